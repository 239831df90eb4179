"""The Kubernetes API client, from a kubeconfig or in-cluster: shared by ``run`` and ``status``.

A module of its own so ``status`` loads the client without the controller (OpenTelemetry, the loop). It
is also the one place the app imports kubernetes-asyncio from, so the generated client is made lazy
before anything loads it (``app/lazy_kubernetes.py``: ~20 MiB of model classes the controller never
uses).
"""

from __future__ import annotations

from adapters.identity import USER_AGENT
from app.lazy_kubernetes import defer_generated_client

defer_generated_client()

# After the deferral: importing these first would load every generated class.
from kubernetes_asyncio import client as k8s_client  # noqa: E402
from kubernetes_asyncio import config as k8s_config  # noqa: E402
from kubernetes_asyncio.client.exceptions import ApiException  # noqa: E402

__all__ = ["ApiException", "ClusterConfigError", "identified", "k8s_client", "k8s_config", "load_api_client"]


class ClusterConfigError(Exception):
    """The cluster's configuration cannot be loaded: a missing or broken kubeconfig, or not in a cluster."""


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
