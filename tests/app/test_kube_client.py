"""``status`` and ``check`` find the cluster as kubectl does: ``--kubeconfig``, else every file of
``KUBECONFIG`` (merged), else ``~/.kube/config``, else the pod's ServiceAccount; and when none applies, one
line that says how to fix it (issue 33, item 4)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from adapters.kube.api import KubeApi, KubeError
from adapters.kube.client import KubeClient
from app import kube_client as kube_client_module
from app.kube_client import ClusterConfigError, cluster_source, load_cli_client
from tests.fixtures.kube_peer import REPO, KubePeer

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_the_flag_wins_and_must_name_a_file(tmp_path: Path) -> None:
    given = tmp_path / "given"
    given.write_text("{}")
    env = {"KUBECONFIG": str(tmp_path / "other"), "HOME": str(tmp_path)}
    assert cluster_source(str(given), env).kubeconfig == str(given)
    with pytest.raises(ClusterConfigError, match=r"--kubeconfig .*/missing: no such file"):
        cluster_source(str(tmp_path / "missing"), env)


def test_kubeconfig_lists_skip_missing_files_and_shadow_the_default(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("{}")
    b.write_text("{}")
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("{}")
    env = {"KUBECONFIG": f"{a}{os.pathsep}{tmp_path / 'gone'}{os.pathsep}{b}", "HOME": str(tmp_path)}
    assert cluster_source("", env).kubeconfig == f"{a}{os.pathsep}{b}"
    assert cluster_source("", {"HOME": str(tmp_path)}).kubeconfig == str(tmp_path / ".kube" / "config")


def test_in_a_pod_without_a_kubeconfig_the_service_account_is_used(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    pod = {"HOME": str(tmp_path), "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    source = cluster_source("", pod, tmp_path)
    assert source.kubeconfig == "" and source.described.startswith("in-cluster")


def test_nothing_to_go_on_is_one_line_that_says_how_to_fix_it(tmp_path: Path) -> None:
    with pytest.raises(ClusterConfigError) as none:
        cluster_source("", {"HOME": str(tmp_path)}, tmp_path / "no-service-account")
    message = str(none.value)
    assert "\n" not in message
    assert f"KUBECONFIG is not set, {tmp_path}/.kube/config does not exist and this is not a pod" in message
    assert "set KUBECONFIG or pass --kubeconfig FILE" in message
    with pytest.raises(
        ClusterConfigError, match="names no file that exists; point KUBECONFIG or --kubeconfig"
    ):
        cluster_source("", {"HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "x")}, tmp_path / "none")


async def test_a_broken_kubeconfig_names_the_file_and_the_fix(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.write_text("current-context: nowhere\n")
    with pytest.raises(ClusterConfigError) as failed:
        await load_cli_client("", {"KUBECONFIG": str(broken), "HOME": str(tmp_path)})
    assert str(failed.value).startswith(f"KUBECONFIG={broken}: ")
    assert str(failed.value).endswith("; fix it, or pass --kubeconfig FILE (and --context NAME)")


def _split(kubeconfig: Path, target: Path) -> tuple[Path, Path]:
    """The peer's kubeconfig as two files, as people keep them: clusters and contexts, and users."""
    doc = yaml.safe_load(kubeconfig.read_text())
    first, second = target / "clusters.yaml", target / "users.yaml"
    first.write_text(yaml.safe_dump({k: v for k, v in doc.items() if k != "users"}))
    second.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "users": doc["users"]}))
    return first, second


@pytest.mark.kube
async def test_a_kubeconfig_list_is_merged_as_kubectl_merges_it(kube_peer: KubePeer, tmp_path: Path) -> None:
    first, second = _split(kube_peer.kubeconfig, tmp_path)
    client, source = await load_cli_client("", {"KUBECONFIG": f"{first}{os.pathsep}{second}"})
    async with client:
        version = await KubeApi(client).request("GET", "/version")
    assert version["gitVersion"].startswith("v1.")
    assert source.described == f"KUBECONFIG={first}{os.pathsep}{second}"


