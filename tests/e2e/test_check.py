"""``model-catalog check`` on the real kube-apiserver and LiteLLM (issue 33, item 5):

- all green with ``deploy/``'s Roles, as the controller's ServiceAccount impersonated by an admin and as
  that ServiceAccount's own token (the view from the controller's pod);
- each rule of the deploy Roles removed in turn: exactly that rule's permissions are named, each with the
  Role to add it to (the permissions come from ``contracts/rbac.GRANTS``, never a list of the test's);
- before the first install: what is missing, one line each, exit 2;
- LiteLLM down, a wrong master key, an immutable catalog ConfigMap: a failure each, no key printed.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from adapters.kube.api import KubeApi
from app.check import CheckSettings, Severity, check_permissions, controller_identity
from app.check import Options as CheckOptions
from app.check import main as check_main
from catalog_core.config import CatalogConfig
from contracts import rbac
from tests.e2e.harness import REPO, deploy_base, kubectl, service_account_kubeconfig
from tests.fixtures.kube_peer import KubePeer, new_api_client

pytestmark = [pytest.mark.kube, pytest.mark.litellm]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def check(
    *args: str, kubeconfig: Path, ns: str, app_ns: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("KUBECONFIG", "CATALOG_", "NAMESPACE", "APPLIANCE_NAMESPACE", "LITELLM_"))
    }
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "check", "--kubeconfig", str(kubeconfig), *args],
        cwd=REPO,
        env={**clean, "NAMESPACE": ns, "APPLIANCE_NAMESPACE": app_ns, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class Installed:
    def __init__(self, peer: KubePeer, work: Path, ns: str, app_ns: str, litellm: Any) -> None:
        self.peer, self.admin, self.work = peer, Path(peer.kubeconfig), work
        self.ns, self.app_ns, self.litellm = ns, app_ns, litellm

    def run(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        kw.setdefault("kubeconfig", self.admin)
        return check(*args, "--litellm-url", self.litellm.base_url, ns=self.ns, app_ns=self.app_ns, **kw)


@pytest.fixture(scope="module")
def installed(kube_peer: Any, litellm_peer: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    admin = Path(kube_peer.kubeconfig)
    ns = f"mck-{uuid.uuid4().hex[:6]}"
    app_ns = f"{ns}-system"
    for name in (ns, app_ns):
        kubectl(admin, "create", "namespace", name)
    for crd in sorted((REPO / "contracts" / "crds").glob("*.yaml")):
        kubectl(admin, "apply", "-f", str(crd))
    manifests, _ = deploy_base(admin, ns, app_ns)
    kubectl(admin, "apply", "-f", "-", input_text=manifests)
    kubectl(
        admin,
        "create",
        "secret",
        "generic",
        "litellm-masterkey-secret",
        "-n",
        ns,
        f"--from-literal=LITELLM_MASTER_KEY={litellm_peer.master_key}",
    )
    try:
        yield Installed(kube_peer, tmp_path_factory.mktemp("check"), ns, app_ns, litellm_peer)
    finally:
        for name in (ns, app_ns):
            kubectl(admin, "delete", "namespace", name, "--wait=false", check=False)


def test_all_green_with_the_deploy_roles(installed: Installed, capsys: pytest.CaptureFixture[str]) -> None:
    done = installed.run()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert all(line.startswith("ok  ") for line in lines[:-1]), done.stdout
    wanted = len(list(rbac.permissions(CheckSettings(CatalogConfig(), "ai", "lease", "", "").names())))
    who = controller_identity(installed.ns)
    assert f"ok    permissions: {wanted} of {wanted} granted to {who}" in lines
    assert any(line.startswith("ok    litellm: ") and "is ready, version 1." in line for line in lines)
    assert "ok    litellm: accepts the master key (GET /model/info: " in done.stdout
    assert (
        f"ok    master-key: Secret {installed.ns}/litellm-masterkey-secret key LITELLM_MASTER_KEY"
        in done.stdout
    )
    assert f"ok    catalog: ConfigMap {installed.ns}/ai-model-catalog: {who} may update it" in done.stdout
    assert lines[-1] == f"result: 0 failed, 0 warnings, {len(lines) - 1} ok"
    assert installed.litellm.master_key not in done.stdout + done.stderr
    print(done.stdout)  # what the README shows

    # From the controller's pod: no kubeconfig, the pod's mounted ServiceAccount (in-cluster, no
    # impersonation) and the key from its environment, as the Deployment gives them.
    token = yaml.safe_load(
        service_account_kubeconfig(
            installed.admin, installed.ns, installed.work / "sa.kubeconfig"
        ).read_text()
    )
    mounted = installed.work / "serviceaccount"
    mounted.mkdir()
    (mounted / "token").write_text(token["users"][0]["user"]["token"])
    cluster = token["clusters"][0]["cluster"]
    (mounted / "ca.crt").write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    host, _, port = cluster["server"].removeprefix("https://").partition(":")
    pod_env = {
        "HOME": str(installed.work / "home"),
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
        "NAMESPACE": installed.ns,
        "APPLIANCE_NAMESPACE": installed.app_ns,
        "LITELLM_BASE_URL": installed.litellm.base_url,
        "LITELLM_MASTER_KEY": installed.litellm.master_key,
    }
    config = CatalogConfig.from_env(pod_env)
    assert isinstance(config, CatalogConfig)
    capsys.readouterr()
    assert check_main(config, CheckOptions(service_account=mounted), pod_env) == 0
    as_pod = capsys.readouterr().out
    assert f"ok    permissions: {wanted} of {wanted} granted to your own identity" in as_pod, as_pod
    assert "ok    master-key: from the environment (LITELLM_MASTER_KEY)" in as_pod
    assert installed.litellm.master_key not in as_pod

    # A kubeconfig whose user may not impersonate: said in the permissions line, with the way out.
    sa_kubeconfig = installed.work / "sa.kubeconfig"
    capsys.readouterr()
    options = CheckOptions(kubeconfig=str(sa_kubeconfig), litellm_url=installed.litellm.base_url)
    assert check_main(config, options, pod_env) == 2
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("FAIL  permissions: ")]
    assert f"you may not impersonate {controller_identity(installed.ns)}" in line
    assert "pass --as= to check your own identity" in line

    as_json = json.loads(installed.run("-o", "json").stdout)
    assert as_json["result"] == "ok" and {f["severity"] for f in as_json["findings"]} == {"ok"}


async def _missing(api: KubeApi, installed: Installed) -> set[tuple[str, str, str, str, str]]:
    """What the permissions check finds missing for the controller's identity (``api`` impersonates it)."""
    settings = CheckSettings(
        CatalogConfig(namespace=installed.ns, appliance_namespace=installed.app_ns),
        installed.ns,
        "ai-model-catalog-controller",
        "",
        controller_identity(installed.ns),
    )
    missing = set()
    for finding in await check_permissions(api, settings):
        if finding.check == "permission":
            p = finding.permission
            assert p is not None and finding.severity is Severity.FAIL
            assert (
                f"add it to Role {p.namespace}/ai-model-catalog-controller ({p.role.file})" in finding.message
            )
            resource = f"{p.resource}/{p.subresource}" if p.subresource else p.resource
            missing.add((p.namespace, p.group, resource, p.name, p.verb))
    return missing


