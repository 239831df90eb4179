"""The /model/info observer: when it polls, what it sends, and how it stays consistent with writes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from anyio.abc import ObjectSendStream

from adapters.backoff import Backoff
from adapters.litellm.bounds import AnswerBounds
from adapters.litellm.client import REFUSED_KEY_TEXT, LiteLLMClient
from adapters.litellm.executor import LiteLLMExecutor
from adapters.litellm.observer import LiteLLMObserver
from adapters.litellm.sync import SharedExclusiveLock
from adapters.vault import SecretVault
from catalog_core.commands import LiteralKey, ObserveLiteLLM, ReadReason, UpdateLiteLLMModel
from catalog_core.events import CommandCompleted, Event, LiteLLMRowsObserved, LiteLLMUnreachable, Outcome
from catalog_core.ingest import _PREPARED_TEXTS, _text_of
from catalog_core.jsonval import Json
from tests.adapters.litellm.conftest import Peer
from tests.fakes.litellm import INFO, PATCH, Fault

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def running(observer: LiteLLMObserver) -> AsyncIterator[list[Event]]:
    """Run the observer in the background; the list fills with what it sends."""
    received: list[Event] = []
    send, receive = anyio.create_memory_object_stream[Event](100)

    async def collect() -> None:
        async for event in receive:
            received.append(event)

    async with anyio.create_task_group() as tg:
        tg.start_soon(observer.run, send)
        tg.start_soon(collect)
        try:
            yield received
        finally:
            tg.cancel_scope.cancel()


async def until(predicate: Any, timeout: float = 3.0) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.005)


def rows_events(events: list[Event]) -> list[LiteLLMRowsObserved]:
    return [e for e in events if isinstance(e, LiteLLMRowsObserved)]


def seed(peer: Peer, suffix: str = "m", api_base: str = "http://a/v1") -> str:
    assert peer.fake is not None
    return peer.fake.seed(
        peer.name(suffix),
        {"model": f"openai/{peer.name(suffix)}", "api_base": api_base, "api_key": "sk-hidden-value-1"},
        {"id": peer.id(suffix), "ai_appliance_owner": "model-catalog"},
    )


async def test_polls_at_start_and_every_resync(fake_peer: Peer) -> None:
    seed(fake_peer)
    observer = LiteLLMObserver(fake_peer.client(), resync_seconds=0.1)
    async with running(observer) as events:
        await until(lambda: len(rows_events(events)) >= 3)
    first = rows_events(events)[0].rows
    assert [r["model_info"]["id"] for r in first] == [fake_peer.id("m")]
    assert "api_key" not in first[0]["litellm_params"]  # whitelisted
    assert "db_model" not in first[0]["model_info"]


async def test_a_poll_prepares_the_texts_its_fold_starts_with(fake_peer: Peer) -> None:
    """At 10,000 rows the rows' texts are ~45 ms of the observation's fold: the observer prepares them
    in steps, and they are exactly those the fold would compute (else the fold would parse every row)."""
    for i in range(30):
        seed(fake_peer, f"m{i}")
    observer = LiteLLMObserver(fake_peer.client(), resync_seconds=60)
    send, receive = anyio.create_memory_object_stream[Event](10)
    await observer.poll_once(send)
    event = receive.receive_nowait()
    assert isinstance(event, LiteLLMRowsObserved) and len(event.rows) == 30
    assert _PREPARED_TEXTS.take(event.rows) == [_text_of(row) for row in event.rows]


async def test_a_planned_read_polls_at_once_and_answers_with_its_observation(fake_peer: Peer) -> None:
    """The core's re-read (``ObserveLiteLLM``): one poll, whose event is the answer (no outcome), and the
    next resync counts from it."""
    assert fake_peer.fake is not None
    seed(fake_peer)
    observer = LiteLLMObserver(fake_peer.client(), resync_seconds=60)
    read = ObserveLiteLLM(ReadReason.AFTER_WRITES)
    assert observer.handles(read) and not observer.handles(update(fake_peer, "http://a/v1"))
    async with running(observer) as events:
        await until(lambda: observer.polls == 1)
        with anyio.fail_after(2):
            assert await observer.execute(read) == []
        await until(lambda: len(events) == 2)
    assert observer.polls == 2 and fake_peer.fake.requests[INFO] == 2
    assert [r["model_info"]["id"] for r in rows_events(events)[1].rows] == [fake_peer.id("m")]


async def test_a_planned_read_of_a_failing_litellm_always_gets_an_answer(fake_peer: Peer) -> None:
    """The resync tells the core of a failure once; a planned read is answered even when nothing changed,
    so the core knows it is over."""
    assert fake_peer.fake is not None
    fake_peer.fake.inject(Fault(status=503, endpoints=frozenset({INFO})))
    observer = LiteLLMObserver(fake_peer.client(), resync_seconds=60, backoff=Backoff(base=30, cap=30))
    send, receive = anyio.create_memory_object_stream[Event](10)
    await observer.poll_once(send)
    await observer.poll_once(send)
    assert isinstance(receive.receive_nowait(), LiteLLMUnreachable)
    with pytest.raises(anyio.WouldBlock):
        receive.receive_nowait()  # the same failure again: not sent twice
    observer._send = send  # as ``run`` does
    assert await observer.execute(ObserveLiteLLM(ReadReason.WRITE_SAW_FAILURE)) == []
    answer = receive.receive_nowait()
    assert isinstance(answer, LiteLLMUnreachable) and answer.reason == "unreachable"


async def test_a_planned_read_before_the_source_runs_is_retried() -> None:
    observer = LiteLLMObserver(LiteLLMClient("http://127.0.0.1:9", "k"), resync_seconds=60)
    read = ObserveLiteLLM(ReadReason.AFTER_WRITES)
    [done] = await observer.execute(read)
    assert isinstance(done, CommandCompleted) and done.outcome is Outcome.RETRY and done.retry_after > 0
    assert (done.key, done.command_id) == (read.key, read.id)


def test_a_down_litellm_is_looked_at_again_within_ten_seconds_whatever_the_resync(fake_peer: Peer) -> None:
    """Regression (fault suite): with the default 30 s resync, polls of a down LiteLLM backed off to
    30 s, so the writes held back by the outage waited up to that long after it was back."""
    from adapters.litellm.observer import UNREACHABLE_POLL_CAP

    observer = LiteLLMObserver(fake_peer.client(), resync_seconds=30)
    delays = [observer._backoff.next() for _ in range(30)]
    assert max(delays) <= UNREACHABLE_POLL_CAP <= 10.0


async def test_unreachable_is_sent_once_while_polls_back_off(fake_peer: Peer) -> None:
    assert fake_peer.fake is not None
    seed(fake_peer)
    down = fake_peer.fake.refuse()
    observer = LiteLLMObserver(fake_peer.client(), resync_seconds=60, backoff=Backoff(base=0.02, cap=0.08))
    async with running(observer) as events:
        await until(lambda: observer.polls >= 5)
        assert [type(e) for e in events] == [LiteLLMUnreachable]
        assert isinstance(events[0], LiteLLMUnreachable) and events[0].reason == "unreachable"
        assert events[0].detail.startswith("GET /model/info")
        fake_peer.fake.faults.remove(down)
        await until(lambda: len(rows_events(events)) == 1)
    assert observer.health.status.value == "ok"


async def test_each_failure_kind_is_reported_when_it_changes(fake_peer: Peer) -> None:
    assert fake_peer.fake is not None
    fake = fake_peer.fake
    send, receive = anyio.create_memory_object_stream[Event](100)
    observer = LiteLLMObserver(fake_peer.client())

    async def poll() -> list[Event]:
        await observer.poll_once(send)
        out = []
        while True:
            try:
                out.append(receive.receive_nowait())
            except anyio.WouldBlock:
                return out

    auth = fake.fail(401)
    assert await poll() == [LiteLLMUnreachable("unauthorized", f"HTTP 401: {REFUSED_KEY_TEXT[401]}")]
    assert await poll() == []
    fake.faults.remove(auth)
    shape = fake.inject(Fault(status=200, payload={"unexpected": True}))
    [error] = await poll()
    assert isinstance(error, LiteLLMUnreachable) and error.reason == "error"
    fake.faults.remove(shape)
    fake.fail(503, times=1)
    [unreachable] = await poll()
    assert isinstance(unreachable, LiteLLMUnreachable) and unreachable.reason == "unreachable"
    [rows] = await poll()
    assert isinstance(rows, LiteLLMRowsObserved)


async def test_the_loop_survives_anything_a_transport_raises(fake_peer: Peer) -> None:
    calls = 0

    def flaky(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("boom")
        return httpx.Response(200, json={"data": []})

    observer = LiteLLMObserver(
        fake_peer.client(transport=httpx.MockTransport(flaky)), backoff=Backoff(base=0.01, cap=0.02)
    )
    async with running(observer) as events:
        await until(lambda: len(events) == 2)
    assert isinstance(events[0], LiteLLMUnreachable) and events[0].reason == "error"
    assert events[1] == LiteLLMRowsObserved(())


# --- writes and polls: an observation is never older than an outcome it follows


def update(peer: Peer, api_base: str) -> UpdateLiteLLMModel:
    name = peer.name("m")
    return UpdateLiteLLMModel(
        peer.id("m"),
        name,
        Json.of({"model": f"openai/{name}", "api_base": api_base}),
        Json.of({"id": peer.id("m")}),
        LiteralKey("none"),
    )


class Recording(ObjectSendStream[Event]):
    """A send stream that records the order of what reached it."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def send(self, item: Event) -> None:
        if isinstance(item, LiteLLMRowsObserved):
            bases = [r["litellm_params"].get("api_base") for r in item.rows]
            self.log.append(f"rows:{bases[0] if bases else None}")

    async def aclose(self) -> None:
        pass


