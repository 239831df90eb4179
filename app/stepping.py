"""One step of the fold that cannot stop the process.

The core turns bad input into reason codes, but a bug in it (or an input nobody foresaw) may still raise.
Raised inside the loop it would end the process, and every replica would crash again on the same object
after each restart. Instead the event is skipped: the state stays the last good one, the failure is
logged with the event's identity (never its content) and counted, and the loop goes on. Replay and the
simulated run use the same function, so a recorded log reproduces the skip exactly.

Where it raised is logged as file, line and function only: an exception's message (and so a traceback)
may quote the input, e.g. ``KeyError('sk-...')``, and input may hold a secret.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from catalog_core.events import CommandCompleted, Event, ObjectDeleted, ObjectUpserted
from catalog_core.fold import Transition, step
from catalog_core.state import CatalogState

log = logging.getLogger("model_catalog.loop")

_PACKAGES = frozenset({"catalog_core", "contracts", "adapters", "app"})
_FRAMES = 3  # innermost frames named in the log: enough to find the bug, never a value


def guarded_step(state: CatalogState, event: Event) -> tuple[Transition, Exception | None]:
    """``step``; on an exception, the unchanged state, no commands, and the exception."""
    try:
        return step(state, event), None
    except Exception as exc:  # see the module docstring: one event must not stop the loop
        return Transition(state, ()), exc


def event_identity(event: Event) -> dict[str, str]:
    """What names an event in a log line: its type, source, object and command key — never its content."""
    out = {"event": type(event).__name__}
    source = getattr(event, "source", None)
    if source is not None:
        out["source"] = str(getattr(source, "value", source))
    if isinstance(event, ObjectUpserted | ObjectDeleted):
        meta: Any = event.object.get("metadata") if isinstance(event.object, Mapping) else None
        meta = meta if isinstance(meta, Mapping) else {}
        # (not "name": LogRecord has one) bounded and escaped: a name is input, and this is one log line
        for field, key in (("namespace", "namespace"), ("name", "object"), ("uid", "uid")):
            value = meta.get(field)
            if isinstance(value, str):
                out[key] = value[:253].encode("unicode_escape").decode("ascii")
        if isinstance(meta.get("resourceVersion"), str):
            out["resource_version"] = meta["resourceVersion"][:64]
    if isinstance(event, CommandCompleted):
        out["key"] = event.key
    return out


def where(exc: BaseException) -> str:
    """The innermost frames of ``exc``, innermost first: "catalog_core/plan.py:420 _catalog < ..."."""
    frames = [
        f"{_module_path(frame.f_code.co_filename)}:{lineno} {frame.f_code.co_name}"
        for frame, lineno in traceback.walk_tb(exc.__traceback__)
    ]
    return " < ".join(reversed(frames[-_FRAMES:])) or "?"


def _module_path(filename: str) -> str:
    """From the project's package down: no site-packages or home directory in a log line."""
    parts = PurePath(filename).parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in _PACKAGES:
            return "/".join(parts[i:])
    return parts[-1] if parts else "?"


def log_step_failure(event: Event, exc: Exception, **context: Any) -> None:
    """One ERROR line: the event's identity, the exception's type and where it was raised (no message and
    no traceback, see the module docstring), and what the caller adds."""
    log.error(
        "the fold failed on one event; it was skipped and the last good state kept",
        extra={**event_identity(event), "error": type(exc).__name__, "where": where(exc), **context},
    )
