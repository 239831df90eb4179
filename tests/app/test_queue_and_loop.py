"""The shell's queue and loop, driven by the pure simulated world (no I/O, fake executors)."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from app.loop import CatalogLoop
from app.queue import CommandQueue
from catalog_core.commands import (
    Command,
    DeleteLiteLLMModel,
    EmitKubernetesEvent,
    ObjectRef,
    ProbeRuntime,
    WriteCatalog,
)
from catalog_core.config import CatalogConfig
from catalog_core.events import (
    CommandCompleted,
    Event,
    LeadershipChanged,
    ObjectUpserted,
    Outcome,
    SourceKind,
    SourceListed,
    Ticked,
)
from catalog_core.redact import redact_for_source
from catalog_core.simulate import SimulatedWorld
from tests.core import builders as b

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


class SimulatedExecutor:
    """Carries commands out in the simulated world, slowly enough to overlap."""

    def __init__(self, world: SimulatedWorld, delay: float = 0.0) -> None:
        self.world, self.delay = world, delay
        self.running: set[str] = set()
        self.max_parallel = 0
        self.started: list[Command] = []

    def handles(self, command: Command) -> bool:
        return True

    async def execute(self, command: Command) -> Sequence[Event]:
        assert command.key not in self.running, "the same key ran twice at once"
        self.running.add(command.key)
        self.started.append(command)
        self.max_parallel = max(self.max_parallel, len(self.running))
        try:
            await anyio.sleep(self.delay)
            return self.world.execute(command)
        finally:
            self.running.discard(command.key)


async def test_queue_coalesces_a_burst_per_key_and_bounds_concurrency():
    world = SimulatedWorld()
    executor = SimulatedExecutor(world, delay=0.05)
    delivered: list[Event] = []

    async def deliver(events: Sequence[Event]) -> None:
        delivered.extend(events)

    queue = CommandQueue([executor], deliver, concurrency=3)
    async with anyio.create_task_group() as tg:
        await tg.start(queue.run)
        for i in range(50):
            queue.submit(DeleteLiteLLMModel("ai-appliance-kubeai-a"))  # the same key, again and again
            queue.submit(DeleteLiteLLMModel(f"ai-appliance-kubeai-m{i % 10}"))
        await anyio.sleep(0.5)
        tg.cancel_scope.cancel()
    per_key = {}
    for command in executor.started:
        per_key[command.key] = per_key.get(command.key, 0) + 1
    assert per_key["litellm/ai-appliance-kubeai-a"] <= 2  # one running, one coalesced
    assert executor.max_parallel <= 3
    outcomes = [e for e in delivered if isinstance(e, CommandCompleted)]  # (the world re-observes too)
    assert len(outcomes) == len(executor.started)


async def test_catalog_writes_respect_a_minimum_interval():
    world = SimulatedWorld()
    executor = SimulatedExecutor(world)

    async def deliver(events: Sequence[Event]) -> None:
        return None

    queue = CommandQueue(
        [executor], deliver, min_interval=lambda key: 0.2 if key.startswith("catalog/") else 0.0
    )
    async with anyio.create_task_group() as tg:
        await tg.start(queue.run)
        for i in range(20):
            queue.submit(WriteCatalog("ai", "ai-model-catalog", (("k", str(i)),), "h", f"fp{i}"))
            await anyio.sleep(0.02)
        await anyio.sleep(0.5)
        tg.cancel_scope.cancel()
    writes = [c for c in executor.started if isinstance(c, WriteCatalog)]
    assert 2 <= len(writes) <= 4  # 0.4 s of submissions, one write per 0.2 s
    assert writes[-1].fingerprint == "fp19"  # the last state always lands


async def test_losing_leadership_cancels_writes_under_way():
    world = SimulatedWorld()
    executor = SimulatedExecutor(world, delay=10)
    delivered: list[Event] = []

    async def deliver(events: Sequence[Event]) -> None:
        delivered.extend(events)

    queue = CommandQueue([executor], deliver)
    async with anyio.create_task_group() as tg:
        await tg.start(queue.run)
        queue.submit(DeleteLiteLLMModel("x"))
        await anyio.sleep(0.05)
        with anyio.fail_after(1):
            queue.drop_writes()
            while queue.depth:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert delivered == []  # abandoned: no outcome is reported for it


async def test_a_route_write_never_waits_behind_events_or_probes():
    """Issue 32, item 9: a 5,000-item edit queued its Warning Events in the FIFO of the route writes, and
    an unrelated activation published 46.6 s later instead of 0.4 s. Here Events and probes never finish
    (their API server and runtimes hang): a LiteLLM write and the catalog submitted after thousands of
    them still run at once, in their own lane."""
    release = anyio.Event()
    done: list[str] = []

    class Hanging:
        def handles(self, command: Command) -> bool:
            return True

        async def execute(self, command: Command) -> Sequence[Event]:
            if isinstance(command, EmitKubernetesEvent | ProbeRuntime):
                await release.wait()
            done.append(command.key)
            return [CommandCompleted(command.key, command.id, Outcome.APPLIED)]

    async def deliver(events: Sequence[Event]) -> None:
        return None

    ref = ObjectRef("v1", "ConfigMap", "ai", "ai-external-models", "u")
    queue = CommandQueue([Hanging()], deliver, concurrency=4)
    async with anyio.create_task_group() as tg:
        await tg.start(queue.run)
        for i in range(5000):
            queue.submit(EmitKubernetesEvent(ref, "InvalidField", f"m{i}: contextWindow: not a number"))
        for i in range(50):
            queue.submit(ProbeRuntime(f"runtime-{i}", f"http://runtime-{i}.ai.svc:8080/health"))
        write = DeleteLiteLLMModel("ai-appliance-external-unrelated")
        catalog = WriteCatalog("ai", "ai-model-catalog", (("k", "v"),), "h", "fp")
        queue.submit(write)
        queue.submit(catalog)
        with anyio.fail_after(5):
            while not {write.key, catalog.key} <= set(done):
                await anyio.sleep(0.01)
        assert done == [write.key, catalog.key]  # nothing else finished: they went first anyway
        release.set()
        tg.cancel_scope.cancel()


async def test_a_raising_executor_becomes_a_retry_outcome():
    class Broken:
        def handles(self, command: Command) -> bool:
            return True

        async def execute(self, command: Command) -> Sequence[Event]:
            raise RuntimeError("boom")

    delivered: list[Event] = []

    async def deliver(events: Sequence[Event]) -> None:
        delivered.extend(events)

    queue = CommandQueue([Broken()], deliver)
    async with anyio.create_task_group() as tg:
        await tg.start(queue.run)
        queue.submit(DeleteLiteLLMModel("x"))
        await anyio.sleep(0.1)
        tg.cancel_scope.cancel()
    (outcome,) = delivered
    assert isinstance(outcome, CommandCompleted)
    assert outcome.outcome is Outcome.RETRY


async def _start_loop(loop: CatalogLoop, world: SimulatedWorld, objects: list[dict]) -> None:
    cfg = loop.state.config
    from contracts.kinds import sources_of

    grouped: dict[SourceKind, list] = {s: [] for s in SourceKind if s is not SourceKind.SECRETS}
    for obj in objects:
        for source in sources_of(obj, cfg):
            red = redact_for_source(source.value, obj).obj
            if source is SourceKind.SECRETS:
                world.secrets[obj["metadata"]["name"]] = red
            else:
                grouped[source].append(red)
    for source, objs in grouped.items():
        await loop.send(SourceListed(source, tuple(objs)))
    await loop.send(world.rows_event())


async def _settle(loop: CatalogLoop, seconds: float = 3.0) -> None:
    """Until nothing is queued, the loop is idle and no LiteLLM write waits (probed or damped)."""
    with anyio.move_on_after(seconds):
        while True:
            await anyio.sleep(0.02)
            if not loop.queue.depth and loop.busy_since is None and not loop.state.damping.waiting:
                await anyio.sleep(0.05)
                if not loop.queue.depth and not loop.state.damping.waiting:
                    return


async def test_loop_converges_and_then_stays_quiet():
    world = SimulatedWorld()
    executor = SimulatedExecutor(world)
    # short settle windows: a row written at start-up that flaps waits for them (issue 14)
    config = CatalogConfig(litellm_settle_seconds=0.2, litellm_settle_cap_seconds=1.0)
    loop = CatalogLoop(config, [executor])
    async with anyio.create_task_group() as tg:
        await tg.start(loop.run)
        await _start_loop(loop, world, [b.kubeai_model("llama"), b.kubeai_model("qwen")])
        await _settle(loop)
        assert set(world.rows) == {"ai-appliance-kubeai-llama", "ai-appliance-kubeai-qwen"}
        writes = len(world.writes)
        # a burst of duplicate events for one object: nothing changes, nothing is written
        for _ in range(100):
            await loop.send(ObjectUpserted(SourceKind.KUBEAI_MODELS, b.kubeai_model("llama", ready=2)))
        await loop.send(world.rows_event())
        await _settle(loop)
        assert len(world.writes) == writes
        # a flapping model: bursts coalesce, the final state wins
        before = len(world.writes)
        for i in range(51):
            await loop.send(ObjectUpserted(SourceKind.KUBEAI_MODELS, b.kubeai_model("qwen", ready=i % 2)))
        await _settle(loop)
        await anyio.sleep(0.5)  # the deferred write goes once the row has been still for 0.2 s
        await _settle(loop)
        assert "ai-appliance-kubeai-qwen" not in world.rows  # the last event (i=50) said not ready
        litellm_writes = [w for w in world.writes[before:] if not isinstance(w, WriteCatalog)]
        assert len(litellm_writes) <= 3  # one burst, one plan: not one write per event
        tg.cancel_scope.cancel()


async def test_standby_loop_writes_nothing_until_it_leads():
    world = SimulatedWorld()
    executor = SimulatedExecutor(world)
    loop = CatalogLoop(CatalogConfig(), [executor], leading=False)
    async with anyio.create_task_group() as tg:
        await tg.start(loop.run)
        await _start_loop(loop, world, [b.kubeai_model("llama")])
        await _settle(loop)
        assert world.writes == []
        await loop.send(LeadershipChanged(True))
        await _settle(loop)
        assert "ai-appliance-kubeai-llama" in world.rows
        tg.cancel_scope.cancel()


async def test_an_exception_in_one_step_is_logged_counted_skipped_and_the_loop_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    """Issue 12 item 3: an exception raised by ``step`` ended the process, and every replica crashed
    again on the same object after each restart. Now that event is skipped with the last good state."""
    import catalog_core.fold as fold

    real_step = fold.step

    def flaky_step(state, event):
        meta = getattr(event, "object", {}).get("metadata", {}) if hasattr(event, "object") else {}
        if meta.get("name") == "poison":
            raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")
        return real_step(state, event)

    monkeypatch.setattr("app.stepping.step", flaky_step)

    class Counting:
        failed: list[Event] = []

        def __getattr__(self, name):
            return lambda *a, **k: None

        def step_failed(self, event: Event) -> None:
            self.failed.append(event)

    telemetry = Counting()
    world = SimulatedWorld()
    loop = CatalogLoop(CatalogConfig(), [SimulatedExecutor(world)], telemetry=telemetry)  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        await tg.start(loop.run)
        await _start_loop(loop, world, [b.kubeai_model("llama")])
        await _settle(loop)
        good = loop.state
        with caplog.at_level("ERROR", logger="model_catalog.loop"):
            poison = b.kubeai_model("poison")
            await loop.send(
                ObjectUpserted(SourceKind.KUBEAI_MODELS, redact_for_source("kubeai-models", poison).obj)
            )
            await _settle(loop)
        assert loop.step_failures == 1 and len(telemetry.failed) == 1
        assert loop.state.stored(SourceKind.KUBEAI_MODELS) == good.stored(
            SourceKind.KUBEAI_MODELS
        )  # the last good state
        line = next(r for r in caplog.records if "skipped" in r.getMessage())
        assert (line.object, line.source, line.error) == ("poison", "kubeai-models", "UnicodeEncodeError")
        # later events are still folded and acted on
        await loop.send(
            ObjectUpserted(
                SourceKind.KUBEAI_MODELS, redact_for_source("kubeai-models", b.kubeai_model("qwen")).obj
            )
        )
        await _settle(loop)
        assert "ai-appliance-kubeai-qwen" in world.rows
        tg.cancel_scope.cancel()


class _Steps:
    """A recorder: every event the loop folds, in order."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def record(self, event: Event, transition: object) -> None:
        self.events.append(event)