async def _until(condition: Any) -> None:
    # A deadlock (one side waiting for the other) fails here instead of hanging; no bound on speed.
    with anyio.fail_after(60):
        while not condition():
            await anyio.sleep(0.005)


async def test_a_poll_does_not_wait_for_a_write_in_flight_whose_outcome_comes_after(fake_peer: Peer) -> None:
    assert fake_peer.fake is not None
    fake = fake_peer.fake
    seed(fake_peer)
    release_patch = anyio.Event()
    fake.inject(Fault(hold=release_patch, endpoints=frozenset({PATCH}), times=1))
    client = fake_peer.client()
    observer = LiteLLMObserver(client)
    executor = LiteLLMExecutor(client, SecretVault(), observer.shared)
    log: list[str] = []

    async def write() -> None:
        [done] = await executor.execute(update(fake_peer, "http://new/v1"))
        assert isinstance(done, CommandCompleted) and done.outcome is Outcome.APPLIED
        log.append("outcome")

    async with anyio.create_task_group() as tg:
        tg.start_soon(write)
        await _until(lambda: fake.requests[PATCH])  # the PATCH waits at LiteLLM, holding no lock
        assert observer.lock.holders == (0, False)
        with anyio.fail_after(60):  # the poll ends while the write is still held
            await observer.poll_once(Recording(log))
        assert log == ["rows:http://a/v1"]
        release_patch.set()
    # The poll saw the old row and said so before the write's outcome (the core then plans a new look).
    assert log == ["rows:http://a/v1", "outcome"]


