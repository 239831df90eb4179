"""Consumer rollouts (contracts C.6): level-triggered, through each consumer's owning workload."""

from __future__ import annotations

import attrs

from catalog_core.state import CatalogState


@attrs.frozen
class RolloutTarget:
    kind: str  # Deployment | StatefulSet | DaemonSet, or Pod for an ownerless pod (evicted)
    name: str
    uid: str
    current_hash: str | None


def targets(state: CatalogState) -> list[RolloutTarget]:
    """Each consumer's owning workload (ReplicaSet -> Deployment), or the pod itself when it has none."""
    out: dict[tuple[str, str], RolloutTarget] = {}
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
                continue
            if kind != "Deployment":
                continue  # its workload is not observed yet
        if kind is None or kind not in ("Deployment", "StatefulSet", "DaemonSet"):
            birth = (
                pod.catalog_hash or state.cluster.pod_birth.get(pod.uid) or state.cluster.initial_catalog_hash
            )
            out[("Pod", pod.name)] = RolloutTarget("Pod", pod.name, pod.uid, birth)
    return [out[k] for k in sorted(out)]