def _models(names: Sequence[str]) -> list[ObjectUpserted]:
    source = SourceKind.KUBEAI_MODELS
    return [ObjectUpserted(source, redact_for_source(source.value, b.kubeai_model(n)).obj) for n in names]


async def test_a_tick_says_how_long_the_loop_folded_its_batch(monkeypatch: pytest.MonkeyPatch):
    # The fold of a batch that took 0.3 s (on the loop's clock) is told to the core with the tick after it;
    # a batch that took no time, none.
    from app import loop as loop_module

    clock = [100.0]
    real_step = loop_module.guarded_step

    def slow_step(state, event):  # type: ignore[no-untyped-def]
        if isinstance(event, ObjectUpserted) and event.object["metadata"]["name"] == "slow":
            clock[0] += 0.3
        return real_step(state, event)

    monkeypatch.setattr(loop_module, "guarded_step", slow_step)
    world = SimulatedWorld()
    steps = _Steps()
    loop = CatalogLoop(
        CatalogConfig(), [SimulatedExecutor(world)], recorder=steps, monotonic=lambda: clock[0]
    )
    async with anyio.create_task_group() as tg:
        await tg.start(loop.run)
        await _start_loop(loop, world, [])
        await _settle(loop, 0.5)
        first = len(steps.events)
        await loop.send(_models(["slow"])[0])
        await _settle(loop, 0.5)
        await loop.send(_models(["quick"])[0])
        await _settle(loop, 0.5)
        tg.cancel_scope.cancel()
    after = steps.events[first:]
    ticks = [
        next(e for e in after[i:] if isinstance(e, Ticked))
        for i, e in enumerate(after)
        if isinstance(e, ObjectUpserted) and e.object["metadata"]["name"] in ("slow", "quick")
    ]
    assert [t.busy for t in ticks] == [pytest.approx(0.3), 0.0]