async def test_a_write_goes_out_during_a_poll_and_its_outcome_comes_after_the_polls_event(
    fake_peer: Peer,
) -> None:
    assert fake_peer.fake is not None
    fake = fake_peer.fake
    seed(fake_peer)
    release_get = anyio.Event()
    fake.inject(Fault(hold=release_get, endpoints=frozenset({INFO}), times=1))
    client = fake_peer.client()
    observer = LiteLLMObserver(client)
    executor = LiteLLMExecutor(client, SecretVault(), observer.shared)
    log: list[str] = []

    async def write() -> None:
        await executor.execute(update(fake_peer, "http://new/v1"))
        log.append("outcome")

    async with anyio.create_task_group() as tg:
        tg.start_soon(observer.poll_once, Recording(log))
        await _until(lambda: fake.requests[INFO])  # the GET waits at LiteLLM, the poll holding the lock
        assert observer.lock.holders == (0, True)
        tg.start_soon(write)
        # The PATCH reaches LiteLLM while the GET is still held: it did not wait for the poll ...
        await _until(lambda: fake.requests[PATCH])
        assert log == []
        release_get.set()
    # ... and its outcome reached the stream after the poll's event (which here already shows it).
    assert log == ["rows:http://new/v1", "outcome"]


async def test_the_lock_shares_writes_and_prefers_a_waiting_poll() -> None:
    lock = SharedExclusiveLock()
    order: list[str] = []
    release_writes = anyio.Event()

    async def writer(name: str) -> None:
        async with lock.shared():
            order.append(f"{name} in")
            await release_writes.wait()
            order.append(f"{name} out")

    async def poll() -> None:
        async with lock.exclusive():
            order.append("poll")

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer, "w1")
        tg.start_soon(writer, "w2")
        await until(lambda: lock.holders == (2, False))  # writes share
        tg.start_soon(poll)
        await anyio.sleep(0.02)
        tg.start_soon(writer, "w3")  # arrives after a poll is waiting: goes after it
        await anyio.sleep(0.02)
        assert order == ["w1 in", "w2 in"]
        release_writes.set()
    assert order.index("poll") > order.index("w2 out")
    assert order.index("w3 in") > order.index("poll")


