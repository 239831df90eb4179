"""One step of the fold that cannot stop the process.

The core turns bad input into reason codes, but a bug in it (or an input nobody foresaw) may still raise.
Raised inside the loop it would end the process, and every replica would crash again on the same object
after each restart. Instead the event is skipped: the state stays the last good one, the failure is
logged with the event's identity (never its content) and counted, and the loop goes on. Replay and the
simulated run use the same function, so a recorded log reproduces the skip exactly.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from catalog_core.events import CommandCompleted, Event, ObjectDeleted, ObjectUpserted
from catalog_core.fold import Transition, step
from catalog_core.state import CatalogState

log = logging.getLogger("model_catalog.loop")


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


def log_step_failure(event: Event, exc: Exception) -> None:
    log.error(
        "the fold failed on one event; it was skipped and the last good state kept",
        extra={**event_identity(event), "error": type(exc).__name__},
        exc_info=exc,
    )
