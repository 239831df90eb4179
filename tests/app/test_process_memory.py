"""app.process_memory: the TLS read buffer of asyncio's connections follows the size asked for (checked on
a real TLS connection to the API server peer, so a Python whose asyncio no longer has the setting fails
here), and only generated source leaves linecache."""

from __future__ import annotations

import asyncio
import linecache
import ssl
from asyncio import sslproto
from pathlib import Path

import attrs
import pytest

from app.process_memory import TLS_READ_BUFFER_BYTES, forget_generated_source, limit_tls_read_buffer
from tests.adapters.test_tls import _peer_ca
from tests.fixtures.kube_peer import KubePeer

pytestmark = pytest.mark.anyio


@pytest.mark.kube
async def test_a_tls_connection_opened_after_the_limit_reads_into_a_buffer_of_that_size(
    kube_peer: KubePeer, tmp_path: Path
) -> None:
    host, port = kube_peer.server.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(_peer_ca(kube_peer, tmp_path)))
    before = limit_tls_read_buffer(TLS_READ_BUFFER_BYTES)
    try:
        _, writer = await asyncio.open_connection(host.strip("[]"), int(port), ssl=context)
        try:
            protocol = writer.transport._ssl_protocol  # type: ignore[attr-defined]
            assert len(protocol._ssl_buffer) == TLS_READ_BUFFER_BYTES
        finally:
            writer.close()
            await writer.wait_closed()
    finally:
        assert limit_tls_read_buffer(before) == TLS_READ_BUFFER_BYTES
    assert sslproto.SSLProtocol.max_size == before


def test_a_buffer_smaller_than_one_tls_record_is_refused() -> None:
    before = sslproto.SSLProtocol.max_size
    with pytest.raises(ValueError, match="one TLS record"):
        limit_tls_read_buffer(16 * 1024 - 1)
    assert sslproto.SSLProtocol.max_size == before


def test_only_the_generated_source_leaves_linecache() -> None:
    @attrs.frozen
    class Generated:
        value: int

    assert Generated(1).value == 1
    real = __file__
    linecache.getline(real, 1)
    assert any(name.startswith("<attrs generated") for name in linecache.cache)
    assert forget_generated_source() > 0
    assert not any(name.startswith(("<attrs generated", "<cattrs generated")) for name in linecache.cache)
    assert real in linecache.cache
    assert forget_generated_source() == 0


def test_model_catalog_run_asks_for_the_smaller_buffer_and_the_library_only_when_asked() -> None:
    from app.options import CatalogOptions
    from app.settings import ServiceSettings, load

    assert CatalogOptions().heap.tls_read_buffer_bytes is None  # an embedding host's asyncio is its own
    settings = load({"LITELLM_MASTER_KEY": "sk-0123456789abcdef"})
    assert isinstance(settings, ServiceSettings)
    assert settings.catalog_options().heap.tls_read_buffer_bytes == TLS_READ_BUFFER_BYTES
