"""A last line of defence before an event is written: nothing the core should not have seen gets out.

The adapters pass every raw object through ``catalog_core.redact.redact_for_source`` before it becomes an
event (trimmed to the fields the core reads, secret values sealed by shape), so this should never find
anything. It re-applies that same function, which is idempotent on its own output: an object that comes
back different had skipped it, and the re-redacted form is written instead (the written event then
differs from what the core saw, and a replay may diverge there, which is the lesser evil), counted, and
never logged. It fails closed: an object the redaction cannot read (any exception) is written as a stub
that only names it. LiteLLM rows keep only the whitelisted fields (``whitelist_row``), so no
``litellm_params.api_key`` of any row.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core.events import (
    Event,
    LiteLLMRowsObserved,
    ObjectDeleted,
    ObjectUpserted,
    SourceKind,
    SourceListed,
)
from catalog_core.redact import redact_for_source
from catalog_core.sources.litellm_row import whitelist_row
from catalog_core.trim import stub


@attrs.frozen
class Guarded:
    event: Event
    stripped: int  # how many values were replaced or removed


def guard(event: Event) -> Guarded:
    """The event as it may be written, and how many suspicious values were stripped from it."""
    if isinstance(event, ObjectUpserted | ObjectDeleted):
        obj, n = _object(event.source, event.object)
        return Guarded(attrs.evolve(event, object=obj) if n else event, n)
    if isinstance(event, SourceListed):
        total = 0
        objects = []
        for item in event.objects:
            obj, n = _object(event.source, item)
            objects.append(obj)
            total += n
        return Guarded(attrs.evolve(event, objects=tuple(objects)) if total else event, total)
    if isinstance(event, LiteLLMRowsObserved):
        rows: list[Mapping[str, Any]] = []
        total = 0
        for row in event.rows:
            clean = whitelist_row(row) if isinstance(row, Mapping) else {}
            if clean != row:
                total += 1
                rows.append(clean)
            else:
                rows.append(row)
        return Guarded(attrs.evolve(event, rows=tuple(rows)) if total else event, total)
    return Guarded(event, 0)


def _object(source: SourceKind, obj: Mapping[str, Any]) -> tuple[Mapping[str, Any], int]:
    try:
        clean = redact_for_source(source, obj).obj  # the values it finds are dropped, never kept
    except Exception:  # fail closed: whatever it is, it is not written
        return stub(obj, "StrippedByEventLog", "the event log could not redact this object"), 1
    return (obj, 0) if clean == obj else (clean, 1)
