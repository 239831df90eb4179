"""What ``model-catalog status`` shows: the live catalog ConfigMap and the Lease, read into plain values.

Only two objects are read (``get`` each): ``ConfigMap/<CATALOG_CONFIGMAP>`` (its ``routes.json``,
``catalog.json``, hash and last-sync annotation) and the controller's Lease (who leads, and the leader's
health report: ``contracts/controller_status.py``). Both come from people and programs we do not control,
so every field is checked and anything unexpected becomes a note or a problem, never an exception.

``problems`` lists every condition that stops or limits publishing: the catalog never written, no leader,
a Lease that cannot be read or carries no report, and each condition the leader reports (LiteLLM
unreachable, a CRD not installed, a source forbidden or failing, a watch reconnecting, the catalog too
large). Any problem, like any item in error or conflict, makes ``status`` exit 1.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs

from catalog_core.catalog_files import HASH_KEY
from catalog_core.conditions import CONSEQUENCE, ConditionType
from catalog_core.sources.catalog_configmap import READY_KEY
from contracts.controller_status import ReportedCondition, ReportUnreadableError, decode

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
    serving_last_good: bool = False  # its input is wrong now; LiteLLM keeps its last good route
    warnings: tuple[str, ...] = ()  # "field: message" of each optional field that was dropped
    # The record's other keys, as compact JSON (a newer controller's fields are shown, not lost).
    extra: tuple[tuple[str, str], ...] = ()

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
            "servingLastGood": self.serving_last_good,
            "warnings": list(self.warnings),
        }


@attrs.frozen
class Leader:
    holder: str  # "" when nobody holds the Lease
    renewed: dt.datetime | None
    duration_seconds: float | None
    problem: str = ""  # why the Lease could not be read ("" when it was)
    exists: bool = True  # False: there is no Lease at all
    report: tuple[ReportedCondition, ...] | None = None  # the holder's health report; None: none
    report_problem: str = ""  # why the report on the Lease could not be read

    def expired(self, now: dt.datetime) -> bool:
        if self.renewed is None or self.duration_seconds is None:
            return False
        return (now - self.renewed).total_seconds() > self.duration_seconds

    def leads(self, now: dt.datetime) -> bool:
        return bool(self.holder) and not self.problem and not self.expired(now)


# Problems seen by status itself (the leader reports the others, ConditionType).
CATALOG_NOT_WRITTEN = "CatalogNotWritten"
NO_LEADER = "NoLeader"
LEASE_UNREADABLE = "LeaseUnreadable"
NO_HEALTH_REPORT = "NoHealthReport"
_STATUS_CONSEQUENCE = {
    CATALOG_NOT_WRITTEN: "consumers that wait for AI_APPLIANCE_MODEL_CATALOG_READY=true do not start",
    NO_LEADER: (
        "nothing writes LiteLLM rows, the catalog, AgentTemplates or rollouts; what is published stays as "
        "it is"
    ),
    LEASE_UNREADABLE: "who leads, and what the leader reports, is unknown",
    NO_HEALTH_REPORT: "whether LiteLLM and every source can be read is unknown",
}


@attrs.frozen
class Problem:
    """A condition that stops or limits publishing."""

    type: str
    subject: str
    message: str
    since: dt.datetime | None = None

    @property
    def consequence(self) -> str:
        """What it means for publishing ("" for a type this version does not know)."""
        if self.type in _STATUS_CONSEQUENCE:
            return _STATUS_CONSEQUENCE[self.type]
        try:
            return CONSEQUENCE[ConditionType(self.type)]
        except ValueError:
            return ""

    def as_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "subject": self.subject,
            "message": self.message,
            "since": _iso(self.since),
            "consequence": self.consequence,
        }


@attrs.frozen
class Status:
    catalog_hash: str
    ready: bool
    written: dt.datetime | None
    resource_version: str
    leader: Leader
    items: tuple[Item, ...]
    notes: tuple[str, ...] = ()

    # Where the two objects are, for the problems' subjects: "<namespace>/<name>".
    configmap_ref: str = "ai/ai-model-catalog"
    lease_ref: str = "ai/ai-model-catalog-controller"

    @property
    def failing(self) -> tuple[Item, ...]:
        return tuple(item for item in self.items if item.failing)

    def problems(self, now: dt.datetime) -> tuple[Problem, ...]:
        """What stops or limits publishing, as of ``now`` (a Lease's expiry depends on it)."""
        out: list[Problem] = []
        if not self.ready:
            out.append(
                Problem(
                    CATALOG_NOT_WRITTEN,
                    self.configmap_ref,
                    f"the catalog is the bootstrap placeholder (hash {self.catalog_hash or '?'}, "
                    f"{READY_KEY}=false): no controller has written it yet",
                )
            )
        leader = self.leader
        if leader.problem:
            out.append(Problem(LEASE_UNREADABLE, self.lease_ref, leader.problem))
        elif not leader.exists:
            out.append(
                Problem(
                    NO_LEADER,
                    self.lease_ref,
                    "no Lease: no replica has led yet (is the controller running, with leader election on?)",
                )
            )
        elif not leader.holder:
            out.append(Problem(NO_LEADER, self.lease_ref, "nobody holds the Lease (released)"))
        elif leader.expired(now):
            out.append(
                Problem(
                    NO_LEADER,
                    self.lease_ref,
                    f"{leader.holder}'s lease expired: it has not renewed for over "
                    f"{leader.duration_seconds:g}s",
                    leader.renewed,
                )
            )
        elif leader.report_problem:
            out.append(Problem(NO_HEALTH_REPORT, self.lease_ref, leader.report_problem))
        elif leader.report is None:
            out.append(
                Problem(
                    NO_HEALTH_REPORT,
                    self.lease_ref,
                    f"the leader {leader.holder} publishes no health report (a controller older than this "
                    "command?)",
                )
            )
        else:
            out += [Problem(c.type, c.subject, c.message, parse_time(c.since)) for c in leader.report]
        return tuple(out)

    def same_view(self, other: Status, now: dt.datetime) -> bool:
        """Nothing a reader would see has changed (the Lease's renewals alone do not count; its expiry
        does)."""

        def problems(status: Status) -> list[tuple[str, str, str]]:
            return [(p.type, p.subject, p.message) for p in status.problems(now)]

        return (
            self.resource_version == other.resource_version
            and self.leader.holder == other.leader.holder
            and problems(self) == problems(other)
        )

    def as_json(self, now: dt.datetime) -> dict[str, Any]:
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
            "problems": [problem.as_json() for problem in self.problems(now)],
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
    meta = lease.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    report: tuple[ReportedCondition, ...] | None = None
    report_problem = ""
    try:
        report = decode(annotations if isinstance(annotations, Mapping) else {})
    except ReportUnreadableError as exc:
        report_problem = str(exc)
    return Leader(
        holder=holder if isinstance(holder, str) else "",
        renewed=parse_time(spec.get("renewTime")),
        duration_seconds=float(duration) if type(duration) is int else None,
        report=report,
        report_problem=report_problem,
    )


def status_from_configmap(
    configmap: Mapping[str, Any],
    leader: Leader,
    previous: Status | None = None,
    *,
    configmap_ref: str = "ai/ai-model-catalog",
    lease_ref: str = "ai/ai-model-catalog-controller",
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
        configmap_ref=configmap_ref,
        lease_ref=lease_ref,
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
    warnings = record.get("warnings")
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
        serving_last_good=record.get("servingLastGood") is True,
        warnings=tuple(
            f"{_text(w, 'field')}: {_text(w, 'message') or _text(w, 'reason')}"
            for w in (warnings if isinstance(warnings, list) else [])
            if isinstance(w, Mapping)
        ),
        extra=tuple(
            (key, json.dumps(value, sort_keys=True, separators=(",", ":")))
            for key, value in sorted(record.items())
            if key not in _RECORD_KEYS
        ),
    )


_RECORD_KEYS = frozenset(
    {"source", "name", "logicalName", "state", "reason", "message", "id", "servingLastGood", "warnings"}
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
