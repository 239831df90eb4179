"""The control loop: one bounded event stream -> the fold -> the command queue -> outcome events.

It drains every event that is waiting, folds them, then ticks once: a burst
becomes one plan. Between bursts it sleeps until the next event or the core's
next deadline (a retry's backoff, a health probe), whichever comes first.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import anyio
from anyio.abc import ObjectSendStream
from anyio.streams.memory import MemoryObjectReceiveStream

from adapters.ports import Executor
from app.queue import CommandQueue
from app.stepping import event_identity, guarded_step, log_step_failure, where
from catalog_core import raw
from catalog_core.commands import Command, EmitKubernetesEvent, ObjectRef, WriteCatalog
from catalog_core.config import CatalogConfig
from catalog_core.events import (
    CommandCompleted,
    Event,
    LeadershipChanged,
    ObjectDeleted,
    ObjectUpserted,
    Outcome,
    Ticked,
)
from catalog_core.fold import Transition, initial_state
from catalog_core.keys import is_catalog_key, is_litellm_key
from catalog_core.plan import next_deadline
from catalog_core.state import CatalogState, RouteRecord
from catalog_core.values import text_problem
from contracts.kinds import RESOURCES

log = logging.getLogger("model_catalog.loop")

STEP_FAILED = "StepFailed"  # the reason of the Warning Event about an event the fold raised on
# A tick that raised leaves the state it planned from as it was, so whatever was due is still due: wait
# for the next event or this backoff rather than tick again at once (a busy loop, an ERROR line each).
TICK_RETRY_FIRST = 1.0
TICK_RETRY_MAX = 60.0
ANNOUNCE_EVERY = 60.0  # seconds between two Warning Events about the same failure
_SINCE_GOOD_TICK = 10  # identities of the events folded since the last good tick, kept for its log line


class Recorder(Protocol):
    def record(self, event: Event, transition: Transition) -> None: ...


class Telemetry(Protocol):
    def event_folded(self, event: Event) -> None: ...
    def commands_planned(
        self, commands: Sequence[Command], oldest_event_at: float, events: Sequence[Event]
    ) -> None: ...
    def command_done(
        self, command: Command, submitted_at: float, started_at: float, events: Sequence[Event]
    ) -> None: ...
    def state_changed(self, state: CatalogState) -> None: ...
    def step_failed(self, event: Event) -> None: ...


class CatalogLoop:
    """Owns the core state. Everything else talks to it through events and read-only views."""

    def __init__(
        self,
        config: CatalogConfig,
        executors: Sequence[Executor],
        *,
        recorder: Recorder | None = None,
        telemetry: Telemetry | None = None,
        buffer: int = 1024,
        max_batch: int = 2000,
        write_concurrency: int = 4,
        catalog_min_interval: float = 0.5,
        litellm_min_interval: float = 1.0,
        leading: bool = True,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state: CatalogState = initial_state(config)
        self._send, self._receive = anyio.create_memory_object_stream[Event](buffer)
        self._recorder = recorder
        self._telemetry = telemetry
        self._max_batch = max_batch
        self._clock = clock
        self._monotonic = monotonic
        self._changed = anyio.Event()
        self._ticked = anyio.Event()
        self.version = 0  # increments whenever the published view changes
        self.busy_since: float | None = None
        self.folded = 0
        self.step_failures = 0  # events the fold raised on (skipped; see app.stepping)
        self._executors = list(executors)
        self._tg: anyio.abc.TaskGroup | None = None
        self._announced: dict[str, float] = {}  # Warning Event id -> when it was last written
        self._tick_retry = 0.0  # the backoff after a failed tick; 0 while ticks succeed
        self._tick_retry_at: float | None = None
        self._since_good_tick: list[dict[str, str]] = []
        self._folded_since_good_tick = 0
        self.queue = CommandQueue(
            executors,
            self._deliver,
            concurrency=write_concurrency,
            min_interval=lambda key: (
                catalog_min_interval
                if is_catalog_key(key)
                else litellm_min_interval
                if is_litellm_key(key)
                else 0.0
            ),
            observe=telemetry.command_done if telemetry is not None else None,
            still_wanted=self._still_wanted,
            clock=monotonic,
        )
        if not leading:
            self._apply(LeadershipChanged(False))
        # The state as of the last tick: what another thread may read as a whole (``state`` also passes
        # through the states between a burst's events, before the tick that plans from them).
        self.ticked: CatalogState = self.state

    def _still_wanted(self, command: Command) -> bool:
        """A queued command runs only if the latest plan still holds it for its key."""
        current = self.state.control.inflight.get(command.key)
        return current is not None and current.id == command.id

    # --- inputs
    def sender(self) -> ObjectSendStream[Event]:
        """A send side for one source (close it when the source ends)."""
        return self._send.clone()

    async def send(self, event: Event) -> None:
        await self._send.send(event)

    async def _deliver(self, events: Sequence[Event]) -> None:
        for event in events:
            await self._send.send(event)

    # --- outputs
    async def wait_changed(self, since: int | None = None) -> None:
        """Return once the published view changed after version ``since`` (default: now)."""
        seen = self.version if since is None else since
        while self.version == seen:
            await self._changed.wait()

    async def wait_changed_or_tick(self) -> None:
        """Return after the next tick."""
        await self._ticked.wait()

    def records(self) -> list[RouteRecord]:
        return list(self.state.derived.records.values())

    # --- the loop
    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            await tg.start(self.queue.run)
            tg.start_soon(self._fold_loop, self._receive)
            task_status.started()

    async def _fold_loop(self, receive: MemoryObjectReceiveStream[Event]) -> None:
        while True:
            batch = await self._next_batch(receive)
            self.busy_since = self._monotonic()
            try:
                oldest = self.busy_since
                before = self.state
                for event in batch:
                    self._apply(event)
                failures = self.step_failures
                # How long the batch took to fold: what was delivered meanwhile waited (Ticked.busy). In
                # whole milliseconds, so the usual sub-millisecond fold records no busy time at all.
                busy = round(self._monotonic() - self.busy_since, 3)
                commands = self._apply(Ticked(self._clock(), busy=busy))
                self.ticked = self.state
                self._tick_done(ok=self.step_failures == failures)
                for command in commands:
                    self.queue.submit(command, submitted_at=oldest)
                if self._telemetry is not None:
                    self._telemetry.commands_planned(commands, oldest, batch)
                    if self.state is not before:
                        self._telemetry.state_changed(self.state)
                self._log_changes(before, self.state, commands)
                if self._published_view_changed(before, self.state):
                    self.version += 1
                    self._changed.set()
                    self._changed = anyio.Event()
                self._ticked.set()
                self._ticked = anyio.Event()
            finally:
                self.busy_since = None

    async def _next_batch(self, receive: MemoryObjectReceiveStream[Event]) -> list[Event]:
        deadline = self._tick_retry_at if self._tick_retry_at is not None else next_deadline(self.state)
        timeout = math.inf if deadline is None else max(0.0, deadline - self._clock())
        batch: list[Event] = []
        with anyio.move_on_after(timeout):
            batch.append(await receive.receive())
        while len(batch) < self._max_batch:
            try:
                batch.append(receive.receive_nowait())
            except anyio.WouldBlock:
                break
        return batch

    def _apply(self, event: Event) -> tuple[Command, ...]:
        transition, error = guarded_step(self.state, event)
        if error is not None:
            self._step_failed(event, error)
        elif not isinstance(event, Ticked):
            self._folded_since_good_tick += 1
            if len(self._since_good_tick) < _SINCE_GOOD_TICK:
                self._since_good_tick.append(event_identity(event))
        self.state = transition.state
        self.folded += 1
        if self._recorder is not None:
            self._recorder.record(event, transition)
        if self._telemetry is not None and not isinstance(event, Ticked) and error is None:
            self._telemetry.event_folded(event)
        if isinstance(event, LeadershipChanged) and not event.leading:
            self.queue.drop_writes()  # even if its step failed: a replica that does not lead must not write
        return transition.commands

    # --- an event the fold raised on (app.stepping)
    def _step_failed(self, event: Event, error: Exception) -> None:
        self.step_failures += 1
        context: dict[str, object] = {}
        if isinstance(event, Ticked):
            # A tick plans from what earlier events stored: the input that trips it came with one of them.
            context = {
                "events_since_last_good_tick": self._folded_since_good_tick,
                "first_events_since_last_good_tick": list(self._since_good_tick),
            }
        log_step_failure(event, error, **context)
        if self._telemetry is not None:
            self._telemetry.step_failed(event)
        self._announce(event, error)

    def _tick_done(self, *, ok: bool) -> None:
        if ok:
            self._tick_retry, self._tick_retry_at = 0.0, None
            self._since_good_tick.clear()
            self._folded_since_good_tick = 0
            return
        self._tick_retry = min(TICK_RETRY_MAX, self._tick_retry * 2 or TICK_RETRY_FIRST)
        self._tick_retry_at = self._clock() + self._tick_retry

    def _involved(self, event: Event) -> ObjectRef | None:
        """What a Warning Event about a failed step is about: the event's object, or for a tick the
        catalog ConfigMap (the output that is no longer kept current)."""
        cfg = self.state.config
        if isinstance(event, Ticked):
            return ObjectRef("v1", "ConfigMap", cfg.namespace, cfg.catalog_configmap, "")
        if not isinstance(event, ObjectUpserted | ObjectDeleted):
            return None  # about no one object (a listing, an outcome): the log line and the metric say it
        obj, resource = event.object, RESOURCES[event.source]
        ref = ObjectRef(
            raw.string(obj, "apiVersion") or resource.api_version,
            raw.string(obj, "kind") or resource.kind,
            raw.namespace_of(obj),
            raw.string(obj, "metadata", "name") or "",
            raw.uid_of(obj),
        )
        fields = (ref.api_version, ref.kind, ref.namespace, ref.name, ref.uid)
        if not (ref.namespace and ref.name) or any(text_problem(f) or len(f) > 253 for f in fields):
            return None  # an identity the API server would refuse, or that cannot even be encoded
        return ref

    def _announce(self, event: Event, error: Exception) -> None:
        """A Warning Event, written by the executor of the core's own Events; only the leader writes."""
        involved = self._involved(event)
        if self._tg is None or involved is None or not self.state.control.leading:
            return
        if isinstance(event, Ticked):
            kept = "the catalog and LiteLLM routes last written are kept until planning succeeds again"
        else:
            kept = "this version of the object is ignored and the last good state kept"
        message = (
            f"model-catalog failed on this input ({type(error).__name__} at {where(error)}); {kept}. "
            "This is a bug in model-catalog; its log names the event."
        )
        command = EmitKubernetesEvent(involved, STEP_FAILED, message)
        executor = next((e for e in self._executors if e.handles(command)), None)
        now = self._monotonic()
        if executor is None or now - self._announced.get(command.id, -math.inf) < ANNOUNCE_EVERY:
            return  # the same failure again (each retried tick, each resync): one Event a minute at most
        if len(self._announced) >= 1000:
            self._announced.clear()
        self._announced[command.id] = now
        self._tg.start_soon(self._emit, executor, command)

    async def _emit(self, executor: Executor, command: EmitKubernetesEvent) -> None:
        events: Sequence[Event] = ()
        try:
            events = await executor.execute(command)
        except Exception as exc:  # an executor must not raise; if one does, only this Event is lost
            log.warning("a Warning Event was not written", extra={"error": type(exc).__name__})
        # Not fed to the core: it did not plan this Event, so the outcome is worth a log line at most.
        if any(isinstance(e, CommandCompleted) and e.outcome is not Outcome.APPLIED for e in events):
            log.warning("a Warning Event was not written", extra={"key": command.key})

    @staticmethod
    def _published_view_changed(before: CatalogState, after: CatalogState) -> bool:
        b, a = before.derived, after.derived
        return (
            b.records is not a.records
            or b.entries is not a.entries
            or before.cluster.catalog is not after.cluster.catalog
        )

    @staticmethod
    def _log_changes(before: CatalogState, after: CatalogState, commands: Sequence[Command]) -> None:
        """One line per decision that changed something: a command issued or a route's state changed."""
        for command in commands:
            extra: dict[str, object] = {
                "decision": type(command).__name__,
                "key": command.key,
                "command_id": command.id,
            }
            if isinstance(command, WriteCatalog):
                extra["catalog_hash"] = command.catalog_hash
            log.info("command issued", extra=extra)
        old, new = before.derived.records, after.derived.records
        if old is new:
            return
        # Only what changed (a structural diff of the two maps): walking every record here made each
        # tick O(models), 20% of a busy loop at 1,000 models.
        for item, previous, record in old.changes(new):
            if record is None:
                log.info("route removed", extra={"decision": "route", "item": item, "state": "removed"})
            elif previous is None or (previous.state, previous.reason) != (record.state, record.reason):
                log.info(
                    "route %s",
                    record.state.value,
                    extra={
                        "decision": "route",
                        "source": record.source,
                        "model": record.name,
                        "state": record.state.value,
                        "reason": record.reason.value,
                        "detail": record.message,
                    },
                )
