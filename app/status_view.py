"""What ``model-catalog status`` shows: the live catalog ConfigMap and the Lease, read into plain values.

Only two objects are read (``get`` each): ``ConfigMap/<CATALOG_CONFIGMAP>`` (its ``routes.json``,
``catalog.json``, hash and last-sync annotation) and the controller's Lease. Both come from people and
programs we do not control, so every field is checked and anything unexpected becomes a note, never an
exception.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs

HASH_KEY = "AI_APPLIANCE_MODEL_CATALOG_HASH"
READY_KEY = "AI_APPLIANCE_MODEL_CATALOG_READY"
LAST_SYNC_ANNOTATION = "ai-appliance.io/last-sync"  # set by the catalog writer on every write
FAILING_STATES = frozenset({"error", "conflict"})


@attrs.frozen
class Item:
    """One routes.json record, with the routes its logical name has in catalog.json."""

    source: str
    name: str
    logical_name: str
    state: str
    reason: str
    message: str
    id: str
    routes: tuple[str, ...]  # localities of the catalog entry's routes, in order (local, mesh, external)
    api_base_host: str
    # The state has held at least since then (a catalog write); None: the catalog says no time.
    since: dt.datetime | None
    since_exact: bool  # True when a watch saw the change happen (then ``since`` is that catalog's write)

    @property
    def failing(self) -> bool:
        return self.state in FAILING_STATES

    def key(self) -> tuple[str, str]:
        return (self.source, self.name)

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "name": self.name,
            "logicalName": self.logical_name,
            "state": self.state,
            "reason": self.reason,
            "message": self.message,
            "id": self.id,
            "routes": list(self.routes),
            "apiBaseHost": self.api_base_host,
            "since": _iso(self.since),
            "sinceExact": self.since_exact,
        }


@attrs.frozen
class Leader:
    holder: str  # "" when nobody holds the Lease
    renewed: dt.datetime | None
    duration_seconds: float | None
    problem: str = ""  # why the Lease could not be read ("" when it was)

    def expired(self, now: dt.datetime) -> bool:
        if self.renewed is None or self.duration_seconds is None:
            return False
        return (now - self.renewed).total_seconds() > self.duration_seconds


@attrs.frozen
class Status:
    catalog_hash: str
    ready: bool
    written: dt.datetime | None
    resource_version: str
    leader: Leader
    items: tuple[Item, ...]
    notes: tuple[str, ...] = ()

    @property
    def failing(self) -> tuple[Item, ...]:
        return tuple(item for item in self.items if item.failing)

    def same_view(self, other: Status) -> bool:
        """Nothing a reader would see has changed (the Lease's renewals alone do not count)."""
        return (
            self.resource_version == other.resource_version
            and self.leader.holder == other.leader.holder
            and self.leader.problem == other.leader.problem
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "catalogHash": self.catalog_hash,
            "ready": self.ready,
            "written": _iso(self.written),
            "leader": {
                "holder": self.leader.holder,
                "renewed": _iso(self.leader.renewed),
                "leaseDurationSeconds": self.leader.duration_seconds,
                **({"problem": self.leader.problem} if self.leader.problem else {}),
            },
            "items": [item.as_json() for item in self.items],
            "notes": list(self.notes),
        }


def _iso(value: dt.datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else None


def parse_time(value: Any) -> dt.datetime | None:
    """An RFC 3339 time as the API server and our writer write it (``Z`` or an offset, maybe micros)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)


def leader_from_lease(lease: Mapping[str, Any]) -> Leader:
    spec = lease.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    holder = spec.get("holderIdentity")
    duration = spec.get("leaseDurationSeconds")
    return Leader(
        holder=holder if isinstance(holder, str) else "",
        renewed=parse_time(spec.get("renewTime")),
        duration_seconds=float(duration) if type(duration) is int else None,
    )


def status_from_configmap(
    configmap: Mapping[str, Any], leader: Leader, previous: Status | None = None
) -> Status:
    """The view of one read. ``previous`` (the last view of a watch) makes ``since`` exact for items
    whose state or reason changed between the two catalogs."""
    meta = configmap.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    annotations = meta.get("annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    data = configmap.get("data")
    data = data if isinstance(data, Mapping) else {}
    notes: list[str] = []
    written = parse_time(annotations.get(LAST_SYNC_ANNOTATION))
    records = _json_list(data.get("routes.json"), "routes.json", notes)
    entries = _entries(data.get("catalog.json"), notes)
    before = {item.key(): item for item in previous.items} if previous is not None else {}
    items = []
    for record in records:
        if not isinstance(record, Mapping):
            notes.append("routes.json holds a record that is not an object; left out")
            continue
        item = _item(record, entries, written)
        old = before.get(item.key())
        if previous is not None:
            if old is not None and (old.state, old.reason) == (item.state, item.reason):
                item = attrs.evolve(item, since=old.since, since_exact=old.since_exact)
            elif previous.resource_version != str(meta.get("resourceVersion") or ""):
                item = attrs.evolve(item, since_exact=True)  # seen changing with this write
        items.append(item)
    items.sort(key=lambda i: (i.logical_name, i.source, i.name))
    hash_value = data.get(HASH_KEY)
    return Status(
        catalog_hash=hash_value if isinstance(hash_value, str) else "",
        ready=data.get(READY_KEY) == "true",
        written=written,
        resource_version=str(meta.get("resourceVersion") or ""),
        leader=leader,
        items=tuple(items),
        notes=tuple(notes),
    )


def _json_list(text: Any, key: str, notes: list[str]) -> list[Any]:
    if text is None or text == "":
        return []
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    if not isinstance(value, list):
        notes.append(f"{key} is not a JSON array; its records are not shown")
        return []
    return value


def _entries(text: Any, notes: list[str]) -> dict[str, Mapping[str, Any]]:
    if text is None or text == "":
        return {}
    try:
        doc = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        doc = None
    models = doc.get("models") if isinstance(doc, Mapping) else None
    if not isinstance(models, list):
        notes.append("catalog.json has no models array; routes are not shown")
        return {}
    return {m["name"]: m for m in models if isinstance(m, Mapping) and isinstance(m.get("name"), str)}


def _text(record: Mapping[str, Any], key: str) -> str:
    value = record.get(key)
    return value if isinstance(value, str) else ""


def _item(
    record: Mapping[str, Any], entries: Mapping[str, Mapping[str, Any]], written: dt.datetime | None
) -> Item:
    logical = _text(record, "logicalName")
    entry = entries.get(logical, {})
    routes = entry.get("routes")
    localities = tuple(
        str(route.get("locality"))
        for route in (routes if isinstance(routes, list) else [])
        if isinstance(route, Mapping) and isinstance(route.get("locality"), str)
    )
    litellm = entry.get("litellm")
    api_base = litellm.get("apiBase") if isinstance(litellm, Mapping) else None
    return Item(
        source=_text(record, "source"),
        name=_text(record, "name"),
        logical_name=logical,
        state=_text(record, "state"),
        reason=_text(record, "reason"),
        message=_text(record, "message"),
        id=_text(record, "id"),
        routes=localities,
        api_base_host=_host(api_base),
        since=written,
        since_exact=False,
    )


def _host(url: Any) -> str:
    if not isinstance(url, str) or not url:
        return ""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return ""
    return f"{host}:{port}" if host and port else host  # never userinfo, path or query
