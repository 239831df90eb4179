"""Port 8080 against whoever can reach it from a pod (issue 32, item 10).

Before, the server took every connection: 1,100 idle ones under the default 1,024 descriptor limit made
``accept()`` fail, the error ended the server's task group, and ``model-catalog run`` exited; each idle
connection held ~9 KB for as long as the client liked. Now connections are capped (in all and per
client address), idle and slow clients time out, a failed accept is retried, and a handler that raises
answers 500. The same on a controller process on the real peers: ``tests/e2e/test_metrics_at_start.py``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal

from app.http import HttpLimits, ProbeServer, Request

REPO = Path(__file__).resolve().parents[2]


def wait_until(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def get(port: int, path: str = "/healthz", source: str = "127.0.0.1", timeout: float = 10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0)) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
        return data


def closed_by_server(sock: socket.socket) -> bool:
    """True once the server closed ``sock`` (end of stream or reset)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        sock.setblocking(True)


def idle(port: int, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))


async def ok(request: Request) -> tuple[int, str, bytes]:
    return 200, "text/plain", b"ok\n"


async def huge(request: Request) -> tuple[int, str, bytes]:
    return 200, "application/octet-stream", b"x" * (64 << 20)


async def broken(request: Request) -> tuple[int, str, bytes]:
    raise KeyError("a bug in a handler")


@pytest.fixture
def serve() -> Iterator[Callable[[HttpLimits], tuple[ProbeServer, int]]]:
    with start_blocking_portal() as portal:
        started: list[Any] = []

        def start(limits: HttpLimits) -> tuple[ProbeServer, int]:
            server = ProbeServer(
                "127.0.0.1", 0, {"/healthz": ok, "/huge": huge, "/broken": broken}, limits=limits
            )
            future, port = portal.start_task(server.run)
            started.append(future)
            return server, port

        try:
            yield start
        finally:
            for future in started:
                future.cancel()


def test_one_address_holds_at_most_its_share_and_others_are_still_served(serve: Any) -> None:
    server, port = serve(HttpLimits(max_connections=64, max_per_peer=4, head_seconds=60))
    held = [idle(port) for _ in range(10)]
    try:
        wait_until(lambda: server.refused >= 6, what="the connections over the cap closed")
        assert server.open_connections == 4
        assert sum(closed_by_server(s) for s in held) == 6
        assert get(port, source="127.0.0.2").endswith(b"ok\n")  # another client is served at once
    finally:
        for sock in held:
            sock.close()


def test_the_total_is_capped_and_frees_up_as_clients_time_out(serve: Any) -> None:
    server, port = serve(HttpLimits(max_connections=6, max_per_peer=3, head_seconds=0.5))
    held = [idle(port, f"127.0.0.{n}") for n in (3, 4) for _ in range(3)]
    try:
        wait_until(lambda: server.open_connections == 6, what="six held")
        late = idle(port, "127.0.0.5")
        wait_until(lambda: closed_by_server(late), what="a seventh closed while full")
        late.close()
        wait_until(lambda: all(closed_by_server(s) for s in held), what="idle clients timed out")
        wait_until(lambda: server.open_connections == 0, what="every slot free")
        assert get(port, source="127.0.0.5").endswith(b"ok\n")
    finally:
        for sock in held:
            sock.close()


def test_a_slow_client_is_cut_off_after_the_head_deadline(serve: Any) -> None:
    server, port = serve(HttpLimits(head_seconds=0.5))
    sock = idle(port)
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        cut = False
        deadline = time.monotonic() + 30
        while not cut and time.monotonic() < deadline:  # one header byte at a time, never done
            try:
                sock.sendall(b"X")
            except (BrokenPipeError, ConnectionResetError):
                cut = True
            cut = cut or closed_by_server(sock)
            time.sleep(0.05)
        assert cut
        wait_until(lambda: server.open_connections == 0, what="its slot freed")
    finally:
        sock.close()


def test_a_client_that_stops_reading_is_dropped_after_the_send_deadline(serve: Any) -> None:
    server, port = serve(HttpLimits(send_seconds=0.5))
    sock = idle(port)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"GET /huge HTTP/1.1\r\nHost: x\r\n\r\n")
        wait_until(lambda: server.open_connections == 0, what="the stuck answer given up")
    finally:
        sock.close()
    assert get(port).endswith(b"ok\n")


def test_a_handler_that_raises_answers_500_and_the_server_goes_on(serve: Any) -> None:
    _, port = serve(HttpLimits())
    assert get(port, "/broken").startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert get(port).endswith(b"ok\n")


_SERVER = textwrap.dedent(
    """
    import resource, sys
    import anyio
    from app.http import ProbeServer

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), hard))

    async def ok(request):
        return 200, "text/plain", b"ok\\n"

    async def main():
        async with anyio.create_task_group() as tg:
            port = await tg.start(ProbeServer("127.0.0.1", 0, {"/healthz": ok}).run)
            print(port, flush=True)

    anyio.run(main)
    """
)


def test_1100_idle_connections_under_the_default_descriptor_limit_do_not_end_the_server() -> None:
    """The server of ``model-catalog run`` in a process of its own under a soft limit of 1,024 files."""
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVER, "1024"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    held: list[socket.socket] = []
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        for _ in range(1100):
            try:
                held.append(idle(port))
            except OSError:
                break  # the kernel's backlog is full: enough
        time.sleep(1.0)  # let the server take what it takes
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert get(port, source="127.0.0.2").endswith(b"ok\n")
        for sock in held:
            sock.close()
        held.clear()
        wait_until(lambda: get(port).endswith(b"ok\n"), what="served again")
        assert process.poll() is None
    finally:
        for sock in held:
            sock.close()
        process.kill()
        process.wait(timeout=30)
