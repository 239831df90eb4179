"""The watches' liveness signal against the real kube-apiserver, through a proxy that can freeze every
connection (half-open) or black-hole them all, new ones included.

The watches here run with a long timeout (300 s) as in production, so nothing but the Lease's watch can
notice a dead connection within the tests' bounds (issue 35: the 5 s timeout per watch that used to do it
cost the API server ~160 requests a minute at idle).
"""

from __future__ import annotations

import datetime as dt
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlparse

import anyio
import attrs
import httpx
import pytest
from kubernetes_asyncio import client

from adapters.kube import KubeAdapters, KubeApi, KubeStats, WatchLiveness, WatchSource, WatchSpec
from adapters.kube.api import Keepalive
from adapters.kube.liveness import LIVENESS_SOURCE
from adapters.kube.settings import (
    LIVENESS_VERDICTS_TOTAL,
    RELISTS_TOTAL,
    WATCH_REQUESTS_TOTAL,
    KubeSettings,
    Liveness,
)
from adapters.vault import SecretVault
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from contracts.kinds import RESOURCES
from tests.adapters.kube.helpers import FAST, Collector, TcpProxy, listed, names, running, upserted
from tests.fixtures.kube_peer import KubePeer, create_namespace, install_crds, new_api_client

pytestmark = [pytest.mark.kube, pytest.mark.anyio]

LONG = attrs.evolve(FAST, watch_timeout_seconds=300, watch_timeout_jitter=0.0, failing_after=1000)
LEASE = "liveness-under-test"


async def renew_forever(api_client: Any, ns: str, every: float) -> None:
    """Another replica holding the Lease: renews it every ``every`` s, straight to the API server."""
    leases = client.CoordinationV1Api(api_client)
    spec = client.V1LeaseSpec(holder_identity="the-leader", lease_duration_seconds=15)
    body = client.V1Lease(metadata=client.V1ObjectMeta(name=LEASE, namespace=ns), spec=spec)
    lease = await leases.create_namespaced_lease(ns, body)
    while True:
        lease.spec.renew_time = dt.datetime.now(dt.UTC)
        lease = await leases.replace_namespaced_lease(LEASE, ns, lease)
        await anyio.sleep(every)


@asynccontextmanager
async def proxied(kube_peer: KubePeer) -> AsyncIterator[tuple[TcpProxy, Any]]:
    target = urlparse(kube_peer.server)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 443)
    port = await proxy.start()
    via_proxy = await new_api_client(kube_peer, host=f"https://127.0.0.1:{port}")
    try:
        yield proxy, via_proxy
    finally:
        await via_proxy.close()
        await proxy.close()


class Models:
    def __init__(self, api_client: Any, ns: str) -> None:
        self.custom = client.CustomObjectsApi(api_client)
        self.ns = ns

    async def create(self, name: str) -> None:
        body = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": name}, "spec": {}}
        await self.custom.create_namespaced_custom_object("kubeai.org", "v1", self.ns, "models", body)


def seen(name: str) -> Callable[[Any], bool]:
    """The Model arrived: by its own event, or in a relist."""
    return lambda e: (
        upserted(SourceKind.KUBEAI_MODELS, name)(e)
        or listed(SourceKind.KUBEAI_MODELS, lambda ev: name in names(ev))(e)
    )


async def start(events: Collector, liveness: WatchLiveness, models: Models) -> None:
    await events.wait_for(listed(SourceKind.KUBEAI_MODELS))
    await models.create("m1")
    await events.wait_for(upserted(SourceKind.KUBEAI_MODELS, "m1"))
    heartbeat = liveness.spec.renewed_every is not None
    with anyio.fail_after(10):
        # the model watch is open, and the Lease's (a probe's is not registered: it is the judge)
        while len(liveness.guards) < (2 if heartbeat else 1):
            await anyio.sleep(0.05)
        while heartbeat and liveness._heard is None:
            await anyio.sleep(0.05)


