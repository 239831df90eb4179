"""In-place upgrade from the previous controller, on the real kube-apiserver and the real LiteLLM (issue 11).

Start from exactly what today's controller leaves behind (contracts Part A, ``tests/compat/legacy.py``):
its LiteLLM rows (``ai_appliance_managed: true``, no owner, today's ids), a Mesh row and a hand-made row,
the catalog ConfigMap in today's format with its hash annotation, and consumer Deployments whose pods it
restarted by deleting them (their templates carry someone's restart annotation, not ours). Then start this
controller and check: no duplicate rows, legacy rows adopted in place (at most one update each, never
delete-and-recreate), foreign rows byte-identical, consumers rolled at most once and only if the catalog
changed, a restart writes nothing, and the rows can be taken back by today's controller (downgrade).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.compat import legacy
from tests.compat.world import World
from tests.e2e.harness import Controller, LiteLLMAdmin, wait_for

pytestmark = [pytest.mark.kube, pytest.mark.litellm, pytest.mark.slow]

OWNER = "model-catalog"
RESTARTED_AT = {"kubectl.kubernetes.io/restartedAt": "2026-11-30T09:58:00Z"}
MESH = {
    "model_name": "mct-llama",
    "litellm_params": {
        "model": "openai/mct-llama",
        "api_base": "http://mesh-bridge.ai.svc:8080/v1",
        "order": 1,
    },
    "model_info": {
        "id": "private-mesh-mct-llama-peer-a",
        "ai_appliance_owner": "private-mesh",
        "max_input_tokens": 4096,
    },
}
HAND = {
    "model_name": "mct-hand",
    "litellm_params": {"model": "openai/mct-hand", "api_base": "http://hand.example/v1"},
    "model_info": {"id": "hand-made-1", "mode": "chat"},
}


def consumer(name: str, labels: dict[str, str], ns: str) -> list[dict[str, Any]]:
    """A Deployment, its ReplicaSet and one pod (Pending: there is no kubelet), as the old controller left
    them after restarting the pod by deleting it."""
    template = {
        "metadata": {"labels": labels, "annotations": dict(RESTARTED_AT)},
        "spec": {"containers": [{"name": "app", "image": f"example/{name}:1"}]},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"selector": {"matchLabels": labels}, "strategy": {"type": "Recreate"}, "template": template},
    }
    return [deployment]


def owned_objects(world: World, name: str, labels: dict[str, str]) -> list[dict[str, Any]]:
    deployment = world.get("deployment", name)
    rs_name = f"{name}-5d8f7"
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": rs_name,
            "namespace": world.ns,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": name,
                    "uid": deployment["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"selector": {"matchLabels": labels}, "template": deployment["spec"]["template"]},
    }
    return [rs]


def pod(world: World, name: str, labels: dict[str, str]) -> dict[str, Any]:
    rs = world.get("replicaset", f"{name}-5d8f7")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-5d8f7-x1",
            "namespace": world.ns,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": rs["metadata"]["name"],
                    "uid": rs["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "app", "image": f"example/{name}:1"}]},
    }


CONSUMERS = {
    "anything-llm": {"app": "anything-llm"},
    "openclaw": {"app.kubernetes.io/instance": "openclaw", "app.kubernetes.io/name": "openclaw"},
}


def add_consumers(world: World) -> None:
    for name, labels in CONSUMERS.items():
        kubectl_docs = consumer(name, labels, world.ns)
        world.apply(*world.moved(kubectl_docs))
        world.apply(*owned_objects(world, name, labels))
        world.apply(pod(world, name, labels))


def generations(world: World) -> dict[str, int]:
    return {name: world.get("deployment", name)["metadata"]["generation"] for name in CONSUMERS}


def template_annotations(world: World, name: str) -> dict[str, str]:
    return dict(world.get("deployment", name)["spec"]["template"]["metadata"].get("annotations") or {})


def commands(controller: Controller) -> list[dict[str, Any]]:
    out = []
    for line in controller.event_log.read_text().splitlines():
        record = json.loads(line)
        if record.get("k") == "commands":
            out.extend(record["commands"])
    return out


def litellm_writes(controller: Controller) -> Counter[tuple[str, str]]:
    return Counter((c["t"], c["model_id"]) for c in commands(controller) if c["t"].startswith("litellm-"))


def settled(world: World, controller: Controller, seconds: float = 3.0) -> None:
    """Wait until the controller has issued nothing for ``seconds`` (writes, rollouts, catalog)."""

    def quiet() -> bool:
        before = len(commands(controller))
        time.sleep(seconds)
        return len(commands(controller)) == before

    wait_for(quiet, timeout=60, interval=0.1, what="the controller to settle")


@pytest.fixture
def litellm(litellm_peer: Any) -> Iterator[LiteLLMAdmin]:
    admin = LiteLLMAdmin(litellm_peer.base_url, litellm_peer.master_key)
    admin.delete_where(lambda row: False)
    yield admin
    admin.delete_where(lambda row: False)


def make_world(kube_peer: Any, litellm_peer: Any, tmp: Path, ns: str) -> World:
    return World(Path(kube_peer.kubeconfig), tmp, ns, f"{ns}-sys", litellm_peer).setup()


def test_upgrade_adopts_legacy_rows_in_place_and_rolls_each_consumer_once(
    kube_peer: Any, litellm_peer: Any, litellm: LiteLLMAdmin, tmp_path: Path
) -> None:
    world = make_world(kube_peer, litellm_peer, tmp_path, "upgrade-ai")
    try:
        key = "sk-upgrade-openai-0001"
        gateway, local = "https://gw.upgrade.example/v1", "http://10.9.8.7:8000/v1"
        legacy_rows = [
            legacy.kubeai_row("mct-llama", context=8192),
            legacy.external_row("mct-gpt", "openai/mct-gpt", key, max_input_tokens=128000),
            # the Secret's key sent to a gateway: kept once the Secret names it (the README's upgrade step)
            legacy.external_row("mct-gw", "openai/mct-gw", key, api_base=gateway),
            # a keyless local server: now written with the key none, so LiteLLM never sends its own
            legacy.external_row("mct-local", "openai/mct-local", None, api_base=local),
            legacy.kubeai_row("mct-retired"),  # its Model is gone: today's controller would delete it too
        ]
        for row in [*legacy_rows, MESH, HAND]:
            litellm.add(row["model_name"], row["litellm_params"], row["model_info"])
        before = litellm.rows()
        world.apply(
            {
                "apiVersion": "kubeai.org/v1",
                "kind": "Model",
                "metadata": {"name": "mct-llama", "namespace": "ai"},
                "spec": {
                    "features": ["TextGeneration"],
                    "engine": "VLLM",
                    "url": "hf://x/llama",
                    "args": ["--max-model-len=8192"],
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": "ai-model-provider-openai",
                    "namespace": "ai",
                    # README, "Before you upgrade: say where each provider Secret's key may go"
                    "annotations": {
                        "appliance.magicstick.dev/model-provider-api-bases": "https://gw.upgrade.example"
                    },
                },
                "stringData": {"apiKey": key},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "ai-external-models", "namespace": "ai"},
                "data": {
                    "models.json": json.dumps(
                        {
                            "models": [
                                {
                                    "name": "mct-gpt",
                                    "model": "openai/mct-gpt",
                                    "apiKeySecretRef": {"name": "ai-model-provider-openai", "key": "apiKey"},
                                    "contextWindow": 128000,
                                },
                                {
                                    "name": "mct-gw",
                                    "model": "openai/mct-gw",
                                    "apiBase": gateway,
                                    "apiKeySecretRef": {"name": "ai-model-provider-openai", "key": "apiKey"},
                                },
                                {"name": "mct-local", "model": "openai/mct-local", "apiBase": local},
                            ]
                        }
                    )
                },
            },
            # Scales from zero (no minReplicas: KubeAI reads 0) and has no ready replica: today's controller
            # withholds it, so it has no legacy row. Publishing it is an intended difference (README's
            # differences table, behaviour §1.1).
            {
                "apiVersion": "kubeai.org/v1",
                "kind": "Model",
                "metadata": {"name": "mct-cold", "namespace": "ai"},
                "spec": {"features": ["TextGeneration"], "engine": "VLLM", "url": "hf://x/cold"},
            },
            legacy.catalog_configmap(list(before.values())),
        )
        kubectl_status(world, "mct-llama")
        add_consumers(world)
        gens_before = generations(world)
        old_hash = world.get("configmap", "ai-model-catalog")["metadata"]["annotations"][
            "ai-appliance.io/catalog-hash"
        ]

        first = world.controller("upgrade")
        first.wait_ready()
        wait_for(lambda: "routes.json" in world.catalog(), timeout=60, what="our first catalog")
        wait_for(
            lambda: "ai-appliance-kubeai-mct-retired" not in litellm.rows(),
            timeout=30,
            what="the stale row deleted",
        )
        settled(world, first)
        after = litellm.rows()

        # rows: the same ids, no duplicates, legacy rows adopted in place; plus the intended difference
        assert set(after) == set(before) - {"ai-appliance-kubeai-mct-retired"} | {
            "ai-appliance-kubeai-mct-cold"
        }
        names = Counter(
            r["model_name"] for r in after.values() if r["model_info"].get("ai_appliance_owner") == OWNER
        )
        assert names == Counter({"mct-llama": 1, "mct-gpt": 1, "mct-gw": 1, "mct-local": 1, "mct-cold": 1})
        adopted = [f"ai-appliance-{s}" for s in ("kubeai-mct-llama", "external-mct-gpt", "external-mct-gw")]
        adopted.append("ai-appliance-external-mct-local")
        for rid in adopted:
            assert after[rid]["model_info"]["ai_appliance_owner"] == OWNER
            assert after[rid]["model_info"]["ai_appliance_managed"] is True
        writes = litellm_writes(first)
        for rid in adopted:
            assert writes[("litellm-update", rid)] <= 1, writes
            for op in ("litellm-create", "litellm-recreate", "litellm-delete"):
                assert writes[(op, rid)] == 0, writes
        keys = {c["model_id"]: c.get("api_key") for c in commands(first) if c["t"] == "litellm-update"}
        assert keys["ai-appliance-external-mct-local"] == {"t": "literal", "value": "none"}
        assert keys["ai-appliance-external-mct-gw"]["name"] == "ai-model-provider-openai"
        assert after["ai-appliance-external-mct-gw"]["litellm_params"]["api_base"] == gateway
        assert writes[("litellm-delete", "ai-appliance-kubeai-mct-retired")] == 1
        # the intended difference: the Model that scales from zero is published, ready or not
        assert writes[("litellm-create", "ai-appliance-kubeai-mct-cold")] == 1
        cold = next(r for r in json.loads(world.catalog()["routes.json"]) if r["name"] == "mct-cold")
        assert (cold["state"], cold["reason"]) == ("published", "ScalesFromZero")
        # foreign rows byte-identical
        for rid in (MESH["model_info"]["id"], HAND["model_info"]["id"]):
            assert after[rid] == before[rid]

        # consumers: rolled exactly once (entries gain routes, so the hash changed), restart annotations kept
        new_hash = world.catalog()["AI_APPLIANCE_MODEL_CATALOG_HASH"]
        assert new_hash != old_hash
        # a rollout waits for the catalog to be stable for its window (issue 14)
        wait_for(
            lambda: generations(world) == {name: g + 1 for name, g in gens_before.items()},
            timeout=30,
            what="each consumer rolled",
        )
        for name in CONSUMERS:
            annotations = template_annotations(world, name)
            assert annotations["ai-appliance.io/catalog-hash"] == new_hash
            assert (
                annotations["kubectl.kubernetes.io/restartedAt"]
                == RESTARTED_AT["kubectl.kubernetes.io/restartedAt"]
            )
        # the catalog keeps the metadata the old controller and Flux put on it
        meta = world.get("configmap", "ai-model-catalog")["metadata"]
        assert meta["labels"]["app"] == "ai-model-catalog"

        # a restart of the new controller writes nothing and rolls nobody
        assert first.stop() == 0
        gens_now = generations(world)
        second = world.controller("restart")
        second.wait_ready()
        settled(world, second)
        time.sleep(6)  # longer than the rollout window: a rollout would have been planned by now
        assert litellm_writes(second) == Counter()
        assert not [c for c in commands(second) if c["t"] in ("workload-roll", "pod-evict", "catalog-write")]
        assert generations(world) == gens_now
        assert litellm.rows() == after
        assert second.stop() == 0

        # downgrade: today's controller matches rows by model_name and deletes only managed rows it does not
        # want (behaviour §2.1, §3). Each of its models finds exactly one managed row of that name, with the
        # id it would keep; the Mesh and hand-made rows are not managed, so it leaves them alone.
        rows = litellm.rows()
        for name in ("mct-llama", "mct-gpt", "mct-gw", "mct-local"):
            (row,) = [
                r
                for r in rows.values()
                if r["model_name"] == name and r["model_info"].get("ai_appliance_managed") is True
            ]
            assert row["model_info"]["id"].startswith(("ai-appliance-kubeai-", "ai-appliance-external-"))
        for rid in (MESH["model_info"]["id"], HAND["model_info"]["id"]):
            assert rows[rid]["model_info"].get("ai_appliance_managed") is not True
    finally:
        world.close()


def kubectl_status(world: World, model: str) -> None:
    from tests.e2e.harness import kubectl

    kubectl(
        world.admin,
        "patch",
        "model",
        model,
        "-n",
        world.ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"replicas": {"all": 1, "ready": 1}}}),
    )


def test_upgrade_with_an_unchanged_catalog_rolls_nobody(
    kube_peer: Any, litellm_peer: Any, litellm: LiteLLMAdmin, tmp_path: Path
) -> None:
    """Nothing published: today's catalog and ours agree on every key a consumer reads and on the hash, so
    the consumers the old controller started keep running."""
    world = make_world(kube_peer, litellm_peer, tmp_path, "same-ai")
    try:
        world.apply(legacy.catalog_configmap([]))
        add_consumers(world)
        gens_before = generations(world)
        old = world.catalog()
        controller = world.controller("same")
        controller.wait_ready()
        wait_for(lambda: "routes.json" in world.catalog(), timeout=60, what="our first catalog")
        settled(world, controller)
        time.sleep(6)  # longer than the rollout window: a rollout would have been planned by now
        written = world.catalog()
        assert {k: written[k] for k in old} == old  # every key today's consumers read: the same bytes
        assert generations(world) == gens_before
        assert not [c for c in commands(controller) if c["t"] in ("workload-roll", "pod-evict")]
        assert controller.stop() == 0
    finally:
        world.close()