async def test_a_cancelled_waiting_poll_does_not_block_writes() -> None:
    lock = SharedExclusiveLock()
    hold = anyio.Event()

    async def long_write() -> None:
        async with lock.shared():
            await hold.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(long_write)
        await until(lambda: lock.holders == (1, False))
        with anyio.move_on_after(0.05):
            async with lock.exclusive():
                raise AssertionError("the write still holds the lock")
        with anyio.fail_after(30):
            async with lock.shared():
                assert lock.holders == (2, False)
        hold.set()


async def test_a_proxy_without_a_model_list_is_observed_as_empty(fake_peer: Peer) -> None:
    """Not an error: a fresh LiteLLM has no rows, and the core must be able to plan the first one."""
    send, receive = anyio.create_memory_object_stream[Event](10)
    observer = LiteLLMObserver(fake_peer.client())
    assert await observer.poll_once(send)
    assert receive.receive_nowait() == LiteLLMRowsObserved(())
    assert observer.health.status.value == "ok"


async def test_many_rows_are_whitelisted_in_chunks_letting_other_tasks_run(fake_peer: Peer) -> None:
    # At 10,000 rows the whitelist pass takes ~30 ms: the watch tasks must not wait for all of it.
    from adapters.litellm import observer as observer_module
    from catalog_core.sources.litellm_row import observed_row

    assert fake_peer.fake is not None
    rows = 3 * observer_module.WHITELIST_CHUNK + 7
    for i in range(rows):
        seed(fake_peer, f"m{i}")
    observer = LiteLLMObserver(fake_peer.client(), resync_seconds=60)
    send, receive = anyio.create_memory_object_stream[Event](10)
    ran: list[int] = []
    original = observer_module.observed_row
    seen_by_chunk: list[int] = []

    def counting(row: Any) -> dict[str, Any]:
        seen_by_chunk.append(len(ran))  # how often the other task had run when this row was reduced
        return original(row)

    async def other_task() -> None:
        while True:
            ran.append(1)
            await anyio.lowlevel.checkpoint()

    observer_module.observed_row = counting  # type: ignore[assignment]
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(other_task)
            await observer.poll_once(send)
            tg.cancel_scope.cancel()
    finally:
        observer_module.observed_row = original  # type: ignore[assignment]
    event = receive.receive_nowait()
    assert isinstance(event, LiteLLMRowsObserved)
    assert len(event.rows) == rows
    # every row, whitelisted as one call would, in the order LiteLLM listed them
    answer = await fake_peer.client().info()
    assert list(event.rows) == [observed_row(r) for r in answer.body["data"]]
    # the other task ran between the chunks (4 chunks: at least 3 times more during the pass)
    assert seen_by_chunk[-1] - seen_by_chunk[0] >= 3


def exactly(value: float) -> Any:
    """``value`` up to float rounding: an absolute tolerance. ``pytest.approx``'s default is relative, so
    on clock readings it grows with the clock: ~0.5 ms on a machine up 8 minutes, a second after 12 days."""
    return pytest.approx(value, rel=0, abs=1e-9)


async def test_planned_reads_are_paced_by_the_last_polls_cost(fake_peer: Peer) -> None:
    # A poll that took 50 ms: a planned re-read waits 10x that from its end.
    from adapters.litellm import observer as observer_module

    observer = LiteLLMObserver(fake_peer.client(), resync_seconds=60, max_pace_seconds=2.0)
    send, _receive = anyio.create_memory_object_stream[Event](10)
    await observer.poll_once(send)
    ended = observer._last_poll_end
    observer._last_poll_cost = 0.05  # as if the /model/info answer had taken 50 ms to read
    assert observer.read_not_before() == exactly(ended + observer_module.POLL_COST_FACTOR * 0.05)
    # never more than the longest pace after the poll, however slow the last answer was
    observer._last_poll_cost = 60.0
    assert observer.read_not_before() == exactly(ended + 2.0)
    # a cheap poll leaves no wait to speak of
    observer._last_poll_cost = 0.0001
    assert observer.read_not_before() == exactly(ended + observer_module.POLL_COST_FACTOR * 0.0001)