def watches(api: KubeApi, ns: str, liveness: Liveness, stats: KubeStats) -> tuple[WatchLiveness, WatchSource]:
    signal = WatchLiveness(api, liveness, settings=LONG, stats=stats)
    spec = WatchSpec(SourceKind.KUBEAI_MODELS, RESOURCES[SourceKind.KUBEAI_MODELS], ns)
    return signal, WatchSource(api, spec, settings=LONG, stats=stats, guards=signal.guards)


@pytest.mark.parametrize("renewed", [True, False], ids=["heartbeat", "probe"])
async def test_every_half_open_watch_resumes_once_the_lease_watch_goes_silent(
    kube_peer: KubePeer, kube_client: Any, renewed: bool
) -> None:
    """Every open connection freezes (stays up, carries nothing), new ones work. A Model created after the
    freeze reaches the source over a new connection within the liveness bound, resumed from the watch's
    resourceVersion (no relist); without the signal it would wait for the 300 s watch timeout."""
    await install_crds(kube_client)
    ns = await create_namespace(kube_client)
    models = Models(kube_client, ns)
    stats = KubeStats()
    spec = Liveness(ns, LEASE, renewed_every=0.5) if renewed else Liveness(ns, LEASE, probe_seconds=2)
    async with proxied(kube_peer) as (proxy, via_proxy), anyio.create_task_group() as tg:
        if renewed:
            tg.start_soon(renew_forever, kube_client, ns, 0.5)
        signal, source = watches(KubeApi(via_proxy), ns, spec, stats)
        tg.start_soon(signal.run)
        async with running([source]) as (events, _):
            await start(events, signal, models)
            relists = stats.total(RELISTS_TOTAL)
            assert proxy.freeze_all() >= 2
            began = anyio.current_time()
            await models.create("m2")
            await events.wait_for(upserted(SourceKind.KUBEAI_MODELS, "m2"), timeout=20)
            took = anyio.current_time() - began
        tg.cancel_scope.cancel()
    # heartbeat: silence for max(3 s, 2.5 renewals); probe: 2 s + 2 s grace; then one reconnect. Far
    # sooner than the watch's own 300 s timeout (the 10 s bound itself is the full fault profile's).
    assert took < 60.0, took
    assert signal.verdicts >= 1
    assert stats.total(LIVENESS_VERDICTS_TOTAL, reason="silent" if renewed else "probe") >= 1
    assert stats.total(RELISTS_TOTAL) == relists  # resumed from its resourceVersion


@pytest.mark.parametrize("renewed", [True, False], ids=["heartbeat", "probe"])
async def test_every_watch_is_back_soon_after_a_black_hole_heals(
    kube_peer: KubePeer, kube_client: Any, renewed: bool
) -> None:
    """Every connection, open and new, carries nothing for 8 s (verdicts meanwhile restart the watches
    into the hole); then new connections work again while the frozen ones stay frozen, as when a route
    comes back. A Model created during the hole is seen soon after the heal, by the liveness signal."""
    await install_crds(kube_client)
    ns = await create_namespace(kube_client)
    models = Models(kube_client, ns)
    stats = KubeStats()
    spec = Liveness(ns, LEASE, renewed_every=0.5) if renewed else Liveness(ns, LEASE, probe_seconds=2)
    async with proxied(kube_peer) as (proxy, via_proxy), anyio.create_task_group() as tg:
        if renewed:
            tg.start_soon(renew_forever, kube_client, ns, 0.5)
        signal, source = watches(KubeApi(via_proxy), ns, spec, stats)
        tg.start_soon(signal.run)
        async with running([source]) as (events, _):
            await start(events, signal, models)
            proxy.black_hole(True)
            await models.create("m2")
            await anyio.sleep(8.0)
            assert not any(seen("m2")(e) for e in events.events)  # the hole held
            verdicts_in_the_hole = signal.verdicts
            proxy.black_hole(False)
            healed = anyio.current_time()
            await events.wait_for(seen("m2"), timeout=30)
            took = anyio.current_time() - healed
        tg.cancel_scope.cancel()
    assert verdicts_in_the_hole >= 1
    assert took < 60.0, took  # the liveness, not the 300 s watch timeout (10 s: the full fault profile)


