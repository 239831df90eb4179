"""``model-catalog status`` says when all is not well (issue 33, item 4), on the real kube-apiserver and
LiteLLM, run under the read-only Role of ``deploy/status-reader``:

- the bootstrap placeholder and no leader (before the controller runs): exit 1, and why;
- a healthy catalog: exit 0; ``status MODEL`` for a published model, one in error, one that does not exist;
- LiteLLM unreachable (its connections cut), a missing CRD (deleted, then installed again), a stale source
  (a Role rule removed, so the watch is forbidden and keeps its last good content): each a problem line
  and exit 1 while it lasts, exit 0 once it is fixed; ``check`` warns about the missing CRD too;
- the controller stopped: it releases the Lease, and status says nobody leads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import (
    FAST_CONTROLLER_ENV,
    REPO,
    Controller,
    CuttableProxy,
    deploy_base,
    kubectl,
    service_account_kubeconfig,
    wait_for,
)

pytestmark = [pytest.mark.kube, pytest.mark.litellm, pytest.mark.slow]

OPERATED = REPO / "examples" / "overlays" / "operated"
ACTIVATIONS_CRD = "modelactivations.appliance.magicstick.dev"
MODELS = [{"name": "gpt-x", "model": "openai/gpt-x", "apiKey": "sk-inline-not-a-secret"}]


class Stage:
    def __init__(
        self, admin: Path, work: Path, ns: str, app_ns: str, proxy: CuttableProxy, env: dict[str, str]
    ):
        self.admin, self.work, self.ns, self.app_ns, self.proxy, self.env = (
            admin,
            work,
            ns,
            app_ns,
            proxy,
            env,
        )
        self.reader = service_account_kubeconfig(
            admin, ns, work / "status.kubeconfig", "ai-model-catalog-status"
        )
        self.controller: Controller | None = None

    def status(self, *args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
        clean = {
            k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "CATALOG_", "NAMESPACE"))
        }
        return subprocess.run(
            [sys.executable, "-m", "app.cli", "status", *args, "-n", self.ns],
            cwd=REPO,
            env={**clean, "KUBECONFIG": str(kubeconfig or self.reader)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def until(
        self,
        accept: Callable[[subprocess.CompletedProcess[str]], bool],
        what: str,
        *args: str,
        timeout: float = 90,
    ) -> subprocess.CompletedProcess[str]:
        last: list[subprocess.CompletedProcess[str]] = []

        def probe() -> subprocess.CompletedProcess[str] | None:
            done = self.status(*args)
            last[:] = [done]
            return done if accept(done) else None

        try:
            return wait_for(probe, timeout, interval=0.5, what=what)  # type: ignore[no-any-return]
        except AssertionError as exc:
            seen = last[0].stdout + last[0].stderr if last else ""
            raise AssertionError(f"{exc}\nlast status:\n{seen}") from None

    def models(self, models: list[dict[str, Any]]) -> None:
        body = {"data": {"models.json": json.dumps({"models": models})}}
        kubectl(
            self.admin,
            "patch",
            "configmap",
            "ai-external-models",
            "-n",
            self.ns,
            "--type=merge",
            "-p",
            json.dumps(body),
        )


def problems(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stdout.splitlines() if line.startswith("problem: ")]


def healthy(done: subprocess.CompletedProcess[str]) -> bool:
    return done.returncode == 0 and not problems(done)


@pytest.fixture(scope="module")
def stage(kube_peer: Any, litellm_peer: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    admin = Path(kube_peer.kubeconfig)
    work = tmp_path_factory.mktemp("status-problems")
    ns = f"mcs-{uuid.uuid4().hex[:6]}"
    app_ns = f"{ns}-system"
    for name in (ns, app_ns):
        kubectl(admin, "create", "namespace", name)
    for file in sorted((REPO / "contracts" / "crds").glob("*.yaml")):
        kubectl(admin, "apply", "-f", str(file))
    for crd in ("models.kubeai.org", ACTIVATIONS_CRD, "agenttemplates.kubeopencode.io"):
        kubectl(admin, "wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    manifests, _ = deploy_base(admin, ns, app_ns, kustomization=OPERATED)
    kubectl(admin, "apply", "-f", "-", input_text=manifests)
    # the two ConfigMaps nobody re-applies: created once, as under Flux (deploy/bootstrap)
    bootstrap, _ = deploy_base(admin, ns, app_ns, kustomization=REPO / "deploy" / "bootstrap")
    kubectl(admin, "create", "-f", "-", input_text=bootstrap)
    host, _, port = litellm_peer.base_url.removeprefix("http://").partition(":")
    proxy = CuttableProxy((host, int(port)))  # LiteLLM as the controller reaches it: cut to take it away
    env = {
        "KUBECONFIG": str(service_account_kubeconfig(admin, ns, work / "controller.kubeconfig")),
        "NAMESPACE": ns,
        "APPLIANCE_NAMESPACE": app_ns,
        "LITELLM_BASE_URL": f"http://127.0.0.1:{proxy.port}",
        "LITELLM_MASTER_KEY": litellm_peer.master_key,
        **FAST_CONTROLLER_ENV,
        "CATALOG_CRD_RECHECK_SECONDS": "1",
        # a permission taken away shows at a watch's next request (the API server does not end open
        # watches): watches renewed every few seconds instead of every 5-10 minutes
        "CATALOG_WATCH_TIMEOUT_SECONDS": "2",
    }
    state = Stage(admin, work, ns, app_ns, proxy, env)
    try:
        yield state
    finally:
        if state.controller is not None:
            state.controller.kill()
        proxy.close()
        for file in sorted((REPO / "contracts" / "crds").glob("*.yaml")):
            kubectl(admin, "apply", "-f", str(file), check=False)  # whatever a test left out
        for name in (ns, app_ns):
            kubectl(admin, "delete", "namespace", name, "--wait=false", check=False)


def test_the_placeholder_and_no_leader_exit_1_and_say_why(stage: Stage) -> None:
    done = stage.status()
    assert done.returncode == 1, done.stdout + done.stderr
    assert problems(done) == [
        f"problem: CatalogNotWritten {stage.ns}/ai-model-catalog: the catalog is the bootstrap "
        "placeholder (hash bootstrap, AI_APPLIANCE_MODEL_CATALOG_READY=false): no controller has written it "
        "yet; consumers that wait for AI_APPLIANCE_MODEL_CATALOG_READY=true do not start",
        f"problem: NoLeader {stage.ns}/ai-model-catalog-controller: no Lease: no replica has led yet (is the "
        "controller running, with leader election on?); nothing writes LiteLLM rows, the catalog, "
        "AgentTemplates or rollouts; what is published stays as it is",
    ]
    view = json.loads(stage.status("-o", "json").stdout)
    assert [p["type"] for p in view["problems"]] == ["CatalogNotWritten", "NoLeader"]


def test_a_healthy_catalog_exits_0_and_status_model_answers_for_one_model(stage: Stage) -> None:
    stage.models(MODELS)
    stage.controller = Controller("replica-a", stage.env, stage.work).start()
    stage.controller.wait_ready(90)
    done = stage.until(healthy, "a healthy, written catalog")
    assert "leader replica-a, renewed" in done.stdout.splitlines()[0]

    published = stage.status("gpt-x")
    assert published.returncode == 0, published.stdout
    assert published.stdout.splitlines()[1] == "gpt-x: published"
    assert "routes: external   LiteLLM id: ai-appliance-external-gpt-x" in published.stdout

    # One in error: a Secret reference the allow-list refuses
    broken = {"name": "needs-key", "model": "openai/y", "apiKeySecretRef": {"name": "someones", "key": "k"}}
    stage.models([*MODELS, broken])
    why = stage.until(
        lambda d: d.returncode == 1 and "needs-key: NOT published" in d.stdout, "needs-key", "needs-key"
    )
    lines = why.stdout.splitlines()
    assert (
        lines[2] == "  external/needs-key: error (SecretNotAllowed), since >=" + lines[2].rsplit(">=", 1)[1]
    )
    assert lines[3].startswith("    why: ") and "kubectl label secret" in lines[3]
    assert len(lines) < 12  # one screen
    table = stage.status()
    assert table.returncode == 1 and "why:" in table.stdout.splitlines()
    only = stage.status("--state", "error")
    assert [line.split()[0] for line in only.stdout.splitlines()[2:3]] == ["needs-key"]
    missing = stage.status("gpt")
    assert missing.returncode == 1
    assert "gpt: not published: no source item has this name or logical name" in missing.stdout
    assert "did you mean gpt-x?" in missing.stdout

    stage.models(MODELS)
    stage.until(healthy, "needs-key gone")


def test_litellm_unreachable_is_a_problem_until_it_answers(stage: Stage) -> None:
    stage.proxy.cut()
    try:
        done = stage.until(
            lambda d: d.returncode == 1 and any(" LiteLLMUnreachable litellm: " in p for p in problems(d)),
            "status to say LiteLLM is unreachable",
        )
        (line,) = problems(done)
        assert "(since " in line and "new, changed or removed models are not written to LiteLLM" in line
        model = stage.status("gpt-x")
        assert model.returncode == 1
        assert (
            "gpt-x: published, but the problems above stop changes to it from being published" in model.stdout
        )
    finally:
        stage.proxy.restore()
    stage.until(healthy, "LiteLLM back")


def test_a_missing_crd_is_a_problem_and_a_check_warning_until_it_is_installed(stage: Stage) -> None:
    kubectl(stage.admin, "delete", "crd", ACTIVATIONS_CRD)
    try:
        done = stage.until(
            lambda d: (
                d.returncode == 1 and any("CRDNotInstalled model-activations" in p for p in problems(d))
            ),
            "status to say the ModelActivation CRD is missing",
        )
        (line,) = problems(done)
        assert f"CustomResourceDefinition {ACTIVATIONS_CRD}" in line and "until its CRD is installed" in line
        clean = {
            k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "CATALOG_", "LITELLM_"))
        }
        checked = subprocess.run(
            [sys.executable, "-m", "app.cli", "check", "--kubeconfig", str(stage.admin)],
            cwd=REPO,
            env={**clean, "NAMESPACE": stage.ns, "APPLIANCE_NAMESPACE": stage.app_ns, **_litellm(stage)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert checked.returncode == 1, checked.stdout  # a warning, nothing failed
        assert (
            f"warn  crd: {ACTIVATIONS_CRD} is not installed: the controller reads model-activations"
            in checked.stdout
        )
    finally:
        kubectl(stage.admin, "apply", "-f", str(REPO / "contracts" / "crds" / "modelactivation.yaml"))
    stage.until(healthy, "the CRD back")


def _litellm(stage: Stage) -> dict[str, str]:
    return {
        "LITELLM_BASE_URL": stage.env["LITELLM_BASE_URL"],
        "LITELLM_MASTER_KEY": stage.env["LITELLM_MASTER_KEY"],
    }


def test_a_source_the_controller_may_no_longer_read_is_a_stale_source_until_the_role_is_fixed(
    stage: Stage,
) -> None:
    path = ["role", "ai-model-catalog-controller", "-n", stage.ns]
    role = json.loads(kubectl(stage.admin, "get", *path, "-o", "json"))
    index = next(i for i, r in enumerate(role["rules"]) if r["resources"] == ["services", "pods"])
    removed = role["rules"][index]
    kubectl(
        stage.admin,
        "patch",
        *path,
        "--type=json",
        "-p",
        json.dumps([{"op": "remove", "path": f"/rules/{index}"}]),
    )
    try:
        done = stage.until(
            lambda d: d.returncode == 1 and any("SourceForbidden pods" in p for p in problems(d)),
            "status to say the pods source is forbidden",
        )
        line = next(p for p in problems(done) if "SourceForbidden pods" in p)
        assert (
            "its last good content is kept" in line
            and "model-catalog check names the missing permission" in line
        )
    finally:
        restore = [{"op": "add", "path": f"/rules/{index}", "value": removed}]
        kubectl(stage.admin, "patch", *path, "--type=json", "-p", json.dumps(restore))
    stage.until(healthy, "the Role fixed")


def test_when_the_controller_stops_nobody_leads(stage: Stage) -> None:
    assert stage.controller is not None
    assert stage.controller.stop() == 0  # graceful: it releases the Lease
    done = stage.status()
    assert done.returncode == 1
    assert problems(done) == [
        f"problem: NoLeader {stage.ns}/ai-model-catalog-controller: nobody holds the Lease (released); "
        "nothing writes LiteLLM rows, the catalog, AgentTemplates or rollouts; what is published stays as "
        "it is"
    ]
    assert "gpt-x" in done.stdout  # the catalog stays as it was written
