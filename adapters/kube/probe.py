"""FreeToken health prober: ``ProbeRuntime`` -> ``GET <url>`` -> ``RuntimeProbed`` (behaviour §4).

It requests exactly the URL of the command (the core only asks for in-cluster
Service URLs it trusts), with a 3 s timeout, no redirects, no proxy from the
environment, and a bounded number of probes at a time. 2xx is healthy; the
detail is short: the status code or the error class.

``resolve`` works like ``curl --resolve``: ``{"host:port": "addr:port"}`` sends
the request for ``host:port`` to ``addr:port`` (keeping the Host header), so a
controller running outside the cluster, or a test, can reach a
``*.svc.cluster.local`` runtime through a local address.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import anyio
import httpx

from adapters.identity import USER_AGENT
from adapters.tls import client_tls_context
from catalog_core.commands import Command, ProbeRuntime
from catalog_core.events import Event, RuntimeProbed

log = logging.getLogger("model_catalog.probe")

RESOLVE_ENV = "CATALOG_PROBE_RESOLVE"
TIMEOUT_SECONDS = 3.0


def parse_resolve(text: str) -> dict[str, str]:
    """``host:port=addr:port[,host:port=addr:port...]`` -> mapping. Raises ValueError on a bad entry."""
    out: dict[str, str] = {}
    for raw_entry in text.split(","):
        entry = raw_entry.strip()
        if not entry:
            continue
        source, sep, target = entry.partition("=")
        for part in (source, target):
            host, colon, port = part.strip().rpartition(":")
            if not sep or not colon or not host or not port.isdigit():
                raise ValueError(f"{RESOLVE_ENV}: {entry!r} is not host:port=addr:port")
        out[source.strip().lower()] = target.strip()
    return out


class RuntimeProber:
    """Executor of ``ProbeRuntime``. Answers with ``RuntimeProbed`` only (no CommandCompleted)."""

    def __init__(
        self,
        *,
        resolve: Mapping[str, str] | None = None,
        timeout: float = TIMEOUT_SECONDS,
        concurrency: int = 8,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.resolve = {k.lower(): v for k, v in (resolve or {}).items()}
        self.timeout = timeout
        self._limit = concurrency
        self._semaphore: anyio.Semaphore | None = None
        self._client = client

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, concurrency: int = 8) -> RuntimeProber:
        """With the ``CATALOG_PROBE_RESOLVE`` override, if set (ValueError when malformed)."""
        return cls(resolve=parse_resolve(env.get(RESOLVE_ENV, "")), concurrency=concurrency)

    def handles(self, command: Command) -> bool:
        return isinstance(command, ProbeRuntime)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def execute(self, command: Command) -> Sequence[Event]:
        assert isinstance(command, ProbeRuntime)
        if self._semaphore is None:
            self._semaphore = anyio.Semaphore(self._limit)
        async with self._semaphore:
            healthy, detail = await self._probe(command.url)
        return [RuntimeProbed(command.runtime, command.url, healthy, detail)]

    def _client_for_use(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout),
                follow_redirects=False,
                trust_env=False,
                verify=client_tls_context(trust_env=False),  # httpx's roots, read only if TLS is ever used
                headers={"user-agent": USER_AGENT},
            )
        return self._client

    def _target(self, url: httpx.URL) -> tuple[httpx.URL, dict[str, str]]:
        port = url.port or (443 if url.scheme == "https" else 80)
        override = self.resolve.get(f"{url.host}:{port}")
        if override is None:
            return url, {}
        addr, _, new_port = override.rpartition(":")
        host_header = url.netloc.decode("ascii")
        return url.copy_with(host=addr.strip("[]"), port=int(new_port)), {"Host": host_header}

    async def _probe(self, url_text: str) -> tuple[bool, str]:
        try:
            url = httpx.URL(url_text)
            target, headers = self._target(url)
            extensions = {"sni_hostname": url.host} if headers and url.scheme == "https" else {}
            with anyio.fail_after(self.timeout + 1.0):  # a hard stop beyond httpx's own timeouts
                async with self._client_for_use().stream(
                    "GET", target, headers=headers, extensions=extensions
                ) as response:
                    status = response.status_code
        except (httpx.HTTPError, TimeoutError, OSError, ValueError) as exc:
            return False, type(exc).__name__
        healthy = 200 <= status < 300
        return healthy, f"HTTP {status}"
