"""The Kubernetes API client, from a kubeconfig or in-cluster: shared by ``run`` and ``status``.

A module of its own so ``status`` loads the client without the controller (OpenTelemetry, the loop).
The client is ``adapters.kube.client.KubeClient`` (httpx). A kubeconfig is read here when its user
authenticates with what a file holds (a token, a token file, a client certificate): what the controller's
pod, the tests and most kubeconfigs use. A user that needs a program or a provider to authenticate
(``exec``, ``auth-provider``) or a user name and password is read by kubernetes-asyncio's loader, which
then also refreshes its credentials; only then is kubernetes-asyncio (with aiohttp, ~10 MiB) imported,
its generated client made lazy first (``app/lazy_kubernetes.py``: ~20 MiB of model classes the
controller never uses).
"""

from __future__ import annotations

import base64
import os
import ssl
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from adapters.kube.client import (
    DEFAULT_CONNECTIONS,
    ClusterAccess,
    KubeClient,
    access_from_configuration,
    no_authorization,
)
from app.terminal import one_line

__all__ = [
    "ClusterAccess",
    "ClusterConfigError",
    "KubeClient",
    "load_access",
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
    headers: Mapping[str, str] | None = None,
) -> tuple[KubeClient, ClusterSource]:
    """A client for a command-line tool, configured as kubectl would be (``cluster_source``), and where
    its configuration came from."""
    source = cluster_source(kubeconfig, env, service_account)
    try:
        access = await load_access(
            source.kubeconfig, context=context, env=env, service_account=service_account
        )
    except ClusterConfigError as exc:
        fix = "fix it, or pass --kubeconfig FILE" + ("" if context else " (and --context NAME)")
        raise ClusterConfigError(f"{source.described}: {exc}; {fix}") from None
    try:
        client = new_client(access, connections=connections, headers=headers)
    except ClusterConfigError as exc:
        raise ClusterConfigError(f"{source.described}: {exc}") from None
    return client, source


async def load_api_client(kubeconfig: str, *, connections: int | None = None) -> KubeClient:
    """A client with its own connection pool (``connections``: its size; 100 by default)."""
    return new_client(await load_access(kubeconfig), connections=connections)


def new_client(
    access: ClusterAccess, *, connections: int | None = None, headers: Mapping[str, str] | None = None
) -> KubeClient:
    """A client for ``access``; ``ClusterConfigError`` when its certificates or key cannot be read."""
    try:
        return KubeClient(access, connections=connections or DEFAULT_CONNECTIONS, headers=headers)
    except (ssl.SSLError, OSError) as exc:
        raise ClusterConfigError(f"its TLS files: {one_line(str(exc) or type(exc).__name__)}") from None


async def load_access(
    kubeconfig: str,
    *,
    context: str = "",
    env: Mapping[str, str] = os.environ,
    service_account: Path = SERVICE_ACCOUNT_DIR,
) -> ClusterAccess:
    """How to reach the cluster: from ``kubeconfig`` (a file, or an ``os.pathsep`` list of files merged as
    kubectl merges them) and its ``context`` (its current one when ""), or in-cluster when it is "".
    Raises ``ClusterConfigError`` saying what is wrong."""
    try:
        if not kubeconfig:
            return in_cluster_access(env, service_account)
        merged = _merged_kubeconfig(kubeconfig)
        access = kubeconfig_access(merged, context)
        if access is not None:
            return access
        return await _library_access(kubeconfig, context)
    except ClusterConfigError:
        raise
    except Exception as exc:  # OSError, YAML errors, bad base64, ssl errors in the library's loader...
        raise ClusterConfigError(one_line(str(exc) or type(exc).__name__)) from None


# --- in-cluster

TOKEN_REREAD_SECONDS = 60.0  # a projected ServiceAccount token is rotated by the kubelet; read it again


def in_cluster_access(env: Mapping[str, str], service_account: Path = SERVICE_ACCOUNT_DIR) -> ClusterAccess:
    """The pod's ServiceAccount: the API server at ``KUBERNETES_SERVICE_HOST:PORT``, its ``ca.crt`` and its
    token, read again every minute (the kubelet rotates it)."""
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ClusterConfigError("not in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set")
    token_file, ca_file = service_account / "token", service_account / "ca.crt"
    if not token_file.is_file() or not token_file.read_text().strip():
        raise ClusterConfigError(f"in-cluster: no ServiceAccount token in {token_file}")
    if not ca_file.is_file():
        raise ClusterConfigError(f"in-cluster: no CA certificate in {ca_file}")
    host = f"[{host}]" if ":" in host else host  # an IPv6 address
    return ClusterAccess(
        server=f"https://{host}:{port}", ca_file=str(ca_file), authorization=_token_file(token_file)
    )


