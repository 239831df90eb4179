"""A small HTTP server for the kubelet and Prometheus: /healthz, /readyz, /metrics, /debug/eventlog.

Plain HTTP/1.1 over anyio (one request per connection, bounded reads, a read
timeout): no web framework is needed for four fixed endpoints.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import SocketStream, TaskStatus

log = logging.getLogger("model_catalog.http")

Handler = Callable[[], Awaitable[tuple[int, str, bytes]]]  # status, content type, body
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


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
                method, path = request
                handler = self._routes.get(path.split("?", 1)[0])
                if handler is None:
                    status, ctype, body = 404, "text/plain", b"not found\n"
                elif method not in ("GET", "HEAD"):
                    status, ctype, body = 405, "text/plain", b"method not allowed\n"
                else:
                    status, ctype, body = await handler()
                head = (
                    f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\nContent-Type: {ctype}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                ).encode()
                await stream.send(head + (b"" if method == "HEAD" else body))
            except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return

    @staticmethod
    async def _read_head(stream: SocketStream) -> tuple[str, str] | None:
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 16384:
            data += await stream.receive(4096)
        parts = data.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) < 2:
            return None
        return parts[0], parts[1]
