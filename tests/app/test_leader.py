"""Leader election on a fake clock: expiry is judged by the candidate's own clock, never by time passing.

The Lease lives on the real kube-apiserver; only the elector's monotonic clock is the test's, so each step
(a holder silent for almost a lease duration, a renewal, a silence past it) is exact and instant.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from kubernetes_asyncio import client

from app.leader import LeaderElector, LeaseConfig
from tests.fixtures.kube_peer import KubePeer, create_namespace

pytestmark = [pytest.mark.kube, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class FakeClock:
    def __init__(self, step: float = 0.0) -> None:
        self.now = 0.0
        self.step = step  # seconds each reading moves on (an API call that takes time)

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class Changes:
    def __init__(self) -> None:
        self.seen: list[bool] = []

    async def __call__(self, leading: bool) -> None:
        self.seen.append(leading)


def _elector(
    api_client: Any, ns: str, identity: str, clock: FakeClock, retry_period: float = 2.0
) -> tuple[LeaderElector, Changes]:
    changes = Changes()
    config = LeaseConfig(
        "lease-under-test", ns, identity, duration=15.0, renew_deadline=10.0, retry_period=retry_period
    )
    return LeaderElector(api_client, config, changes, clock=clock), changes


async def test_a_standby_takes_over_only_after_a_whole_lease_duration_of_silence_on_its_own_clock(
    kube_peer: KubePeer, kube_client: Any
) -> None:
    ns = await create_namespace(kube_client)
    a_clock, b_clock = FakeClock(), FakeClock()
    a, a_changes = _elector(kube_client, ns, "replica-a", a_clock)
    b, b_changes = _elector(kube_client, ns, "replica-b", b_clock)

    await a._try_acquire()  # no Lease yet: created, held
    assert a.leading and a_changes.seen == [True]

    await b._try_acquire()  # first sight of a's renewal, at b's 0 s
    b_clock.now = 14.9
    await b._try_acquire()  # silent for less than a lease duration: not expired
    assert not b.leading

    await a._renew_or_step_down()  # a renews: b starts counting again from when it sees that
    b_clock.now = 20.0
    await b._try_acquire()  # 20 s since b first looked, but the renewal was seen only now
    assert not b.leading and b_changes.seen == []

    b_clock.now = 35.1  # 15.1 s of silence since b saw the renewal
    await b._try_acquire()
    assert b.leading and b_changes.seen == [True]
    lease = await client.CoordinationV1Api(kube_client).read_namespaced_lease("lease-under-test", ns)
    assert lease.spec.holder_identity == "replica-b"
    assert lease.spec.lease_transitions == 1

    await a._renew_or_step_down()  # a finds the Lease held by b: it stops at once, without retrying
    assert not a.leading and a_changes.seen == [True, False]


async def test_a_candidate_waits_for_the_lease_duration_the_holder_wrote(
    kube_peer: KubePeer, kube_client: Any
) -> None:
    """As client-go's candidates: another holder that wrote ``leaseDurationSeconds: 4`` is expired after
    4 s of silence, not after this replica's own 15 s."""
    ns = await create_namespace(kube_client)
    leases = client.CoordinationV1Api(kube_client)
    now = dt.datetime.now(dt.UTC)
    await leases.create_namespaced_lease(
        ns,
        client.V1Lease(
            metadata=client.V1ObjectMeta(name="lease-under-test", namespace=ns),
            spec=client.V1LeaseSpec(holder_identity="other", lease_duration_seconds=4, renew_time=now),
        ),
    )
    b_clock = FakeClock()
    b, b_changes = _elector(kube_client, ns, "replica-b", b_clock)
    await b._try_acquire()  # first sight of other's renewal, at b's 0 s
    b_clock.now = 3.9
    await b._try_acquire()
    assert not b.leading
    b_clock.now = 4.1
    await b._try_acquire()
    assert b.leading and b_changes.seen == [True]
    lease = await leases.read_namespaced_lease("lease-under-test", ns)
    assert lease.spec.holder_identity == "replica-b" and lease.spec.lease_duration_seconds == 15


async def test_a_leader_that_cannot_renew_within_the_renew_deadline_steps_down() -> None:
    # An API server that refuses every connection; each attempt costs one second of the elector's clock.
    unreachable = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))
    clock = FakeClock(step=1.0)
    elector, changes = _elector(unreachable, "ns", "replica-a", clock, retry_period=0.001)
    elector.leading = True
    try:
        await elector._renew_or_step_down()
    finally:
        await unreachable.close()
    assert not elector.leading and changes.seen == [False]
    assert 10.0 <= clock.now <= 14.0  # gave up once the deadline passed on its own clock, not later


