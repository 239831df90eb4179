"""End to end: ``model-catalog run`` as a separate process, on the real kube-apiserver and LiteLLM,
authenticated with a ServiceAccount token bound by exactly the Roles in ``deploy/`` (issue 6).

One scenario, step by step, asserting LiteLLM rows, the ConfigMap, routes.json,
the AgentTemplate and the rollout annotation after each step; then a standby
replica takes over when the leader is killed; then the run's event log replays
with ``--verify``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.harness import (
    FAST_CONTROLLER_ENV,
    REPO,
    Controller,
    HealthServer,
    LiteLLMAdmin,
    deploy_base,
    image_runtime_env,
    kubectl,
    quantile,
    service_account_kubeconfig,
    wait_for,
)

pytestmark = [pytest.mark.kube, pytest.mark.litellm, pytest.mark.slow]

NS, APP_NS = "ai", "ai-system"
OWNED = "model-catalog"


class Cluster:
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def apply(self, *docs: dict[str, Any]) -> None:
        kubectl(self.kubeconfig, "apply", "-f", "-", input_text=yaml.safe_dump_all(docs))

    def delete(self, kind: str, name: str, namespace: str = NS) -> None:
        kubectl(self.kubeconfig, "delete", kind, name, "-n", namespace, "--ignore-not-found", "--wait=false")

    def patch_status(self, kind: str, name: str, status: dict[str, Any], namespace: str = NS) -> None:
        kubectl(
            self.kubeconfig,
            "patch",
            kind,
            name,
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": status}),
        )

    def get(self, kind: str, name: str, namespace: str = NS) -> dict[str, Any]:
        return json.loads(kubectl(self.kubeconfig, "get", kind, name, "-n", namespace, "-o", "json"))

    def catalog(self) -> dict[str, str]:
        return dict(self.get("configmap", "ai-model-catalog").get("data") or {})

    def catalog_models(self) -> dict[str, dict[str, Any]]:
        data = self.catalog()
        if "catalog.json" not in data:
            return {}
        return {m["id"]: m for m in json.loads(data["catalog.json"])["models"]}

    def routes(self) -> dict[tuple[str, str], dict[str, Any]]:
        data = self.catalog()
        return {(r["source"], r["name"]): r for r in json.loads(data.get("routes.json", "[]"))}

    def events(self, namespace: str) -> list[dict[str, Any]]:
        return json.loads(kubectl(self.kubeconfig, "get", "events", "-n", namespace, "-o", "json"))["items"]


def model(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"features": ["TextGeneration"], "engine": "VLLM", "url": f"hf://x/{name}", **spec},
    }


def external(models: Any) -> dict[str, Any]:
    text = models if isinstance(models, str) else json.dumps({"models": models})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ai-external-models", "namespace": NS},
        "data": {"models.json": text},
    }


def activation(name: str, secret: str) -> dict[str, Any]:
    return {
        "apiVersion": "appliance.magicstick.dev/v1alpha1",
        "kind": "ModelActivation",
        "metadata": {"name": name, "namespace": APP_NS},
        "spec": {
            "type": "external",
            "external": {"model": f"openai/{name}", "apiKeySecretRef": {"name": secret, "key": "k"}},
        },
    }


def secret(name: str, value: str) -> dict[str, Any]:
    """A model-provider Secret: labelled, as every Secret a model may use must be (behaviour §1.5)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"appliance.magicstick.dev/model-provider-secret": "true"},
        },
        "stringData": {"k": value},
    }


def workload(name: str, kind: str = "Deployment", labels: dict[str, str] | None = None) -> dict[str, Any]:
    labels = labels or {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }


