"""Consumer rollouts (behaviour §9.2): level-triggered, through each consumer's owning workload."""

from __future__ import annotations

import attrs

from catalog_core.evolve import evolve
from catalog_core.sources.consumers import ConsumerPod
from catalog_core.state import CatalogState


@attrs.frozen
class RolloutTarget:
    kind: str  # Deployment | StatefulSet | DaemonSet, or Pod for an ownerless pod (evicted)
    name: str
    uid: str
    current_hash: str | None


def _birth(state: CatalogState, pod: ConsumerPod) -> str | None:
    """The catalog a pod read when it started: its own annotation, else the catalog when it appeared."""
    return pod.catalog_hash or state.cluster.pod_birth.get(pod.uid) or state.cluster.initial_catalog_hash


def targets(state: CatalogState) -> list[RolloutTarget]:
    """Each consumer's owning workload (ReplicaSet -> Deployment), or the pod itself when it has none.

    A workload we never rolled (no ``ai-appliance.io/catalog-hash`` in its pod template, e.g. after an
    upgrade from the previous controller, which deleted pods instead) is on the catalog its pods started
    with: it is rolled only when that differs from the current one, so an unchanged catalog rolls nothing.
    """
    out: dict[tuple[str, str], RolloutTarget] = {}
    births: dict[tuple[str, str], set[str | None]] = {}
    for pod in state.cluster.pods.values():
        if pod.terminating:
            continue
        kind, name = pod.owner_kind, pod.owner_name
        if kind == "ReplicaSet" and name is not None:
            rs = state.cluster.replicasets.get(name)
            kind, name = ("Deployment", rs.deployment) if rs is not None and rs.deployment else (None, None)
        if kind in ("Deployment", "StatefulSet", "DaemonSet") and name is not None:
            workload = state.cluster.workloads.get(f"{kind}/{name}")
            if workload is not None:
                out[(kind, name)] = RolloutTarget(kind, name, workload.uid, workload.template_hash)
                births.setdefault((kind, name), set()).add(_birth(state, pod))
                continue
            if kind != "Deployment":
                continue  # its workload is not observed yet
        if kind is None or kind not in ("Deployment", "StatefulSet", "DaemonSet"):
            out[("Pod", pod.name)] = RolloutTarget("Pod", pod.name, pod.uid, _birth(state, pod))
    for key, target in out.items():
        started = births.get(key)
        if target.current_hash is None and started is not None and len(started) == 1:
            out[key] = evolve(target, current_hash=next(iter(started)))
    return [out[k] for k in sorted(out)]
