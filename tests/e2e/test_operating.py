"""Operating it (issue 16), on the real kube-apiserver and LiteLLM with the bundled example cluster:

- ``model-catalog status``, run under a ServiceAccount token bound by ``deploy/status-reader`` and
  nothing else, shows the same states and reasons as ``render`` of the same objects; its exit codes
  (1 with an item in error, 0 without, 2 when it may not read) and ``--watch``;
- every metric name the alert rules and the Grafana dashboard use is in the ``/metrics`` output of
  the controller running that cluster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.harness import (
    FAST_CONTROLLER_ENV,
    REPO,
    Controller,
    CuttableProxy,
    HealthServer,
    LiteLLMAdmin,
    deploy_base,
    kubeconfig_through,
    kubectl,
    service_account_kubeconfig,
    wait_for,
)
from tests.monitoring.names import metric_names_used

pytestmark = [pytest.mark.kube, pytest.mark.litellm, pytest.mark.slow]

EXAMPLE = REPO / "examples" / "cluster.yaml"
OPERATED = REPO / "examples" / "overlays" / "operated"
STATUS_SA = "ai-model-catalog-status"
OWNED = "model-catalog"
ROUTE_KINDS = "models,configmaps,secrets,deployments,replicasets,services,pods,agenttemplates"


def example_objects(ns: str, app_ns: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The example cluster moved to ``ns`` / ``app_ns``: (objects without status, those with a status)."""
    objects, with_status = [], []
    for doc in yaml.safe_load_all(EXAMPLE.read_text()):
        if not doc or (doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "ai-model-catalog"):
            continue  # the deploy base's placeholder stands in for it
        meta = doc["metadata"]
        for server_owned in ("uid", "resourceVersion", "generation"):
            meta.pop(server_owned, None)
        meta["namespace"] = app_ns if meta.get("namespace") == "ai-system" else ns
        if "status" in doc:
            with_status.append(doc)
        objects.append({k: v for k, v in doc.items() if k != "status"})
    return objects, with_status


def cli(*args: str, kubeconfig: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "CATALOG_", "NAMESPACE"))}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args, "--kubeconfig", str(kubeconfig)],
        cwd=REPO,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def route_states(records: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[str, str]]:
    return {(r["source"], r["name"]): (r["state"], r["reason"]) for r in records}


