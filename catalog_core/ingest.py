"""Source events -> typed observations. Parsing happens here; only typed values are stored.

An observation that parses to the value already held changes nothing (no dirty
mark), so resyncs, relists and status-only updates cost no planning.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.events import (
    LiteLLMRowsObserved,
    LiteLLMUnreachable,
    ObjectDeleted,
    ObjectUpserted,
    SourceKind,
    SourceListed,
    SourceUnavailable,
    Unavailability,
)
from catalog_core.pmap import PMap
from catalog_core.reasons import Reason
from catalog_core.sources.activation import ModelActivation
from catalog_core.sources.agent_template import AgentTemplateInfo
from catalog_core.sources.catalog_configmap import ObservedCatalog
from catalog_core.sources.consumers import ConsumerPod, ReplicaSetOwner, Workload
from catalog_core.sources.external import ExternalModelsDocument
from catalog_core.sources.freetoken import FreeTokenRuntime, ServicePort
from catalog_core.sources.kubeai import KubeAIModel
from catalog_core.sources.litellm_row import LiteLLMRow
from catalog_core.sources.secret import SecretInfo
from catalog_core.state import CatalogState, LiteLLMStatus, SourceState, SourceStatus

_WORKLOAD_KIND = {
    SourceKind.DEPLOYMENTS: "Deployment",
    SourceKind.STATEFULSETS: "StatefulSet",
    SourceKind.DAEMONSETS: "DaemonSet",
}


def _mark(dirty: PMap[bool], keys: Iterable[str]) -> PMap[bool]:
    for key in keys:
        dirty = dirty.set(key, True)
    return dirty


def _dependents(state: CatalogState, ref: str) -> frozenset[str]:
    return state.refs.get(ref, frozenset())


# --- per-source: (field name, parse, key of a parsed value, items to re-plan when it changes)
def _parse(state: CatalogState, source: SourceKind, obj: Mapping[str, Any]) -> Any:
    ns = state.config.namespace
    if source is SourceKind.KUBEAI_MODELS:
        return KubeAIModel.from_k8s(obj)
    if source is SourceKind.MODEL_ACTIVATIONS:
        return ModelActivation.from_k8s(obj, ns)
    if source is SourceKind.FREETOKEN_DEPLOYMENTS:
        return FreeTokenRuntime.from_k8s(obj)
    if source is SourceKind.SERVICES:
        return ServicePort.from_k8s(obj)
    if source is SourceKind.SECRETS:
        return SecretInfo.from_k8s(obj)
    if source is SourceKind.AGENT_TEMPLATES:
        return AgentTemplateInfo.from_k8s(obj)
    if source is SourceKind.PODS:
        return ConsumerPod.from_k8s(obj)
    if source is SourceKind.REPLICASETS:
        return ReplicaSetOwner.from_k8s(obj)
    if source in _WORKLOAD_KIND:
        return Workload.from_k8s(obj, _WORKLOAD_KIND[source])
    raise ValueError(source)


_FIELD = {
    SourceKind.KUBEAI_MODELS: "kubeai",
    SourceKind.MODEL_ACTIVATIONS: "activations",
    SourceKind.FREETOKEN_DEPLOYMENTS: "runtimes",
    SourceKind.SERVICES: "services",
    SourceKind.SECRETS: "secrets",
    SourceKind.AGENT_TEMPLATES: "templates",
    SourceKind.PODS: "pods",
    SourceKind.REPLICASETS: "replicasets",
    SourceKind.DEPLOYMENTS: "workloads",
    SourceKind.STATEFULSETS: "workloads",
    SourceKind.DAEMONSETS: "workloads",
}


def _key(source: SourceKind, name: str) -> str:
    kind = _WORKLOAD_KIND.get(source)
    return f"{kind}/{name}" if kind else name


def _touched(state: CatalogState, source: SourceKind, name: str) -> CatalogState:
    """Mark what depends on the object ``name`` of ``source`` for re-planning."""
    ns = state.config.namespace
    if source is SourceKind.KUBEAI_MODELS:
        return attrs.evolve(state, dirty_items=state.dirty_items.set(f"kubeai/{name}", True))
    if source is SourceKind.MODEL_ACTIVATIONS:
        items = {f"activation/{name}", *_dependents(state, f"activation/{name}")}
        return attrs.evolve(state, dirty_items=_mark(state.dirty_items, items))
    if source is SourceKind.FREETOKEN_DEPLOYMENTS:
        return attrs.evolve(state, dirty_items=state.dirty_items.set(f"freetoken/{name}", True))
    if source is SourceKind.SERVICES:
        return attrs.evolve(
            state, dirty_items=_mark(state.dirty_items, _dependents(state, f"service/{name}"))
        )
    if source is SourceKind.SECRETS:
        return attrs.evolve(state, dirty_items=_mark(state.dirty_items, _dependents(state, f"secret/{name}")))
    if source is SourceKind.AGENT_TEMPLATES:
        return attrs.evolve(
            state, dirty_templates=True, settled=state.settled.delete(f"agenttemplate/{ns}/{name}")
        )
    if source is SourceKind.PODS:
        return attrs.evolve(state, dirty_rollouts=True, settled=state.settled.delete(f"evict/{ns}/{name}"))
    if source in _WORKLOAD_KIND:
        key = f"rollout/{ns}/{_WORKLOAD_KIND[source]}/{name}"
        return attrs.evolve(state, dirty_rollouts=True, settled=state.settled.delete(key))
    return attrs.evolve(state, dirty_rollouts=True)


def _put(state: CatalogState, source: SourceKind, name: str, value: Any) -> CatalogState:
    """Store (or, with None, remove) one parsed object; a no-op when nothing changed."""
    field = _FIELD[source]
    current: PMap[Any] = getattr(state, field)
    key = _key(source, name)
    old = current.get(key)
    if old == value:
        return state
    updated = current.delete(key) if value is None else current.set(key, value)
    changes: dict[str, Any] = {field: updated}
    state = attrs.evolve(state, **changes)
    if source is SourceKind.PODS:
        state = _pod_birth(state, old, value)
    return _touched(state, source, name)


def _pod_birth(state: CatalogState, old: Any, new: Any) -> CatalogState:
    """Remember which catalog a pod could have read when it started (for ownerless pods)."""
    births = state.pod_birth
    if isinstance(old, ConsumerPod) and (new is None or new.uid != old.uid):
        births = births.delete(old.uid)
    if isinstance(new, ConsumerPod) and new.uid not in births and state.catalog is not None:
        births = births.set(new.uid, state.catalog.catalog_hash or "")
    return attrs.evolve(state, pod_birth=births)


def _set_status(
    state: CatalogState, source: SourceKind, status: SourceStatus, detail: str = ""
) -> CatalogState:
    old = state.source(source)
    listed = status in (SourceStatus.LISTED, SourceStatus.NOT_INSTALLED)
    new = SourceState(status, detail, old.ever_listed or listed)
    if new == old:
        return state
    state = attrs.evolve(state, sources=state.sources.set(source.value, new), dirty_catalog=True)
    if not old.known and new.known:
        # Everything this source feeds may now be decidable, including owned rows held while it was unknown.
        dirty_ids = state.dirty_ids
        for rid, row in state.rows.items():
            if row.ours:
                dirty_ids = dirty_ids.set(rid, True)
        state = attrs.evolve(state, dirty_rollouts=True, dirty_templates=True, dirty_ids=dirty_ids)
    return state


def upserted(state: CatalogState, event: ObjectUpserted) -> CatalogState:
    return _upsert(state, event.source, event.object)


def _upsert(state: CatalogState, source: SourceKind, obj: Mapping[str, Any]) -> CatalogState:
    if source is SourceKind.EXTERNAL_MODELS:
        if raw.name_of(obj) != state.config.external_models_configmap:
            return state
        return _external(state, obj)
    if source is SourceKind.CATALOG_CONFIGMAP:
        if raw.name_of(obj) != state.config.catalog_configmap:
            return state
        return _catalog(state, ObservedCatalog.from_k8s(obj))
    name = raw.name_of(obj)
    if not name:
        return state
    return _put(state, source, name, _parse(state, source, obj))


def deleted(state: CatalogState, event: ObjectDeleted) -> CatalogState:
    name = raw.name_of(event.object)
    if event.source is SourceKind.EXTERNAL_MODELS:
        return _external(state, None) if name == state.config.external_models_configmap else state
    if event.source is SourceKind.CATALOG_CONFIGMAP:
        return _catalog(state, None) if name == state.config.catalog_configmap else state
    if not name:
        return state
    return _put(state, event.source, name, None)


def listed(state: CatalogState, event: SourceListed) -> CatalogState:
    source = event.source
    if source is SourceKind.EXTERNAL_MODELS:
        wanted = state.config.external_models_configmap
        obj = next((o for o in event.objects if raw.name_of(o) == wanted), None)
        state = _external(state, obj)
    elif source is SourceKind.CATALOG_CONFIGMAP:
        wanted = state.config.catalog_configmap
        obj = next((o for o in event.objects if raw.name_of(o) == wanted), None)
        state = _catalog(state, ObservedCatalog.from_k8s(obj) if obj is not None else None)
    else:
        state = _replace_all(state, source, event.objects)
        if source is SourceKind.SECRETS and event.scope is not None:
            scope = frozenset(event.scope)
            changed = scope.symmetric_difference(state.secrets_scope)
            dirty = state.dirty_items
            for name in changed:
                dirty = _mark(dirty, _dependents(state, f"secret/{name}"))
            state = attrs.evolve(state, secrets_scope=scope, dirty_items=dirty)
    return _set_status(state, source, SourceStatus.LISTED)


def _replace_all(
    state: CatalogState, source: SourceKind, objects: Iterable[Mapping[str, Any]]
) -> CatalogState:
    seen: set[str] = set()
    for obj in objects:
        name = raw.name_of(obj)
        if not name:
            continue
        seen.add(name)
        state = _put(state, source, name, _parse(state, source, obj))
    current: PMap[Any] = getattr(state, _FIELD[source])
    prefix = f"{_WORKLOAD_KIND[source]}/" if source in _WORKLOAD_KIND else ""
    for key in list(current):
        if prefix and not key.startswith(prefix):
            continue
        name = key[len(prefix) :]
        if name not in seen:
            state = _put(state, source, name, None)
    return state


def unavailable(state: CatalogState, event: SourceUnavailable) -> CatalogState:
    if event.status is Unavailability.NOT_INSTALLED:
        # An absent CRD is an empty source (contracts A.1), not an error.
        state = listed(state, SourceListed(event.source, ()))
        return _set_status(state, event.source, SourceStatus.NOT_INSTALLED, event.detail)
    status = SourceStatus.FORBIDDEN if event.status is Unavailability.FORBIDDEN else SourceStatus.FAILING
    return _set_status(state, event.source, status, event.detail)  # keep the last good content


def _external(state: CatalogState, obj: Mapping[str, Any] | None) -> CatalogState:
    doc = ExternalModelsDocument.from_configmap(obj, state.config.namespace)
    uid = raw.uid_of(obj) if obj is not None else ""
    if doc.problem is not None:
        # Unreadable: keep the last good items, report the document (C.4).
        if doc.problem == state.external_problem and uid == state.external_uid:
            return state
        return attrs.evolve(state, external_problem=doc.problem, external_uid=uid, dirty_catalog=True)
    items = state.external_items
    new_names = {item.name for item in doc.items}
    dirty = state.dirty_items
    for name in list(items):
        if name not in new_names:
            items = items.delete(name)
            dirty = dirty.set(f"external/{name}", True)
    for item in doc.items:
        if items.get(item.name) != item:
            items = items.set(item.name, item)
            dirty = dirty.set(f"external/{item.name}", True)
    if uid != state.external_uid:
        dirty = _mark(dirty, (f"external/{name}" for name in items))
    return attrs.evolve(
        state,
        external_items=items,
        external_problem=None,
        external_uid=uid,
        dirty_items=dirty,
        dirty_catalog=state.dirty_catalog or state.external_problem is not None,
    )


def _catalog(state: CatalogState, observed: ObservedCatalog | None) -> CatalogState:
    if observed == state.catalog:
        return state
    initial = state.initial_catalog_hash
    if initial is None and observed is not None:
        initial = observed.catalog_hash or ""
    ns, name = state.config.namespace, state.config.catalog_configmap
    return attrs.evolve(
        state,
        catalog=observed,
        initial_catalog_hash=initial,
        dirty_catalog=True,
        dirty_rollouts=True,
        settled=state.settled.delete(f"catalog/{ns}/{name}"),
    )


def rows_observed(state: CatalogState, event: LiteLLMRowsObserved) -> CatalogState:
    new: dict[str, LiteLLMRow] = {}
    for row in event.rows:
        parsed = LiteLLMRow.from_info(row)
        if parsed is not None:
            new[parsed.id] = parsed
    state = _set_rows(state, new.items(), [rid for rid in state.rows if rid not in new])
    failures = state.failures
    dirty_ids = state.dirty_ids
    for key, failure in list(failures.items()):
        if failure.reason is Reason.LITELLM_UNAUTHORIZED:
            # The master key works again: what failed for that reason may be tried again.
            failures = failures.delete(key)
            dirty_ids = dirty_ids.set(key.removeprefix("litellm/"), True)
    return attrs.evolve(
        state,
        failures=failures,
        dirty_ids=dirty_ids,
        litellm=LiteLLMStatus(observed_once=True, reachable=True),
    )


def set_row(state: CatalogState, rid: str, row: LiteLLMRow | None) -> CatalogState:
    return _set_rows(state, [(rid, row)] if row is not None else [], [] if row is not None else [rid])


def _set_rows(
    state: CatalogState, upserts: Iterable[tuple[str, LiteLLMRow]], deletes: Iterable[str]
) -> CatalogState:
    rows, by_logical = state.rows, state.rows_by_logical
    dirty_ids, dirty_logical, settled = state.dirty_ids, state.dirty_logical, state.settled

    def unindex(row: LiteLLMRow) -> None:
        nonlocal by_logical, dirty_logical
        ids = by_logical.get(row.logical_name, frozenset()) - {row.id}
        by_logical = by_logical.set(row.logical_name, ids) if ids else by_logical.delete(row.logical_name)
        dirty_logical = dirty_logical.set(row.logical_name, True)

    def changed(rid: str) -> None:
        nonlocal dirty_ids, settled
        dirty_ids = dirty_ids.set(rid, True)
        settled = settled.delete(f"litellm/{rid}")

    for rid, row in upserts:
        old = rows.get(rid)
        if old == row:
            continue
        if old is not None:
            unindex(old)
        rows = rows.set(rid, row)
        by_logical = by_logical.set(row.logical_name, by_logical.get(row.logical_name, frozenset()) | {rid})
        dirty_logical = dirty_logical.set(row.logical_name, True)
        changed(rid)
    for rid in deletes:
        old = rows.get(rid)
        if old is None:
            continue
        unindex(old)
        rows = rows.delete(rid)
        changed(rid)
    return attrs.evolve(
        state,
        rows=rows,
        rows_by_logical=by_logical,
        dirty_ids=dirty_ids,
        dirty_logical=dirty_logical,
        settled=settled,
    )


def litellm_unreachable(state: CatalogState, event: LiteLLMUnreachable) -> CatalogState:
    """Keep every observed row: the last published catalog stays as it is (C.11)."""
    status = attrs.evolve(
        state.litellm, reachable=False, detail=f"{event.reason}: {event.detail}".strip(": ")
    )
    return state if status == state.litellm else attrs.evolve(state, litellm=status)
