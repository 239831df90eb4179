"""The Lease has an API client and connection pool of its own (issue 12 item 5).

Before, the elector shared the catalog's client: once its pool (100 connections) was held by watches —
one per referenced Secret name, say — the Lease GET waited for a connection, the renewal missed its
deadline and the leader stepped down. Here the shared pool is exhausted on purpose, on the real
kube-apiserver, and the Lease must go on renewing; on shutdown both clients are closed.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from adapters.kube.api import KubeApi, KubeError
from app import service as service_module
from app.settings import ServiceSettings, load
from tests.fixtures.kube_peer import KubePeer, create_namespace

pytestmark = [pytest.mark.kube, pytest.mark.anyio]

LEASE = "ai-model-catalog-controller"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _holder(coordination: client.CoordinationV1Api, ns: str) -> tuple[str, Any]:
    try:
        lease = await coordination.read_namespaced_lease(LEASE, ns)
    except ApiException:
        return "", None
    return lease.spec.holder_identity or "", lease.spec.renew_time


async def _pool_exhausted(api: KubeApi, ns: str) -> bool:
    """True when a plain GET on the client cannot get a connection within a second."""
    try:
        await api.request("GET", f"/api/v1/namespaces/{ns}/configmaps", timeout=1.0)
    except KubeError as err:
        return err.status == 0  # a timeout waiting for the pool, not an answer
    return False


async def test_the_lease_renews_while_the_shared_connection_pool_is_exhausted(
    kube_peer: KubePeer, kube_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = await create_namespace(kube_client)
    made: list[Any] = []
    real_load = service_module.load_api_client

    async def recording(kubeconfig: str, **kwargs: Any) -> Any:
        made.append(await real_load(kubeconfig, **kwargs))
        return made[-1]

    monkeypatch.setattr(service_module, "load_api_client", recording)
    settings = load(
        {
            "LITELLM_MASTER_KEY": "sk-test",
            "LITELLM_BASE_URL": "http://127.0.0.1:9",  # unreachable: LiteLLM plays no part here
            "NAMESPACE": ns,
            "APPLIANCE_NAMESPACE": ns,
            "KUBECONFIG": str(kube_peer.kubeconfig),
            "CATALOG_HTTP_HOST": "127.0.0.1",
            "CATALOG_HTTP_PORT": "0",
            "POD_NAME": "replica-a",
            "CATALOG_LEASE_DURATION_SECONDS": "4",
            "CATALOG_LEASE_RENEW_DEADLINE_SECONDS": "3",
            "CATALOG_LEASE_RETRY_PERIOD_SECONDS": "0.5",
        }
    )
    assert isinstance(settings, ServiceSettings)
    coordination = client.CoordinationV1Api(kube_client)
    release = anyio.Event()

    async with anyio.create_task_group() as tg:
        tg.start_soon(service_module.serve, settings)
        deadline = time.monotonic() + 30
        while (await _holder(coordination, ns))[0] != "replica-a":
            assert time.monotonic() < deadline, "the Lease was never taken"
            await anyio.sleep(0.2)
        shared, lease_client = made
        assert lease_client is not shared
        assert lease_client.connections == service_module.LEASE_CONNECTIONS

        # Hold every connection of the shared pool with watches that stay open.
        api = KubeApi(shared)

        async def hold_a_connection() -> None:
            async with api.watch(f"/api/v1/namespaces/{ns}/configmaps", [], 60, 5.0):
                await release.wait()

        for _ in range(shared.connections):
            tg.start_soon(hold_a_connection)
        deadline = time.monotonic() + 30
        while not await _pool_exhausted(api, ns):
            assert time.monotonic() < deadline, "the shared pool never filled up"

        # Longer than the renew deadline (3 s): a leader that cannot renew would have stepped down.
        _, renewed_before = await _holder(coordination, ns)
        await anyio.sleep(5)
        holder, renewed_after = await _holder(coordination, ns)
        assert await _pool_exhausted(api, ns)  # still exhausted all along
        assert holder == "replica-a"
        assert renewed_after > renewed_before

        release.set()
        tg.cancel_scope.cancel()

    # No client outlives the service: both sessions (and their pools) are closed.
    assert len(made) == 2
    assert all(c.closed for c in made)
