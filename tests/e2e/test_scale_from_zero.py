"""A KubeAI Model that scales from zero, on the real kube-apiserver and the real LiteLLM (behaviour §1.1).

The operator turns a local ModelActivation with ``minReplicas: 0`` into a KubeAI Model with the same
``minReplicas``; the controller (a separate process, with the ServiceAccount of ``deploy/``) publishes
that Model while it has no ready replica. Its ready count then goes 0 -> 1 -> 0 -> 1, as KubeAI scales
it for requests: the controller writes nothing more (no LiteLLM write, no ConfigMap write, no rollout).
A controller started with ``CATALOG_KUBEAI_SCALE_FROM_ZERO=false`` withdraws it while it is not ready.
Both runs' event logs replay identically.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compat.world import World
from tests.e2e.harness import REPO, Controller, LiteLLMAdmin, kubectl, wait_for

pytestmark = [pytest.mark.kube, pytest.mark.litellm, pytest.mark.slow]

NAME = "qwen-cold"
ROW = f"ai-appliance-kubeai-{NAME}"
CONSUMER = {"app.kubernetes.io/instance": "openclaw", "app.kubernetes.io/name": "openclaw"}


def activation(world: World) -> dict[str, Any]:
    """A local ModelActivation, as the dashboard writes it when the user frees the GPU between uses."""
    return {
        "apiVersion": "appliance.magicstick.dev/v1alpha1",
        "kind": "ModelActivation",
        "metadata": {"name": NAME, "namespace": world.app_ns},
        "spec": {"type": "local", "engine": "vllm", "modelType": "chat", "minReplicas": 0},
    }


def operator_model(world: World) -> dict[str, Any]:
    """The KubeAI Model the Magic Stick Operator creates for the activation: its name, its engine, and
    its minReplicas copied over (KubeAI scales it from zero)."""
    spec = world.get("modelactivation", NAME, world.app_ns)["spec"]
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {
            "name": NAME,
            "namespace": world.ns,
            "labels": {"appliance.magicstick.dev/modelactivation": NAME},
        },
        "spec": {
            "features": ["TextGeneration"],
            "engine": "VLLM",
            "url": f"hf://Qwen/{NAME}",
            "resourceProfile": "cpu:2",
            "minReplicas": spec["minReplicas"],
            "maxReplicas": 1,
        },
    }


def consumer(world: World) -> None:
    """A consumer Deployment with its ReplicaSet and pod: what a catalog change would roll."""
    labels = CONSUMER
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    world.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "openclaw", "namespace": world.ns, "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "template": template},
        }
    )
    uid = world.get("deployment", "openclaw")["metadata"]["uid"]
    world.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": "openclaw-5d8f",
                "namespace": world.ns,
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "Deployment",
                        "name": "openclaw",
                        "uid": uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {"selector": {"matchLabels": labels}, "template": template},
        }
    )
    rs_uid = world.get("replicaset", "openclaw-5d8f")["metadata"]["uid"]
    world.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "openclaw-5d8f-x1",
                "namespace": world.ns,
                "labels": labels,
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "openclaw-5d8f",
                        "uid": rs_uid,
                        "controller": True,
                    }
                ],
            },
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
    )


def replicas(world: World, ready: int, pods: int) -> str:
    """KubeAI's status update of the Model; the resourceVersion it made."""
    out = kubectl(
        world.admin,
        "patch",
        "model",
        NAME,
        "-n",
        world.ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"replicas": {"all": pods, "ready": ready}}}),
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    )
    return out.strip()


def records(controller: Controller) -> list[dict[str, Any]]:
    return [json.loads(line) for line in controller.event_log.read_text().splitlines() if line.strip()]


def commands(controller: Controller) -> list[dict[str, Any]]:
    return [c for r in records(controller) if r.get("k") == "commands" for c in r["commands"]]


def folded(controller: Controller, resource_version: str) -> bool:
    """The controller has folded the Model at ``resource_version`` (and ticked after it)."""
    seen = False
    for record in records(controller):
        event = record.get("event") if record.get("k") == "event" else None
        if event is None:
            continue
        objects = event.get("objects") or [event.get("object") or {}]
        if any(o.get("metadata", {}).get("resourceVersion") == resource_version for o in objects):
            seen = True
        elif seen and event.get("t") == "ticked":
            return True
    return False