async def test_the_holder_writes_its_health_report_on_each_renewal_and_keeps_other_annotations(
    kube_peer: KubePeer, kube_client: Any
) -> None:
    ns = await create_namespace(kube_client)
    report = {"ai-appliance.io/controller-status": "first"}  # the health report as of each write
    config = LeaseConfig("lease-under-test", ns, "replica-a", duration=15.0, renew_deadline=10.0)
    elector = LeaderElector(kube_client, config, Changes(), clock=FakeClock(), annotations=lambda: report)
    leases = client.CoordinationV1Api(kube_client)

    await elector._try_acquire()  # created with the report
    lease = await leases.read_namespaced_lease("lease-under-test", ns)
    assert lease.metadata.annotations == {"ai-appliance.io/controller-status": "first"}
    lease.metadata.annotations["example.com/owner"] = "someone"  # another tool's annotation
    await leases.replace_namespaced_lease("lease-under-test", ns, lease)

    report = {"ai-appliance.io/controller-status": "2nd"}
    await elector._renew_or_step_down()
    lease = await leases.read_namespaced_lease("lease-under-test", ns)
    assert lease.metadata.annotations == {
        "ai-appliance.io/controller-status": "2nd",
        "example.com/owner": "someone",
    }

    def broken() -> dict[str, str]:
        raise RuntimeError("a bug in the report")

    elector._annotations = broken
    await elector._renew_or_step_down()  # the Lease is renewed without a new report, not lost
    assert elector.leading
    lease = await leases.read_namespaced_lease("lease-under-test", ns)
    assert lease.spec.holder_identity == "replica-a"


class Counted:
    """The elector's API requests, counted by verb (a wrapper around its KubeApi)."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.calls: dict[str, int] = {}

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        verb = {"GET": "read", "POST": "create", "PUT": "replace"}[method]
        self.calls[verb] = self.calls.get(verb, 0) + 1
        return await self.api.request(method, path, **kwargs)


async def test_the_leader_renews_with_one_update_and_reads_only_after_a_conflict(
    kube_peer: KubePeer, kube_client: Any
) -> None:
    """Issue 35: each renewal was a read and an update (60 requests a minute at a 2 s retry period); it is
    an update of the Lease the last write returned, and a conflict (someone else wrote it) reads it."""
    ns = await create_namespace(kube_client)
    elector, _ = _elector(kube_client, ns, "replica-a", FakeClock())
    counted = Counted(elector._api)
    elector._api = counted
    await elector._try_acquire()  # no Lease: a read (404) and a create
    for _ in range(5):
        await elector._renew_or_step_down()
    assert elector.leading
    assert counted.calls == {"read": 1, "create": 1, "replace": 5}

    leases = client.CoordinationV1Api(kube_client)
    lease = await leases.read_namespaced_lease("lease-under-test", ns)
    lease.metadata.annotations = {"example.com/owner": "someone"}  # another writer: our copy is stale
    await leases.replace_namespaced_lease("lease-under-test", ns, lease)
    await elector._renew_or_step_down()  # 409, then a read and an update
    assert elector.leading
    assert counted.calls["read"] == 2 and counted.calls["replace"] == 7
    lease = await leases.read_namespaced_lease("lease-under-test", ns)
    assert lease.spec.holder_identity == "replica-a"
    assert lease.metadata.annotations == {"example.com/owner": "someone"}


def _as_watched(lease: Any) -> dict[str, Any]:
    """The Lease as a watch delivers it (plain API dict)."""
    return dict(client.ApiClient().sanitize_for_serialization(lease))


async def test_a_standby_fed_by_the_lease_watch_reads_the_lease_only_once_the_holder_looks_expired(
    kube_peer: KubePeer, kube_client: Any
) -> None:
    """Issue 35: a standby read the Lease every retry period (30 requests a minute); fed by the watch of
    the Lease (the watches' liveness signal), it reads it only when the holder has looked silent for a
    whole lease duration on its own clock, and still takes over then."""
    ns = await create_namespace(kube_client)
    a, _ = _elector(kube_client, ns, "replica-a", FakeClock())
    b_clock = FakeClock()
    b, b_changes = _elector(kube_client, ns, "replica-b", b_clock)
    counted = Counted(b._api)
    b._api = counted
    leases = client.CoordinationV1Api(kube_client)
    await a._try_acquire()
    for second in range(0, 30, 2):  # a renews every 2 s, b sees each renewal through its watch
        await a._renew_or_step_down()
        b.observe(_as_watched(await leases.read_namespaced_lease("lease-under-test", ns)))
        b_clock.now = float(second)
        await b._try_acquire()
    assert counted.calls == {} and not b.leading  # 15 tries, no request

    b.observe({"metadata": {"name": "another-lease"}, "spec": {"holderIdentity": "x"}})  # not ours: ignored
    b_clock.now = 28.0 + 15.1  # a stopped renewing (the last renewal seen at 28 s)
    await b._try_acquire()
    assert b.leading and b_changes.seen == [True]
    assert counted.calls == {"read": 1, "replace": 1}

    # A stale view (the watch frozen) costs a read once it looks expired, never a wrong takeover.
    c_clock = FakeClock()
    c, c_changes = _elector(kube_client, ns, "replica-c", c_clock)
    c.observe(_as_watched(await leases.read_namespaced_lease("lease-under-test", ns)))
    await b._renew_or_step_down()
    c_clock.now = 15.1  # b renewed, but c's watch did not deliver it
    await c._try_acquire()  # reads: renewed since, as seen now -> not expired
    assert not c.leading and c_changes.seen == []