async def test_at_idle_each_watch_is_one_request_for_minutes(kube_peer: KubePeer, kube_client: Any) -> None:
    """Issue 35: with the default settings every source and the Lease's heartbeat open one watch each and
    renew it only after 5-10 minutes. Before, each watch was renewed every 5 s (~3 requests per watch in
    the 15 s measured here: ~190 a minute for the controller's 13 watches)."""
    await install_crds(kube_client)
    ns = await create_namespace(kube_client)
    config = CatalogConfig(namespace=ns, appliance_namespace=ns)
    settings = KubeSettings(liveness=Liveness(ns, LEASE, renewed_every=0.5))
    adapters = KubeAdapters(kube_client, config, SecretVault(), settings=settings)
    send, receive = anyio.create_memory_object_stream[Any](1000)
    events = Collector(receive)
    async with anyio.create_task_group() as tg:
        tg.start_soon(renew_forever, kube_client, ns, 0.5)
        tg.start_soon(events.run)
        tg.start_soon(adapters.run, send)
        # the sources listed (the Secret watcher waits for its command: not listed, not watching)
        expected = {s.spec.source for s in adapters.sources if isinstance(s, WatchSource)}
        with anyio.fail_after(30):
            while {e.source for e in events.events if type(e).__name__ == "SourceListed"} < expected:
                await anyio.sleep(0.1)
        await anyio.sleep(1.0)
        before = stats_total(adapters.stats)
        await anyio.sleep(15.0)
        after = stats_total(adapters.stats)
        tg.cancel_scope.cancel()
    watches_now = len(expected) + 1  # every source's watch and the Lease's
    assert before["requests"] == watches_now, before
    assert after == before, (before, after)  # not one renewal, relist or verdict in 15 s
    assert adapters.liveness is not None and adapters.liveness.verdicts == 0


def stats_total(stats: KubeStats) -> dict[str, int]:
    return {
        "requests": stats.total(WATCH_REQUESTS_TOTAL),
        "liveness": stats.total(WATCH_REQUESTS_TOTAL, source=LIVENESS_SOURCE),
        "relists": stats.total(RELISTS_TOTAL),
        "verdicts": stats.total(LIVENESS_VERDICTS_TOTAL),
    }


async def test_a_watch_connection_carries_tcp_keepalive(kube_peer: KubePeer, kube_client: Any) -> None:
    """A peer that vanishes (a dropped NAT entry, a node gone) leaves no byte to read: keepalive probes
    end such a connection within idle + interval * probes seconds, at no cost to the API server."""
    ns = await create_namespace(kube_client)
    sockets: list[Any] = []

    @attrs.frozen
    class Recording(Keepalive):
        def apply(self, response: httpx.Response) -> bool:
            applied = super().apply(response)
            sockets.append(response.extensions["network_stream"].get_extra_info("socket"))
            return applied

    api = KubeApi(kube_client)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    async with api.watch(path, [], 5, 1.0, response_timeout=5.0, keepalive=Recording(5, 2, 3)) as _:
        (sock,) = sockets
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        if hasattr(socket, "TCP_KEEPIDLE"):  # Linux
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 5
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 2
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 3
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 11_000


async def test_a_watch_request_unanswered_is_given_up_after_its_response_timeout(
    kube_peer: KubePeer,
) -> None:
    """A black-holed new connection (accepted, then silent) cannot hold a watch for its 300 s timeout."""
    async with proxied(kube_peer) as (proxy, via_proxy):
        proxy.black_hole(True)
        api = KubeApi(via_proxy)
        began = anyio.current_time()
        with pytest.raises(Exception) as raised:
            async with api.watch("/api/v1/namespaces/default/configmaps", [], 300, 1.5, response_timeout=1.0):
                pass
        assert anyio.current_time() - began < 5.0
        assert "no answer to the watch request within 1 s" in str(raised.value)
