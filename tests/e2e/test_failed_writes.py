"""A failed write is neither final nor silent, end to end (issue 33, item 2; issue 32, item 11).

``model-catalog run`` as a process on the real kube-apiserver, authenticated as the ServiceAccount the
Roles of ``deploy/`` bind, with the write retry cap at 2 s (``CATALOG_WRITE_RETRY_MAX_SECONDS``). For each
writer a verb is taken out of the Role while a change needs that write; the failure must show as a Warning
Event on the object (none can, for the Event writer itself), as a ``WriteFailing`` problem of
``model-catalog status`` run with the read-only ``deploy/status-reader`` token (the leader's report on its
Lease) and its exit status, and as ``model_catalog_failing_writes`` at 1 — the input of
``ModelCatalogWritesFailing``, whose firing on that shape ``tests/monitoring/rules.test.yaml`` proves
with promtool. Then the Role is fixed, and the same
process (no restart) writes within the backoff cap. LiteLLM's writer is refused the same way on the real
LiteLLM: the controller's key belongs to a user without the admin role, and the user is then promoted.
The forged immutable catalog of issue 32, item 11 is deleted by the admin and written again at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.harness import (
    FAST_CONTROLLER_ENV,
    REPO,
    Controller,
    LiteLLMAdmin,
    deploy_base,
    kubectl,
    service_account_kubeconfig,
    wait_for,
)

pytestmark = [pytest.mark.kube, pytest.mark.litellm, pytest.mark.slow]

OPERATED = REPO / "examples" / "overlays" / "operated"
ROLE = "ai-model-catalog-controller"
STATUS_SA = "ai-model-catalog-status"
RETRY_CAP = "2"
CONSUMER = "ai-appliance.io/model-catalog-consumer"


class World:
    def __init__(
        self, admin: Path, work: Path, ns: str, app_ns: str, litellm: LiteLLMAdmin, litellm_url: str
    ) -> None:
        self.admin, self.work, self.ns, self.app_ns, self.litellm = admin, work, ns, app_ns, litellm
        self.litellm_url = litellm_url
        self.controller: Controller | None = None
        self.reader = service_account_kubeconfig(admin, ns, work / f"{ns}-status.kubeconfig", STATUS_SA)

    # --- the cluster, as its admin
    def kubectl(self, *args: str, input_text: str | None = None, check: bool = True) -> str:
        return kubectl(self.admin, *args, input_text=input_text, check=check)

    def apply(self, *docs: dict[str, Any]) -> None:
        self.kubectl("apply", "-n", self.ns, "-f", "-", input_text=yaml.safe_dump_all(docs))

    def get(self, kind: str, name: str) -> dict[str, Any]:
        return dict(json.loads(self.kubectl("get", kind, name, "-n", self.ns, "-o", "json")))

    def catalog(self) -> dict[str, str]:
        return dict(self.get("configmap", "ai-model-catalog").get("data") or {})

    def catalog_models(self) -> set[str]:
        text = self.catalog().get("catalog.json")
        return {m["name"] for m in json.loads(text)["models"]} if text else set()

    def routes(self) -> dict[str, dict[str, Any]]:
        return {r["name"]: r for r in json.loads(self.catalog().get("routes.json") or "[]")}

    def events(self, kind: str, name: str) -> list[dict[str, Any]]:
        listed = json.loads(self.kubectl("get", "events", "-n", self.ns, "-o", "json"))["items"]
        mine = [e for e in listed if (e.get("source") or {}).get("component") == "model-catalog"]
        found = [
            e for e in mine if (e["involvedObject"]["kind"], e["involvedObject"]["name"]) == (kind, name)
        ]
        return sorted(found, key=lambda e: e.get("lastTimestamp") or "")

    def ready_model(self, name: str) -> None:
        """A KubeAI Model that is ready: the controller routes it, so the catalog and templates change."""
        self.apply(
            {
                "apiVersion": "kubeai.org/v1",
                "kind": "Model",
                "metadata": {"name": name},
                "spec": {"features": ["TextGeneration"], "engine": "VLLM", "url": f"hf://x/{name}"},
            }
        )
        self.kubectl(
            "patch",
            "model",
            name,
            "-n",
            self.ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"replicas": {"all": 1, "ready": 1}}}),
        )

    @contextlib.contextmanager
    def revoked(self, resource: str, *verbs: str) -> Iterator[None]:
        """The controller's Role without ``verbs`` on ``resource`` (in every rule that grants them), restored
        on the way out."""
        role = json.loads(self.kubectl("get", "role", ROLE, "-n", self.ns, "-o", "json"))
        original = json.loads(json.dumps(role["rules"]))
        for rule in role["rules"]:
            if resource in rule["resources"]:
                rule["verbs"] = [v for v in rule["verbs"] if v not in verbs]
        role["rules"] = [r for r in role["rules"] if r["verbs"]]
        role["metadata"].pop("resourceVersion", None)
        self.kubectl("replace", "-f", "-", input_text=json.dumps(role))
        try:
            yield
        finally:
            role = json.loads(self.kubectl("get", "role", ROLE, "-n", self.ns, "-o", "json"))
            role["rules"] = original
            role["metadata"].pop("resourceVersion", None)
            self.kubectl("replace", "-f", "-", input_text=json.dumps(role))

    # --- what the operator sees
    def status(self) -> tuple[int, dict[str, Any]]:
        clean = {
            k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "CATALOG_", "NAMESPACE"))
        }
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "app.cli",
                "status",
                "-o",
                "json",
                "-n",
                self.ns,
                "--kubeconfig",
                str(self.reader),
            ],
            cwd=REPO,
            env=clean,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode in (0, 1), done.stderr
        return done.returncode, json.loads(done.stdout)

    def failing_write(self, subject: str) -> dict[str, Any] | None:
        """The ``WriteFailing`` problem ``model-catalog status`` shows about ``subject`` (the leader's
        report on its Lease), when the status also exits 1."""
        code, view = self.status()
        found = [p for p in view["problems"] if (p["type"], p["subject"]) == ("WriteFailing", subject)]
        return found[0] if found and code == 1 else None

    def no_longer_failing(self, subject: str) -> None:
        """The leader's next report (each Lease renewal) no longer has it."""
        wait_for(
            lambda: self.failing_write(subject) is None, 30, 0.5, f"{subject} no longer failing in status"
        )

    def failing(self, kind: str) -> float:
        assert self.controller is not None
        return self.controller.metric("model_catalog_failing_writes", kind=kind)


