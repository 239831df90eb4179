"""Who may read /debug/eventlog.

Regression (issue 12): the HTTP server binds 0.0.0.0:8080 for probes and metrics, and the endpoint
served the event-log ring to anyone who could reach the pod. Now: loopback clients (``kubectl exec``,
``port-forward``), or a bearer token (``CATALOG_DEBUG_TOKEN``) from anywhere.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from app.http import Request, debug_allowed, is_loopback
from app.service import Service
from app.settings import ServiceSettings, load
from catalog_core.config import ConfigError

TOKEN = "debug-token-0123456789abcdef"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def request(peer: str, authorization: str | None = None) -> Request:
    headers = {} if authorization is None else {"authorization": authorization}
    return Request("GET", "/debug/eventlog", headers, peer)


@pytest.mark.parametrize("peer", ["127.0.0.1", "127.0.0.53", "::1", "::ffff:127.0.0.1"])
def test_loopback_clients_need_no_token(peer: str) -> None:
    assert is_loopback(peer)
    assert debug_allowed(request(peer), None) and debug_allowed(request(peer), TOKEN)


@pytest.mark.parametrize("peer", ["10.42.0.7", "192.0.2.2", "fd00::2", "::ffff:10.0.0.1", "", "localhost"])
def test_other_clients_are_refused_when_no_token_is_set(peer: str) -> None:
    assert not is_loopback(peer)
    assert not debug_allowed(request(peer), None)
    assert not debug_allowed(request(peer, f"Bearer {TOKEN}"), None)  # no token set: none is accepted
    assert not debug_allowed(request(peer, "Bearer "), "")


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer ", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN],
)
def test_a_missing_or_wrong_token_is_refused(authorization: str | None) -> None:
    assert not debug_allowed(request("10.42.0.7", authorization), TOKEN)


@pytest.mark.parametrize("authorization", [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"  Bearer  {TOKEN} "])
def test_the_right_token_is_accepted_from_anywhere(authorization: str) -> None:
    assert debug_allowed(request("10.42.0.7", authorization), TOKEN)


def test_the_token_is_a_secret_setting_of_some_length() -> None:
    settings = load({"LITELLM_MASTER_KEY": "sk-x", "CATALOG_DEBUG_TOKEN": TOKEN})
    assert isinstance(settings, ServiceSettings) and settings.debug_token is not None
    assert settings.debug_token.value == TOKEN and TOKEN not in repr(settings)
    unset = load({"LITELLM_MASTER_KEY": "sk-x"})
    assert isinstance(unset, ServiceSettings) and unset.debug_token is None
    short = load({"LITELLM_MASTER_KEY": "sk-x", "CATALOG_DEBUG_TOKEN": "short-one"})
    assert isinstance(short, ConfigError) and short.variable == "CATALOG_DEBUG_TOKEN"
    assert "short-one" not in str(short)


# --- over a real socket


def _non_loopback_address() -> str | None:
    """An address of this host that is not loopback (None when it has none)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("198.51.100.1", 9))  # no packet is sent: this only picks a route's source
        address = str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()
    return None if is_loopback(address) or address == "0.0.0.0" else address


@asynccontextmanager
async def serving(tmp_path: Path, host: str, **env: str) -> AsyncIterator[int]:
    settings = load(
        {
            "LITELLM_MASTER_KEY": "sk-x",
            "CATALOG_HTTP_HOST": host,
            "CATALOG_HTTP_PORT": "0",
            "CATALOG_EVENT_LOG_PATH": str(tmp_path / "events.jsonl"),
            **env,
        }
    )
    assert isinstance(settings, ServiceSettings)
    service = Service(settings, api_client=object())
    try:
        async with anyio.create_task_group() as tg:
            port = await tg.start(service.http.run)
            yield port
            tg.cancel_scope.cancel()
    finally:
        service.telemetry.shutdown()


async def get(host: str, port: int, headers: str = "") -> tuple[int, bytes]:
    async with await anyio.connect_tcp(host, port) as stream:
        await stream.send(f"GET /debug/eventlog HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode())
        data = b""
        with anyio.fail_after(5):
            try:
                while True:
                    data += await stream.receive()
            except anyio.EndOfStream:
                pass
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.mark.anyio
async def test_a_loopback_client_reads_the_ring_without_a_token(tmp_path: Path) -> None:
    async with serving(tmp_path, "127.0.0.1") as port:
        status, body = await get("127.0.0.1", port)
    assert status == 200 and b'"k":"header"' in body.split(b"\n", 1)[0]


@pytest.mark.anyio
async def test_a_client_from_another_address_needs_the_token(tmp_path: Path) -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this host has no non-loopback address to connect from")
    async with serving(tmp_path, address) as port:
        refused, body = await get(address, port)
    assert refused == 403 and b"header" not in body
    async with serving(tmp_path, address, CATALOG_DEBUG_TOKEN=TOKEN) as port:
        wrong, _ = await get(address, port, "Authorization: Bearer not-the-token-at-all\r\n")
        right, body = await get(address, port, f"Authorization: Bearer {TOKEN}\r\n")
    assert wrong == 403
    assert right == 200 and b'"k":"header"' in body.split(b"\n", 1)[0]
