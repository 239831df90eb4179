"""The event-log recorder: every step of the fold, appended to size-bounded rotating files, plus a ring.

The shell calls :meth:`Recorder.record` after each ``step(state, event)``. What
that costs the control loop, and why:

- ``record`` only checks the event (:mod:`adapters.eventlog.guard`), encodes the
  event and its commands (orjson, microseconds) and appends them to a bounded
  in-memory queue and to the ring. It never touches a file, never blocks and
  never raises.
- The file I/O happens in a worker thread (``anyio.to_thread.run_sync``, driven
  by :meth:`Recorder.run`), which writes whole batches and encodes snapshots,
  the only large records. A write to a local disk usually takes microseconds,
  but it can stall for seconds (dirty-page throttling, a network volume, the
  error paths of a full disk): synchronous appends from the loop would stall
  planning with it. Off the loop, a stall costs queue space instead.
- When the queue is full (the disk is slower than the events) or a write fails
  (``OSError``: full disk, permissions), records are dropped and counted in
  :attr:`Recorder.stats`, and the failure is logged once when it starts and
  once when it ends. The file then gets a ``gap`` record and a snapshot (or a
  fresh file), so what was written still replays. While writes fail, one retry
  is made every ``retry_seconds``.
- For tools without an event loop (the example generator, tests, benchmarks)
  ``writer="inline"`` writes from the caller's thread instead.

Files: ``PATH`` is the newest, ``PATH.1`` .. ``PATH.<max_files-1>`` older ones.
Every file starts with a header; a file that does not start the run (rotated,
or reopened after a failure) follows it with a snapshot, so any single file
replays on its own (``model-catalog replay --from-snapshot``), and files
concatenated oldest first replay as one. A snapshot is also written every
``snapshot_every`` events.

The ring keeps the last ``ring_size`` records in memory, whatever happened to
the files, and no more than ``ring_bytes`` of them (their encoded size; a
snapshot counts as large as the last one written): the oldest are dropped
first. The newest record is always kept, even one larger than ``ring_bytes``
on its own (then it is the whole ring): a dump should show the latest step, and
that record is in memory anyway until it is written. :meth:`Recorder.dump_ring`
writes the ring, preceded by a header and a snapshot, as a log that replays on
its own.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Final, Literal

import anyio
import anyio.to_thread
import attrs

from adapters.eventlog.guard import guard
from adapters.identity import version as service_version
from catalog_core.config import MAX_INTEGER_DIGITS, CatalogConfig, quoted_setting
from catalog_core.events import Event
from catalog_core.fold import Transition, initial_state
from catalog_core.state import CatalogState
from contracts import eventlog as wire

log = logging.getLogger("model_catalog.eventlog")

MIB: Final = 1024 * 1024
_INLINE_BATCH: Final = 256 * 1024
ENV_PATH: Final = "CATALOG_EVENT_LOG_PATH"
ENV_MAX_BYTES: Final = "CATALOG_EVENT_LOG_MAX_BYTES"
ENV_FILES: Final = "CATALOG_EVENT_LOG_FILES"
ENV_SNAPSHOT_EVERY: Final = "CATALOG_EVENT_LOG_SNAPSHOT_EVERY"
ENV_RING: Final = "CATALOG_EVENT_LOG_RING"
ENV_RING_BYTES: Final = "CATALOG_EVENT_LOG_RING_BYTES"


@attrs.frozen
class RecorderSettings:
    path: Path
    max_bytes: int = 4 * MIB
    max_files: int = 4
    snapshot_every: int = 10_000
    ring_size: int = 1000
    ring_bytes: int = 8 * MIB  # encoded bytes the ring may hold (the newest record is always kept)
    queue_bytes: int = 16 * MIB
    retry_seconds: float = 5.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RecorderSettings | None:
        """None when ``CATALOG_EVENT_LOG_PATH`` is unset (the default: no event log).

        Raises ``ValueError`` with the variable's name for an invalid value.
        """
        path = (env.get(ENV_PATH) or "").strip()
        if not path:
            return None
        d = cls(Path(path))

        def number(name: str, default: int, minimum: int) -> int:
            text = (env.get(name) or "").strip()
            if not text:
                return default
            digits = text.isascii() and text.isdigit() and len(text) <= MAX_INTEGER_DIGITS
            if not digits or int(text) < minimum:
                raise ValueError(f"{name}: must be an integer >= {minimum}, got {quoted_setting(text)}")
            return int(text)

        return cls(
            path=Path(path),
            max_bytes=number(ENV_MAX_BYTES, d.max_bytes, 64 * 1024),
            max_files=number(ENV_FILES, d.max_files, 1),
            snapshot_every=number(ENV_SNAPSHOT_EVERY, d.snapshot_every, 1),
            ring_size=number(ENV_RING, d.ring_size, 0),
            ring_bytes=number(ENV_RING_BYTES, d.ring_bytes, 64 * 1024),
        )


@attrs.define
class RecorderStats:
    """Counters the shell can export (``model_catalog_event_log_dropped_records_total``)."""

    records_written: int = 0
    records_dropped: int = 0
    bytes_written: int = 0
    write_errors: int = 0
    encode_errors: int = 0
    secrets_stripped: int = 0
    rotations: int = 0
    snapshots: int = 0
    failing: bool = False


@attrs.frozen
class _Item:
    """Records to write, in order: encoded bytes, or a snapshot encoded by the writer (``data`` None)."""

    kind: Literal["step", "header", "snapshot", "gap"]
    first_seq: int
    last_seq: int
    ts: str
    data: bytes | None
    state: CatalogState  # the state just before these records
    after: int  # seq of the last event folded into ``state``
    lost_from: int = -1  # a gap's first lost seq

    @property
    def records(self) -> int:
        return self.last_seq - self.first_seq + 1


@attrs.frozen
class _Outcome:
    written: int  # items fully written
    error: OSError | None


Opener = Callable[[Path], IO[bytes]]


def _append(path: Path) -> IO[bytes]:
    return open(path, "ab")


class _Sink:
    """The files. Used by one thread at a time (the worker thread, or the caller's with inline writing)."""

    def __init__(self, path: Path, max_files: int, header: wire.Header, opener: Opener = _append) -> None:
        self.path = path
        self.max_files = max_files
        self.header = header
        self.opener = opener
        self.file: IO[bytes] | None = None
        self.size = 0  # bytes of complete records in the current file
        self.needs_repair = False
        self.started = False
        self.snapshot_size = 0  # size of the last snapshot written (the producer's estimate)
        self.rotations = 0  # rotations during the run (not the one that moves an old log away)
        self.total_bytes = 0

    def _check_regular(self, path: Path) -> None:
        """Only regular files are rotated, truncated or appended to (never a device, a pipe, a directory)."""
        if path.exists() and not path.is_file():
            raise OSError(errno.EINVAL, f"{path} is not a regular file")

    def _rotate(self) -> None:
        self._check_regular(self.path)
        if self.file is not None:
            self.file.close()
            self.file = None
        if self.max_files <= 1:
            self.path.unlink(missing_ok=True)
        else:
            oldest = self.path.with_name(f"{self.path.name}.{self.max_files - 1}")
            oldest.unlink(missing_ok=True)
            for i in range(self.max_files - 2, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{i}")
                if older.exists():
                    older.rename(self.path.with_name(f"{self.path.name}.{i + 1}"))
            if self.path.exists():
                self.path.rename(self.path.with_name(f"{self.path.name}.1"))
        self.rotations += 1

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._check_regular(self.path)
        self.file = self.opener(self.path)
        self.size = self.file.tell()

    def _start(self) -> None:
        """A new run never appends to an old one: an existing log is rotated away first."""
        if self.path.exists() and self.path.stat().st_size > 0:
            self._rotate()
            self.rotations -= 1
        self._open()
        self.started = True

    def _repair(self) -> bool:
        """After a failed write: cut the torn tail off. False when a fresh file is needed instead."""
        self.needs_repair = False
        try:
            if self.file is None:
                self._open()
            assert self.file is not None
            self.file.truncate(self.size)
            self.file.seek(self.size)
        except OSError:
            if self.file is not None:
                with contextlib.suppress(OSError):
                    self.file.close()
            self.file = None
            self._rotate()
            self._open()
            return False
        return self.size > 0

    def _bytes(self, item: _Item) -> bytes:
        data = item_bytes(item)
        if item.kind == "snapshot":
            self.snapshot_size = len(data)
        return data

    def write(self, items: Iterable[_Item]) -> _Outcome:
        written = 0
        try:
            if not self.started:
                self._start()
            for item in items:
                if item.kind == "header" and self.size > 0:
                    self._rotate()
                    self._open()
                if item.kind == "gap" and self.needs_repair and not self._repair():
                    # No usable tail to continue: the gap opens a fresh file as its header.
                    data = self._header_bytes(item.first_seq, item.ts)
                elif item.kind == "gap" and self.size == 0:
                    data = self._header_bytes(item.first_seq, item.ts)
                else:
                    data = self._bytes(item)
                if self.file is None:
                    self._open()
                assert self.file is not None
                self.file.write(data)
                self.file.flush()
                self.size += len(data)
                self.total_bytes += len(data)
                written += 1
        except OSError as exc:
            self.needs_repair = True
            return _Outcome(written, exc)
        return _Outcome(written, None)

    def _header_bytes(self, seq: int, ts: str) -> bytes:
        header = attrs.evolve(self.header, seq=seq, ts=ts, starts_run=False)
        return wire.encode_header(header) + b"\n"

    def close(self) -> None:
        if self.file is not None:
            with contextlib.suppress(OSError):
                self.file.close()
            self.file = None


class Recorder:
    """Records every step of the fold. See the module docstring for the I/O model."""

    def __init__(
        self,
        settings: RecorderSettings,
        config: CatalogConfig,
        *,
        writer: Literal["thread", "inline"] = "thread",
        state: CatalogState | None = None,
        clock: Callable[[], float] = time.time,
        run_id: str | None = None,
        version: str | None = None,
        opener: Opener = _append,
    ) -> None:
        """``state``: the state the fold starts from (default ``initial_state(config)``).

        Raises ``UnsafeConfigError`` when the configuration cannot be recorded safely.
        """
        self.settings = settings
        self.stats = RecorderStats()
        self._writer = writer
        self._clock = clock
        start = initial_state(config) if state is None else state
        starts_run = start == initial_state(config, start.waits_for)
        now = self._ts()
        self._header = wire.Header(
            seq=0,
            ts=now,
            service_version=version if version is not None else service_version(),
            run=run_id if run_id is not None else uuid.uuid4().hex[:16],
            starts_run=starts_run,
            origin="log",
            state_schema=wire.STATE_SCHEMA,
            snapshot_every=settings.snapshot_every,
            config=wire.config_env(config),
            sources=tuple(sorted(kind.value for kind in start.waits_for)),
            gates=tuple(sorted(gate.value for gate in config.gates)),
            catalog_keys=tuple(sorted(config.catalog_keys)),
        )
        self._sink = _Sink(settings.path, settings.max_files, self._header, opener)
        self._queue: deque[_Item] = deque()
        self._queued_bytes = 0
        self._ring: deque[tuple[_Item, int]] = deque()  # (item, its size when it was added)
        self._ring_bytes = 0
        self._seq = -1
        self._state = start
        self._last_event = 0
        self._events_since_snapshot = 0
        self._file_bytes = 0
        self._steps_in_file = 0
        self._lost_from: int | None = None  # first seq not written since the last good record
        self._retry_at = 0.0
        self._wakeup: anyio.Event | None = None
        self._closed = False
        self._stripped_logged = False
        self._encode_failing = False
        self._enqueue(self._header_item(now, starts_run, start, 0))
        if not starts_run:
            self._enqueue(self._snapshot_item(now, start, 0))

    @property
    def last_seq(self) -> int:
        """The seq of the last record produced (written, queued or dropped)."""
        return self._seq

    # --- producer side (the control loop) ------------------------------------------------------

    def _ts(self) -> str:
        return wire.timestamp(self._clock())

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _header_item(self, ts: str, starts_run: bool, state: CatalogState, after: int) -> _Item:
        seq = self._next_seq()
        header = attrs.evolve(self._header, seq=seq, ts=ts, starts_run=starts_run)
        data = wire.encode_header(header) + b"\n"
        return _Item("header", seq, seq, ts, data, state, after)

    def _snapshot_item(self, ts: str, state: CatalogState, after: int) -> _Item:
        """A snapshot of ``state`` (the state after event ``after``), encoded later by the writer."""
        seq = self._next_seq()
        self._events_since_snapshot = 0
        return _Item("snapshot", seq, seq, ts, None, state, after)

    def _size(self, item: _Item) -> int:
        return len(item.data) if item.data is not None else max(self._sink.snapshot_size, 1024)

    def _enqueue(self, item: _Item, ring: bool = True) -> None:
        size = self._size(item)
        self._queue.append(item)
        self._queued_bytes += size
        self._file_bytes += size
        if ring:
            self._ring_append(item, size)
        if self._wakeup is not None:
            self._wakeup.set()

    def record(self, event: Event, transition: Transition) -> None:
        """Record one step: the event as the core received it, then the commands it emitted. Never raises."""
        if self._closed:
            return
        try:
            self._record(event, transition)
        except Exception as exc:
            self.stats.encode_errors += 1
            if not self._encode_failing:
                self._encode_failing = True
                log.error("event log: a step could not be recorded (%s); it is dropped", type(exc).__name__)
            # The step is lost: it takes its seq (so the gap covers it) and the state moves on.
            self._seq += 1
            self.stats.records_dropped += 1
            self._lost(self._seq)
            self._state = transition.state
            self._last_event = self._seq
        else:
            self._encode_failing = False

    def _record(self, event: Event, transition: Transition) -> None:
        checked = guard(event)
        if checked.stripped:
            self.stats.secrets_stripped += checked.stripped
            if not self._stripped_logged:
                self._stripped_logged = True
                log.error(
                    "event log: an event carried %d un-redacted secret value(s); they were replaced by "
                    "markers before writing (an adapter skipped redaction)",
                    checked.stripped,
                )
        ts = self._ts()
        before, after = self._state, self._last_event
        resynced = self._lost_from is not None
        writable = self._resync(ts)
        resynced = resynced and self._lost_from is None
        data = self._encode(ts, checked.event, transition)
        room = self._queued_bytes + len(data) <= self.settings.queue_bytes
        if (
            writable
            and room
            and self._file_bytes + len(data) > self.settings.max_bytes
            and self._steps_in_file
        ):
            self._rotate(ts, before, after)  # the new file's header and snapshot come first: renumber
            data = self._encode(ts, checked.event, transition)
        seq = self._seq + 1
        last = seq + 1 if transition.commands else seq
        self._seq = last
        self._state = transition.state
        self._last_event = seq
        self._events_since_snapshot += 1
        step = _Item("step", seq, last, ts, data, before, after)
        self._ring_append(step, len(data))
        if not writable:
            self._drop(step)
            return
        if not room:
            self._drop(step)
            log.warning("event log: the writer fell behind; records are dropped until it catches up")
            return
        self._enqueue(step, ring=False)
        self._steps_in_file += 1
        if self._events_since_snapshot >= self.settings.snapshot_every:
            self._enqueue(self._snapshot_item(ts, self._state, self._last_event))
        if self._writer == "inline" and (self._queued_bytes >= _INLINE_BATCH or resynced):
            self.flush()  # batched; at once after a loss, to learn soon whether writing works again

    def _encode(self, ts: str, event: Event, transition: Transition) -> bytes:
        """The step's records, numbered from the next seq: the event, then its commands if any."""
        seq = self._seq + 1
        data = wire.encode_event(seq, ts, event) + b"\n"
        if transition.commands:
            data += wire.encode_commands(seq + 1, ts, seq, transition.commands) + b"\n"
        return data

    def _resync(self, ts: str) -> bool:
        """Whether the next step may be queued. After a loss, first queue a gap and a snapshot of the
        current state (when the writer works again and has room), so the file replays past the hole."""
        if self._lost_from is None:
            return True
        if self.stats.failing and self._clock() < self._retry_at:
            return False
        if self._queued_bytes > self.settings.queue_bytes // 2:
            return False
        lost_from, lost_to = self._lost_from, self._seq
        self._lost_from = None
        self._retry_at = self._clock() + self.settings.retry_seconds
        reason = "writing the file failed" if self.stats.failing else "the writer fell behind"
        gap = wire.encode_gap(lost_to, ts, lost_from, lost_to, reason) + b"\n"
        # The gap takes the last lost seq (nothing with that seq is in the file): no new number.
        state, after = self._state, self._last_event
        self._enqueue(_Item("gap", lost_to, lost_to, ts, gap, state, after, lost_from), ring=False)
        self._enqueue(self._snapshot_item(ts, state, after))
        self._steps_in_file = 0
        return True

    def _rotate(self, ts: str, state: CatalogState, after: int) -> None:
        """A new file, opening with a header and a snapshot of ``state`` (before the step that follows)."""
        self._file_bytes = 0
        self._steps_in_file = 0
        self._enqueue(self._header_item(ts, False, state, after))
        self._enqueue(self._snapshot_item(ts, state, after))

    def _drop(self, step: _Item) -> None:
        self.stats.records_dropped += step.records
        self._lost(step.first_seq)

    def _lost(self, seq: int) -> None:
        if self._lost_from is None or seq < self._lost_from:
            self._lost_from = seq

    # --- writer side ---------------------------------------------------------------------------

    def _take(self) -> list[_Item]:
        batch = list(self._queue)
        self._queue.clear()
        self._queued_bytes = 0
        return batch

    def _after_write(self, batch: list[_Item], outcome: _Outcome) -> None:
        done = batch[: outcome.written]
        for item in done:
            self.stats.records_written += item.records
            if item.kind == "snapshot":
                self.stats.snapshots += 1
        self.stats.bytes_written = self._sink.total_bytes
        self.stats.rotations = self._sink.rotations
        if outcome.error is None:
            if self.stats.failing and done:
                self.stats.failing = False
                log.warning(
                    "event log: writing %s works again (%d records dropped so far)",
                    self.settings.path,
                    self.stats.records_dropped,
                )
            self._file_bytes = self._sink.size + self._queued_bytes
            return
        failed = batch[outcome.written :]
        self.stats.write_errors += 1
        for item in failed:
            if item.kind == "gap":
                self._lost(item.lost_from)
            else:
                self.stats.records_dropped += item.records
                self._lost(item.first_seq)
        # Whatever was queued meanwhile cannot follow a torn file either.
        for item in self._take():
            if item.kind != "gap":
                self.stats.records_dropped += item.records
                self._lost(item.first_seq)
        self._retry_at = self._clock() + self.settings.retry_seconds
        if not self.stats.failing:
            self.stats.failing = True
            log.error(
                "event log: writing %s failed (%s); records are dropped until it works again",
                self.settings.path,
                outcome.error.strerror or type(outcome.error).__name__,
            )

    def flush(self) -> None:
        """Write what is queued from this thread (inline writing, or when no :meth:`run` is active)."""
        while self._queue:
            batch = self._take()
            self._after_write(batch, self._sink.write(batch))

    async def _flush_async(self) -> None:
        while self._queue:
            batch = self._take()
            # A batch handed to the thread is accounted for even when the task is cancelled meanwhile.
            with anyio.CancelScope(shield=True):
                outcome = await anyio.to_thread.run_sync(self._sink.write, batch)
            self._after_write(batch, outcome)

    async def run(self) -> None:
        """Write queued records from a worker thread until cancelled (then write what is left).

        With ``writer="thread"``, :meth:`record` must be called from the event loop this runs in.
        """
        self._wakeup = anyio.Event()
        try:
            await self._flush_async()
            while True:
                await self._wakeup.wait()
                self._wakeup = anyio.Event()
                await self._flush_async()
        finally:
            with anyio.CancelScope(shield=True):
                await self._flush_async()
            self._wakeup = None

    def close(self) -> None:
        """Write what is left and close the file (no :meth:`run` may be active)."""
        self.flush()
        self._closed = True
        self._sink.close()

    async def aclose(self) -> None:
        await self._flush_async()
        self._closed = True
        await anyio.to_thread.run_sync(self._sink.close)

    # --- the ring ------------------------------------------------------------------------------

    def _ring_append(self, item: _Item, size: int) -> None:
        """Add to the ring, then drop its oldest items while it holds more than ``ring_size`` items or
        more than ``ring_bytes`` bytes — never the item just added. O(1) amortised: each item is added
        and dropped once, its size computed once."""
        if not self.settings.ring_size:
            return
        ring = self._ring
        ring.append((item, size))
        self._ring_bytes += size
        while len(ring) > 1 and (
            len(ring) > self.settings.ring_size or self._ring_bytes > self.settings.ring_bytes
        ):
            _, dropped = ring.popleft()
            self._ring_bytes -= dropped

    @property
    def ring_bytes(self) -> int:
        """The encoded size of what the ring holds (snapshots as estimated when they were added)."""
        return self._ring_bytes

    def ring(self) -> list[_Item]:
        return [item for item, _ in self._ring]

    def dump_ring(self, stream: IO[bytes], items: list[_Item] | None = None) -> int:
        """Write the ring as a log that replays on its own; returns the number of records written."""
        return dump_items(self._header, self.ring() if items is None else items, stream, self._ts())

    async def dump_ring_to(self, path: Path) -> int:
        """Dump the ring to ``path`` from a worker thread (the ring is copied on the loop first)."""
        items = self.ring()

        def write() -> int:
            with open(path, "wb") as stream:
                return self.dump_ring(stream, items)

        return await anyio.to_thread.run_sync(write)


def item_bytes(item: _Item) -> bytes:
    if item.kind == "snapshot":
        return wire.encode_snapshot(item.first_seq, item.ts, item.after, item.state) + b"\n"
    assert item.data is not None
    return item.data


def dump_items(header: wire.Header, items: list[_Item], stream: IO[bytes], ts: str) -> int:
    """Ring items as a log of their own: a header (and a snapshot unless the items start the run) first."""
    if not items:
        return 0
    first = items[0]
    dump_header = attrs.evolve(header, origin="ring-dump", ts=ts)
    preamble: list[bytes] = []
    if first.kind == "header":
        # Re-issue it as the dump's header (the items that follow are what the log had after it).
        starts = first.first_seq == 0 and header.starts_run
        preamble.append(wire.encode_header(attrs.evolve(dump_header, seq=first.first_seq, starts_run=starts)))
        items = items[1:]
    elif first.kind == "snapshot":
        preamble.append(
            wire.encode_header(attrs.evolve(dump_header, seq=first.first_seq - 1, starts_run=False))
        )
    elif first.first_seq == 1 and header.starts_run:
        preamble.append(wire.encode_header(attrs.evolve(dump_header, seq=0, starts_run=True)))
    else:
        e = first.first_seq
        preamble.append(wire.encode_header(attrs.evolve(dump_header, seq=e - 2, starts_run=False)))
        preamble.append(wire.encode_snapshot(e - 1, first.ts, first.after, first.state))
    count = len(preamble)
    stream.write(b"".join(line + b"\n" for line in preamble))
    for item in items:
        stream.write(item_bytes(item))
        count += item.records
    stream.flush()
    return count
