"""The HTTP client of the Kubernetes adapters: httpx, to one API server, with its TLS and credentials.

``KubeApi`` sends every request through a ``KubeClient``. A host that embeds the library may hand us its
own kubernetes-asyncio ``ApiClient`` instead: ``kube_client_of`` then builds a ``KubeClient`` from that
client's ``Configuration`` (its server, TLS files and the bearer token it would send, refreshed as it
refreshes it) and default headers, so both take the same path; the ``KubeApi`` that made it closes it,
never the host's ``ApiClient``. The generated client, and the aiohttp
it runs on (~8 MiB of memory with frozenlist, multidict and yarl), are then never loaded by us.

Connections are not kept alive between requests: an idle pooled connection could be silently dead
(half-open) and hold the next request until its timeout; watches, the bulk of the requests, are
long-lived and end with their own connection anyway.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import httpx

from adapters.identity import USER_AGENT

Authorization = Callable[[], Awaitable[str | None]]  # the Authorization header's value, or None
DEFAULT_CONNECTIONS = 100  # at once, watches included (kubernetes-asyncio's default pool size)


async def no_authorization() -> str | None:
    return None


class CredentialsError(Exception):
    """The Authorization header of a request could not be made: the credential hook failed (an exec
    plugin, an auth provider, a token file) or gave a value a header cannot carry. The message names the
    cause's class only: what a plugin printed or the token itself may hold the secret."""


def _header_value(authorization: str) -> str:
    """``authorization`` when an HTTP header can carry it (visible ASCII and spaces); ``CredentialsError``
    otherwise, before httpx or h11 would put the value into an exception's message."""
    if not authorization.isascii() or any(c < " " or c == "\x7f" for c in authorization):
        raise CredentialsError("the token holds characters an HTTP header cannot carry")
    return authorization


@attrs.frozen
class ClusterAccess:
    """How to reach one API server: where, whom to trust, who we are."""

    server: str  # https://host:port (a path prefix allowed)
    ca_file: str | None = None  # None and no ca_data: the system's roots
    ca_data: str | None = None  # PEM text
    cert_file: str | None = None  # a client certificate (and key_file its key, when apart)
    key_file: str | None = None
    cert_data: bytes | None = None  # PEM, when the kubeconfig embeds them
    key_data: bytes | None = None
    verify: bool = True  # False: insecure-skip-tls-verify
    tls_server_name: str | None = None  # the name to check the certificate against, when not the host's
    proxy: str | None = None
    authorization: Authorization = attrs.field(default=no_authorization, eq=False)


def tls_context(access: ClusterAccess) -> ssl.SSLContext:
    """A client context trusting ``access``'s roots (the system's when it names none) and presenting its
    client certificate, if any."""
    context = ssl.create_default_context(cafile=access.ca_file, cadata=access.ca_data)
    if access.cert_data is not None:
        _load_cert_data(context, access.cert_data, access.key_data)
    elif access.cert_file:
        context.load_cert_chain(access.cert_file, keyfile=access.key_file)
    if not access.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _load_cert_data(context: ssl.SSLContext, cert: bytes, key: bytes | None) -> None:
    """``load_cert_chain`` reads files only: the PEM goes through private files removed right after."""
    with tempfile.TemporaryDirectory(prefix="model-catalog-tls-") as directory:
        paths: list[str | None] = []
        for name, data in (("cert.pem", cert), ("key.pem", key)):
            if data is None:
                paths.append(None)
                continue
            path = os.path.join(directory, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            paths.append(path)
        context.load_cert_chain(paths[0] or "", keyfile=paths[1])


class KubeClient:
    """Requests to one API server (an async context manager; ``aclose`` ends it)."""

    def __init__(
        self,
        access: ClusterAccess,
        *,
        connections: int = DEFAULT_CONNECTIONS,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """``connections``: how many requests at once (each watch holds one); ``headers``: sent with every
        request (e.g. ``Impersonate-User``), after our User-Agent."""
        self.access = access
        self.server = access.server.rstrip("/")
        self.connections = connections
        secure = self.server.startswith("https:")
        self._extensions: dict[str, Any] = (
            {"sni_hostname": access.tls_server_name} if secure and access.tls_server_name else {}
        )
        self._http = httpx.AsyncClient(
            verify=tls_context(access) if secure else False,
            proxy=access.proxy,
            # HTTPS_PROXY / NO_PROXY, as kubectl and kubernetes-asyncio honour them
            trust_env=True,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=0),
            headers={"User-Agent": USER_AGENT, **(headers or {})},
        )

    async def send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        headers: Mapping[str, str],
        content: bytes | None,
        timeout: httpx.Timeout,
    ) -> httpx.Response:
        """One request, its answer's body still to read (close the response). ``CredentialsError`` when
        its Authorization header cannot be made."""
        try:
            authorization = await self.access.authorization()
        except Exception as exc:  # whatever the hook raises; cancellation is not an Exception
            raise CredentialsError(f"the credential hook failed ({type(exc).__name__})") from None
        request = self._http.build_request(
            method,
            self.server + path,
            params=list(query),
            headers={**headers, "Authorization": _header_value(authorization)} if authorization else headers,
            content=content,
            timeout=timeout,
            extensions=self._extensions,
        )
        return await self._http.send(request, stream=True)

    @property
    def closed(self) -> bool:
        return self._http.is_closed

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def access_from_configuration(configuration: Any) -> ClusterAccess:
    """The access a kubernetes-asyncio ``Configuration`` describes: its bearer token is asked of it for
    every request, so its refresh hook (exec plugins, OIDC, in-cluster token files) keeps working."""

    async def authorization() -> str | None:
        settings = await configuration.auth_settings()
        token = settings.get("BearerToken", {}).get("value")
        return str(token) if token else None

    return ClusterAccess(
        server=str(configuration.host),
        ca_file=configuration.ssl_ca_cert or None,
        cert_file=configuration.cert_file or None,
        key_file=configuration.key_file or None,
        verify=bool(configuration.verify_ssl),
        tls_server_name=getattr(configuration, "tls_server_name", None) or None,
        proxy=configuration.proxy or None,
        authorization=authorization,
    )


def kube_client_of(client: Any) -> KubeClient:
    """A new ``KubeClient`` with the configuration and default headers of a kubernetes-asyncio ``ApiClient``
    (a host's): whoever asks for it closes it (``KubeApi.aclose``); the ``ApiClient`` stays the host's."""
    configuration = client.configuration
    return KubeClient(
        access_from_configuration(configuration),
        connections=int(configuration.connection_pool_maxsize or DEFAULT_CONNECTIONS),
        headers=dict(client.default_headers),
    )
