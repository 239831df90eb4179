"""A small HTTP server for the kubelet and Prometheus: /healthz, /readyz, /metrics, /debug/eventlog.

Plain HTTP/1.1 over anyio (one request per connection, bounded reads, a read
timeout): no web framework is needed for four fixed endpoints.

The server binds every address (probes and metrics come from outside the pod), so a route that shows
more than health decides who may read it: :func:`debug_allowed` is the rule for ``/debug/eventlog``.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Mapping

import anyio
import attrs
from anyio.abc import SocketAttribute, SocketStream, TaskStatus

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


class ProbeServer:
    def __init__(self, host: str, port: int, routes: dict[str, Handler]) -> None:
        self._host, self._port = host, port
        self._routes = routes
        self.port = port

    async def run(self, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(
            local_host=self._host, local_port=self._port, reuse_port=False
        )
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)
        log.info("serving probes and metrics", extra={"port": self.port})
        task_status.started(self.port)
        async with listener:
            await listener.serve(self._handle)

    async def _handle(self, stream: SocketStream) -> None:
        async with stream:
            try:
                with anyio.fail_after(5):
                    request = await self._read_head(stream)
                if request is None:
                    return
                request = attrs.evolve(request, peer=_peer(stream))
                method = request.method
                handler = self._routes.get(request.path.split("?", 1)[0])
                if handler is None:
                    status, ctype, body = 404, "text/plain", b"not found\n"
                elif method not in ("GET", "HEAD"):
                    status, ctype, body = 405, "text/plain", b"method not allowed\n"
                else:
                    status, ctype, body = await handler(request)
                head = (
                    f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\nContent-Type: {ctype}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                ).encode()
                await stream.send(head + (b"" if method == "HEAD" else body))
            except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return

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
