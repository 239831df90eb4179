"""The core's state: what was observed, what was derived from it, and what is in flight.

All maps are persistent (``PMap``): an event changes only what it touches and
shares the rest, so folding one event costs the same at 100 or 10,000 models.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

import attrs

from catalog_core.commands import ApiKeyRef, Command, ReadReason
from catalog_core.config import CatalogConfig
from catalog_core.damping import Damping
from catalog_core.events import SourceKind
from catalog_core.evolve import evolve
from catalog_core.jsonval import Json
from catalog_core.kinds import KINDS
from catalog_core.pmap import PMap, empty
from catalog_core.reasons import Reason, RouteState
from catalog_core.sources.agent_template import AgentTemplateInfo
from catalog_core.sources.catalog_configmap import ObservedCatalog
from catalog_core.sources.common import FieldWarning, Problem
from catalog_core.sources.consumers import ConsumerPod, ReplicaSetOwner, Workload
from catalog_core.sources.external import ExternalItem
from catalog_core.sources.freetoken import ServicePort
from catalog_core.sources.litellm_row import LiteLLMRow
from catalog_core.sources.secret import SecretInfo
from catalog_core.values import ModelType, Source


class SourceStatus(StrEnum):
    PENDING = "pending"  # not listed yet
    LISTED = "listed"
    NOT_INSTALLED = "not-installed"
    FORBIDDEN = "forbidden"
    FAILING = "failing"


@attrs.frozen
class SourceState:
    status: SourceStatus = SourceStatus.PENDING
    detail: str = ""
    ever_listed: bool = False

    @property
    def known(self) -> bool:
        """Its content is known: listed, or absent by design (CRD not installed)."""
        return self.status in (SourceStatus.LISTED, SourceStatus.NOT_INSTALLED) or self.ever_listed


@attrs.frozen
class LiteLLMStatus:
    observed_once: bool = False
    reachable: bool = False
    detail: str = ""


@attrs.frozen
class RuntimeHealth:
    """Health gate of one FreeToken runtime (behaviour §1.4)."""

    url: str
    healthy: bool = False
    failures: int = 0
    next_probe_at: float = 0.0
    probing_since: float | None = None
    detail: str = ""


@attrs.frozen
class StartWatch:
    """A route published before it is ready whose runtime is starting: pods exist, none is ready
    (behaviour §1.1)."""

    since: float  # the tick that first saw it starting
    due: float  # when it is overdue if it is starting still
    overdue: bool = False  # it has been starting for longer than its start deadline


@attrs.frozen
class DesiredRoute:
    """One LiteLLM deployment the catalog owns, exactly as it would be sent (api_key as a reference)."""

    id: str
    source: Source
    item: str
    model_name: str
    litellm_params: Json
    model_info: Json
    api_key: ApiKeyRef | None
    spec_hash: str
    model_type: ModelType
    locality: str
    order: int | None
    litellm_model: str
    api_base: str | None
    context_window: int | None
    max_output_tokens: int | None


@attrs.frozen
class Candidate:
    """A source item's claim to a route, before names and ids are shared out."""

    item: str
    source: Source
    name: str
    involved_uid: str
    route: DesiredRoute | None  # the current route, or the last good one while the input has a problem
    reason: Reason  # PUBLISHED when the input is good, else why not
    message: str = ""
    refs: tuple[str, ...] = ()  # "secret/x", "service/y", "activation/z": what the claim depends on
    health_url: str | None = None  # a FreeToken runtime that passed its other gates
    warnings: tuple[FieldWarning, ...] = ()  # optional fields of the input that were dropped
    # the operator vouches for it: a runtime owned by its ModelActivation (owner reference, uid verified)
    vouched: bool = False


@attrs.frozen
class RouteRecord:
    """One record of routes.json (behaviour §7)."""

    source: str
    name: str
    logical_name: str
    state: RouteState
    reason: Reason
    message: str = ""
    id: str | None = None
    serving_last_good: bool = False
    warnings: tuple[FieldWarning, ...] = ()

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "source": self.source,
            "name": self.name,
            "logicalName": self.logical_name,
            "state": self.state.value,
            "reason": self.reason.value,
        }
        if self.message:
            out["message"] = self.message
        if self.id:
            out["id"] = self.id
        if self.serving_last_good:
            out["servingLastGood"] = True
        if self.warnings:
            out["warnings"] = [w.as_json() for w in self.warnings]
        return out


