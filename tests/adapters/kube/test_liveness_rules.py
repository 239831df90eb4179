"""The liveness signal's rules on a scripted API (what the real-peer tests cannot time exactly)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import attrs
import pytest

from adapters.kube.api import KubeApi, KubeError
from adapters.kube.liveness import Guards, WatchLiveness
from adapters.kube.settings import Liveness
from tests.adapters.kube.helpers import FAST

pytestmark = [pytest.mark.anyio]

SETTINGS = attrs.evolve(FAST, retry_base_seconds=0.05, retry_cap_seconds=0.1)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class ScriptedApi(KubeApi):
    """Each watch request runs the next step of the script: it raises, ends, or streams events forever."""

    def __init__(self, steps: list[Callable[[], AsyncIterator[dict[str, Any]]] | KubeError]) -> None:
        super().__init__(None)
        self.steps = steps
        self.requests = 0

    @asynccontextmanager
    async def watch(self, path: str, query: Any, server_timeout: int, grace: float, **_: Any) -> Any:
        step = self.steps[min(self.requests, len(self.steps) - 1)]
        self.requests += 1
        if isinstance(step, KubeError):
            raise step
        yield step()


async def ends() -> AsyncIterator[dict[str, Any]]:
    await anyio.sleep(0.3)  # the API server ends the probe, as asked
    return
    yield {}


async def silent() -> AsyncIterator[dict[str, Any]]:
    await anyio.sleep_forever()
    yield {}


async def stream(guards: Guards, opened: list[anyio.CancelScope]) -> None:
    """A watch as WatchSource holds one: registered in ``guards`` until a verdict ends it."""
    with guards.guarded() as guard, guard:
        opened.append(guard)
        await anyio.sleep_forever()


async def test_the_first_probe_that_ends_on_time_after_a_verdict_ends_the_watches_opened_before_it() -> None:
    """A probe fails (a verdict: every watch resumes), the watches reopen while the path is still dark,
    then the next probe ends on time: the watches opened in between were opened into the dark and are
    ended too, though no probe failed after them."""
    failure = KubeError(0, "TimeoutError", "the probe did not end")
    api = ScriptedApi([failure, ends])
    signal = WatchLiveness(api, Liveness("ns", "lease", probe_seconds=1), settings=SETTINGS)
    before: list[anyio.CancelScope] = []
    into_the_dark: list[anyio.CancelScope] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(stream, signal.guards, before)
        await anyio.sleep(0.01)
        tg.start_soon(signal.run)
        with anyio.fail_after(5):
            while not before[0].cancel_called:  # the first probe failed: a verdict
                await anyio.sleep(0.01)
            tg.start_soon(stream, signal.guards, into_the_dark)  # reopened before the next probe
            while not into_the_dark or not into_the_dark[0].cancel_called:
                await anyio.sleep(0.01)
        assert signal.verdicts == 1
        opened_after = []
        tg.start_soon(stream, signal.guards, opened_after)
        await anyio.sleep(0.5)  # more probes end on time: nothing else is ended
        assert opened_after and not opened_after[0].cancel_called
        tg.cancel_scope.cancel()


async def test_a_lease_never_heard_gives_no_verdict() -> None:
    """Before the first event (the Lease does not exist yet) silence says nothing: no verdict."""
    api = ScriptedApi([silent])
    signal = WatchLiveness(api, Liveness("ns", "lease", renewed_every=0.1), settings=SETTINGS)
    opened: list[anyio.CancelScope] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(stream, signal.guards, opened)
        tg.start_soon(signal.run)
        await anyio.sleep(3.5)  # past stale_after (3 s)
        assert opened
        assert signal.verdicts == 0 and not opened[0].cancel_called
        tg.cancel_scope.cancel()


async def test_a_heard_lease_gone_silent_ends_every_watch_once_per_stale_period() -> None:
    async def once() -> AsyncIterator[dict[str, Any]]:
        yield {"type": "ADDED", "object": {"metadata": {"name": "lease"}}}
        await anyio.sleep_forever()

    api = ScriptedApi([once, silent])
    signal = WatchLiveness(api, Liveness("ns", "lease", renewed_every=0.1), settings=SETTINGS)
    opened: list[anyio.CancelScope] = []
    began = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(stream, signal.guards, opened)
        tg.start_soon(signal.run)
        with anyio.fail_after(30):
            while not opened or not opened[0].cancel_called:
                await anyio.sleep(0.01)
        took = anyio.current_time() - began
        await anyio.sleep(1.0)
        tg.cancel_scope.cancel()
    assert took >= 3.0  # not before stale_after = max(3 s, 2.5 renewals of 0.1 s)
    assert signal.verdicts == 1  # not again within the next stale period
    assert api.requests == 2  # the Lease's own watch resumed over a new connection
