"""A thin, typed REST layer over one shared kubernetes-asyncio ``ApiClient``.

Everything the Kubernetes adapters do goes through ``KubeApi``: plain dicts in and
out (API field names, camelCase), one error type (``KubeError``) for every HTTP
status and transport failure, a client-side timeout on every request, and watch
streams read line by line. We call ``ApiClient.call_api`` with
``_preload_content=False`` instead of the generated typed methods, so one
table-driven code path serves core resources and custom resources alike, and no
object is ever converted to a model class and back.
"""

from __future__ import annotations

import math
import socket
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import aiohttp
import anyio
import attrs
import orjson

from adapters.identity import FIELD_MANAGER
from contracts.kinds import Resource

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
_WRITES = frozenset({"POST", "PUT", "PATCH"})  # each names us as its field manager (managedFields)
_MESSAGE_LIMIT = 300


class KubeError(Exception):
    """An API error: ``status`` is the HTTP status, 0 for a transport failure or a timeout.

    ``reason`` is the Status reason (``NotFound``, ``Conflict``, ...) or the exception class;
    ``message`` is the Status message, truncated. Never the request or response body.
    """

    def __init__(self, status: int, reason: str, message: str = "") -> None:
        super().__init__(status, reason, message)
        self.status = status
        self.reason = reason
        self.message = message[:_MESSAGE_LIMIT]

    def __str__(self) -> str:
        head = f"HTTP {self.status} {self.reason}" if self.status else self.reason
        return f"{head}: {self.message}" if self.message else head

    @property
    def transient(self) -> bool:
        """Worth retrying as it is: transport errors, timeouts, 429 and 5xx."""
        return self.status in {0, 429} or self.status >= 500

    @classmethod
    def from_body(cls, status: int, body: bytes) -> KubeError:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            text = body.decode("utf-8", "replace").strip()
            return cls(status, _status_reason(status), text)
        if isinstance(doc, dict):
            return cls(
                status, str(doc.get("reason") or _status_reason(status)), str(doc.get("message") or "")
            )
        return cls(status, _status_reason(status))

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> KubeError:
        """From a ``Status`` object (a watch ERROR event)."""
        code = status.get("code")
        return cls(
            code if isinstance(code, int) else 500,
            str(status.get("reason") or "Error"),
            str(status.get("message") or ""),
        )


def _status_reason(status: int) -> str:
    return {
        400: "BadRequest",
        401: "Unauthorized",
        403: "Forbidden",
        404: "NotFound",
        405: "MethodNotAllowed",
        409: "Conflict",
        410: "Gone",
        422: "Invalid",
        429: "TooManyRequests",
        500: "InternalError",
        503: "ServiceUnavailable",
        504: "Timeout",
    }.get(status, f"HTTP{status}")


def collection_path(resource: Resource, namespace: str) -> str:
    prefix = f"/apis/{resource.group}/{resource.version}" if resource.group else f"/api/{resource.version}"
    return f"{prefix}/namespaces/{quote(namespace, safe='')}/{resource.plural}"


def object_path(resource: Resource, namespace: str, name: str, subresource: str = "") -> str:
    path = f"{collection_path(resource, namespace)}/{quote(name, safe='')}"
    return f"{path}/{subresource}" if subresource else path


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def resource_label(resource: Resource) -> str:
    """``modelactivations.appliance.magicstick.dev`` or ``configmaps`` (how RBAC names a resource)."""
    return f"{resource.plural}.{resource.group}" if resource.group else resource.plural


@attrs.frozen
class Keepalive:
    """TCP keepalive for one long-lived connection: probes after ``idle`` seconds without a byte, every
    ``interval`` seconds, ``probes`` of them unanswered end it; unacknowledged data is bounded by the
    same time (TCP_USER_TIMEOUT). Options the platform lacks are skipped (SO_KEEPALIVE alone still ends
    a dead connection, on the system's own schedule)."""

    idle: int
    interval: int
    probes: int

    @property
    def dead_after(self) -> int:
        """Seconds from the last byte to the end of a connection whose peer vanished."""
        return self.idle + self.interval * self.probes

    def apply(self, response: aiohttp.ClientResponse) -> bool:
        """On the connection of ``response``; False when it has no socket (then nothing is set)."""
        connection = response.connection
        transport = connection.transport if connection is not None else None
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is None:
            return False
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            for option, value in (
                ("TCP_KEEPIDLE", self.idle),
                ("TCP_KEEPINTVL", self.interval),
                ("TCP_KEEPCNT", self.probes),
                ("TCP_USER_TIMEOUT", self.dead_after * 1000),
            ):
                if hasattr(socket, option):
                    sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
        except OSError:  # not a TCP socket (a proxy's, a test's): the watch timeout still bounds it
            return False
        return True