def _controller(world: World, name: str, key: str) -> Controller:
    sa = service_account_kubeconfig(world.admin, world.ns, world.work / f"{name}.kubeconfig")
    env = {
        "KUBECONFIG": str(sa),
        "NAMESPACE": world.ns,
        "APPLIANCE_NAMESPACE": world.app_ns,
        "LITELLM_BASE_URL": world.litellm_url,
        "LITELLM_MASTER_KEY": key,
        **FAST_CONTROLLER_ENV,
        "CATALOG_WRITE_RETRY_MAX_SECONDS": RETRY_CAP,
        "LOG_LEVEL": "INFO",
    }
    controller = Controller(name, env, world.work).start()
    controller.wait_ready(90)
    wait_for(controller.leading, 30, what=f"{name} to lead")
    return controller


def _world(admin: Path, work: Path, litellm: LiteLLMAdmin, url: str, prefix: str) -> World:
    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    app_ns = f"{ns}-system"
    for name in (ns, app_ns):
        kubectl(admin, "create", "namespace", name)
    manifests, _ = deploy_base(admin, ns, app_ns, kustomization=OPERATED)
    kubectl(admin, "apply", "-f", "-", input_text=manifests)
    return World(admin, work, ns, app_ns, litellm, url)


def _crds(admin: Path) -> None:
    for crd in sorted((REPO / "contracts" / "crds").glob("*.yaml")):
        kubectl(admin, "apply", "-f", str(crd))
    for crd in (
        "models.kubeai.org",
        "modelactivations.appliance.magicstick.dev",
        "agenttemplates.kubeopencode.io",
    ):
        kubectl(admin, "wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")


