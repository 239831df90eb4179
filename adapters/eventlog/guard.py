"""A last line of defence before an event is written: nothing that looks like a secret value gets out.

The adapters redact every raw object before it becomes an event
(``catalog_core.redact``), so this should never find anything. If it does, an
adapter skipped redaction: the value is replaced by a marker (the written event
then differs from what the core saw, and a replay may diverge there, which is
the lesser evil), counted, and never logged.

What is checked:

- a Secret (source ``secrets`` or ``kind: Secret``): every ``data`` value must be
  a redaction marker; ``stringData`` and annotations must be gone;
- any object: the ``kubectl.kubernetes.io/last-applied-configuration``
  annotation (a verbatim copy of what was applied, Secret data included) and
  ``managedFields`` must be gone;
- ``models.json`` of the external models ConfigMap: inline API keys must be
  markers, and text that is not JSON must have become the invalid-JSON marker;
- a ModelActivation's ``spec.external``: inline API keys must be markers;
- LiteLLM rows: only the whitelisted fields (``whitelist_row``), so no
  ``litellm_params.api_key`` of any row.
"""

from __future__ import annotations

import copy
import json
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
from catalog_core.redact import (
    INLINE_KEY_FIELDS,
    INVALID_JSON_MARKER,
    REDACTED,
    load_json_text,
    redacted_fingerprint,
)
from catalog_core.sources.litellm_row import whitelist_row

STRIPPED = {REDACTED: "stripped-by-event-log"}
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


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
    fixed: dict[str, Any] | None = None

    def writable() -> dict[str, Any]:
        nonlocal fixed
        if fixed is None:
            fixed = copy.deepcopy(dict(obj))
        return fixed

    n = 0
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        annotations = meta.get("annotations")
        if isinstance(annotations, Mapping) and _LAST_APPLIED in annotations:
            del writable()["metadata"]["annotations"][_LAST_APPLIED]
            n += 1
        if "managedFields" in meta:
            del writable()["metadata"]["managedFields"]
            n += 1
    if source is SourceKind.SECRETS or obj.get("kind") == "Secret":
        n += _secret(obj, writable)
    elif source is SourceKind.EXTERNAL_MODELS:
        n += _models_json(obj, writable)
    elif source is SourceKind.MODEL_ACTIVATIONS:
        n += _activation(obj, writable)
    return (fixed if fixed is not None else obj), n


def _secret(obj: Mapping[str, Any], writable: Any) -> int:
    n = 0
    if "stringData" in obj:
        del writable()["stringData"]
        n += 1
    meta = obj.get("metadata")
    if isinstance(meta, Mapping) and meta.get("annotations"):
        writable()["metadata"].pop("annotations", None)
        n += 1
    data = obj.get("data")
    if data is None:
        return n
    if not isinstance(data, Mapping):
        writable()["data"] = {}
        return n + 1
    for key, value in data.items():
        if redacted_fingerprint(value) is None:
            writable()["data"][key] = dict(STRIPPED)
            n += 1
    return n


def _inline_keys(definition: Any) -> list[tuple[str, ...]]:
    """Paths of inline API keys in one external definition that are not redaction markers."""
    found: list[tuple[str, ...]] = []
    if not isinstance(definition, Mapping):
        return found
    for field in INLINE_KEY_FIELDS:
        value = definition.get(field)
        if value is not None and redacted_fingerprint(value) is None:
            found.append((field,))
    nested = definition.get("litellm")
    if isinstance(nested, Mapping):
        for field in INLINE_KEY_FIELDS:
            value = nested.get(field)
            if value is not None and redacted_fingerprint(value) is None:
                found.append(("litellm", field))
    return found


def _strip_paths(definition: dict[str, Any], paths: list[tuple[str, ...]]) -> None:
    for path in paths:
        node = definition
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = dict(STRIPPED)


def _models_json(obj: Mapping[str, Any], writable: Any) -> int:
    data = obj.get("data")
    text = data.get("models.json") if isinstance(data, Mapping) else None
    if not isinstance(text, str) or text.startswith(INVALID_JSON_MARKER) or not text.strip():
        return 0
    doc, error = load_json_text(text)
    if error is not None:
        # Redaction turns unparsable text into a marker: raw text may hold keys in any shape.
        writable()["data"]["models.json"] = INVALID_JSON_MARKER + "(content stripped by the event log)"
        return 1
    items = doc.get("models") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        return 0
    n = 0
    for item in items:
        paths = _inline_keys(item)
        if paths:
            _strip_paths(item, paths)
            n += len(paths)
    if n:
        writable()["data"]["models.json"] = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return n


def _activation(obj: Mapping[str, Any], writable: Any) -> int:
    spec = obj.get("spec")
    external = spec.get("external") if isinstance(spec, Mapping) else None
    paths = _inline_keys(external)
    if paths:
        _strip_paths(writable()["spec"]["external"], paths)
    return len(paths)