def quiet(controller: Controller, seconds: float = 3.0) -> None:
    """Wait until the controller has planned nothing for ``seconds``."""

    def still() -> bool:
        before = len(commands(controller))
        time.sleep(seconds)
        return len(commands(controller)) == before

    wait_for(still, timeout=90, interval=0.1, what="the controller to settle")


def route(world: World) -> dict[str, Any] | None:
    data = world.catalog()
    return next((r for r in json.loads(data.get("routes.json", "[]")) if r["name"] == NAME), None)


def entries(world: World) -> set[str]:
    data = world.catalog()
    return {m["id"] for m in json.loads(data.get("catalog.json", '{"models": []}'))["models"]}


def replay_verifies(controller: Controller) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "replay", str(controller.event_log), "--verify"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture
def litellm(litellm_peer: Any) -> Iterator[LiteLLMAdmin]:
    admin = LiteLLMAdmin(litellm_peer.base_url, litellm_peer.master_key)
    admin.delete_where(lambda row: False)
    yield admin
    admin.delete_where(lambda row: False)


def test_a_model_that_scales_from_zero_is_published_once_and_its_flapping_writes_nothing(
    kube_peer: Any, litellm_peer: Any, litellm: LiteLLMAdmin, tmp_path: Path
) -> None:
    ns = f"cold-{uuid.uuid4().hex[:6]}"  # a deleted namespace may linger on the peer (no controllers)
    world = World(Path(kube_peer.kubeconfig), tmp_path, ns, f"{ns}-system", litellm_peer).setup()
    try:
        world.apply(activation(world))
        world.apply(operator_model(world))  # no status yet: KubeAI has not started anything
        consumer(world)
        first = world.controller("on")
        first.wait_ready()

        # published with no ready replica: LiteLLM row, catalog entry, record published/ScalesFromZero
        row = wait_for(lambda: litellm.rows().get(ROW), timeout=60, what="the row of the cold Model")
        assert row["model_name"] == NAME
        assert row["litellm_params"]["model"] == f"openai/{NAME}"
        assert row["model_info"]["ai_appliance_owner"] == "model-catalog"
        wait_for(lambda: NAME in entries(world), timeout=30, what="its catalog entry")
        record = wait_for(lambda: route(world), timeout=30, what="its routes.json record")
        assert (record["state"], record["reason"]) == ("published", "ScalesFromZero")
        quiet(first)
        rolled = world.get("deployment", "openclaw")["metadata"]["generation"]
        wait_for(
            lambda: (
                world.get("deployment", "openclaw")["spec"]["template"]["metadata"].get("annotations") or {}
            ).get("ai-appliance.io/catalog-hash"),
            timeout=30,
            what="the consumer rolled onto the first catalog",
        )
        quiet(first)
        before = {
            "commands": len(commands(first)),
            "row": litellm.rows()[ROW],
            "configmap": world.get("configmap", "ai-model-catalog")["metadata"]["resourceVersion"],
            "generation": world.get("deployment", "openclaw")["metadata"]["generation"],
        }
        assert before["generation"] >= rolled

        # KubeAI scales it for requests: a pod starts, becomes ready, goes; again
        for ready, pods in ((0, 1), (1, 1), (0, 0), (0, 1), (1, 1)):
            version = replicas(world, ready, pods)
            wait_for(lambda v=version: folded(first, v), timeout=30, what=f"ready={ready} folded")
        quiet(first)
        issued = commands(first)[before["commands"] :]
        assert issued == [], issued  # no LiteLLM write, no catalog write, no rollout, no Event
        assert litellm.rows()[ROW] == before["row"]
        assert (
            world.get("configmap", "ai-model-catalog")["metadata"]["resourceVersion"] == before["configmap"]
        )
        assert world.get("deployment", "openclaw")["metadata"]["generation"] == before["generation"]
        assert (route(world) or {}).get("reason") == "ScalesFromZero"
        assert first.stop() == 0
        replay_verifies(first)

        # KubeAI scales it to zero; a controller with the setting off withdraws it (the previous rule)
        replicas(world, 0, 0)
        second = world.controller("off", CATALOG_KUBEAI_SCALE_FROM_ZERO="false")
        second.wait_ready()
        wait_for(lambda: ROW not in litellm.rows(), timeout=60, what="the row withdrawn")
        wait_for(lambda: (route(world) or {}).get("reason") == "NotReady", timeout=30, what="NotReady")
        assert NAME not in entries(world)
        assert route(world)["state"] == "withheld"  # type: ignore[index]
        assert second.stop() == 0
        replay_verifies(second)
    finally:
        world.close()