@pytest.fixture(scope="module")
def world(kube_peer: Any, litellm_peer: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    admin = Path(kube_peer.kubeconfig)
    work = tmp_path_factory.mktemp("e2e")
    for ns in (NS, APP_NS):
        kubectl(admin, "create", "namespace", ns, check=False)
    for crd in sorted((REPO / "contracts" / "crds").glob("*.yaml")):
        kubectl(admin, "apply", "-f", str(crd))
    for crd in (
        "models.kubeai.org",
        "modelactivations.appliance.magicstick.dev",
        "agenttemplates.kubeopencode.io",
    ):
        kubectl(admin, "wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    litellm = LiteLLMAdmin(litellm_peer.base_url, litellm_peer.master_key)
    litellm.delete_where(lambda r: r["model_info"].get("ai_appliance_owner") != OWNED)  # a clean slate
    yield admin, work, litellm_peer, litellm
    litellm.delete_where(lambda r: False)


def test_dry_run_of_the_deploy_base_passes(world: Any) -> None:
    admin, *_ = world
    manifests, skipped = deploy_base(admin)
    out = kubectl(admin, "apply", "--dry-run=server", "-f", "-", input_text=manifests)
    assert "deployment.apps/ai-model-catalog-controller created (server dry run)" in out
    assert "role.rbac.authorization.k8s.io/ai-model-catalog-controller created (server dry run)" in out
    # only what this v1.20 test server cannot serve is left out (policy/v1 arrived in 1.21)
    assert set(skipped) <= {"policy/v1/PodDisruptionBudget"}


def test_the_controller_end_to_end(world: Any) -> None:
    admin, work, peer, litellm = world
    cluster = Cluster(admin)
    # RBAC, the bootstrap ConfigMaps (the Deployment stays inert: no kubelet)
    kubectl(admin, "apply", "-f", "-", input_text=deploy_base(admin)[0])
    sa_kubeconfig = service_account_kubeconfig(admin, NS, work / "sa.kubeconfig")
    health = HealthServer()
    env = {
        "KUBECONFIG": str(sa_kubeconfig),
        "NAMESPACE": NS,
        "APPLIANCE_NAMESPACE": APP_NS,
        "LITELLM_BASE_URL": peer.base_url,
        "LITELLM_MASTER_KEY": peer.master_key,
        **FAST_CONTROLLER_ENV,
        **image_runtime_env(),  # as the image runs it: python -OO, its allocator settings
        "CATALOG_PROBE_RESOLVE": f"phi-rt.{NS}.svc.cluster.local:8080=127.0.0.1:{health.port}",
        "LOG_LEVEL": "INFO",
    }
    leader = Controller("replica-a", env, work).start()
    standby: Controller | None = None
    try:
        leader.wait_ready()
        wait_for(leader.leading, 20, what="replica-a to lead")
        # the placeholder is replaced: ready (sources read, LiteLLM observed) comes before the first write
        wait_for(
            lambda: cluster.catalog()["AI_APPLIANCE_MODEL_CATALOG_READY"] == "true",
            20,
            what="the first catalog",
        )

        # 1. KubeAI Models that cannot scale from zero (minReplicas 1, as the operator creates them):
        # created (not ready) -> withheld; ready -> published; unready -> withdrawn; deleted
        cluster.apply(
            model("llama", args=["--max-model-len=8192"], minReplicas=1), model("qwen", minReplicas=1)
        )
        wait_for(
            lambda: cluster.routes().get(("kubeai", "llama"), {}).get("reason") == "NotReady", what="NotReady"
        )
        assert "ai-appliance-kubeai-llama" not in litellm.rows()
        cluster.patch_status("model", "llama", {"replicas": {"all": 1, "ready": 1}})
        row = wait_for(lambda: litellm.rows().get("ai-appliance-kubeai-llama"), what="the llama row")
        assert row["model_info"]["ai_appliance_owner"] == OWNED
        assert row["litellm_params"]["order"] == 0
        assert (
            wait_for(lambda: cluster.catalog_models().get("llama"), what="llama in the catalog")[
                "contextWindow"
            ]
            == 8192
        )
        assert cluster.routes()[("kubeai", "llama")]["state"] == "published"

        # 2. the external ConfigMap, including an invalid edit that keeps the last good models
        cluster.apply(secret("openai", "sk-e2e-canary-value"))
        cluster.apply(
            external(
                [
                    {
                        "name": "gpt-4o",
                        "model": "openai/gpt-4o",
                        "apiKeySecretRef": {"name": "openai", "key": "k"},
                    }
                ]
            )
        )
        wait_for(lambda: "ai-appliance-external-gpt-4o" in litellm.rows(), what="gpt-4o")
        cluster.apply(external('{"models": [ {"name": "gpt-4o",, ]}'))
        wait_for(
            lambda: (
                cluster.routes().get(("external", "ai-external-models"), {}).get("reason") == "InvalidJSON"
            ),
            what="InvalidJSON recorded",
        )
        assert "gpt-4o" in cluster.catalog_models()
        assert "ai-appliance-external-gpt-4o" in litellm.rows()
        wait_for(
            lambda: any(e["reason"] == "InvalidJSON" for e in cluster.events(NS)), what="an InvalidJSON Event"
        )

        # 3. ModelActivations: an allowed provider Secret, and one at the master key Secret (labelled)
        cluster.apply(
            secret("ai-model-provider-mistral", "mistral-key"),
            secret("litellm-masterkey-secret", "sk-master"),
        )
        cluster.apply(
            activation("mistral", "ai-model-provider-mistral"),
            activation("sneaky", "litellm-masterkey-secret"),
        )
        wait_for(lambda: "ai-appliance-external-mistral" in litellm.rows(), what="mistral")
        wait_for(
            lambda: (
                cluster.routes().get(("modelactivation", "sneaky"), {}).get("reason") == "SecretNotAllowed"
            ),
            what="sneaky rejected",
        )
        wait_for(
            lambda: any(e["reason"] == "SecretNotAllowed" for e in cluster.events(APP_NS)), what="an Event"
        )
        assert "ai-appliance-external-sneaky" not in litellm.rows()

        # 4. a FreeToken runtime with a local /health server
        cluster.apply(
            {
                "apiVersion": "appliance.magicstick.dev/v1alpha1",
                "kind": "ModelActivation",
                "metadata": {"name": "phi", "namespace": APP_NS},
                "spec": {"type": "local", "engine": "freetoken"},
            },
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "phi-rt", "namespace": NS},
                "spec": {"ports": [{"name": "http", "port": 8080}], "selector": {"app": "phi-rt"}},
            },
            workload(
                "phi-rt",
                labels={
                    "app": "phi-rt",
                    "appliance.magicstick.dev/runtime": "freetoken",
                    "appliance.magicstick.dev/modelactivation": "phi",
                },
            ),
        )
        wait_for(
            lambda: cluster.routes().get(("freetoken", "phi"), {}).get("reason") == "NotReady",
            what="phi NotReady",
        )
        generation = cluster.get("deployment", "phi-rt")["metadata"]["generation"]
        cluster.patch_status(
            "deployment",
            "phi-rt",
            {
                "observedGeneration": generation,
                "replicas": 1,
                "readyReplicas": 1,
                "conditions": [{"type": "Available", "status": "True"}],
            },
        )
        row = wait_for(lambda: litellm.rows().get("ai-appliance-freetoken-phi"), what="the phi row")
        assert row["litellm_params"]["api_base"] == f"http://phi-rt.{NS}.svc.cluster.local:8080/v1"
        assert health.hits >= 1
        health.healthy = False
        wait_for(
            lambda: "ai-appliance-freetoken-phi" not in litellm.rows(),
            20,
            what="phi withdrawn after 2 failures",
        )
        # routes.json follows once LiteLLM is read again after the delete (the catalog waits for it)
        wait_for(
            lambda: cluster.routes()[("freetoken", "phi")]["reason"] == "HealthCheckFailed",
            what="HealthCheckFailed recorded",
        )
        health.healthy = True
        wait_for(lambda: "ai-appliance-freetoken-phi" in litellm.rows(), 20, what="phi back")

        # 5. a Mesh fallback added straight to LiteLLM: never touched, merged into the llama entry
        litellm.add(
            "llama",
            {"model": "openai/llama", "api_base": "http://mesh-bridge:8080/v1", "order": 1},
            {"id": "mesh-llama-peer-b", "ai_appliance_owner": "private-mesh"},
        )
        entry = wait_for(
            lambda: (m := cluster.catalog_models().get("llama")) and len(m["routes"]) == 2 and m,
            what="the Mesh route in the llama entry",
        )
        assert entry["routes"][1] == {"order": 1, "locality": "mesh", "owner": "private-mesh"}

        # 6. an AgentTemplate and a consumer Deployment (found through its ReplicaSet)
        cluster.apply(
            {
                "apiVersion": "kubeopencode.io/v1alpha1",
                "kind": "AgentTemplate",
                "metadata": {"name": "litellm-default", "namespace": NS},
                "spec": {"config": {"provider": {"litellm": {"models": {"retired": {"name": "retired"}}}}}},
            }
        )
        consumer = workload(
            "openclaw",
            labels={"app.kubernetes.io/instance": "openclaw", "app.kubernetes.io/name": "openclaw"},
        )
        cluster.apply(consumer)
        uid = cluster.get("deployment", "openclaw")["metadata"]["uid"]
        rs = workload("openclaw-5d8f", "ReplicaSet", consumer["metadata"]["labels"])
        rs["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": "openclaw",
                "uid": uid,
                "controller": True,
            }
        ]
        cluster.apply(rs)
        rs_uid = cluster.get("replicaset", "openclaw-5d8f")["metadata"]["uid"]
        cluster.apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "openclaw-5d8f-x1",
                    "namespace": NS,
                    "labels": consumer["metadata"]["labels"],
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
        models = wait_for(
            lambda: (
                (
                    t := cluster.get("agenttemplate", "litellm-default")["spec"]["config"]["provider"][
                        "litellm"
                    ]["models"]
                )
                and "retired" not in t
                and t
            ),
            what="the AgentTemplate models replaced",
        )
        assert {"llama", "gpt-4o", "mistral", "phi"} <= set(models)
        current = cluster.catalog()["AI_APPLIANCE_MODEL_CATALOG_HASH"]

        def rolled() -> bool:
            annotations = cluster.get("deployment", "openclaw")["spec"]["template"]["metadata"].get(
                "annotations", {}
            )
            return (
                annotations.get("ai-appliance.io/catalog-hash")
                == cluster.catalog()["AI_APPLIANCE_MODEL_CATALOG_HASH"]
            )

        # its pod started after this catalog was written: it read it already, so it is not rolled
        time.sleep(1.5)
        assert not rolled()

        # 7. the model becomes unready, then is deleted: withdrawn, its row deleted by id, the consumer rolled
        cluster.patch_status("model", "llama", {"replicas": {"all": 1, "ready": 0}})
        wait_for(lambda: "ai-appliance-kubeai-llama" not in litellm.rows(), what="llama withdrawn")
        assert "mesh-llama-peer-b" in litellm.rows()  # the Mesh row stays
        wait_for(lambda: cluster.catalog()["AI_APPLIANCE_MODEL_CATALOG_HASH"] != current, what="a new hash")
        wait_for(rolled, what="rolled onto the new hash")
        cluster.delete("model", "llama")
        cluster.delete("model", "qwen")
        wait_for(lambda: ("kubeai", "qwen") not in cluster.routes(), what="qwen gone from routes.json")

        # 8. steady: no writes while nothing changes (LiteLLM resyncs keep running every 2 s)
        time.sleep(3)
        before = _writes(leader)
        assert before > 10  # the metrics are read for real: every step above wrote
        idle = float(os.environ.get("E2E_IDLE_SECONDS", "6"))  # 60 for the figure in the closing note
        polls = leader.metric("model_catalog_events_total", type="LiteLLMRowsObserved")
        time.sleep(idle)
        assert _writes(leader) - before == 0, "writes while idle"
        resyncs = leader.metric("model_catalog_events_total", type="LiteLLMRowsObserved") - polls
        print(f"idle {idle:.0f}s: 0 writes, {resyncs:.0f} LiteLLM resyncs folded")

        # 9. a standby takes over within the lease duration when the leader dies
        standby = Controller("replica-b", env, work).start()
        standby.wait_ready()
        assert not standby.leading()
        leader.kill()
        killed_at = time.monotonic()
        wait_for(standby.leading, 60, what="replica-b to lead")
        takeover = time.monotonic() - killed_at
        # Never before the crashed leader's Lease (4 s, renewed every 0.5 s) could have expired; how much
        # later depends on the machine's load, so only the wait above bounds it.
        assert takeover >= 4 - 0.5, f"replica-b led {takeover:.1f}s after the kill, before the Lease expired"
        print(f"takeover {takeover:.1f}s after the leader was killed (Lease 4 s)")
        cluster.apply(model("mixtral"))
        cluster.patch_status("model", "mixtral", {"replicas": {"all": 1, "ready": 1}})
        wait_for(lambda: "ai-appliance-kubeai-mixtral" in litellm.rows(), what="the new leader writes")

        # measurements for the closing note (printed; asserted loosely)
        latency = standby.histogram("model_catalog_reconcile_latency_seconds")
        print(f"event->command latency p50={quantile(latency, 0.5)} p99={quantile(latency, 0.99)}")

        # 10. graceful shutdown: exit 0; the event log replays identically
        assert standby.stop() == 0
        replay = subprocess.run(
            [sys.executable, "-m", "app.cli", "replay", str(standby.event_log), "--verify"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        assert replay.returncode == 0, replay.stdout + replay.stderr
        # 11. no secret value anywhere we wrote
        for path in (leader.log_path, standby.log_path, leader.event_log, standby.event_log):
            text = path.read_text(errors="replace")
            for canary in ("sk-e2e-canary-value", "mistral-key", "sk-master", peer.master_key):
                assert canary not in text, f"{canary} leaked into {path.name}"
        assert "sk-e2e-canary-value" not in json.dumps(cluster.catalog())
    finally:
        leader.kill()
        if standby is not None:
            standby.kill()
        health.close()


def _writes(controller: Controller) -> float:
    """Commands carried out, except the reads (health probes, the Secret watch), from one scrape."""
    text = controller.metrics()
    total = controller.metric("model_catalog_commands_total", text)
    reads = controller.metric("model_catalog_commands_total", text, kind="ProbeRuntime") + controller.metric(
        "model_catalog_commands_total", text, kind="WatchSecrets"
    )
    return total - reads