@attrs.frozen
class RouteRef:
    order: int | None
    locality: str
    owner: str


@attrs.frozen
class CatalogEntry:
    """One logical model of the published catalog (behaviour §5.1, §6)."""

    id: str
    name: str
    model_type: ModelType
    source: str
    managed: bool
    litellm_model: str
    api_base: str | None
    context_window: int | None
    max_output_tokens: int | None
    routes: tuple[RouteRef, ...]
    aliases: tuple[str, ...]


@attrs.frozen
class Retry:
    command_id: str
    not_before: float
    # The command itself when nothing plans it anew (a Kubernetes Event): sent again once due.
    command: Command | None = None


@attrs.frozen
class Failure:
    command_id: str
    reason: Reason
    detail: str


# A write is reported failing (routes.json, a Warning Event, ``model_catalog_failing_writes``) once this many
# attempts in a row failed: one failure that the next attempt mends (a conflict, a blip) is only logged.
REPORTED_AFTER_ATTEMPTS = 2


@attrs.frozen
class WriteFailure:
    """A write whose latest attempts failed, kept until one succeeds, its target needs no write any more or
    this replica stops leading: what the operator is shown about it."""

    command_id: str  # the command that failed last
    kind: str  # its class name (the ``kind`` of the metrics)
    reason: Reason
    detail: str  # what was attempted and what the target answered (never a secret: the executor's text)
    since: float  # when the first failure in a row was folded
    attempts: int  # failed attempts in a row
    terminal: bool = False  # not retried until its input changes

    @property
    def reported(self) -> bool:
        return self.terminal or self.attempts >= REPORTED_AFTER_ATTEMPTS

    @property
    def message(self) -> str:
        """The detail, and what happens next."""
        then = (
            "not retried until its input changes"
            if self.terminal
            else "retried with backoff until it succeeds"
        )
        return f"{self.detail} ({then})"


Marks = tuple[Any, ...]
"""A persistent stack of keys marked for the next tick: ``(key, older_marks)`` or ``()``.

Marking is O(1) (one tuple); duplicates collapse when the tick reads them with ``marked``.
"""

NO_MARKS: Marks = ()


def mark(marks: Marks, key: str) -> Marks:
    return (key, marks)


def mark_all(marks: Marks, keys: Iterable[str]) -> Marks:
    for key in keys:
        marks = (key, marks)
    return marks


def marked(marks: Marks) -> list[str]:
    """The distinct keys, sorted (planning order never depends on arrival order)."""
    seen: set[str] = set()
    while marks:
        seen.add(marks[0])
        marks = marks[1]
    return sorted(seen)


@attrs.frozen
class Observed:
    """The typed content of the sources that decide the routes."""

    # The typed items of each route source read object by object (catalog_core/registry.py), by
    # SourceKind value, then by name. Its shape does not depend on which sources exist.
    stores: PMap[PMap[Any]] = attrs.field(factory=empty)
    external_items: PMap[ExternalItem] = attrs.field(factory=empty)  # effective (last good while unreadable)
    external_problem: Problem | None = None
    external_uid: str = ""
    services: PMap[ServicePort] = attrs.field(factory=empty)
    secrets: PMap[SecretInfo] = attrs.field(factory=empty)
    secrets_scope: frozenset[str] = frozenset()  # names the secret watch has covered


@attrs.frozen
class ClusterView:
    """What the catalog writes to and who consumes it."""

    templates: PMap[AgentTemplateInfo] = attrs.field(factory=empty)
    pods: PMap[ConsumerPod] = attrs.field(factory=empty)
    pod_birth: PMap[str] = attrs.field(factory=empty)  # pod uid -> catalog hash when it appeared (live)
    replicasets: PMap[ReplicaSetOwner] = attrs.field(factory=empty)
    workloads: PMap[Workload] = attrs.field(factory=empty)  # "Kind/name"
    catalog: ObservedCatalog | None = None
    # The catalog that consumers running at start-up read: the observed catalog's previous hash when this
    # controller wrote it over another (a rollout may have been cut short), else its hash.
    initial_catalog_hash: str | None = None


