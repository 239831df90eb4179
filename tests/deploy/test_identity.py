"""Every write names us: on a real API server, each object the controller writes (the catalog ConfigMap, an
AgentTemplate, a rolled workload, an Event, its Lease) carries the field manager ``model-catalog`` in its
``managedFields``, and the API server's audit log shows our User-Agent on every request the controller makes
(evictions and reads included), not the generated client's ``OpenAPI-Generator``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.identity import FIELD_MANAGER, USER_AGENT
from tests.deploy.appliance import CATALOG, EXTERNAL, MASTER_KEY, NS, Appliance, readme_commands
from tests.deploy.conftest import AUDIT_LOG
from tests.e2e.harness import wait_for
from tests.faults.peers import OwnKubePeer, ServedFake

pytestmark = [pytest.mark.kube]

CONSUMER = {"app.kubernetes.io/instance": "openclaw", "app.kubernetes.io/name": "openclaw"}
SA_USER = f"system:serviceaccount:{NS}:ai-model-catalog-controller"
BROKEN = {"name": "broken"}  # no model: rejected, with a Warning Event on the ConfigMap


@pytest.fixture
def appliance(appliance_peer: OwnKubePeer, tmp_path: Path) -> Appliance:
    appliance = Appliance(appliance_peer, tmp_path)
    appliance.reset()
    return appliance


def _owned(appliance: Appliance, kind: str, name: str, ns: str = NS) -> list[str]:
    """The managers of the object's fields that are not kubectl's (the test's own writes)."""
    managed = appliance.get(kind, name, ns)["metadata"].get("managedFields", [])
    return sorted({m["manager"] for m in managed} - {"kubectl-client-side-apply", "kubectl"})


def _external(models: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": EXTERNAL, "namespace": NS},
        "data": {"models.json": json.dumps({"models": models})},
    }


def _owner(kind: str, name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": True}


def _consumer(appliance: Appliance) -> None:
    """A Deployment found through its ReplicaSet and pod (no controller-manager here: made by hand), and a
    consumer pod that nothing owns (evicted rather than rolled)."""
    labels = {**CONSUMER}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    appliance.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "openclaw", "namespace": NS, "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": template},
        }
    )
    owner = appliance.get("deployment", "openclaw")["metadata"]["uid"]
    appliance.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": "openclaw-5d8f",
                "namespace": NS,
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "openclaw",
                        "uid": owner,
                        "controller": True,
                    }
                ],
            },
            "spec": {"selector": {"matchLabels": labels}, "template": template},
        }
    )
    rs = appliance.get("replicaset", "openclaw-5d8f")["metadata"]["uid"]
    pod_spec = {"containers": [{"name": "c", "image": "x"}]}
    appliance.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "openclaw-5d8f-x1",
                "namespace": NS,
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "openclaw-5d8f",
                        "uid": rs,
                        "controller": True,
                    }
                ],
            },
            "spec": pod_spec,
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "loose-consumer",
                "namespace": NS,
                "labels": {"ai-appliance.io/model-catalog-consumer": "true"},
            },
            "spec": pod_spec,
        },
    )


def _audited(user: str, since: int) -> list[dict[str, Any]]:
    """The audit log's entries of ``user`` after byte ``since`` (one per request: its ResponseComplete)."""
    entries = []
    with AUDIT_LOG.open("rb") as log:
        log.seek(since)
        lines = log.read().decode().splitlines()
    for line in lines:
        entry = json.loads(line)
        if entry["user"]["username"] == user and entry["stage"] == "ResponseComplete":
            entries.append(entry)
    return entries


def test_every_object_the_controller_writes_names_our_field_manager_and_every_request_our_user_agent(
    appliance: Appliance,
) -> None:
    since = AUDIT_LOG.stat().st_size if AUDIT_LOG.exists() else 0
    for command in readme_commands("### In a cluster"):
        appliance.run_applied(command)
    models = [*appliance.user_models()["models"], BROKEN]
    appliance.apply(
        appliance.provider_secret(),
        _external(models),
        {
            "apiVersion": "kubeopencode.io/v1alpha1",
            "kind": "AgentTemplate",
            "metadata": {"name": "litellm-default", "namespace": NS},
            "spec": {"config": {"provider": {"litellm": {"models": {}}}}},
        },
    )
    _consumer(appliance)
    served = ServedFake(MASTER_KEY)
    try:
        with appliance.controller("replica-a", served):
            appliance.wait_catalog_with(["team-gpt"])
            # A pod that was there before the first catalog may have started on it (the controller cannot
            # tell), so a change of the catalog is what surely rolls the consumers.
            appliance.apply(_external([*models, {**models[0], "name": "team-gpt-mini"}]))
            catalog = appliance.wait_catalog_with(["team-gpt", "team-gpt-mini"])

            def patched() -> bool:
                template = appliance.get("agenttemplate", "litellm-default")
                return "team-gpt" in template["spec"]["config"]["provider"]["litellm"]["models"]

            def rolled() -> bool:
                template = appliance.get("deployment", "openclaw")["spec"]["template"]["metadata"]
                current = catalog["AI_APPLIANCE_MODEL_CATALOG_HASH"]
                return template.get("annotations", {}).get("ai-appliance.io/catalog-hash") == current

            def evicted() -> bool:
                return appliance.run(f"kubectl get pod loose-consumer -n {NS}").returncode != 0

            def warned() -> list[dict[str, Any]]:
                items = json.loads(appliance.kubectl("get", "events", "-n", NS, "-o", "json"))["items"]
                return [e for e in items if e["involvedObject"]["name"] == EXTERNAL]

            # bounds only (each returns as soon as it holds), wide for a loaded machine
            wait_for(patched, 120, what="the AgentTemplate patched")
            wait_for(rolled, 120, what="the consumer Deployment rolled")
            wait_for(evicted, 120, what="the loose consumer pod evicted")
            (event, *_) = wait_for(warned, 120, what="a Warning Event on ai-external-models")

            assert _owned(appliance, "configmap", CATALOG) == [FIELD_MANAGER]
            assert _owned(appliance, "agenttemplate", "litellm-default") == [FIELD_MANAGER]
            assert _owned(appliance, "deployment", "openclaw") == [FIELD_MANAGER]
            assert _owned(appliance, "event", event["metadata"]["name"]) == [FIELD_MANAGER]
            assert _owned(appliance, "lease", "ai-model-catalog-controller") == [FIELD_MANAGER]
            assert event["source"]["component"] == FIELD_MANAGER
    finally:
        served.close()

    requests = _audited(SA_USER, since)
    verbs = {(e["verb"], e["objectRef"].get("resource"), e["objectRef"].get("subresource")) for e in requests}
    for wanted in (
        ("create", "configmaps", None),
        ("patch", "agenttemplates", None),
        ("patch", "deployments", None),
        ("create", "pods", "eviction"),
        ("create", "events", None),
        ("update", "leases", None),
        ("watch", "configmaps", None),
    ):
        assert wanted in verbs, f"no {wanted} request in the audit log"
    agents = {e.get("userAgent") for e in requests}
    assert agents == {USER_AGENT}, f"requests made as {agents - {USER_AGENT}}"
