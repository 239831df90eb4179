"""Helpers for the kube adapter tests: fast settings, an event collector, a cuttable TCP proxy."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from anyio.streams.memory import MemoryObjectReceiveStream

from adapters.kube import KubeSettings, run_sources
from adapters.ports import Executor, Source
from catalog_core import raw, registry
from catalog_core.commands import (
    Command,
    CreateLiteLLMModel,
    DeleteLiteLLMModel,
    RecreateLiteLLMModel,
    UpdateLiteLLMModel,
)
from catalog_core.config import CatalogConfig
from catalog_core.events import (
    Event,
    ObjectDeleted,
    ObjectUpserted,
    SourceKind,
    SourceListed,
    Ticked,
)
from catalog_core.fold import initial_state, step
from catalog_core.plan import all_records, rendered_catalog
from catalog_core.simulate import SimulatedWorld, converge
from catalog_core.state import CatalogState, RouteRecord

LITELLM_COMMANDS = (CreateLiteLLMModel, UpdateLiteLLMModel, RecreateLiteLLMModel, DeleteLiteLLMModel)

FAST = KubeSettings(
    watch_timeout_seconds=5,
    watch_timeout_jitter=0.0,
    timeout_grace_seconds=2.0,
    request_timeout_seconds=10.0,
    crd_recheck_seconds=0.5,
    retry_base_seconds=0.1,
    retry_cap_seconds=1.0,
    forbidden_recheck_seconds=0.5,
    failing_after=3,
    secret_listing_wait_seconds=10.0,
    secret_poll_seconds=0.5,
)


class Collector:
    """Receives events in the background; tests wait for conditions over everything received."""

    def __init__(self, receive: ObjectReceiveStream[Event]) -> None:
        self.receive = receive
        self.events: list[Event] = []
        self._paused = False

    async def run(self) -> None:
        async for event in self.receive:
            self.events.append(event)

    async def wait_for(
        self, predicate: Callable[[Event], bool], timeout: float = 20.0, after: int = 0
    ) -> Event:
        """The first event (from index ``after``) matching ``predicate``; fails after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events[after:]:
                if predicate(event):
                    return event
            if time.monotonic() > deadline:
                tail = [_short(e) for e in self.events[-15:]]
                raise AssertionError(f"no matching event within {timeout}s; last events: {tail}")
            await anyio.sleep(0.02)

    def index(self, event: Event) -> int:
        return next(i for i, e in enumerate(self.events) if e is event)

    def of(self, source: SourceKind, name: str | None = None) -> list[Event]:
        """Upserts, deletes and listings of ``source`` (touching ``name``, when given)."""
        out: list[Event] = []
        for event in self.events:
            if getattr(event, "source", None) is not source:
                continue
            if isinstance(event, ObjectUpserted | ObjectDeleted):
                touched = {raw.name_of(event.object)}
            elif isinstance(event, SourceListed):
                touched = {raw.name_of(o) for o in event.objects}
            else:
                touched = set()
            if name is None or name in touched:
                out.append(event)
        return out


def _short(event: Event) -> str:
    source = getattr(event, "source", "")
    obj = getattr(event, "object", None)
    name = raw.name_of(obj) if obj is not None else ""
    if isinstance(event, SourceListed):
        name = ",".join(raw.name_of(o) for o in event.objects)
    status = getattr(event, "status", "")
    return f"{type(event).__name__}({source} {name} {status})".replace("  ", " ")


def upserted(
    source: SourceKind, name: str, check: Callable[[Any], bool] = lambda o: True
) -> Callable[[Event], bool]:
    return lambda e: (
        isinstance(e, ObjectUpserted)
        and e.source is source
        and raw.name_of(e.object) == name
        and check(e.object)
    )


def deleted(source: SourceKind, name: str) -> Callable[[Event], bool]:
    return lambda e: isinstance(e, ObjectDeleted) and e.source is source and raw.name_of(e.object) == name


def listed(
    source: SourceKind, check: Callable[[SourceListed], bool] = lambda e: True
) -> Callable[[Event], bool]:
    return lambda e: isinstance(e, SourceListed) and e.source is source and check(e)


def names(event: SourceListed) -> set[str]:
    return {raw.name_of(o) for o in event.objects}


@asynccontextmanager
async def running(
    sources: Sequence[Source], buffer: int = 1000
) -> AsyncIterator[tuple[Collector, ObjectSendStream[Event]]]:
    """Run ``sources`` into a bounded stream drained by a Collector; cancelled on exit."""
    send, receive = anyio.create_memory_object_stream[Event](buffer)
    collector = Collector(receive)
    with send, receive:
        async with anyio.create_task_group() as tg:
            tg.start_soon(collector.run)
            tg.start_soon(run_sources, sources, send)
            try:
                yield collector, send
            finally:
                tg.cancel_scope.cancel()


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout: float = 20.0, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s")
        await anyio.sleep(0.05)


class _Connection:
    def __init__(self, writers: list[asyncio.StreamWriter]) -> None:
        self.writers = writers
        self.frozen = False