@attrs.frozen
class LiteLLMView:
    status: LiteLLMStatus = LiteLLMStatus()
    # A write was applied that no observation has covered yet: LiteLLM fills limits in from its model map,
    # so the row it holds is known only after the next /model/info (the catalog waits for it).
    unobserved_writes: bool = False
    # When a tick first found ``unobserved_writes`` (None: none): while writes are still in flight the
    # re-read waits for them, but never longer than ``plan.REREAD_MAX_DELAY`` after this.
    unobserved_since: float | None = None
    # A write's answer left what LiteLLM holds, or its status, unknown: the reason to read it again at once
    # (None: nothing is unknown). Any observation settles it.
    unconfirmed: ReadReason | None = None
    rows: PMap[LiteLLMRow] = attrs.field(factory=empty)
    rows_by_logical: PMap[frozenset[str]] = attrs.field(factory=empty)  # logical name -> row ids


@attrs.frozen
class Derived:
    """What the rules concluded, kept so a tick recomputes only what changed."""

    candidates: PMap[Candidate] = attrs.field(factory=empty)  # by item key
    last_good: PMap[DesiredRoute] = attrs.field(factory=empty)  # by item key
    # route id -> the item whose kept route was withdrawn because what allowed it is gone (the Secret its
    # key came from, a trusted Service): written at once, past any write damping, then forgotten
    withdrawn: PMap[str] = attrs.field(factory=empty)
    # model name -> items claiming it: with a route, or a runtime's (sticky names) withheld or not
    by_name: PMap[frozenset[str]] = attrs.field(factory=empty)
    by_id: PMap[frozenset[str]] = attrs.field(factory=empty)  # route id -> items claiming it
    refs: PMap[frozenset[str]] = attrs.field(factory=empty)  # "secret/x" -> items depending on it
    wanted_secrets: frozenset[str] = frozenset()  # the Secrets some item references (the "secret/x" refs)
    winners: PMap[str] = attrs.field(factory=empty)  # route id -> winning item
    # model name -> the item of a sticky-name source (a runtime) that holds it, kept while that item claims
    # the name, even withheld (behaviour §3)
    holders: PMap[str] = attrs.field(factory=empty)
    losses: PMap[tuple[Reason, str]] = attrs.field(factory=empty)  # item -> why it lost
    entries: PMap[CatalogEntry] = attrs.field(factory=empty)  # logical name -> entry
    records: PMap[RouteRecord] = attrs.field(factory=empty)  # item -> routes.json record
    desired_catalog_hash: str = ""
    desired_catalog_fingerprint: str = ""


@attrs.frozen
class Pending:
    """Work for the next tick."""

    items: Marks = NO_MARKS  # candidates to recompute
    names: Marks = NO_MARKS  # names to re-share among claimants
    ids: Marks = NO_MARKS  # LiteLLM rows to re-plan
    records: Marks = NO_MARKS  # routes.json records to rebuild
    logical: Marks = NO_MARKS  # catalog entries to rebuild
    templates: bool = False
    catalog: bool = True
    rollouts: bool = False
    failures: Marks = NO_MARKS  # command keys whose write failure to report, or whose recovery

    @property
    def idle(self) -> bool:
        return not (
            self.items or self.names or self.ids or self.records or self.logical or self.failures
        ) and not (self.templates or self.catalog or self.rollouts)


@attrs.frozen
class Control:
    """Commands in flight and their history, so re-planning never repeats a write."""

    inflight: PMap[Command] = attrs.field(factory=empty)  # key -> command
    settled: PMap[str] = attrs.field(factory=empty)  # key -> id applied since the target was last observed
    retries: PMap[Retry] = attrs.field(factory=empty)
    failures: PMap[Failure] = attrs.field(factory=empty)
    announced: PMap[str] = attrs.field(factory=empty)  # problem key -> event id already emitted
    secret_watch: str = ""  # id of the last WatchSecrets command
    leading: bool = True  # a standby replica plans but issues no writes
    failing: PMap[WriteFailure] = attrs.field(factory=empty)  # key -> its write's failures in a row


