"""What ``explain`` says about LiteLLM writes held back by damping: deferred, and why;
cancelled because the row flapped back to what LiteLLM holds."""

from __future__ import annotations

from collections.abc import Iterable

from catalog_core import damping as churn
from catalog_core.commands import Command
from catalog_core.keys import litellm_key
from catalog_core.state import CatalogState


def deferral_lines(
    before: CatalogState, after: CatalogState, ids: Iterable[str], commands: Iterable[Command]
) -> list[str]:
    """One line per row of ``ids`` whose write was deferred or cancelled by this step."""
    if before.damping.keys is after.damping.keys:
        return []
    issued = {c.key for c in commands}
    windows = churn.Windows.of(after.config)
    out: list[str] = []
    for rid in sorted(ids):
        key = litellm_key(rid)
        old, new = before.damping.keys.get(key), after.damping.keys.get(key)
        was = old is not None and old.deferred_since is not None
        now_deferred = new is not None and new.deferred_since is not None
        if now_deferred and not was and new is not None:
            why = churn.deferral_reason(new, after.now, windows, churn.calm_at(after.damping, windows))
            out.append(f"LiteLLM {rid}: {why}")
        elif was and not now_deferred and key not in issued:
            out.append(f"LiteLLM {rid}: deferred write cancelled: the row is back to what LiteLLM holds")
    return out