@pytest.mark.anyio
async def test_each_rule_removed_from_a_deploy_role_is_named_with_its_role(installed: Installed) -> None:
    from tests.deploy.test_rbac_declaration import granted_by_rules

    admin = await new_api_client(installed.peer)
    controller = await new_api_client(installed.peer, impersonate=controller_identity(installed.ns))
    try:
        as_admin, as_controller = KubeApi(admin), KubeApi(controller)

        async def until(expected: set[tuple[str, str, str, str, str]]) -> None:
            with anyio.fail_after(30):  # the authorizer's Role cache follows a change within moments
                while await _missing(as_controller, installed) != expected:
                    await anyio.sleep(0.2)

        await until(set())
        for namespace in (installed.ns, installed.app_ns):
            path = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/{rbac.SERVICE_ACCOUNT}"
            role = await as_admin.request("GET", path)
            rules = role["rules"]
            for index, rule in enumerate(rules):
                kept = rules[:index] + rules[index + 1 :]
                expected = granted_by_rules(namespace, rules) - granted_by_rules(namespace, kept)
                assert expected, rule
                role = await as_admin.request("GET", path)
                await as_admin.request("PUT", path, body={**role, "rules": kept})
                try:
                    await until(expected)
                finally:
                    role = await as_admin.request("GET", path)
                    await as_admin.request("PUT", path, body={**role, "rules": rules})
                await until(set())
    finally:
        await admin.close()
        await controller.close()