class World:
    def __init__(
        self, admin: Path, work: Path, ns: str, app_ns: str, controller: Controller, proxy: CuttableProxy
    ) -> None:
        self.admin, self.work, self.ns, self.app_ns = admin, work, ns, app_ns
        self.controller, self.proxy = controller, proxy
        self.scrapes: list[str] = []
        self.render_env: dict[str, str] = {}

    def catalog(self) -> dict[str, str]:
        doc = json.loads(
            kubectl(self.admin, "get", "configmap", "ai-model-catalog", "-n", self.ns, "-o", "json")
        )
        return dict(doc.get("data") or {})

    def render_routes(self) -> list[dict[str, Any]]:
        """``render`` of what the API server holds now (the README's upgrade step 1)."""
        snapshot = self.work / "objects.yaml"
        snapshot.write_text(
            kubectl(self.admin, "get", ROUTE_KINDS, "-n", self.ns, "-o", "yaml")
            + "\n---\n"
            + kubectl(self.admin, "get", "modelactivations", "-n", self.app_ns, "-o", "yaml")
        )
        out = subprocess.run(
            [sys.executable, "-m", "app.cli", "render", "-f", str(snapshot), "--healthy", "phi-4-mini"],
            cwd=REPO,
            env={**os.environ, **self.render_env},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return list(json.loads(out.stdout)["routes"])


@pytest.fixture(scope="module")
def world(kube_peer: Any, litellm_peer: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    admin = Path(kube_peer.kubeconfig)
    work = tmp_path_factory.mktemp("operating")
    ns = f"mco-{uuid.uuid4().hex[:6]}"
    app_ns = f"{ns}-system"
    for name in (ns, app_ns):
        kubectl(admin, "create", "namespace", name)
    for crd in sorted((REPO / "contracts" / "crds").glob("*.yaml")):
        kubectl(admin, "apply", "-f", str(crd))
    for crd in (
        "models.kubeai.org",
        "modelactivations.appliance.magicstick.dev",
        "agenttemplates.kubeopencode.io",
    ):
        kubectl(admin, "wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    manifests, skipped = deploy_base(admin, ns, app_ns, kustomization=OPERATED)
    assert set(skipped) <= {
        "policy/v1/PodDisruptionBudget",
        "monitoring.coreos.com/v1/PodMonitor",
        "monitoring.coreos.com/v1/PrometheusRule",
    }
    kubectl(admin, "apply", "-f", "-", input_text=manifests)
    objects, with_status = example_objects(ns, app_ns)
    kubectl(admin, "apply", "-f", "-", input_text=yaml.safe_dump_all(objects))
    for doc in with_status:
        kind, name = doc["kind"].lower(), doc["metadata"]["name"]
        status = dict(doc["status"])
        if "observedGeneration" in status:
            live = json.loads(kubectl(admin, "get", kind, name, "-n", ns, "-o", "json"))
            status["observedGeneration"] = live["metadata"]["generation"]
        if "readyReplicas" in status:  # the API server checks ready <= replicas
            status.setdefault("replicas", status["readyReplicas"])
        kubectl(
            admin,
            "patch",
            kind,
            name,
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": status}),
        )
    litellm = LiteLLMAdmin(litellm_peer.base_url, litellm_peer.master_key)
    litellm.delete_where(lambda r: False)  # an empty LiteLLM, as render without --litellm-info assumes
    health = HealthServer()
    # The controller reaches the API server through a proxy the metrics test cuts (stale watches).
    sa_kubeconfig = service_account_kubeconfig(admin, ns, work / "controller-direct.kubeconfig")
    server = yaml.safe_load(sa_kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    host, _, port = server.removeprefix("https://").partition(":")
    proxy = CuttableProxy((host, int(port)))
    env = {
        "KUBECONFIG": str(kubeconfig_through(sa_kubeconfig, proxy.port, work / "controller.kubeconfig")),
        "NAMESPACE": ns,
        "APPLIANCE_NAMESPACE": app_ns,
        "LITELLM_BASE_URL": litellm_peer.base_url,
        "LITELLM_MASTER_KEY": litellm_peer.master_key,
        **FAST_CONTROLLER_ENV,
        "CATALOG_PROBE_RESOLVE": f"phi-4-mini-freetoken.{ns}.svc.cluster.local:8080=127.0.0.1:{health.port}",
        # a permission taken away shows at a watch's next request (the API server does not end open
        # watches): watches renewed every few seconds instead of every 5-10 minutes
        "CATALOG_WATCH_TIMEOUT_SECONDS": "2",
    }
    controller = Controller("replica-a", env, work).start()
    state = World(admin, work, ns, app_ns, controller, proxy)
    state.render_env = {
        "NAMESPACE": ns,
        "APPLIANCE_NAMESPACE": app_ns,
        "LITELLM_BASE_URL": litellm_peer.base_url,
    }
    try:
        controller.wait_ready(90)
        wait_for(controller.leading, 30, what="replica-a to lead")
        yield state
    finally:
        controller.stop()
        proxy.close()
        health.close()
        litellm.delete_where(lambda r: False)
        for name in (ns, app_ns):
            kubectl(admin, "delete", "namespace", name, "--wait=false", check=False)


def test_status_shows_what_render_shows_under_the_read_only_role(world: World) -> None:
    expected = route_states(world.render_routes())
    assert expected[("external", "groq-llama")] == ("error", "SecretNotAllowed")  # the example has errors
    assert expected[("freetoken", "phi-4-mini")] == ("published", "Published")
    reader = service_account_kubeconfig(world.admin, world.ns, world.work / "status.kubeconfig", STATUS_SA)

    def converged() -> dict[str, Any] | None:
        world.scrapes.append(world.controller.metrics())
        done = cli("status", "-o", "json", "-n", world.ns, kubeconfig=reader)
        if done.returncode == 2:
            raise AssertionError(done.stderr)
        view = json.loads(done.stdout)
        return view if route_states(view["items"]) == expected else None

    view = wait_for(converged, 90, interval=0.5, what="status to show render's states and reasons")
    catalog = world.catalog()
    assert view["catalogHash"] == catalog["AI_APPLIANCE_MODEL_CATALOG_HASH"]
    assert view["leader"]["holder"] == "replica-a"
    assert view["written"] is not None
    llama = next(i for i in view["items"] if i["name"] == "llama-3.1-8b")
    assert llama["routes"] == ["local"] and llama["id"] == "ai-appliance-kubeai-llama-3.1-8b"

    table = cli("status", "-n", world.ns, kubeconfig=reader)
    assert table.returncode == 1, table.stderr  # groq-llama and borrowed-key are in error
    lines = table.stdout.splitlines()
    assert lines[0].startswith(f"catalog {view['catalogHash']}  written ")
    assert "leader replica-a, renewed" in lines[0]
    assert lines[1].split() == ["MODEL", "SOURCE", "STATE", "REASON", "ROUTES", "SINCE"]
    rows = {tuple(line.split()[:4]) for line in lines[2:]}
    for (source, _name), (state, reason) in expected.items():
        assert any(r[1:] == (source, state, reason) for r in rows), (source, state, reason)
    wide = cli("status", "-o", "wide", "-n", world.ns, kubeconfig=reader)
    assert "API-BASE" in wide.stdout and "kubeai." in wide.stdout
    (world.work / "status-table.txt").write_text(table.stdout)  # what the README shows
    print(table.stdout)

    # The Role is all it has: nothing else is readable with that token.
    for verb in (
        ["get", "secret", "openai-credentials"],
        ["get", "configmap", "ai-external-models"],
        ["get", "configmaps"],
    ):
        denied = kubectl(reader, *verb, "-n", world.ns, check=False)
        assert "Forbidden" in denied or "forbidden" in denied, denied


def test_status_exit_codes_and_watch(world: World) -> None:
    reader = world.work / "status.kubeconfig"
    assert reader.exists(), "runs after the first test"
    # 2: a token without the Role may not read the catalog
    kubectl(world.admin, "create", "serviceaccount", "nobody", "-n", world.ns)
    nobody = service_account_kubeconfig(world.admin, world.ns, world.work / "nobody.kubeconfig", "nobody")
    refused = cli("status", "-n", world.ns, kubeconfig=nobody)
    assert refused.returncode == 2
    assert "Forbidden" in refused.stderr and refused.stdout == ""

    # --watch: redraws when the catalog changes; ends on SIGINT with the exit status of the last view
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "CATALOG_", "NAMESPACE"))}
    watch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.cli",
            "status",
            "--watch",
            "--interval",
            "0.3",
            "-o",
            "json",
            "-n",
            world.ns,
            "--kubeconfig",
            str(reader),
        ],
        cwd=REPO,
        env=clean,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout is not None
        first = json.loads(watch.stdout.readline())
        assert {i["state"] for i in first["items"]} >= {"error"}
        # Repair both errors: drop the ModelActivation that borrows the master key, and groq-llama.
        kubectl(world.admin, "delete", "modelactivation", "borrowed-key", "-n", world.app_ns)
        external = json.loads(
            kubectl(world.admin, "get", "configmap", "ai-external-models", "-n", world.ns, "-o", "json")
        )
        models = json.loads(external["data"]["models.json"])
        models["models"] = [m for m in models["models"] if m["name"] != "groq-llama"]
        kubectl(
            world.admin,
            "patch",
            "configmap",
            "ai-external-models",
            "-n",
            world.ns,
            "--type=merge",
            "-p",
            json.dumps({"data": {"models.json": json.dumps(models)}}),
        )
        deadline = time.monotonic() + 60
        latest = first
        while any(i["state"] in ("error", "conflict") for i in latest["items"]):
            assert time.monotonic() < deadline, latest
            latest = json.loads(watch.stdout.readline())
        changed = [i for i in latest["items"] if i["sinceExact"]]
        assert latest["items"] and all(i["since"] for i in latest["items"])
        assert not changed or all(i["since"] == latest["written"] for i in changed)
        watch.send_signal(signal.SIGINT)
        assert watch.wait(20) == 0  # the last view has nothing in error or conflict
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait(10)
    assert cli("status", "-n", world.ns, kubeconfig=reader).returncode == 0