def _token_file(path: Path) -> Any:
    """The ``Bearer`` header of the token in ``path``, read again once a minute has passed."""
    cached: list[Any] = ["", -TOKEN_REREAD_SECONDS]  # the header, when it was read (monotonic)

    async def authorization() -> str | None:
        now = time.monotonic()
        if now - cached[1] >= TOKEN_REREAD_SECONDS or not cached[0]:
            try:
                token = path.read_text().strip()
            except OSError:
                token = ""  # the last token serves until the file is back
            if token:
                cached[0], cached[1] = f"Bearer {token}", now
        return cached[0] or None

    return authorization


# --- kubeconfig files


def _merged_kubeconfig(paths: str) -> dict[str, Any]:
    """The kubeconfig files of ``paths`` merged as kubectl merges them: the first file to set a value (the
    current context) or to name an entry (a cluster, user or context) wins; file paths in an entry are
    made absolute against the directory of the file that holds it."""
    import yaml  # only for a kubeconfig: a pod's in-cluster configuration needs no YAML

    merged: dict[str, Any] = {"clusters": {}, "users": {}, "contexts": {}, "current-context": ""}
    for name in paths.split(os.pathsep):
        if not name:
            continue
        path = Path(name).expanduser()
        doc = yaml.safe_load(path.read_text()) or {}
        if not isinstance(doc, Mapping):
            raise ClusterConfigError(f"{path} is not a kubeconfig (not a mapping)")
        if not merged["current-context"] and doc.get("current-context"):
            merged["current-context"] = str(doc["current-context"])
        for section, key in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            for entry in doc.get(section) or ():
                if not isinstance(entry, Mapping) or "name" not in entry:
                    continue
                body = entry.get(key) or {}
                if isinstance(body, Mapping):
                    merged[section].setdefault(str(entry["name"]), (dict(body), path.parent))
    return merged


def _file(value: Any, base: Path) -> str | None:
    if not value:
        return None
    path = Path(str(value)).expanduser()
    return str(path if path.is_absolute() else base / path)


def _data(value: Any) -> bytes | None:
    return base64.b64decode(str(value), validate=False) if value else None


def kubeconfig_access(merged: Mapping[str, Any], context: str) -> ClusterAccess | None:
    """The access of ``context`` (the current one when "") in a merged kubeconfig; None when its user
    authenticates otherwise than with a token, a token file or a client certificate."""
    name = context or merged["current-context"]
    if not name:
        raise ClusterConfigError("no context: the kubeconfig sets no current-context; pass --context NAME")
    if name not in merged["contexts"]:
        raise ClusterConfigError(f"no context named {name!r} in the kubeconfig")
    ctx, _ = merged["contexts"][name]
    cluster_name, user_name = str(ctx.get("cluster") or ""), str(ctx.get("user") or "")
    if cluster_name not in merged["clusters"]:
        raise ClusterConfigError(
            f"context {name!r} names cluster {cluster_name!r}, which the kubeconfig lacks"
        )
    cluster, cluster_base = merged["clusters"][cluster_name]
    user, user_base = merged["users"].get(user_name, ({}, Path.cwd()))
    if any(user.get(k) for k in ("exec", "auth-provider", "username", "password")):
        return None
    server = str(cluster.get("server") or "")
    if not server:
        raise ClusterConfigError(f"cluster {cluster_name!r} has no server")
    ca_data = _data(cluster.get("certificate-authority-data"))
    authorization = no_authorization
    if user.get("token"):
        header = f"Bearer {user['token']}"

        async def static() -> str | None:
            return header

        authorization = static
    elif user.get("tokenFile"):
        authorization = _token_file(Path(_file(user["tokenFile"], user_base) or ""))
    return ClusterAccess(
        server=server,
        ca_file=None if ca_data else _file(cluster.get("certificate-authority"), cluster_base),
        ca_data=ca_data.decode() if ca_data else None,
        cert_file=_file(user.get("client-certificate"), user_base),
        key_file=_file(user.get("client-key"), user_base),
        cert_data=_data(user.get("client-certificate-data")),
        key_data=_data(user.get("client-key-data")),
        verify=not cluster.get("insecure-skip-tls-verify"),
        tls_server_name=str(cluster.get("tls-server-name") or "") or None,
        proxy=str(cluster.get("proxy-url") or "") or None,
        authorization=authorization,
    )


async def _library_access(kubeconfig: str, context: str) -> ClusterAccess:
    """kubernetes-asyncio's loader, for the users it authenticates with a program or a provider (it then
    refreshes their token on our requests, through its ``Configuration``)."""
    from app.lazy_kubernetes import defer_generated_client

    defer_generated_client()
    from kubernetes_asyncio import client as k8s_client
    from kubernetes_asyncio import config as k8s_config

    configuration = k8s_client.Configuration()
    await k8s_config.load_kube_config(
        config_file=kubeconfig, context=context or None, client_configuration=configuration
    )
    return access_from_configuration(configuration)
