"""A thin, typed REST layer over one shared ``KubeClient`` (``adapters/kube/client.py``).

Everything the Kubernetes adapters do goes through ``KubeApi``: plain dicts in and
out (API field names, camelCase), one error type (``KubeError``) for every HTTP
status and transport failure, a client-side timeout on every request, and watch
streams read line by line. One table-driven code path serves core resources and
custom resources alike, and no object is ever converted to a model class and back.
"""

from __future__ import annotations

import email.utils
import math
import socket
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import anyio
import attrs
import httpx
import orjson

from adapters.identity import FIELD_MANAGER
from adapters.kube.client import CredentialsError, KubeClient, kube_client_of
from contracts.kinds import Resource

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
_WRITES = frozenset({"POST", "PUT", "PATCH"})  # each names us as its field manager (managedFields)
_MESSAGE_LIMIT = 300
# Memory bounds on what an API server (or a proxy in front of it) may send. An answer (a list page of
# ``list_page_size`` objects, each at most etcd's 1.5 MiB) beyond ANSWER_LIMIT fails as ResponseTooLarge
# and is retried with backoff; one watch event is one object, so a longer line is no event.
ANSWER_LIMIT = 128 * 1024 * 1024
WATCH_LINE_LIMIT = 16 * 1024 * 1024
ERROR_BODY_LIMIT = 64 * 1024  # of an error's answer: enough for its Status (its message is cut anyway)


TRANSPORT_FAILURE_STATUS = 0  # ``KubeError.status`` of a request that got no HTTP answer
# The statuses an API server that is down or restarting answers with (none, then 503 while its resources
# come back), and 429 from an overloaded one (API Priority and Fairness): every source and writer declares
# its error series for them at 0 from the start, so an outage adds no series (and ``increase()`` sees its
# first error).
OUTAGE_STATUSES = (TRANSPORT_FAILURE_STATUS, 429, 503)
# The longest wait a Retry-After header can ask of us: a proxy's "come back in a day" must not park a
# source or a write for a day (its retries still back off, with jitter, from their own schedule).
RETRY_AFTER_LIMIT = 60.0


class KubeError(Exception):
    """An API error: ``status`` is the HTTP status, 0 for a transport failure or a timeout.

    ``reason`` is the Status reason (``NotFound``, ``Conflict``, ...) or the exception class;
    ``message`` is the Status message, truncated. Never the request or response body.
    """

    def __init__(self, status: int, reason: str, message: str = "", *, retry_after: float = 0.0) -> None:
        """``retry_after``: seconds the server asked us to wait (its Retry-After), 0 when it said none."""
        super().__init__(status, reason, message)
        self.status = status
        self.reason = reason
        self.message = message[:_MESSAGE_LIMIT]
        self.retry_after = retry_after

    def __str__(self) -> str:
        head = f"HTTP {self.status} {self.reason}" if self.status else self.reason
        return f"{head}: {self.message}" if self.message else head

    @property
    def transient(self) -> bool:
        """Worth retrying as it is: transport errors, timeouts, 429 and 5xx."""
        return self.status in {0, 429} or self.status >= 500

    @classmethod
    def from_body(cls, status: int, body: bytes, retry_after: float = 0.0) -> KubeError:
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            # one line of it (a proxy's HTML page must not make a log record of many lines)
            text = " ".join(body[: _MESSAGE_LIMIT * 4].decode("utf-8", "replace").split())
            return cls(status, _status_reason(status), text, retry_after=retry_after)
        if isinstance(doc, dict):
            reason = str(doc.get("reason") or _status_reason(status))
            return cls(status, reason, str(doc.get("message") or ""), retry_after=retry_after)
        return cls(status, _status_reason(status), retry_after=retry_after)

    @classmethod
    def from_response(cls, response: httpx.Response, body: bytes) -> KubeError:
        """From an answer that is not a success; its Retry-After heeded only where a retry is due."""
        status = response.status_code
        wait = retry_after(response.headers.get("Retry-After")) if status == 429 or status >= 500 else 0.0
        return cls.from_body(status, body, wait)

    @classmethod
    def from_status(cls, status: Mapping[str, Any]) -> KubeError:
        """From a ``Status`` object (a watch ERROR event)."""
        code = status.get("code")
        return cls(
            code if isinstance(code, int) else 500,
            str(status.get("reason") or "Error"),
            str(status.get("message") or ""),
        )


