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
from app.stepping import guarded_step, log_step_failure
from catalog_core.commands import Command, WriteCatalog
from catalog_core.config import CatalogConfig
from catalog_core.events import Event, LeadershipChanged, SourceKind, Ticked
from catalog_core.fold import Transition
from catalog_core.plan import next_deadline
from catalog_core.state import CatalogState, RouteRecord, initial_state

log = logging.getLogger("model_catalog.loop")


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
        self.queue = CommandQueue(
            executors,
            self._deliver,
            concurrency=write_concurrency,
            min_interval=lambda key: (
                catalog_min_interval
                if key.startswith("catalog/")
                else litellm_min_interval
                if key.startswith("litellm/")
                else 0.0
            ),
            observe=telemetry.command_done if telemetry is not None else None,
            still_wanted=self._still_wanted,
            clock=monotonic,
        )
        if not leading:
            self._apply(LeadershipChanged(False))

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

    def sources_listed(self, sources: Sequence[SourceKind]) -> bool:
        return all(self.state.source(kind).known for kind in sources)

    # --- the loop
    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
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
                commands = self._apply(Ticked(self._clock()))
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
        deadline = next_deadline(self.state)
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
            self.step_failures += 1
            log_step_failure(event, error)
            if self._telemetry is not None:
                self._telemetry.step_failed(event)
        self.state = transition.state
        self.folded += 1
        if self._recorder is not None:
            self._recorder.record(event, transition)
        if self._telemetry is not None and not isinstance(event, Ticked):
            self._telemetry.event_folded(event)
        if isinstance(event, LeadershipChanged) and not event.leading:
            self.queue.drop_writes()
        return transition.commands

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
        # tick O(models), 20% of a busy loop at 1,000 models (issue 7).
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
