"""A small HTTP server for the kubelet and Prometheus: /healthz, /readyz, /metrics, /debug/eventlog.

Plain HTTP/1.1 over anyio (one request per connection, bounded reads, a deadline for the request head and
one for the answer, a cap on connections in all and per client address): no web framework is needed for
four fixed endpoints.

The server binds every address (probes and metrics come from outside the pod), so a route that shows
more than health decides who may read it: :func:`debug_allowed` is the rule for ``/debug/eventlog``.
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import cast

import anyio
import attrs
from anyio.abc import SocketAttribute, SocketListener, SocketStream, TaskGroup, TaskStatus
from anyio.streams.stapled import MultiListener

log = logging.getLogger("model_catalog.http")


@attrs.frozen
class Request:
    """What a handler may look at: the method, the path, the headers (names in lower case) and the
    address of the peer (empty when unknown)."""

    method: str
    path: str
    headers: Mapping[str, str] = attrs.field(factory=dict, repr=False)  # may carry a token
    peer: str = ""


Handler = Callable[[Request], Awaitable[tuple[int, str, bytes]]]  # status, content type, body
_REASONS = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def is_loopback(peer: str) -> bool:
    """127.0.0.0/8, ::1 and IPv4-mapped loopback; anything unparsable is not."""
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def debug_allowed(request: Request, token: str | None) -> bool:
    """Who may read a debug endpoint: a loopback client (``kubectl exec ... model-catalog get``,
    ``kubectl port-forward``), or — only when ``token`` is set — a request carrying
    ``Authorization: Bearer <token>`` from anywhere (compared in constant time)."""
    if is_loopback(request.peer):
        return True
    if not token:
        return False
    scheme, _, presented = request.headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode(), token.encode())


@attrs.frozen
class HttpLimits:
    """What one client, and all of them together, may hold of the server. The port is open to the pod
    network (probes and metrics come from outside the pod): whoever can reach it must not be able to
    exhaust the process's file descriptors or memory, nor stall the probes."""

    max_connections: int = 64  # at once; more are closed as soon as they are accepted
    max_per_peer: int = 8  # at once from one address: one client cannot take every slot
    head_seconds: float = 5.0  # to send the request line and headers (idle and slow clients)
    send_seconds: float = 30.0  # to take the whole answer (a client that stops reading)
    accept_retry_seconds: float = 0.005  # after a failed accept (out of descriptors): doubling ...
    accept_retry_cap_seconds: float = 1.0  # ... up to this, as Go's net/http does


class ProbeServer:
    """``run`` serves until cancelled. A failed accept (out of file descriptors, a connection reset before
    it was taken) is logged and retried with a capped backoff, a handler that raises answers 500: nothing
    a client does ends the server, so nothing a client does ends the process."""

    def __init__(
        self, host: str, port: int, routes: dict[str, Handler], limits: HttpLimits | None = None
    ) -> None:
        self._host, self._port = host, port
        self._routes = routes
        self.limits = limits or HttpLimits()
        self.port = port
        self._open = 0
        self._by_peer: dict[str, int] = {}
        self.refused = 0  # connections closed at once: over a cap (for tests and logs)
        self.accept_failures = 0

    @property
    def open_connections(self) -> int:
        return self._open

    async def run(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(
            local_host=self._host, local_port=self._port, reuse_port=False
        )
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        log.info("serving probes and metrics", extra={"port": self.port})
        task_status.started(self.port)
        async with listener, anyio.create_task_group() as tg:
            listeners = listener.listeners if isinstance(listener, MultiListener) else [listener]
            for one in listeners:  # one per address family of the host (TCP: socket listeners)
                tg.start_soon(self._accept_loop, cast(SocketListener, one), tg)

    async def _accept_loop(self, listener: SocketListener, tg: TaskGroup) -> None:
        limits = self.limits
        delay = 0.0
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                # EMFILE/ENFILE (out of descriptors), ENOBUFS, ECONNABORTED: the listener is fine; a
                # connection closes soon (the caps and timeouts see to it), so wait a little and go on.
                self.accept_failures += 1
                delay = min(limits.accept_retry_cap_seconds, max(limits.accept_retry_seconds, delay * 2))
                if self.accept_failures == 1 or delay == limits.accept_retry_cap_seconds:
                    reason = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
                    log.warning("http: accept failed (%s); retrying in %.3fs", reason, delay)
                await anyio.sleep(delay)
                continue
            delay = 0.0
            peer = _peer(stream)
            if self._open >= limits.max_connections or self._by_peer.get(peer, 0) >= limits.max_per_peer:
                self.refused += 1
                with anyio.CancelScope(shield=True):
                    await stream.aclose()
                continue
            self._open += 1
            self._by_peer[peer] = self._by_peer.get(peer, 0) + 1
            tg.start_soon(self._serve_one, stream, peer)

    async def _serve_one(self, stream: SocketStream, peer: str) -> None:
        try:
            await self._handle(stream, peer)
        finally:
            self._open -= 1
            left = self._by_peer.get(peer, 1) - 1
            if left:
                self._by_peer[peer] = left
            else:
                self._by_peer.pop(peer, None)

    async def _handle(self, stream: SocketStream, peer: str = "") -> None:
        limits = self.limits
        async with stream:
            try:
                with anyio.fail_after(limits.head_seconds):
                    request = await self._read_head(stream)
                if request is None:
                    return
                request = attrs.evolve(request, peer=peer or _peer(stream))
                status, ctype, body = await self._answer(request)
                head = (
                    f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\nContent-Type: {ctype}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                ).encode()
                with anyio.fail_after(limits.send_seconds):
                    await stream.send(head + (b"" if request.method == "HEAD" else body))
            except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return

    async def _answer(self, request: Request) -> tuple[int, str, bytes]:
        handler = self._routes.get(request.path.split("?", 1)[0])
        if handler is None:
            return 404, "text/plain", b"not found\n"
        if request.method not in ("GET", "HEAD"):
            return 405, "text/plain", b"method not allowed\n"
        try:
            return await handler(request)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # a bug in a handler: this request fails, the server goes on
            log.error("http: %s failed: %s", request.path, type(exc).__name__, exc_info=exc)
            return 500, "text/plain", b"internal error\n"

    @staticmethod
    async def _read_head(stream: SocketStream) -> Request | None:
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 16384:
            data += await stream.receive(4096)
        lines = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        parts = lines[0].split()
        if len(parts) < 2:
            return None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if colon:
                headers[name.strip().lower()] = value.strip()
        return Request(parts[0], parts[1], headers)


def _peer(stream: SocketStream) -> str:
    try:
        address = stream.extra(SocketAttribute.remote_address)
    except anyio.TypedAttributeLookupError:
        return ""
    return str(address[0]) if isinstance(address, tuple) else ""