def test_every_metric_the_rules_and_dashboard_use_is_exported(world: World) -> None:
    """A renamed metric breaks the build, not the dashboard: the names in the PrometheusRule and the
    Grafana dashboard, against what the running controller exports: scraped while the example converged,
    while its connections to the API server were cut (stale watches) and while its ai-system Role was
    unbound (403s), so the series that exist only in trouble are there too."""
    world.proxy.cut()
    try:
        text = wait_for(
            lambda: (m := world.controller.metrics()) and "model_catalog_source_stale_seconds{" in m and m,
            60,
            what="a stale watch",
        )
        world.scrapes.append(text)
    finally:
        world.proxy.restore()
    world.controller.wait_ready(90)
    kubectl(world.admin, "delete", "rolebinding", "ai-model-catalog-controller", "-n", world.app_ns)
    try:
        wait_for(  # the series exist from the start, at 0: wait for a count
            lambda: world.controller.metric("model_catalog_kube_forbidden_total") > 0,
            60,
            what="a 403 counted",
        )
    finally:
        manifests, _ = deploy_base(world.admin, world.ns, world.app_ns, kustomization=OPERATED)
        kubectl(world.admin, "apply", "-f", "-", input_text=manifests)
    world.scrapes.append(world.controller.metrics())
    exported = set()
    for text in world.scrapes:
        for line in text.splitlines():
            if line and not line.startswith("#"):
                exported.add(line.split("{")[0].split(" ")[0])
    used = metric_names_used()
    assert used, "the rules and the dashboard use metrics"
    missing = sorted(name for name in used if name not in exported)
    assert not missing, f"used by the rules or the dashboard, not exported: {missing}"
