"""Consumer rollouts (behaviour §9.2): level-triggered, through each consumer's owning workload."""

from __future__ import annotations

import attrs

from catalog_core import kinds
from catalog_core.events import SourceKind
from catalog_core.evolve import evolve
from catalog_core.gates import Gate
from catalog_core.kinds import OWN_PODS, ROLLABLE_BY_NAME, THROUGH_KINDS
from catalog_core.sources.consumers import ConsumerPod, Workload
from catalog_core.state import CatalogState


@attrs.frozen
class RolloutTarget:
    kind: str  # a rollable kind (catalog_core/kinds.py), or Pod for an ownerless pod (evicted)
    name: str
    uid: str
    current_hash: str | None


def _birth(state: CatalogState, pod: ConsumerPod) -> str | None:
    """The catalog a pod read when it started: its own annotation, else the catalog when it appeared."""
    return pod.catalog_hash or state.cluster.pod_birth.get(pod.uid) or state.cluster.initial_catalog_hash


def targets(state: CatalogState) -> list[RolloutTarget]:
    """Each consumer's owning workload (ReplicaSet -> Deployment), or the pod itself when it has none.

    Only through a verified chain, to a workload that is a consumer itself: anyone who may create a pod
    may write any ownerReference into it (Deployment/litellm, LiteLLM's own ReplicaSet, each with the true
    uid, which anyone who may read them can copy). So every link must name its object by that object's uid
    (pod -> ReplicaSet -> Deployment, pod -> StatefulSet, pod -> DaemonSet; a Deployment never owns a pod
    itself), and the workload at its end must carry the consumer mark itself (behaviour §9.2). A pod whose
    chain does not hold is left alone: neither its claimed owner is rolled nor the pod evicted.

    A workload we never rolled (no ``ai-appliance.io/catalog-hash`` in its pod template, e.g. after an
    upgrade from the previous controller, which deleted pods instead) is on the catalog its pods started
    with: it is rolled only when that differs from the current one, so an unchanged catalog rolls nothing.
    """
    out: dict[tuple[str, str], RolloutTarget] = {}
    births: dict[tuple[str, str], set[str | None]] = {}
    owner_of = _owner if Gate.VERIFIED_ROLLOUTS in state.config.gates else _owner_by_name
    for pod in state.cluster.pods.values():
        if pod.terminating:
            continue
        owner = owner_of(state, pod)
        if owner is _EVICT:
            out[("Pod", pod.name)] = RolloutTarget("Pod", pod.name, pod.uid, _birth(state, pod))
        elif isinstance(owner, Workload):
            key = (owner.kind, owner.name)
            out[key] = RolloutTarget(owner.kind, owner.name, owner.uid, owner.template_hash)
            births.setdefault(key, set()).add(_birth(state, pod))
    for key, target in out.items():
        started = births.get(key)
        if target.current_hash is None and started is not None and len(started) == 1:
            out[key] = evolve(target, current_hash=next(iter(started)))
    return [out[k] for k in sorted(out)]


_EVICT = "evict"  # the pod has no owner that would recreate it on a rollout: it is evicted itself
_LEAVE = "leave"  # the chain does not hold (yet): nothing is done for this pod


def _owner(state: CatalogState, pod: ConsumerPod) -> Workload | str:
    """The consumer workload to roll for ``pod``, or ``_EVICT`` or ``_LEAVE``."""
    kind, name = pod.owner_kind, pod.owner_name
    if kind is None or name is None:
        return _EVICT
    if kind == _REPLICASET:
        rs = state.cluster.replicasets.get(name)
        if rs is None or not rs.uid or rs.uid != pod.owner_uid:
            return _LEAVE  # not observed yet, or not the ReplicaSet the pod names
        if rs.deployment is None:
            return _EVICT  # a bare ReplicaSet recreates the pod: evicting it is its rollout
        return _verified(state, THROUGH_KINDS[_REPLICASET], rs.deployment, rs.deployment_uid)
    if kind in OWN_PODS:
        return _verified(state, kind, name, pod.owner_uid)
    if kind in ROLLABLE_BY_NAME:
        return (
            _LEAVE  # it owns the kind between it and its pods, never a pod: only a forged reference says so
        )
    return _EVICT  # a Job or another controller recreates it


def _verified(state: CatalogState, kind: str, name: str, uid: str) -> Workload | str:
    workload = state.cluster.workloads.get(f"{kind}/{name}")
    if workload is None or not workload.uid or workload.uid != uid or not workload.consumer:
        return _LEAVE
    return workload


# The kind between a Deployment and its pods: a pod's owner of this kind is followed to its Deployment.
_REPLICASET = kinds.BY_SOURCE[SourceKind.REPLICASETS].name


def _owner_by_name(state: CatalogState, pod: ConsumerPod) -> Workload | str:
    """``_owner`` without ``Gate.VERIFIED_ROLLOUTS``: the workload the pod's owner references name (pod ->
    ReplicaSet -> Deployment, pod -> StatefulSet or DaemonSet), uids unchecked, whatever the workload."""
    kind, name = pod.owner_kind, pod.owner_name
    if kind == "ReplicaSet" and name is not None:
        rs = state.cluster.replicasets.get(name)
        deployment = THROUGH_KINDS[_REPLICASET]
        kind, name = (deployment, rs.deployment) if rs is not None and rs.deployment else (None, None)
    if kind not in ROLLABLE_BY_NAME:
        return _EVICT
    workload = state.cluster.workloads.get(f"{kind}/{name}") if name is not None else None
    return workload if workload is not None else _LEAVE  # its workload is not observed yet