class KubeApi:
    """Plain-dict requests on a shared ``ApiClient`` (the host owns and closes it)."""

    def __init__(
        self, api_client: Any, *, request_timeout: float = 30.0, connect_timeout: float = 10.0
    ) -> None:
        self.api_client = api_client
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """One request; the decoded JSON answer. Raises ``KubeError`` for anything but 2xx. A write
        (POST, PUT, PATCH) carries our ``fieldManager`` unless ``query`` names one.

        The server gets a deadline (``timeout``) a second shorter than the client's own, so a slow
        request normally ends with the server's answer rather than a cut connection.
        """
        total = timeout if timeout is not None else self.request_timeout
        client_timeout = aiohttp.ClientTimeout(total=total, sock_connect=min(total, self.connect_timeout))
        params = list(query)
        if not any(name in ("timeout", "timeoutSeconds") for name, _ in params):
            params.append(("timeout", f"{max(1, int(total) - 1)}s"))
        if method in _WRITES and not any(name == "fieldManager" for name, _ in params):
            params.append(("fieldManager", FIELD_MANAGER))
        response = await self._send(
            method, path, query=params, body=body, content_type=content_type, timeout=client_timeout
        )
        try:
            data = await _read(response)
        finally:
            response.release()
        if not 200 <= response.status < 300:
            raise KubeError.from_body(response.status, data)
        try:
            doc = orjson.loads(data) if data else {}
        except orjson.JSONDecodeError as exc:
            raise KubeError(response.status, "InvalidResponse", "the answer is not JSON") from exc
        return doc if isinstance(doc, dict) else {}

    @asynccontextmanager
    async def watch(
        self,
        path: str,
        query: Sequence[tuple[str, str]],
        server_timeout: int,
        grace: float,
        *,
        response_timeout: float | None = None,
        keepalive: Keepalive | None = None,
    ) -> AsyncIterator[AsyncGenerator[dict[str, Any], None]]:
        """Open one watch request (``watch=true`` and ``timeoutSeconds`` are added here).

        Entering raises ``KubeError`` unless the server answered 200, within ``response_timeout``
        seconds when given; the yielded iterator gives the decoded events and ends when the server
        closes the stream. The client gives up ``grace`` seconds after the server should have closed
        it, so a half-open connection cannot hang the watch for longer than its timeout; ``keepalive``
        ends one whose peer vanished sooner.
        """
        params = [*query, ("watch", "true"), ("timeoutSeconds", str(server_timeout))]
        total = server_timeout + grace
        client_timeout = aiohttp.ClientTimeout(total=total, sock_connect=min(total, self.connect_timeout))
        wait = math.inf if response_timeout is None else response_timeout
        response: aiohttp.ClientResponse | None = None
        with anyio.move_on_after(wait):
            response = await self._send("GET", path, query=params, timeout=client_timeout)
        if response is None:
            raise KubeError(0, "TimeoutError", f"no answer to the watch request within {wait:g} s")
        try:
            if response.status != 200:
                raise KubeError.from_body(response.status, await _read(response))
            if keepalive is not None:
                keepalive.apply(response)
            yield _events(response)
        finally:
            response.close()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        timeout: aiohttp.ClientTimeout,
        body: Any = None,
        content_type: str = JSON,
    ) -> aiohttp.ClientResponse:
        try:
            response: aiohttp.ClientResponse = await self.api_client.call_api(
                path,
                method,
                query_params=list(query),
                # One connection per request, closed after it: an idle pooled connection could be silently
                # dead (half-open) and hold the next request until its timeout. Watches, the bulk of the
                # requests, close theirs anyway.
                header_params={"Accept": JSON, "Content-Type": content_type, "Connection": "close"},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise KubeError(0, type(exc).__name__, str(exc)) from exc
        return response


async def _events(response: aiohttp.ClientResponse) -> AsyncGenerator[dict[str, Any], None]:
    while True:
        try:
            line = await response.content.readline()
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            raise KubeError(0, type(exc).__name__, str(exc)) from exc
        if not line:
            return
        if not line.strip():
            continue
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise KubeError(0, "InvalidWatchEvent", "a watch line is not JSON") from exc
        if isinstance(event, dict):
            yield event


async def _read(response: aiohttp.ClientResponse) -> bytes:
    try:
        return await response.read()
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        raise KubeError(0, type(exc).__name__, str(exc)) from exc
