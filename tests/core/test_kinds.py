"""One declaration per watched Kubernetes kind (``catalog_core/kinds.py``): every kind is declared once,
an inconsistent declaration is refused by name, and every rollable workload kind is watched, stored,
followed from its pods, rolled with its patch, read back and granted, from its declaration alone."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from catalog_core import kinds, registry
from catalog_core.commands import EvictPod, RollWorkload
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from catalog_core.gates import ALL_GATES, Gate
from catalog_core.keys import RefKind
from catalog_core.sources.common import CATALOG_HASH_ANNOTATION
from catalog_core.state import STORE
from contracts import rbac
from contracts.kinds import RESOURCES
from tests.core import builders as b
from tests.core.harness import Cluster

APP = {"app.kubernetes.io/instance": "openclaw", "app.kubernetes.io/name": "openclaw"}


def test_every_source_kind_has_exactly_one_declaration() -> None:
    for source in SourceKind:
        declared = (source in kinds.BY_SOURCE) + (source in registry.BY_KIND)
        assert declared == 1, f"{source}: declared {declared} times (kinds.KINDS and registry.SPECS)"
    for kind in kinds.KINDS:
        assert RESOURCES[kind.source] is kind.resource, kind.name
        assert registry.trim_spec(kind.source) is kind.trim, kind.name
        assert STORE.get(kind.source) == kind.store, kind.name


def _broken(kind: kinds.Kind) -> list[tuple[str, kinds.Kind]]:
    cases = [
        (
            "parse and store",
            attrs.evolve(kind, store=None) if kind.store else attrs.evolve(kind, store=("a", "b")),
        ),
        ("keeps no metadata", attrs.evolve(kind, trim={})),
        ("dependents", attrs.evolve(kind, dependents=None if kind.dependents else RefKind.SECRET)),
    ]
    if kind.rollable is not None:
        cases += [
            ("stored with the workloads", attrs.evolve(kind, store=("cluster", "pods"))),
            ("which the state records for", attrs.evolve(kind, rollable=kinds.Rollable(through="Job"))),
        ]
    return cases


@pytest.mark.parametrize(
    ("kind", "message", "broken"),
    [(k, m, x) for k in kinds.KINDS for m, x in _broken(k)],
    ids=lambda v: v.name if isinstance(v, kinds.Kind) else None,
)
def test_an_inconsistent_declaration_is_refused_naming_it(
    kind: kinds.Kind, message: str, broken: Any
) -> None:
    others = tuple(broken if k is kind else k for k in kinds.KINDS)
    with pytest.raises(RuntimeError, match=message) as raised:
        kinds.check(others)
    assert kind.name in str(raised.value)


def test_a_kind_declared_twice_is_refused() -> None:
    with pytest.raises(RuntimeError, match="share a source kind"):
        kinds.check((*kinds.KINDS, kinds.KINDS[0]))


def workload(kind: kinds.Kind, name: str, *, template_hash: str | None = None) -> dict[str, Any]:
    """An object of a rollable kind, its pod template where the declaration says, carrying ``APP``."""
    assert kind.rollable is not None
    annotations = {CATALOG_HASH_ANNOTATION: template_hash} if template_hash else {}
    obj: dict[str, Any] = {
        "apiVersion": kind.resource.api_version,
        "kind": kind.name,
        "metadata": {"name": name, "namespace": b.NS, "uid": b.uid_of(name), "labels": APP},
    }
    place = obj
    for step in kind.rollable.template:
        place = place.setdefault(step, {})
    place["metadata"] = {"labels": APP, "annotations": annotations}
    return obj


def consumers(kind: kinds.Kind) -> list[dict[str, Any]]:
    """A consumer workload of ``kind`` and its pods, owned through the kind its declaration names."""
    assert kind.rollable is not None
    if kind.rollable.through == "ReplicaSet":
        return [
            workload(kind, "app"),
            b.replicaset("app-rs", "app"),
            b.pod("app-rs-1", labels=APP, owner=("ReplicaSet", "app-rs")),
            b.pod("app-rs-2", labels=APP, owner=("ReplicaSet", "app-rs")),
        ]
    assert not kind.rollable.through, f"{kind.name}: a test of pods owned through {kind.rollable.through}"
    return [
        workload(kind, "app"),
        b.pod("app-0", labels=APP, owner=(kind.name, "app")),
        b.pod("app-1", labels=APP, owner=(kind.name, "app")),
    ]


def _template_hash(obj: dict[str, Any], kind: kinds.Kind) -> str | None:
    assert kind.rollable is not None
    for step in kind.rollable.template:
        obj = obj[step]
    return obj["metadata"]["annotations"].get(CATALOG_HASH_ANNOTATION)


@pytest.mark.parametrize("verified", [True, False], ids=["verified-owners", "owners-by-name"])
@pytest.mark.parametrize("kind", kinds.ROLLABLE, ids=lambda k: k.name)
def test_a_rollable_kind_is_rolled_once_through_its_declaration(kind: kinds.Kind, verified: bool) -> None:
    """Its consumers' pods are restarted by rolling the workload (never evicted one by one), with its
    patch, once: the rolled workload reads back as current, so the steady state writes nothing."""
    gates = ALL_GATES if verified else ALL_GATES - {Gate.VERIFIED_ROLLOUTS}
    c = Cluster(attrs.evolve(CatalogConfig(), gates=gates))
    c.start(b.kubeai_model("llama"), *consumers(kind))
    rolls = [(x.kind, x.name) for x in c.world.writes if isinstance(x, RollWorkload)]
    assert rolls == [(kind.name, "app")], f"{kind.name}: rolled {rolls}"
    assert not any(isinstance(x, EvictPod) for x in c.world.writes), f"{kind.name}: its pods were evicted"
    current = c.catalog()["hash"]
    assert _template_hash(c.world.workloads[kind.key("app")], kind) == current, kind.name
    assert c.state.cluster.workloads[kind.key("app")].template_hash == current, kind.name
    writes = len(c.world.writes)
    c.apply(b.kubeai_model("llama", ready=2))  # not a catalog change
    c.apply(workload(kind, "app", template_hash=current))
    assert len(c.world.writes) == writes, f"{kind.name}: written again in the steady state"


@pytest.mark.parametrize("kind", kinds.ROLLABLE, ids=lambda k: k.name)
def test_a_rollable_kind_is_watched_and_patched_by_the_controllers_grants(kind: kinds.Kind) -> None:
    """``contracts/rbac.GRANTS`` derives them from the declaration; tests/deploy/test_rbac_declaration.py
    holds the Roles in deploy/ to exactly the grants."""
    verbs = {
        verb
        for grant in rbac.GRANTS
        if grant.namespace == rbac.NAMESPACE
        and grant.group == kind.resource.group
        and kind.resource.plural in grant.resources
        and not grant.names
        for verb in grant.verbs
    }
    assert {"list", "watch", "patch"} <= verbs, f"{kind.name}: granted only {sorted(verbs)}"