async def test_a_planned_read_waits_out_its_pace(fake_peer: Peer) -> None:
    observer = LiteLLMObserver(fake_peer.client(), resync_seconds=60, max_pace_seconds=0.2)
    send, receive = anyio.create_memory_object_stream[Event](10)
    await observer.poll_once(send)
    receive.receive_nowait()
    observer._last_poll_cost = 1.0  # a slow poll: the pace is its cap
    first_ended = observer._last_poll_end
    began: list[float] = []
    read_rows = observer._read_rows

    async def timed() -> Any:
        began.append(anyio.current_time())
        return await read_rows()

    observer._read_rows = timed  # type: ignore[method-assign]
    observer._send = send
    await observer.execute(ObserveLiteLLM(ReadReason.AFTER_WRITES))
    assert observer.polls == 2 and isinstance(receive.receive_nowait(), LiteLLMRowsObserved)
    # the second GET went no sooner than the pace allowed (a lower bound: a busy machine only adds)
    assert began and began[0] >= first_ended + 0.2


async def test_the_collector_is_off_while_an_answer_is_parsed_and_reduced_then_on_again(
    fake_peer: Peer,
) -> None:
    import gc

    for i in range(3):
        seed(fake_peer, f"m{i}")
    observer = LiteLLMObserver(fake_peer.client(), resync_seconds=60, pause_collector=True)
    seen_during: list[bool] = []
    real_parse = observer._parse

    def parse(content: bytes) -> Any:
        value = real_parse(content)
        seen_during.append(gc.isenabled())
        return value

    observer._parse = parse  # type: ignore[method-assign]
    send, receive = anyio.create_memory_object_stream[Event](10)
    assert gc.isenabled()
    await observer.poll_once(send)
    assert seen_during == [False] and gc.isenabled() and observer.collector.pauses == 1
    assert len(receive.receive_nowait().rows) == 3  # type: ignore[attr-defined]
    # an answer that is not rows: on again too
    assert fake_peer.fake is not None
    fake_peer.fake.inject(Fault(status=500, endpoints=frozenset({INFO}), times=1))
    await observer.poll_once(send)
    assert gc.isenabled() and observer.collector.pauses == 2
    # a host that turned the collector off keeps it off
    gc.disable()
    try:
        await observer.poll_once(send)
        assert not gc.isenabled() and observer.collector.pauses == 2
    finally:
        gc.enable()


async def test_the_collector_is_left_alone_unless_asked(fake_peer: Peer) -> None:
    import gc

    seed(fake_peer)
    observer = LiteLLMObserver(fake_peer.client(), resync_seconds=60)
    send, _receive = anyio.create_memory_object_stream[Event](10)
    real_parse = observer._parse
    seen: list[bool] = []
    observer._parse = lambda content: (real_parse(content), seen.append(gc.isenabled()))[0]  # type: ignore[method-assign]
    await observer.poll_once(send)
    assert seen == [True] and observer.collector.pauses == 0


async def test_an_answer_past_the_bounds_is_reported_as_an_error_once(fake_peer: Peer) -> None:
    """A /model/info larger than ``AnswerBounds`` is not read whole or parsed: LiteLLM is reported as
    erroring, logged once, and the core is told once (``LiteLLMUnreachable``: it keeps the rows it saw
    last)."""
    assert fake_peer.fake is not None
    fake = fake_peer.fake
    fake.seed(fake_peer.name("kept"), {"model": "openai/kept"}, {"id": fake_peer.id("kept")})
    send, receive = anyio.create_memory_object_stream[Event](100)
    bounds = AnswerBounds(max_bytes=1024 * 1024, max_values=10_000)
    observer = LiteLLMObserver(fake_peer.client(bounds=bounds))
    await observer.poll_once(send)
    assert isinstance(receive.receive_nowait(), LiteLLMRowsObserved)
    values = fake.inject(Fault(status=200, payload={"data": [[] for _ in range(20_000)]}))
    await observer.poll_once(send)
    event = receive.receive_nowait()
    assert isinstance(event, LiteLLMUnreachable) and event.reason == "error"
    assert "more than 10,000 JSON values (CATALOG_LITELLM_MAX_ANSWER_VALUES)" in event.detail
    fake.faults.remove(values)
    fake.inject(Fault(status=200, payload={"data": [{"model_name": "x" * 2_000_000}]}))
    await observer.poll_once(send)
    with pytest.raises(anyio.WouldBlock):  # still erroring: told once
        receive.receive_nowait()
    assert "larger than 1,048,576 bytes (CATALOG_LITELLM_MAX_ANSWER_BYTES)" in observer.health.detail
