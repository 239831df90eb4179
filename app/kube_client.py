"""The Kubernetes API client, from a kubeconfig or in-cluster: shared by ``run`` and ``status``.

A module of its own so ``status`` loads the client without the controller (OpenTelemetry, the loop). It
is also the one place the app imports kubernetes-asyncio from, so the generated client is made lazy
before anything loads it (``app/lazy_kubernetes.py``: ~20 MiB of model classes the controller never
uses).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs

from adapters.identity import USER_AGENT
from app.lazy_kubernetes import defer_generated_client
from app.terminal import one_line

defer_generated_client()

# After the deferral: importing these first would load every generated class.
from kubernetes_asyncio import client as k8s_client  # noqa: E402
from kubernetes_asyncio import config as k8s_config  # noqa: E402
from kubernetes_asyncio.client.exceptions import ApiException  # noqa: E402

__all__ = [
    "ApiException",
    "ClusterConfigError",
    "identified",
    "k8s_client",
    "k8s_config",
    "load_api_client",
    "load_cli_client",
]

# Where a pod's ServiceAccount is mounted (token, ca.crt): in-cluster configuration needs its token.
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ClusterConfigError(Exception):
    """The cluster's configuration cannot be loaded: a missing or broken kubeconfig, or not in a cluster."""


@attrs.frozen
class ClusterSource:
    """Where a command-line tool's cluster configuration comes from, chosen as kubectl chooses it."""

    kubeconfig: str  # the file, or KUBECONFIG-style list of files, to merge; "" for in-cluster
    described: str  # for messages: "--kubeconfig FILE", "KUBECONFIG=...", "~/.kube/config", "in-cluster"


def cluster_source(
    kubeconfig: str, env: Mapping[str, str], service_account: Path = SERVICE_ACCOUNT_DIR
) -> ClusterSource:
    """kubectl's order: ``--kubeconfig`` (that file only); else every file of ``KUBECONFIG`` that exists,
    merged (missing ones are skipped); else ``~/.kube/config`` when it exists; else the pod's
    ServiceAccount (in-cluster). Raises ``ClusterConfigError`` saying how to fix it when none applies."""
    if kubeconfig:
        if not Path(kubeconfig).expanduser().is_file():
            raise ClusterConfigError(
                f"--kubeconfig {kubeconfig}: no such file; pass the path of a kubeconfig"
            )
        return ClusterSource(str(Path(kubeconfig).expanduser()), f"--kubeconfig {kubeconfig}")
    listed = env.get("KUBECONFIG", "")
    found = [
        str(Path(p).expanduser()) for p in listed.split(os.pathsep) if p and Path(p).expanduser().is_file()
    ]
    if found:
        return ClusterSource(os.pathsep.join(found), f"KUBECONFIG={listed}")
    home = env.get("HOME")
    default = (Path(home) if home else Path.home()) / ".kube" / "config"
    if not listed and default.is_file():
        return ClusterSource(str(default), str(default))
    pod = env.get("KUBERNETES_SERVICE_HOST") and env.get("KUBERNETES_SERVICE_PORT")
    if pod and (service_account / "token").is_file():
        return ClusterSource("", "in-cluster (the pod's ServiceAccount)")
    if listed:
        raise ClusterConfigError(
            f"KUBECONFIG={listed} names no file that exists; point KUBECONFIG or --kubeconfig at a kubeconfig"
        )
    raise ClusterConfigError(
        f"no cluster configuration: KUBECONFIG is not set, {default} does not exist and this is not a pod; "
        "set KUBECONFIG or pass --kubeconfig FILE (kubectl config view --raw > FILE makes one)"
    )


async def load_cli_client(
    kubeconfig: str,
    env: Mapping[str, str],
    *,
    context: str = "",
    connections: int | None = None,
    service_account: Path = SERVICE_ACCOUNT_DIR,
) -> tuple[k8s_client.ApiClient, ClusterSource]:
    """A client for a command-line tool, configured as kubectl would be (``cluster_source``), and where
    its configuration came from."""
    source = cluster_source(kubeconfig, env, service_account)
    configuration = k8s_client.Configuration()
    try:
        if source.kubeconfig:
            await k8s_config.load_kube_config(
                config_file=source.kubeconfig, context=context or None, client_configuration=configuration
            )
        else:
            k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration,
                token_filename=str(service_account / "token"),
                cert_filename=str(service_account / "ca.crt"),
                environ=dict(env),
            )
    except Exception as exc:  # the library raises ConfigException, OSError, YAML errors...
        reason = one_line(str(exc) or type(exc).__name__)
        fix = "fix it, or pass --kubeconfig FILE" + ("" if context else " (and --context NAME)")
        raise ClusterConfigError(f"{source.described}: {reason}; {fix}") from None
    if connections is not None:
        configuration.connection_pool_maxsize = connections
    return identified(k8s_client.ApiClient(configuration)), source


async def load_api_client(kubeconfig: str, *, connections: int | None = None) -> k8s_client.ApiClient:
    """A client with its own connection pool (``connections``: its size; the library's default is 100)."""
    configuration = k8s_client.Configuration()
    try:
        if kubeconfig:
            await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        else:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except Exception as exc:  # the library raises ConfigException, OSError, YAML errors...
        raise ClusterConfigError(str(exc) or type(exc).__name__) from None
    if connections is not None:
        configuration.connection_pool_maxsize = connections
    return identified(k8s_client.ApiClient(configuration))


def identified(api_client: k8s_client.ApiClient) -> k8s_client.ApiClient:
    """``api_client`` with our User-Agent on every request (for a client we made; a host's keeps its own)."""
    api_client.user_agent = USER_AGENT
    return api_client
