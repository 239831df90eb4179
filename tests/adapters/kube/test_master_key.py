"""The LiteLLM master key read from its Secret, in LiteLLM's namespace, for a host that embeds the catalog
(``model_catalog.read_litellm_master_key``; ``BlockingModelCatalog`` without ``litellm_master_key``).
Real kube-apiserver. Every failure says what to fix and never carries the value."""

from __future__ import annotations

import base64
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from catalog_core.config import CatalogConfig
from model_catalog import MasterKeyError, read_litellm_master_key
from tests.fixtures.kube_peer import KubePeer, create_namespace, new_api_client

pytestmark = [pytest.mark.kube, pytest.mark.anyio]


def _key() -> str:
    return f"sk-master-{uuid.uuid4().hex}"


async def _secret(
    api: Any, namespace: str, data: dict[str, str], name: str = "litellm-masterkey-secret"
) -> None:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    body = {"metadata": {"name": name, "namespace": namespace}, "data": encoded}
    await client.CoreV1Api(api).create_namespaced_secret(namespace, body)  # type: ignore[arg-type]


async def test_the_key_is_read_from_litellms_secret_in_litellms_namespace(kube_client: Any) -> None:
    litellm_ns, host_ns = await create_namespace(kube_client), await create_namespace(kube_client, "mcsys")
    key = _key()
    await _secret(kube_client, litellm_ns, {"LITELLM_MASTER_KEY": key, "OTHER": "x"})
    config = CatalogConfig(namespace=litellm_ns, appliance_namespace=host_ns)
    assert await read_litellm_master_key(kube_client, config, timeout=5) == key
    # the Secret's name is the catalog's setting (LITELLM_MASTER_KEY_SECRET_NAME)
    await _secret(kube_client, litellm_ns, {"LITELLM_MASTER_KEY": "sk-renamed"}, name="my-litellm-key")
    renamed = CatalogConfig(namespace=litellm_ns, litellm_master_key_secret="my-litellm-key")
    assert await read_litellm_master_key(kube_client, renamed, timeout=5) == "sk-renamed"


async def test_a_missing_secret_or_key_says_what_to_fix_and_never_the_value(kube_client: Any) -> None:
    ns = await create_namespace(kube_client)
    config = CatalogConfig(namespace=ns)
    with pytest.raises(MasterKeyError) as missing:
        await read_litellm_master_key(kube_client, config, timeout=5)
    assert f"Secret {ns}/litellm-masterkey-secret" in str(missing.value)
    assert "NotFound" in str(missing.value) and "LITELLM_MASTER_KEY_SECRET_NAME" in str(missing.value)
    value = _key()
    await _secret(kube_client, ns, {"MASTER_KEY": value})
    with pytest.raises(MasterKeyError) as no_field:
        await read_litellm_master_key(kube_client, config, timeout=5)
    assert "has no key LITELLM_MASTER_KEY (it has: MASTER_KEY)" in str(no_field.value)
    assert value not in str(no_field.value)
    await client.CoreV1Api(kube_client).delete_namespaced_secret("litellm-masterkey-secret", ns)
    await _secret(kube_client, ns, {"LITELLM_MASTER_KEY": "  "})
    with pytest.raises(MasterKeyError, match="key LITELLM_MASTER_KEY is empty"):
        await read_litellm_master_key(kube_client, config, timeout=5)


async def test_a_host_not_allowed_to_read_it_is_told_which_role_it_needs(
    kube_client: Any, kube_peer: KubePeer
) -> None:
    ns = await create_namespace(kube_client)
    value = _key()
    await _secret(kube_client, ns, {"LITELLM_MASTER_KEY": value})
    as_operator = await new_api_client(kube_peer, impersonate=f"operator-{uuid.uuid4().hex[:6]}")
    try:
        with pytest.raises(MasterKeyError) as denied:
            await read_litellm_master_key(as_operator, CatalogConfig(namespace=ns), timeout=5)
    finally:
        await as_operator.close()
    message = str(denied.value)
    assert "HTTP 403 Forbidden" in message
    assert f"needs `get` on secrets/litellm-masterkey-secret in namespace {ns}" in message
    assert value not in message


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never answers (an API server that hangs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


async def test_an_api_server_that_does_not_answer_fails_within_the_timeout(
    kube_peer: KubePeer, silent_server: int
) -> None:
    hanging = await new_api_client(kube_peer, host=f"https://127.0.0.1:{silent_server}")
    try:
        began = time.monotonic()
        with pytest.raises(MasterKeyError, match="no answer from the API server within 1 s"):
            await read_litellm_master_key(hanging, CatalogConfig(), timeout=1.0)
        assert time.monotonic() - began < 30  # bounded by the timeout, not by the connection
    finally:
        await hanging.close()