@pytest.fixture(scope="module")
def world(kube_peer: Any, litellm_peer: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One controller with every right the Roles of ``deploy/`` give, an AgentTemplate, and a consumer
    Deployment whose pod (through its ReplicaSet) reads the catalog."""
    admin = Path(kube_peer.kubeconfig)
    _crds(admin)
    litellm = LiteLLMAdmin(litellm_peer.base_url, litellm_peer.master_key)
    litellm.delete_where(lambda r: False)
    state = _world(admin, tmp_path_factory.mktemp("failed-writes"), litellm, litellm_peer.base_url, "mcw")
    state.apply(
        {
            "apiVersion": "kubeopencode.io/v1alpha1",
            "kind": "AgentTemplate",
            "metadata": {"name": "litellm-default"},
            "spec": {"config": {}},
        }
    )
    _consumer(state, "web")
    try:
        state.controller = _controller(state, "writes-a", litellm_peer.master_key)
        wait_for(
            lambda: state.catalog().get("AI_APPLIANCE_MODEL_CATALOG_READY") == "true", 30, what="a catalog"
        )
        yield state
    finally:
        if state.controller is not None:
            state.controller.stop()
        litellm.delete_where(lambda r: False)
        for name in (state.ns, state.app_ns):
            kubectl(admin, "delete", "namespace", name, "--wait=false", check=False)


def _consumer(world: World, name: str) -> None:
    """Deployment -> ReplicaSet -> Pod, each owned by the one before by uid (no controller-manager here)."""
    labels = {"app": name, CONSUMER: "true"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    world.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels}, "template": template},
        }
    )
    deployment = world.get("deployment", name)
    owner = {"apiVersion": "apps/v1", "controller": True, "blockOwnerDeletion": True}
    world.apply(
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{name}-1",
                "labels": labels,
                "ownerReferences": [
                    {**owner, "kind": "Deployment", "name": name, "uid": deployment["metadata"]["uid"]}
                ],
            },
            "spec": {"selector": {"matchLabels": labels}, "template": template},
        }
    )
    replicaset = world.get("replicaset", f"{name}-1")
    world.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-1-a",
                "labels": labels,
                "ownerReferences": [
                    {**owner, "kind": "ReplicaSet", "name": f"{name}-1", "uid": replicaset["metadata"]["uid"]}
                ],
            },
            "spec": template["spec"],
        }
    )


def _healed_without_restart(world: World, pid: int) -> None:
    assert world.controller is not None and world.controller.process is not None
    assert world.controller.process.pid == pid and world.controller.process.poll() is None


def test_a_forbidden_catalog_write_is_shown_and_heals_once_the_role_is_fixed(world: World) -> None:
    assert world.controller is not None and world.controller.process is not None
    pid = world.controller.process.pid
    with world.revoked("configmaps", "update"):
        world.ready_model("cm-forbidden")
        wait_for(lambda: world.failing("WriteCatalog") == 1.0, 60, what="the failing catalog write counted")
        warning = wait_for(
            lambda: world.failing_write("ConfigMap/ai-model-catalog"),
            30,
            0.5,
            "a failing catalog write in status",
        )
        assert warning["message"].startswith(f"forbidden: update configmaps/ai-model-catalog in {world.ns}")
        assert "retried with backoff" in warning["message"]
        event = world.events("ConfigMap", "ai-model-catalog")[-1]
        assert (event["type"], event["reason"]) == ("Warning", "Forbidden")
        assert world.failing("WriteCatalog") == 1.0
        assert "cm-forbidden" not in world.catalog_models()
    wait_for(lambda: "cm-forbidden" in world.catalog_models(), 60, what="the catalog written after the fix")
    wait_for(lambda: world.failing("WriteCatalog") == 0.0, 30, what="the failing-writes gauge back to 0")
    world.no_longer_failing("ConfigMap/ai-model-catalog")
    assert world.events("ConfigMap", "ai-model-catalog")[-1]["reason"] == "WriteRecovered"
    _healed_without_restart(world, pid)


def test_a_forbidden_agenttemplate_patch_is_shown_and_heals_once_the_role_is_fixed(world: World) -> None:
    assert world.controller is not None and world.controller.process is not None
    pid = world.controller.process.pid

    def models() -> dict[str, Any]:
        config = world.get("agenttemplate", "litellm-default")["spec"]["config"]
        return dict(((config.get("provider") or {}).get("litellm") or {}).get("models") or {})

    with world.revoked("agenttemplates", "patch"):
        world.ready_model("template-forbidden")
        wait_for(lambda: world.failing("PatchAgentTemplate") == 1.0, 60, what="the failing patch counted")
        warning = wait_for(
            lambda: world.failing_write("AgentTemplate/litellm-default"), 30, 0.5, "a failing patch in status"
        )
        assert warning["message"].startswith(f"forbidden: patch agenttemplates/litellm-default in {world.ns}")
        assert world.events("AgentTemplate", "litellm-default")[-1]["reason"] == "Forbidden"
        assert world.failing("PatchAgentTemplate") == 1.0
        assert "template-forbidden" not in models()
    wait_for(lambda: "template-forbidden" in models(), 60, what="the template patched after the fix")
    wait_for(lambda: world.failing("PatchAgentTemplate") == 0.0, 30, what="the gauge back to 0")
    world.no_longer_failing("AgentTemplate/litellm-default")
    _healed_without_restart(world, pid)


def test_a_forbidden_rollout_is_shown_and_heals_once_the_role_is_fixed(world: World) -> None:
    assert world.controller is not None and world.controller.process is not None
    pid = world.controller.process.pid

    def rolled_onto() -> str | None:
        template = world.get("deployment", "web")["spec"]["template"]
        return (template["metadata"].get("annotations") or {}).get("ai-appliance.io/catalog-hash")

    with world.revoked("deployments", "patch"):
        world.ready_model("rollout-forbidden")
        wait_for(lambda: "rollout-forbidden" in world.catalog_models(), 60, what="the new catalog")
        wait_for(lambda: world.failing("RollWorkload") == 1.0, 60, what="the failing rollout counted")
        warning = wait_for(
            lambda: world.failing_write("Deployment/web"), 30, 0.5, "a failing rollout in status"
        )
        assert warning["message"].startswith(f"forbidden: patch deployments/web in {world.ns}")
        assert world.events("Deployment", "web")[-1]["reason"] == "Forbidden"
        assert world.failing("RollWorkload") == 1.0
        current = world.catalog()["AI_APPLIANCE_MODEL_CATALOG_HASH"]
        assert rolled_onto() != current
    wait_for(lambda: rolled_onto() == current, 60, what="web rolled after the fix")
    wait_for(lambda: world.failing("RollWorkload") == 0.0, 30, what="the gauge back to 0")
    _healed_without_restart(world, pid)


def test_a_forbidden_event_is_counted_logged_and_written_once_the_role_is_fixed(world: World) -> None:
    """An Event about an Event write failing cannot be an Event: status (the leader's report), the metric
    and the log line say it; the problem it announces is in routes.json meanwhile, and the Event is
    written once it may be."""
    assert world.controller is not None and world.controller.process is not None
    pid = world.controller.process.pid
    document = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ai-external-models"},
        "data": {"models.json": json.dumps({"models": [{"name": "no-model-here"}]})},
    }
    with world.revoked("events", "get", "create", "update"):
        world.apply(document)
        wait_for(
            lambda: world.routes().get("no-model-here", {}).get("reason") == "MissingField", 60, what="record"
        )
        wait_for(lambda: world.failing("EmitKubernetesEvent") == 1.0, 60, what="the failing Event counted")
        assert not [
            e for e in world.events("ConfigMap", "ai-external-models") if e["reason"] == "MissingField"
        ]
        assert "forbidden: get events/" in world.controller.tail(200)
        problem = wait_for(lambda: world.failing_write("events"), 30, 0.5, "the failing Event in status")
        assert " Kubernetes Events cannot be written; the first: forbidden: get events/" in problem["message"]
    wait_for(
        lambda: [e for e in world.events("ConfigMap", "ai-external-models") if e["reason"] == "MissingField"],
        60,
        what="the Event written after the fix",
    )
    wait_for(lambda: world.failing("EmitKubernetesEvent") == 0.0, 30, what="the gauge back to 0")
    world.no_longer_failing("events")
    _healed_without_restart(world, pid)


def test_a_forged_immutable_catalog_is_shown_and_written_again_once_deleted(world: World) -> None:
    """Issue 32, item 11: someone replaces the catalog with an immutable forgery. The controller cannot
    rewrite it and says so (Event, status, metric); once the admin deletes the forgery, the watch sees it
    and the controller writes the catalog at once, without a restart."""
    assert world.controller is not None and world.controller.process is not None
    pid = world.controller.process.pid
    world.kubectl("delete", "configmap", "ai-model-catalog", "-n", world.ns)
    world.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "ai-model-catalog"},
            "data": {"AI_APPLIANCE_MODEL_CATALOG_READY": "true", "forged": "yes"},
            "immutable": True,
        }
    )
    world.ready_model("after-forgery")
    wait_for(lambda: world.failing("WriteCatalog") == 1.0, 60, what="the failing catalog write counted")
    warning = wait_for(
        lambda: world.failing_write("ConfigMap/ai-model-catalog"), 30, 0.5, "the forgery in status"
    )
    assert "the ConfigMap is immutable (immutable: true)" in warning["message"]
    assert f"kubectl delete configmap -n {world.ns} ai-model-catalog" in warning["message"]
    assert world.events("ConfigMap", "ai-model-catalog")[-1]["reason"] == "CatalogImmutable"
    assert world.failing("WriteCatalog") == 1.0
    world.kubectl("delete", "configmap", "ai-model-catalog", "-n", world.ns)
    wait_for(lambda: "after-forgery" in world.catalog_models(), 30, what="the catalog written again")
    assert "forged" not in world.catalog()
    wait_for(lambda: world.failing("WriteCatalog") == 0.0, 30, what="the gauge back to 0")
    _healed_without_restart(world, pid)


def test_a_litellm_key_without_the_admin_role_is_shown_and_heals_once_promoted(
    world: World, litellm_peer: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The real LiteLLM refuses ``/model/new`` to a key whose user is an ``internal_user`` (403), while it
    still answers ``/model/info``. The controller retries with backoff, its item's routes.json record says
    ``LiteLLMUnauthorized``, a Warning Event is on the Model; once the user is made a proxy admin the row is
    written by the same process."""
    # Two controllers on one LiteLLM would each delete the other's rows (both own "model-catalog" rows):
    # the first one stops here (this test runs last in the module).
    assert world.controller is not None
    world.controller.stop()
    world.litellm.delete_where(lambda r: False)
    user = f"mc-{uuid.uuid4().hex[:8]}"
    key = f"sk-{user}-limited-key"
    admin = world.litellm.http
    admin.post("/user/new", json={"user_id": user, "user_role": "internal_user"}).raise_for_status()
    admin.post("/key/generate", json={"user_id": user, "key": key}).raise_for_status()
    limited = _world(world.admin, tmp_path_factory.mktemp("limited"), world.litellm, world.litellm_url, "mcl")
    try:
        limited.controller = controller = _controller(limited, "writes-limited", key)
        assert controller.process is not None
        pid = controller.process.pid
        limited.ready_model("limited-llama")
        record = wait_for(
            lambda: (
                limited.routes().get("limited-llama", {}).get("reason") == "LiteLLMUnauthorized"
                and limited.routes()["limited-llama"]
            ),
            60,
            what="LiteLLMUnauthorized in routes.json",
        )
        assert record["state"] == "error" and "retried with backoff" in record["message"]
        assert key not in json.dumps(record)
        code, view = limited.status()
        assert code == 1
        assert [(i["name"], i["reason"]) for i in view["items"]] == [("limited-llama", "LiteLLMUnauthorized")]
        problem = wait_for(lambda: limited.failing_write("litellm"), 30, 0.5, "the failing row in status")
        assert problem["message"].startswith("1 LiteLLM rows cannot be written; the first: create: HTTP 403")
        events = limited.events("Model", "limited-llama")
        assert events and events[-1]["reason"] == "LiteLLMUnauthorized" and events[-1]["type"] == "Warning"
        assert limited.failing("CreateLiteLLMModel") == 1.0
        assert "ai-appliance-kubeai-limited-llama" not in world.litellm.rows()
        admin.post("/user/update", json={"user_id": user, "user_role": "proxy_admin"}).raise_for_status()
        wait_for(
            lambda: "ai-appliance-kubeai-limited-llama" in world.litellm.rows(), 60, what="the row written"
        )
        wait_for(
            lambda: limited.routes().get("limited-llama", {}).get("state") == "published",
            60,
            what="published",
        )
        wait_for(lambda: limited.failing("CreateLiteLLMModel") == 0.0, 30, what="the gauge back to 0")
        _healed_without_restart(limited, pid)
    finally:
        if limited.controller is not None:
            limited.controller.stop()
        admin.post("/key/delete", json={"keys": [key]})
        admin.post("/user/delete", json={"user_ids": [user]})
        world.litellm.delete_where(lambda r: False)
        for name in (limited.ns, limited.app_ns):
            kubectl(world.admin, "delete", "namespace", name, "--wait=false", check=False)
