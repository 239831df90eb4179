"""Leader election on a fake clock: expiry is judged by the candidate's own clock, never by time passing.

The Lease lives on the real kube-apiserver; only the elector's monotonic clock is the test's, so each step
(a holder silent for almost a lease duration, a renewal, a silence past it) is exact and instant.
"""

from __future__ import annotations

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
    reports = iter(
        [{"ai-appliance.io/controller-status": "first"}, {"ai-appliance.io/controller-status": "2nd"}]
    )
    config = LeaseConfig("lease-under-test", ns, "replica-a", duration=15.0, renew_deadline=10.0)
    elector = LeaderElector(
        kube_client, config, Changes(), clock=FakeClock(), annotations=lambda: next(reports)
    )
    leases = client.CoordinationV1Api(kube_client)

    await elector._try_acquire()  # created with the report
    lease = await leases.read_namespaced_lease("lease-under-test", ns)
    assert lease.metadata.annotations == {"ai-appliance.io/controller-status": "first"}
    lease.metadata.annotations["example.com/owner"] = "someone"  # another tool's annotation
    await leases.replace_namespaced_lease("lease-under-test", ns, lease)

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