def retry_after(value: str | None, now: float | None = None) -> float:
    """The seconds a Retry-After header asks for (delay-seconds or an HTTP-date, ``now`` being the wall
    clock's seconds), at most RETRY_AFTER_LIMIT; 0 for none, a past date or anything else (a negative or
    malformed value is no request to wait)."""
    if not value:
        return 0.0
    value = value.strip()
    if value.isascii() and value.isdigit():  # str.isdigit also holds for "²", which float() refuses
        return min(float(value), RETRY_AFTER_LIMIT)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0.0
    if when.tzinfo is None:  # an HTTP-date is GMT; a date without a zone is no HTTP-date
        return 0.0
    seconds = when.timestamp() - (time.time() if now is None else now)
    return min(max(0.0, seconds), RETRY_AFTER_LIMIT)


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

    def apply(self, response: httpx.Response) -> bool:
        """On the connection of ``response``; False when it has no socket (then nothing is set)."""
        stream = response.extensions.get("network_stream")
        # a socket.socket, or asyncio's TransportSocket wrapping one
        sock = stream.get_extra_info("socket") if stream is not None else None
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
    """Plain-dict requests on a shared ``KubeClient``, or on a host's kubernetes-asyncio ``ApiClient``
    (``kube_client_of``: the ``KubeClient`` made from it is ours, closed by ``aclose``); a ``KubeClient``
    passed in is closed by whoever made it."""

    def __init__(
        self, api_client: Any, *, request_timeout: float = 30.0, connect_timeout: float = 10.0
    ) -> None:
        self.api_client = api_client
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self._made: KubeClient | None = None  # from a host's ApiClient: ours to close

    def _client(self) -> KubeClient:
        if isinstance(self.api_client, KubeClient):
            return self.api_client
        if self._made is None or self._made.closed:
            self._made = kube_client_of(self.api_client)
        return self._made

    async def aclose(self) -> None:
        """Close the ``KubeClient`` made from a host's ``ApiClient``, if any: never the host's client, nor
        a ``KubeClient`` that was passed in (its maker closes it)."""
        made, self._made = self._made, None
        if made is not None:
            await made.aclose()

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
        params = list(query)
        if not any(name in ("timeout", "timeoutSeconds") for name, _ in params):
            params.append(("timeout", f"{max(1, int(total) - 1)}s"))
        if method in _WRITES and not any(name == "fieldManager" for name, _ in params):
            params.append(("fieldManager", FIELD_MANAGER))
        status, data = 0, b""
        with anyio.move_on_after(total) as scope:  # the whole exchange, as the server's deadline is
            response = await self._send(
                method, path, query=params, body=body, content_type=content_type, total=total
            )
            try:
                status = response.status_code
                ok = 200 <= status < 300
                data = await _read(response, ANSWER_LIMIT if ok else ERROR_BODY_LIMIT, strict=ok)
            finally:
                await response.aclose()
        if scope.cancelled_caught:
            raise KubeError(0, "TimeoutError", f"no complete answer within {total:g} s")
        if not 200 <= status < 300:
            raise KubeError.from_response(response, data)
        try:
            doc = orjson.loads(data) if data else {}
        except orjson.JSONDecodeError as exc:
            raise KubeError(status, "InvalidResponse", "the answer is not JSON") from exc
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
        deadline = anyio.current_time() + total
        wait = min(total, math.inf if response_timeout is None else response_timeout)
        response: httpx.Response | None = None
        with anyio.move_on_after(wait):
            response = await self._send("GET", path, query=params, total=total)
        if response is None:
            raise KubeError(
                TRANSPORT_FAILURE_STATUS, "TimeoutError", f"no answer to the watch request within {wait:g} s"
            )
        try:
            if response.status_code != 200:
                with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
                    raise KubeError.from_response(
                        response, await _read(response, ERROR_BODY_LIMIT, strict=False)
                    )
                raise KubeError(0, "TimeoutError", f"the watch's answer was not read within {total:g} s")
            if keepalive is not None:
                keepalive.apply(response)
            yield _events(response, deadline)
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        total: float,
        body: Any = None,
        content_type: str = JSON,
    ) -> httpx.Response:
        try:
            return await self._client().send(
                method,
                path,
                query=query,
                headers={"Accept": JSON, "Content-Type": content_type, "Connection": "close"},
                content=None if body is None else orjson.dumps(body),
                timeout=httpx.Timeout(total, connect=min(total, self.connect_timeout)),
            )
        except CredentialsError as exc:
            raise KubeError(0, "CredentialsError", str(exc)) from None
        except httpx.LocalProtocolError:
            # h11 quotes the header it refused, and a header may hold a credential
            raise KubeError(0, "LocalProtocolError", "a request header is not valid HTTP") from None
        except (httpx.HTTPError, httpx.InvalidURL, ssl.SSLError, TimeoutError, OSError) as exc:
            raise KubeError(0, type(exc).__name__, str(exc)) from exc


async def _events(response: httpx.Response, deadline: float) -> AsyncGenerator[dict[str, Any], None]:
    """The watch events of ``response``, one JSON document a line, until it ends; ``KubeError``
    (TimeoutError) once ``deadline`` (anyio's clock) has passed, as the server should have ended it."""
    chunks = response.aiter_raw()
    pending = b""
    while True:
        chunk: bytes | None = None
        with anyio.move_on_after(deadline - anyio.current_time()) as scope:
            try:
                chunk = await anext(chunks, None)
            except (httpx.HTTPError, ssl.SSLError, TimeoutError, OSError) as exc:
                raise KubeError(0, type(exc).__name__, str(exc)) from exc
        if scope.cancelled_caught:
            raise KubeError(0, "TimeoutError", "the watch outlived its timeout")
        *lines, pending = (pending + chunk).split(b"\n") if chunk is not None else (pending, b"")
        if len(pending) > WATCH_LINE_LIMIT:
            raise KubeError(0, "InvalidWatchEvent", f"a watch line is longer than {WATCH_LINE_LIMIT} bytes")
        for line in lines:
            if not line.strip():
                continue
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise KubeError(0, "InvalidWatchEvent", "a watch line is not JSON") from exc
            if not isinstance(event, dict):
                raise KubeError(0, "InvalidWatchEvent", "a watch line is not a JSON object")
            yield event
        if chunk is None:
            return


async def _read(response: httpx.Response, limit: int, *, strict: bool) -> bytes:
    """The (decoded) body of ``response``, at most ``limit`` bytes: beyond them ``strict`` fails as
    ResponseTooLarge, else the rest is left unread (an error's answer: only its start is kept)."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                if strict:
                    raise KubeError(0, "ResponseTooLarge", f"the answer is longer than {limit} bytes")
                chunks.append(chunk[: limit - size + len(chunk)])
                break
            chunks.append(chunk)
    except (httpx.HTTPError, ssl.SSLError, TimeoutError, OSError) as exc:
        raise KubeError(0, type(exc).__name__, str(exc)) from exc
    return b"".join(chunks)