@attrs.frozen
class CatalogState:
    """Grouped by concern so an event copies only the small groups it changes."""

    config: CatalogConfig
    # The sources planning waits for before it writes (catalog_inputs_known): every catalog source of this
    # build for a live run; in a replay, those its log's header names (a log never lists a later source).
    waits_for: frozenset[SourceKind] = frozenset()
    now: float = 0.0
    sources: PMap[SourceState] = attrs.field(factory=empty)
    observed: Observed = Observed()
    cluster: ClusterView = ClusterView()
    litellm: LiteLLMView = LiteLLMView()
    health: PMap[RuntimeHealth] = attrs.field(factory=empty)
    starts: PMap[StartWatch] = attrs.field(factory=empty)  # by item key
    derived: Derived = Derived()
    pending: Pending = Pending()
    control: Control = Control()
    damping: Damping = attrs.field(factory=Damping)  # writes waiting for their key to settle

    def source(self, kind: SourceKind) -> SourceState:
        return self.sources.get(kind.value) or SourceState()

    def stored(self, kind: SourceKind) -> PMap[Any]:
        """The typed objects of a map-shaped source, by name (STORE says where; a route source's are in
        ``observed.stores``)."""
        place = STORE.get(kind)
        if place is None:
            return self.observed.stores.get(kind) or _EMPTY
        found: PMap[Any] = getattr(getattr(self, place[0]), place[1])
        return found

    def with_route_items(self, kind: SourceKind, objects: PMap[Any], items: Marks) -> CatalogState:
        """This state with route source ``kind``'s typed objects replaced by ``objects`` and the items
        marked for the next tick by ``items``: a watch event of a route source, the fold's hottest path
        (bench P5). One copy each of the state, ``observed`` and ``pending``, by position
        (``attrs.evolve`` costs ~1.2 us more per copy)."""
        o, p = self.observed, self.pending
        stores = o.stores.set(kind, objects) if objects else o.stores.delete(kind)
        observed = Observed(
            stores,
            o.external_items,
            o.external_problem,
            o.external_uid,
            o.services,
            o.secrets,
            o.secrets_scope,
        )
        pending = Pending(
            items, p.names, p.ids, p.records, p.logical, p.templates, p.catalog, p.rollouts, p.failures
        )
        return CatalogState(
            self.config,
            self.waits_for,
            self.now,
            self.sources,
            observed,
            self.cluster,
            self.litellm,
            self.health,
            self.starts,
            self.derived,
            pending,
            self.control,
            self.damping,
        )

    def with_stored(self, kind: SourceKind, objects: PMap[Any], **changes: Any) -> CatalogState:
        """This state with ``kind``'s typed objects replaced by ``objects`` (and the other top-level
        ``changes``, in the same copy). A route source's item events take ``with_route_items``."""
        place = STORE.get(kind)
        if place is None:
            stores = self.observed.stores
            stores = stores.set(kind, objects) if objects else stores.delete(kind)
            return evolve(self, observed=evolve(self.observed, stores=stores), **changes)
        group = getattr(self, place[0])
        return evolve(self, **{place[0]: evolve(group, **{place[1]: objects})}, **changes)


_EMPTY: PMap[Any] = empty()


# The copies by position above name every field in order: adding, removing or reordering a field of these
# classes must update them (an import error, rather than a state copied into the wrong fields).
_POSITIONAL_COPIES = {
    CatalogState: (
        "config",
        "waits_for",
        "now",
        "sources",
        "observed",
        "cluster",
        "litellm",
        "health",
        "starts",
        "derived",
        "pending",
        "control",
        "damping",
    ),
    Observed: (
        "stores",
        "external_items",
        "external_problem",
        "external_uid",
        "services",
        "secrets",
        "secrets_scope",
    ),
    Pending: ("items", "names", "ids", "records", "logical", "templates", "catalog", "rollouts", "failures"),
}
for _cls, _names in _POSITIONAL_COPIES.items():
    if tuple(field.name for field in attrs.fields(_cls)) != _names:
        raise RuntimeError(f"state: {_cls.__name__}'s fields changed; update its copies by position")


# Where the typed objects of each map-shaped source that is not a route source are kept: (group
# attribute, field of that group), as its declaration says (``catalog_core/kinds.py``). A route source's
# are in ``Observed.stores``.
STORE: Mapping[SourceKind, tuple[str, str]] = {k.source: k.store for k in KINDS if k.store is not None}
for _kind, (_group, _field) in STORE.items():
    _default = (
        attrs.fields_dict(CatalogState)[_group].default if _group in attrs.fields_dict(CatalogState) else None
    )
    if _default is None or _field not in attrs.fields_dict(type(_default)):
        raise RuntimeError(f"state: {_kind} is declared stored in {_group}.{_field}, which the state lacks")