class TcpProxy:
    """127.0.0.1 proxy to the API server that a test can cut: drop every connection, refuse new ones,
    or freeze the open ones (half-open: they stay up, but no byte passes any more, in either direction)."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._connections: set[_Connection] = set()
        self._holding = False  # new connections are accepted frozen (a black hole)

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def refuse(self) -> None:
        """Stop listening (new connections are refused) and drop the open ones."""
        if self._server is not None:
            self._server.close()
            self._server = None
        self.drop_all()

    def drop_all(self) -> None:
        self._holding = False
        for conn in list(self._connections):
            conn.frozen = False
            for writer in conn.writers:
                writer.transport.abort()
        self._connections.clear()

    async def wait_for_a_connection(self, timeout: float = 10.0) -> None:
        """Until at least one connection is open (a watch renewed over fresh connections has gaps)."""
        with anyio.fail_after(timeout):
            while not self._connections:
                await anyio.sleep(0.01)

    def freeze_all(self) -> int:
        """Half-open every connection open now (new connections work normally); how many."""
        for conn in self._connections:
            conn.frozen = True
        return len(self._connections)

    def hold_all(self) -> int:
        """Half-open every connection, open now or opened later (a black hole), until ``drop_all``."""
        self._holding = True
        return self.freeze_all()

    def black_hole(self, on: bool) -> int:
        """On: every open connection freezes and so does every new one (accepted, then nothing passes);
        off: new connections work again, the frozen ones stay frozen (nobody tells the client). How
        many connections are frozen."""
        self._holding = on
        if on:
            self.freeze_all()
        return sum(conn.frozen for conn in self._connections)

    async def close(self) -> None:
        await self.refuse()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        conn = _Connection([writer, up_writer])
        conn.frozen = self._holding
        self._connections.add(conn)
        await asyncio.gather(
            self._pipe(reader, up_writer, conn), self._pipe(up_reader, writer, conn), return_exceptions=True
        )
        self._connections.discard(conn)

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: _Connection
    ) -> None:
        try:
            while data := await reader.read(65536):
                if conn.frozen:
                    continue  # the bytes go nowhere; the connection stays up
                writer.write(data)
                await writer.drain()
            while conn.frozen:  # the other side closed: a frozen connection does not tell
                await asyncio.sleep(0.5)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.transport.abort()


class Pipeline:
    """A minimal shell around the real core: kube events -> ``fold.step`` -> commands -> executors.

    LiteLLM commands are answered by ``SimulatedWorld`` (this module is about Kubernetes); every
    other command goes to the kube executors. Outcomes are folded back, as the shell would.
    """

    def __init__(
        self,
        config: CatalogConfig,
        executors: Sequence[Executor],
        receive: MemoryObjectReceiveStream[Event],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state = initial_state(config)
        self.executors = executors
        self.receive = receive
        self.clock = clock
        self.world = SimulatedWorld()
        self.seen: list[Event] = []  # every event folded, in order
        self.commands: list[Command] = []
        self.fold(self.world.rows_event())  # LiteLLM observed once (empty)

    def fold(self, event: Event) -> None:
        self.seen.append(event)
        self.state = step(self.state, event).state

    async def turn(self) -> None:
        with anyio.move_on_after(0.05):
            self.fold(await self.receive.receive())
        while True:
            try:
                self.fold(self.receive.receive_nowait())
            except anyio.WouldBlock:
                break
        result = step(self.state, Ticked(self.clock()))
        self.state = result.state
        for command in result.commands:
            self.commands.append(command)
            if isinstance(command, LITELLM_COMMANDS):
                answers: Sequence[Event] = self.world.execute(command)
            else:
                executor = next(e for e in self.executors if e.handles(command))
                answers = await executor.execute(command)
            for event in answers:
                self.fold(event)
            if isinstance(command, LITELLM_COMMANDS):
                self.fold(self.world.rows_event())

    async def until(
        self, check: Callable[[], Awaitable[bool] | bool], timeout: float = 30.0, what: str = ""
    ) -> None:
        deadline = time.monotonic() + timeout
        while True:
            await self.turn()
            done = check()
            if not isinstance(done, bool):
                done = await done
            if done:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{what or 'condition'} not reached within {timeout}s")


class HealthServer:
    """A local HTTP server answering every request with ``status`` (set by the test); records requests."""

    def __init__(self) -> None:
        self.status = 503
        self.requests: list[tuple[str, str]] = []  # (request line, Host header)
        self.user_agents: list[str] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            host = next((h.split(":", 1)[1].strip() for h in head[1:] if h.lower().startswith("host:")), "")
            self.requests.append((head[0], host))
            agent = (h.split(":", 1)[1].strip() for h in head[1:] if h.lower().startswith("user-agent:"))
            self.user_agents.append(next(agent, ""))
            writer.write(
                f"HTTP/1.1 {self.status} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".encode()
            )
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


# --- what the real core makes of events (through its public functions only, not its state's layout)


def record_of(state: CatalogState, source: str, name: str) -> RouteRecord | None:
    """The routes.json record of one source item (``source`` as in routes.json: kubeai, freetoken, ...)."""
    return next((r for r in all_records(state) if r.source == source and r.name == name), None)


def published_ids(config: CatalogConfig, kube_events: Sequence[Event]) -> list[str]:
    """The model ids the catalog would publish after ``kube_events``, every other input empty.

    Sources the events do not mention are listed empty, Secrets are watched (none), LiteLLM is
    simulated; the core then converges as in ``render``.
    """
    mentioned = {getattr(e, "source", None) for e in kube_events}
    world = SimulatedWorld()
    events: list[Event] = [
        SourceListed(kind, ())
        for kind in registry.CATALOG_KINDS
        if kind not in mentioned and kind is not SourceKind.SECRETS
    ]
    events += [SourceListed(SourceKind.SECRETS, (), scope=()), world.rows_event(), *kube_events]
    state, _, _ = converge(initial_state(config), world, start=1.0, events=events)
    catalog = json.loads(rendered_catalog(state).as_dict()["catalog.json"])
    return [m["id"] for m in catalog["models"]]