def test_before_the_first_install_every_missing_piece_is_one_line(installed: Installed) -> None:
    fresh = f"mck-{uuid.uuid4().hex[:6]}"
    done = check(
        "--litellm-url",
        installed.litellm.base_url,
        kubeconfig=installed.admin,
        ns=fresh,
        app_ns=f"{fresh}-system",
    )
    assert done.returncode == 2
    lines = done.stdout.splitlines()
    settings = CheckSettings(
        CatalogConfig(namespace=fresh, appliance_namespace=f"{fresh}-system"), fresh, "lease", "", ""
    )
    wanted = list(rbac.permissions(settings.names()))
    missing = [line for line in lines if line.startswith("FAIL  permission: ")]
    assert len(missing) == len(wanted)
    assert f"FAIL  permissions: 0 of {len(wanted)} granted to {controller_identity(fresh)}" in lines
    assert (
        f"FAIL  permission: create pods/eviction in {fresh} is not allowed (needed by PodEvictor): "
        f"add it to Role {fresh}/ai-model-catalog-controller (deploy/controller/role-ai.yaml)"
    ) in lines
    assert any(
        line.startswith(
            f"FAIL  master-key: Secret {fresh}/litellm-masterkey-secret key LITELLM_MASTER_KEY: "
            "the Secret does not exist"
        )
        for line in lines
    )
    assert any(line.startswith(f"FAIL  catalog: ConfigMap {fresh}/ai-model-catalog: ") for line in lines)
    assert lines[-1].startswith(f"result: {len(missing) + 3} failed, ")


def test_litellm_down_a_wrong_key_and_an_immutable_catalog_fail(installed: Installed) -> None:
    down = check(
        "--litellm-url",
        "http://127.0.0.1:9",
        kubeconfig=installed.admin,
        ns=installed.ns,
        app_ns=installed.app_ns,
    )
    assert down.returncode == 2
    assert "FAIL  litellm: http://127.0.0.1:9 does not answer: connect: GET /health/readiness" in down.stdout

    wrong = installed.run(env={"LITELLM_MASTER_KEY": "sk-not-the-key-123"})
    assert wrong.returncode == 2
    assert "FAIL  litellm: LiteLLM refuses the master key (HTTP 401" in wrong.stdout
    assert "sk-not-the-key-123" not in wrong.stdout + wrong.stderr

    # A catalog ConfigMap someone made immutable: the controller could never write it.
    kubectl(
        installed.admin,
        "patch",
        "configmap",
        "ai-model-catalog",
        "-n",
        installed.ns,
        "--type=merge",
        "-p",
        '{"immutable": true}',
    )
    refused = installed.run()
    assert refused.returncode == 2
    (line,) = [line for line in refused.stdout.splitlines() if line.startswith("FAIL  catalog: ")]
    assert (
        f"ConfigMap {installed.ns}/ai-model-catalog: {controller_identity(installed.ns)} "
        "may not update it: HTTP 422" in line
    )
    assert "immutable" in line
