"""The command queue: one entry per key (the newest command wins), bounded concurrency, never the
same key twice at once.

Like controller-runtime's workqueue: a burst of commands for one key becomes
one execution of the last of them; a key being executed is not started again
until it finishes; some keys (the catalog ConfigMap) have a minimum interval
between executions so bursts coalesce into few writes.

Commands run in lanes, each with its own FIFO and its own workers: what routes depend on (LiteLLM rows,
the catalog, AgentTemplates, rollouts, and the Secret watch that reads the keys), Kubernetes Events,
health probes, and the re-reads of LiteLLM. So no number of Events or slow probes ever delays a route
write: a 5,000-item edit makes Events that wait in their own lane, one at a time and in order, while the
writes go on; a re-read waiting out its pace holds no write's worker.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from enum import StrEnum

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from adapters.ports import Executor
from catalog_core.commands import READ_COMMANDS, Command, EmitKubernetesEvent, ObserveLiteLLM, ProbeRuntime
from catalog_core.events import CommandCompleted, Event, Outcome

log = logging.getLogger("model_catalog.queue")

Deliver = Callable[[Sequence[Event]], Awaitable[None]]
Observe = Callable[[Command, float, float, Sequence[Event]], None]  # command, submitted, started, outcome


class Lane(StrEnum):
    ROUTES = "routes"  # LiteLLM rows, the catalog, AgentTemplates, rollouts, the Secret watch
    EVENTS = "events"  # Kubernetes Events: one at a time, so they are written in the order planned
    PROBES = "probes"  # runtimes' health probes (each may take its whole timeout)
    READS = "reads"  # the core's re-reads of LiteLLM: one at a time, paced without holding a write's worker


def lane_of(command: Command) -> Lane:
    if isinstance(command, EmitKubernetesEvent):
        return Lane.EVENTS
    if isinstance(command, ProbeRuntime):
        return Lane.PROBES
    if isinstance(command, ObserveLiteLLM):
        return Lane.READS
    return Lane.ROUTES


EVENT_CONCURRENCY = 1  # Events are written in the order the core planned them (a recovery after a failure)


def _key(command: Command) -> str:
    return str(command.key)


class CommandQueue:
    def __init__(
        self,
        executors: Sequence[Executor],
        deliver: Deliver,
        *,
        concurrency: int = 4,
        min_interval: Callable[[str], float] = lambda key: 0.0,
        observe: Observe | None = None,
        still_wanted: Callable[[Command], bool] = lambda command: True,
        clock: Callable[[], float] = time.monotonic,
        lanes: Mapping[Lane, int] | None = None,
    ) -> None:
        """``concurrency``: route writes at once; ``lanes``: the workers of each lane (default: that many
        route commands and probes, one Event)."""
        self._executors = list(executors)
        self._deliver = deliver
        self._workers = {
            Lane.ROUTES: concurrency,
            Lane.EVENTS: EVENT_CONCURRENCY,
            Lane.PROBES: concurrency,
            Lane.READS: 1,
            **(lanes or {}),
        }
        self._min_interval = min_interval
        self._observe = observe
        self._still_wanted = still_wanted
        self._clock = clock
        self._pending: dict[str, Command] = {}
        self._submitted_at: dict[str, float] = {}
        self._running: dict[str, anyio.CancelScope] = {}
        self._last_done: dict[str, float] = {}
        self._scheduled: set[str] = set()
        self._ready: dict[Lane, tuple[MemoryObjectSendStream[str], MemoryObjectReceiveStream[str]]] = {
            lane: anyio.create_memory_object_stream[str](math.inf) for lane in Lane
        }
        self._tg: TaskGroup | None = None

    @property
    def depth(self) -> int:
        return len(self._pending) + len(self._running)

    def submit(self, command: Command, submitted_at: float | None = None) -> None:
        """Queue ``command``, replacing any queued command for the same key."""
        key = _key(command)
        self._pending[key] = command
        self._submitted_at.setdefault(key, submitted_at if submitted_at is not None else self._clock())
        self._wake(key)

    def drop_writes(self) -> None:
        """Leadership lost: forget queued writes and cancel the ones under way (reads continue)."""
        for key, command in list(self._pending.items()):
            if not isinstance(command, READ_COMMANDS):
                del self._pending[key]
                self._submitted_at.pop(key, None)
        for scope in self._running.values():
            scope.cancel()

    def _wake(self, key: str) -> None:
        if key in self._running or key in self._scheduled:
            return
        wait = self._last_done.get(key, -math.inf) + self._min_interval(key) - self._clock()
        self._scheduled.add(key)
        ready = self._ready[lane_of(self._pending[key])][0]
        if wait > 0 and self._tg is not None:
            self._tg.start_soon(self._later, ready, key, wait)
        else:
            ready.send_nowait(key)

    @staticmethod
    async def _later(ready: MemoryObjectSendStream[str], key: str, wait: float) -> None:
        await anyio.sleep(wait)
        ready.send_nowait(key)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            self._tg = tg
            for lane, workers in self._workers.items():
                for _ in range(workers):
                    tg.start_soon(self._worker, self._ready[lane][1])
            task_status.started()

    async def _worker(self, ready: MemoryObjectReceiveStream[str]) -> None:
        async for key in ready:
            self._scheduled.discard(key)
            command = self._pending.pop(key, None)
            if command is None:
                continue
            if not self._still_wanted(command):
                self._submitted_at.pop(key, None)
                continue  # withdrawn by a later plan (desired and observed agree again)
            submitted = self._submitted_at.pop(key, self._clock())
            started = self._clock()
            with anyio.CancelScope() as scope:
                self._running[key] = scope
                try:
                    events = await self._execute(command)
                finally:
                    del self._running[key]
                    if self._min_interval(key) > 0:  # only paced keys need it (an Event's key is new)
                        self._last_done[key] = self._clock()
                if self._observe is not None:
                    self._observe(command, submitted, started, events)
                await self._deliver(events)
            if scope.cancelled_caught:
                log.info("write abandoned: leadership lost", extra={"key": key})
            if key in self._pending:
                self._wake(key)

    async def _execute(self, command: Command) -> Sequence[Event]:
        executor = next((e for e in self._executors if e.handles(command)), None)
        if executor is None:
            log.error("no executor for command", extra={"kind": type(command).__name__, "key": _key(command)})
            return [CommandCompleted(_key(command), command.id, Outcome.TERMINAL, reason="NoExecutor")]
        try:
            return await executor.execute(command)
        except Exception as exc:  # an executor must not raise; if one does, the loop survives it
            log.exception("executor raised", extra={"kind": type(command).__name__, "key": _key(command)})
            detail = f"{type(exc).__name__}"
            return [
                CommandCompleted(_key(command), command.id, Outcome.RETRY, retry_after=5.0, detail=detail)
            ]