@pytest.mark.kube
def test_status_reads_the_default_kubeconfig_in_home(kube_peer: KubePeer, tmp_path: Path) -> None:
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(kube_peer.kubeconfig.read_text())
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("KUBECONFIG", "KUBERNETES_", "NAMESPACE"))
    }
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "status", "-n", "no-such-namespace"],
        cwd=REPO,
        env={**env, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # It reached the API server with ~/.kube/config: the answer is the API server's 404.
    assert done.returncode == 2
    assert "ConfigMap no-such-namespace/ai-model-catalog: HTTP 404 NotFound" in done.stderr, done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "status"],
        cwd=REPO,
        env={**env, "HOME": str(tmp_path / "empty")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "set KUBECONFIG or pass --kubeconfig FILE" in done.stderr


# --- how the client authenticates: read by app/kube_client.py, kubernetes-asyncio only for a program


def _peer_parts(kube_peer: KubePeer) -> tuple[dict[str, object], str, bytes]:
    """The peer's kubeconfig, its admin token and its CA (PEM)."""
    doc = yaml.safe_load(kube_peer.kubeconfig.read_text())
    token = doc["users"][0]["user"]["token"]
    ca = base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"])
    return doc, token, ca


async def _namespaces(client: KubeClient) -> list[str]:
    answer = await KubeApi(client).request("GET", "/api/v1/namespaces")
    return [item["metadata"]["name"] for item in answer["items"]]


@pytest.mark.kube
async def test_a_token_file_is_read_again_as_it_rotates(
    kube_peer: KubePeer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tokenFile`` (relative to the kubeconfig) and the CA as a file: a rotated token is used once read
    again, never a cached stale one for longer than the reread interval."""
    doc, token, ca = _peer_parts(kube_peer)
    (tmp_path / "ca.crt").write_bytes(ca)
    (tmp_path / "token").write_text("not-a-token\n")
    cluster = doc["clusters"][0]["cluster"]  # type: ignore[index]
    del cluster["certificate-authority-data"]
    cluster["certificate-authority"] = "ca.crt"
    doc["users"][0]["user"] = {"tokenFile": "token"}  # type: ignore[index]
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(doc))
    monkeypatch.setattr(kube_client_module, "TOKEN_REREAD_SECONDS", 0.0)
    client, _ = await load_cli_client(str(tmp_path / "kubeconfig"), {})
    async with client:
        with pytest.raises(KubeError) as failed:
            await _namespaces(client)
        assert failed.value.status == 401
        (tmp_path / "token").write_text(token + "\n")
        assert "default" in await _namespaces(client)


@pytest.mark.kube
async def test_in_a_pod_the_service_account_token_and_ca_reach_the_api_server(
    kube_peer: KubePeer, tmp_path: Path
) -> None:
    _, token, ca = _peer_parts(kube_peer)
    (tmp_path / "token").write_text(token)
    (tmp_path / "ca.crt").write_bytes(ca)
    address = urlparse(kube_peer.server)
    env = {"KUBERNETES_SERVICE_HOST": str(address.hostname), "KUBERNETES_SERVICE_PORT": str(address.port)}
    client, source = await load_cli_client("", env, service_account=tmp_path)
    assert source.kubeconfig == ""
    async with client:
        assert "default" in await _namespaces(client)
    (tmp_path / "ca.crt").write_bytes(b"")  # an unreadable CA bundle stops the start, never trust-all
    with pytest.raises(
        ClusterConfigError, match=r"in-cluster .*: its TLS files: .*NO_CERTIFICATE_OR_CRL_FOUND"
    ):
        await load_cli_client("", env, service_account=tmp_path)


def test_kubeconfig_entries_resolve_files_against_their_own_file(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "config").write_text(
        yaml.safe_dump(
            {
                "current-context": "one",
                "contexts": [{"name": "one", "context": {"cluster": "c", "user": "u"}}],
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": "https://api.example:6443",
                            "certificate-authority": "ca.crt",
                            "tls-server-name": "kubernetes",
                        },
                    }
                ],
            }
        )
    )
    key = base64.b64encode(b"-----BEGIN KEY-----").decode()
    (tmp_path / "b" / "config").write_text(
        yaml.safe_dump(
            {
                "current-context": "ignored: the first file's wins",
                "users": [
                    {"name": "u", "user": {"client-certificate": "u.crt", "client-key-data": key}},
                    {"name": "p", "user": {"exec": {"command": "x"}}},
                ],
                "contexts": [{"name": "program", "context": {"cluster": "c", "user": "p"}}],
            }
        )
    )
    merged = kube_client_module._merged_kubeconfig(
        f"{tmp_path / 'a' / 'config'}{os.pathsep}{tmp_path / 'b' / 'config'}"
    )
    access = kube_client_module.kubeconfig_access(merged, "")
    assert access is not None
    assert (access.server, access.ca_file, access.cert_file) == (
        "https://api.example:6443",
        str(tmp_path / "a" / "ca.crt"),
        str(tmp_path / "b" / "u.crt"),
    )
    assert (access.key_data, access.tls_server_name, access.verify) == (
        b"-----BEGIN KEY-----",
        "kubernetes",
        True,
    )
    # A user that authenticates through a program is left to kubernetes-asyncio's loader.
    assert kube_client_module.kubeconfig_access(merged, "program") is None
    with pytest.raises(ClusterConfigError, match="no context named 'nowhere'"):
        kube_client_module.kubeconfig_access(merged, "nowhere")


@pytest.mark.kube
async def test_a_user_that_runs_a_program_is_read_by_kubernetes_asyncio(
    kube_peer: KubePeer, tmp_path: Path
) -> None:
    """``exec`` credentials: kubernetes-asyncio's loader runs the program; its token reaches the server."""
    doc, token, _ = _peer_parts(kube_peer)
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": token},
    }
    (tmp_path / "credential.json").write_text(json.dumps(credential))
    doc["users"][0]["user"] = {  # type: ignore[index]
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "cat",
            "args": [str(tmp_path / "credential.json")],
            "interactiveMode": "Never",
        }
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(doc))
    client, _ = await load_cli_client(str(tmp_path / "kubeconfig"), {})
    async with client:
        assert "default" in await _namespaces(client)
