"""Replaying a recorded event log: the ``Replayer``, its comparisons with the recording, and the verify.

The library behind the ``replay`` and ``explain`` commands (``app.replay``, ``app.explain``) and the
verify in parts (``app.replay_parts``). The log is streamed (one line at a time, so its size does not
matter). The fold starts from ``initial_state`` with the configuration in the header, or from a
snapshot; each event goes through the same ``step`` as in the live run.

An event whose step raises is skipped with the state before it kept, reported as a notice (its line, the
event, the exception's type and where it was raised), and the replay goes on: that is what the live loop
did (``app.stepping``), so the rest of the log replays exactly as it ran, and a verify still compares
every step. Stopping there would leave the rest of a log that shows such a bug unreadable.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

import attrs

from adapters.eventlog.reader import DEFAULT_MAX_LINE_BYTES, LogFile, LogLine, LogReadError
from app.progress import LogProgress
from app.stepping import guarded_step, where
from app.terminal import safe_streams
from catalog_core import raw
from catalog_core.commands import (
    ApiKeyRef,
    Command,
    CreateCatalogPlaceholder,
    CreateLiteLLMModel,
    DeleteLiteLLMModel,
    EmitKubernetesEvent,
    EvictPod,
    InlineKeyRef,
    LiteralKey,
    ObserveLiteLLM,
    PatchAgentTemplate,
    ProbeRuntime,
    RecreateLiteLLMModel,
    RollWorkload,
    SecretKey,
    UpdateLiteLLMModel,
    WatchSecrets,
    WriteCatalog,
)
from catalog_core.events import (
    CommandCompleted,
    Event,
    LiteLLMRowsObserved,
    LiteLLMUnreachable,
    ObjectDeleted,
    ObjectUpserted,
    RuntimeProbed,
    SourceListed,
    SourceUnavailable,
    Ticked,
)
from catalog_core.fold import initial_state
from catalog_core.state import CatalogState
from catalog_core.urls import masked_url
from contracts import eventlog as wire

EXIT_OK = 0
EXIT_DIVERGED = 1
EXIT_UNREADABLE = 2


class Step(NamedTuple):
    """One event folded again, with what the live run recorded for it."""

    seq: int
    line: int
    event: Event
    before: CatalogState
    after: CatalogState
    commands: tuple[Command, ...]
    recorded: list[Any] | None  # the recorded commands, raw; [] when it had none; None when not read
    recorded_seq: int | None = None
    recorded_line: int | None = None


@attrs.frozen
class SnapshotSeen:
    """A snapshot on the way: the recorded state (raw) and the replayed state at that point."""

    seq: int
    line: int
    raw: Any
    state: CatalogState


@attrs.frozen
class Notice:
    seq: int
    line: int
    message: str


Item = Step | SnapshotSeen | Notice


class Replayer:
    """Iterate a log's steps, folding each event again. Raises ``LogReadError`` for a bad or refused log."""

    def __init__(
        self,
        path: Path | str,
        *,
        until: int | None = None,
        from_snapshot: bool = False,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        part: tuple[int, int | None] | None = None,
    ) -> None:
        """``part``: (start, stop) byte offsets of snapshot records (start 0: the log's beginning; stop
        None: its end): only that part of the log, from the snapshot at ``start``, restored, to the
        snapshot at ``stop``, compared (``app.replay_parts``)."""
        self.log = LogFile(path, max_line_bytes=max_line_bytes)
        self.part = part
        self.header = self.log.header
        self.until = until
        self.from_snapshot = from_snapshot
        try:
            self.config = self.header.catalog_config()
        except wire.LogFormatError as exc:
            raise LogReadError(self.log.path, 1, str(exc)) from None
        self.schema_matches = wire.snapshots_readable(self.header.state_schema)
        try:
            waits_for = self.header.waits_for()
        except wire.LogFormatError as exc:
            raise LogReadError(self.log.path, 1, str(exc)) from None
        self.state = initial_state(self.config, waits_for)
        self.last_seq: int | None = None
        self.progress: Callable[[int], None] | None = None  # told each record's byte offset (a bar)
        self.first_seq: int | None = None
        self.failed_steps = 0
        # With ``skip_quiet``, a step that emits no command where none was recorded is only counted here,
        # not yielded: nothing to compare or print (Performance, bench P6: most events are such).
        self.skip_quiet = False
        self.quiet_steps = 0

    def _fail(self, line: int, message: str) -> LogReadError:
        return LogReadError(self.log.path, line, message)

    def _restore(self, line: LogLine, why: str) -> CatalogState:
        if not self.schema_matches:
            raise self._fail(
                line.number,
                f"{why}, but its snapshots were written by model-catalog {self.header.service_version} with "
                f"another state shape (state schema {self.header.state_schema}, this version has "
                f"{wire.STATE_SCHEMA}); they cannot be read by this version",
            )
        try:
            state = wire.structure_state(wire.with_header_fields(line.raw["state"], self.config))
        except wire.LogFormatError as exc:
            raise self._fail(line.number, f"snapshot record: {exc}") from None
        if state.config != self.config:
            raise self._fail(line.number, "snapshot record: its configuration is not the header's")
        return state

    def _header_again(self, line: LogLine) -> None:
        """A header inside the stream: the next file of the same run, concatenated (oldest first)."""
        try:
            header = wire.decode_header(line.raw)
        except wire.LogFormatError as exc:
            raise self._fail(line.number, str(exc)) from None
        same = (
            header.run,
            header.version,
            dict(header.config),
            header.state_schema,
            header.gates,
            header.catalog_keys,
        ) == (
            self.header.run,
            self.header.version,
            dict(self.header.config),
            self.header.state_schema,
            self.header.gates,
            self.header.catalog_keys,
        )
        if not same:
            raise self._fail(line.number, "a header of another run or configuration: logs of different runs")

    def __iter__(self) -> Iterator[Item]:
        records: Iterator[LogLine]
        if self.part is not None and self.part[0] > 0:
            start = self.part[0]
            records = self.log.records(start, self.log.line_number_at(start))
            opening = next(records, None)
            if opening is None or opening.raw["k"] != "snapshot":
                raise self._fail(0, f"no snapshot record at byte {start}")
            self.state = self._restore(opening, "a part of the log starts from a snapshot")
            prev = opening.raw["seq"]
        elif self.from_snapshot:
            snapshot = self.log.latest_snapshot(self.until)
            if snapshot is None:
                where = f" at or before seq {self.until}" if self.until is not None else ""
                raise self._fail(0, f"no snapshot{where}: replay without --from-snapshot")
            self.state = self._restore(snapshot, "--from-snapshot starts from a snapshot")
            records = self.log.records(snapshot.offset, snapshot.number)
            next(records)
            prev = snapshot.raw["seq"]
            yield Notice(prev, snapshot.number, f"replaying from the snapshot at seq {prev}")
        else:
            records = self.log.records()
            prev = next(records).raw["seq"]
            if not self.header.starts_run:
                opening = next(records, None)
                if opening is None or opening.raw["k"] != "snapshot":
                    raise self._fail(2, "this file continues a run but does not open with a snapshot")
                self._continues(prev, opening)
                self.state = self._restore(opening, "this file continues a run from its opening snapshot")
                prev = opening.raw["seq"]
                yield Notice(
                    prev,
                    opening.number,
                    f"the file continues run {self.header.run}: replaying "
                    f"from its opening snapshot at seq {prev}",
                )
        if self.progress is not None:
            records = _reporting(records, self.progress)
        yield from self._stream(records, prev)

    def _continues(self, prev: int, line: LogLine) -> None:
        raw = line.raw
        seq = raw["seq"]
        if raw["k"] == "gap":
            lost_from, lost_to = raw["lost_from"], raw["lost_to"]
            if not (type(lost_from) is int and type(lost_to) is int):
                raise self._fail(line.number, "gap record: lost_from and lost_to must be integers")
            if lost_from != prev + 1 or seq != lost_to or lost_to < lost_from:
                raise self._fail(
                    line.number,
                    f"gap record: lost seq {lost_from}..{lost_to} does not follow seq {prev}",
                )
            return
        if seq != prev + 1:
            if seq <= prev:
                raise self._fail(line.number, f"seq {seq} after seq {prev}: records out of order")
            raise self._fail(
                line.number, f"seq {seq} after seq {prev}: records {prev + 1}..{seq - 1} are missing"
            )

    def _stream(self, records: Iterator[LogLine], prev: int) -> Iterator[Item]:
        # The hot loop of replay: one record per turn, locals only, one object per step.
        pending: tuple[int, int, Event, CatalogState, CatalogState, tuple[Command, ...]] | None = None
        reseed = False
        stopped = False
        state = self.state
        until = self.until
        structure = wire.structure_event
        skip_quiet = self.skip_quiet
        stop_at = self.part[1] if self.part is not None else None
        for line in records:
            raw = line.raw
            seq, kind = raw["seq"], raw["k"]
            if until is not None and seq > until:
                stopped = True
                break
            if seq != prev + 1 or kind == "gap":
                self._continues(prev, line)
            prev = seq
            if pending is not None:
                if kind == "commands":
                    answers = raw["answers"]
                    if answers != pending[0]:
                        raise self._fail(
                            line.number,
                            f"commands record answers seq {answers!r}, "
                            f"but the event before it is seq {pending[0]}",
                        )
                    if type(raw["commands"]) is not list:
                        raise self._fail(line.number, "commands record: commands must be an array")
                    self.last_seq = seq
                    yield Step(*pending, raw["commands"], seq, line.number)
                    pending = None
                    continue
                if skip_quiet and not pending[5]:
                    self.quiet_steps += 1
                else:
                    yield Step(*pending, [])
                pending = None
            if reseed and kind != "snapshot":
                raise self._fail(line.number, "a gap must be followed by a snapshot")
            if kind == "event":
                try:
                    event = structure(raw["event"])
                except wire.LogFormatError as exc:
                    raise self._fail(line.number, f"event record: {exc}") from None
                result, error = guarded_step(state, event)  # skipped as the live loop skipped it
                if error is not None:
                    self.failed_steps += 1
                    yield Notice(
                        seq,
                        line.number,
                        f"line {line.number}: the step of event seq {seq} ({describe_event(event)}) raised "
                        f"{type(error).__name__} at {where(error)}; skipped with the state before it kept, "
                        "as the live run skipped it",
                    )
                if self.first_seq is None:
                    self.first_seq = seq
                pending = (seq, line.number, event, state, result.state, result.commands)
                state = self.state = result.state
            elif kind == "commands":
                raise self._fail(line.number, "a commands record that follows no event")
            elif kind == "snapshot":
                if reseed:
                    state = self.state = self._restore(line, "after a gap the log continues from a snapshot")
                    reseed = False
                    yield Notice(seq, line.number, f"continuing from the snapshot at seq {seq}")
                else:
                    yield SnapshotSeen(
                        seq, line.number, wire.with_header_fields(raw["state"], self.config), state
                    )
            elif kind == "gap":
                reseed = True
                yield Notice(
                    seq,
                    line.number,
                    f"records {raw['lost_from']}..{raw['lost_to']} were never written ({raw['reason']})",
                )
            else:
                self._header_again(line)
            self.last_seq = seq
            if line.offset == stop_at:  # the snapshot the next part starts from: compared, and the end
                break
        if pending is not None:
            # Stopped by --until between an event and its commands: what was recorded is not read.
            yield Step(*pending, None if stopped else [])
        if reseed and not stopped:
            raise self._fail(0, "the log ends with a gap (no snapshot after it)")


def _reporting(records: Iterator[LogLine], report: Callable[[int], None]) -> Iterator[LogLine]:
    for line in records:
        report(line.offset)
        yield line


# --- text --------------------------------------------------------------------------------------


def _key(ref: ApiKeyRef | None) -> str:
    if ref is None:
        return "none"
    if isinstance(ref, LiteralKey):
        return f"literal:{ref.value}"
    if isinstance(ref, SecretKey):
        return f"Secret {ref.namespace}/{ref.name}#{ref.key}@{ref.resource_version}"
    assert isinstance(ref, InlineKeyRef)
    return f"inline {ref.fingerprint}"


def describe_command(command: Command) -> str:
    """One line, for humans (keys are references; an api_base's user:password@ and query are masked)."""
    if isinstance(command, CreateLiteLLMModel | UpdateLiteLLMModel | RecreateLiteLLMModel):
        params = dict(command.litellm_params.value())
        if isinstance(params.get("api_base"), str):
            params["api_base"] = masked_url(params["api_base"])
        extra = "".join(f" {k}={params[k]}" for k in ("api_base", "order") if k in params)
        return (
            f"{command.model_id} model_name={command.model_name} model={params.get('model')}{extra} "
            f"api_key={_key(command.api_key)}"
        )
    if isinstance(command, DeleteLiteLLMModel):
        return command.model_id
    if isinstance(command, WriteCatalog):
        keys = len(command.data)
        return f"ConfigMap {command.namespace}/{command.name} hash={command.catalog_hash} ({keys} keys)"
    if isinstance(command, CreateCatalogPlaceholder):
        return (
            f"ConfigMap {command.namespace}/{command.name} hash={command.catalog_hash} (if it does not exist)"
        )
    if isinstance(command, PatchAgentTemplate):
        return (
            f"AgentTemplate {command.namespace}/{command.name} at resourceVersion {command.resource_version}"
        )
    if isinstance(command, RollWorkload):
        return f"{command.kind} {command.namespace}/{command.name} onto catalog {command.catalog_hash}"
    if isinstance(command, EvictPod):
        return f"Pod {command.namespace}/{command.name} onto catalog {command.catalog_hash}"
    if isinstance(command, ProbeRuntime):
        return f"{command.runtime}: GET {command.url}"
    if isinstance(command, EmitKubernetesEvent):
        ref = command.involved
        target = f"{ref.kind} {ref.namespace}/{ref.name}"
        return f"{command.event_type} on {target}: {command.reason}: {command.message}"
    if isinstance(command, ObserveLiteLLM):
        return f"GET /model/info ({command.reason.value})"
    assert isinstance(command, WatchSecrets)
    names = ", ".join(
        s.name + (" (provider Secrets only)" if s.provider_only else "") for s in command.secrets
    )
    return f"Secrets in {command.namespace}: {names or '(none)'}"


def command_line(answers: int, command: Command) -> str:
    return f"{answers} {wire.COMMAND_TAGS[type(command)]} {describe_command(command)}"


def describe_event(event: Event) -> str:
    if isinstance(event, ObjectUpserted | ObjectDeleted):
        verb = "upserted" if isinstance(event, ObjectUpserted) else "deleted"
        obj = event.object
        kind = obj.get("kind") or "object"
        return f"{event.source.value}: {verb} {kind} {raw.name_of(obj) or '?'}"
    if isinstance(event, SourceListed):
        return f"{event.source.value}: listed ({len(event.objects)} objects)"
    if isinstance(event, SourceUnavailable):
        detail = f": {event.detail}" if event.detail else ""
        return f"{event.source.value}: unavailable ({event.status.value}{detail})"
    if isinstance(event, LiteLLMRowsObserved):
        return f"LiteLLM /model/info observed ({len(event.rows)} rows)"
    if isinstance(event, LiteLLMUnreachable):
        return f"LiteLLM unreachable ({event.reason}{': ' + event.detail if event.detail else ''})"
    if isinstance(event, RuntimeProbed):
        health = "healthy" if event.healthy else "unhealthy"
        return f"probe of {event.runtime}: {health}{' (' + event.detail + ')' if event.detail else ''}"
    if isinstance(event, CommandCompleted):
        why = f" ({event.reason}{': ' + event.detail if event.detail else ''})" if event.reason else ""
        retry = f" after {event.retry_after:g}s" if event.outcome.value == "retry" else ""
        return f"{event.key}: {event.outcome.value}{retry}{why}"
    assert isinstance(event, Ticked)
    return f"tick now={event.now!r}"


# --- verify ------------------------------------------------------------------------------------


@attrs.frozen
class Divergence:
    seq: int
    message: str
    recorded: str
    replayed: str


def _text(value: bytes | None) -> str:
    return "(none)" if value is None else value.decode("utf-8")


def compare(item: Step) -> Divergence | None:
    """The step's replayed commands against the recorded ones (their exact log encoding)."""
    assert item.recorded is not None
    if not item.commands and not item.recorded:
        return None  # most events emit nothing (no encoding of two empty lists per event)
    replayed = wire.unstructure_commands(item.commands)
    if wire.dumps(replayed) == wire.dumps(item.recorded):
        return None
    if item.recorded_seq is None:
        return Divergence(
            item.seq,
            f"the recording has no commands for event seq {item.seq} (line {item.line}); "
            f"the replay emits {len(replayed)}",
            "[]",
            _text(wire.dumps(replayed)),
        )
    index = 0
    while index < min(len(replayed), len(item.recorded)) and wire.dumps(replayed[index]) == wire.dumps(
        item.recorded[index]
    ):
        index += 1
    rec = wire.dumps(item.recorded[index]) if index < len(item.recorded) else None
    rep = wire.dumps(replayed[index]) if index < len(replayed) else None
    return Divergence(
        item.recorded_seq,
        f"the commands record (line {item.recorded_line}) answering event seq {item.seq} differs from the "
        f"replay at command {index + 1} (recorded {len(item.recorded)}, replayed {len(replayed)})",
        _text(rec),
        _text(rep),
    )


def compare_state(item: SnapshotSeen) -> Divergence | None:
    recorded = wire.structure_state(item.raw, f"$.state (line {item.line})")
    if recorded == item.state:
        return None
    fields = [
        f.name for f in attrs.fields(CatalogState) if getattr(recorded, f.name) != getattr(item.state, f.name)
    ]
    return Divergence(
        item.seq,
        f"the snapshot (line {item.line}) differs from the replayed state in: {', '.join(fields)}",
        _text(wire.dumps({f: wire.unstructure_state(recorded)[f] for f in fields})),
        _text(wire.dumps({f: wire.unstructure_state(item.state)[f] for f in fields})),
    )


# --- shared by the commands that read a log (replay, explain) -------------------------------


@contextlib.contextmanager
def command_streams(
    path: str, out: IO[str] | None, err: IO[str] | None
) -> Iterator[tuple[LogProgress, IO[str], IO[str]]]:
    """A log-reading command's progress bar (on a terminal) and its output streams, made safe to print to."""
    stderr = err if err is not None else sys.stderr
    with LogProgress(path, stderr) as progress:
        safe_out, safe_err = safe_streams(out, progress.stream(stderr))
        yield progress, safe_out, safe_err


def reading(path: str, progress: LogProgress, **options: Any) -> Replayer:
    """A replayer of ``path`` (``options``: ``Replayer``'s) that shows how far it has read on ``progress``."""
    replayer = Replayer(path, **options)
    replayer.progress = progress.at if progress.enabled else None
    return replayer


def unreadable(exc: LogReadError | wire.LogFormatError, path: str, err: IO[str]) -> int:
    """Say why the log cannot be read (once, on ``err``); the exit status of a command that reads it."""
    where_ = f"{exc}" if isinstance(exc, LogReadError) else f"{path}: {exc}"
    print(f"model-catalog: {where_}", file=err)
    return EXIT_UNREADABLE


@attrs.frozen
class Verified:
    """What a verify of a log (or of a part of one, ``app.replay_parts``) found."""

    events: int
    commands: int
    snapshots: int
    first_seq: int | None
    last_seq: int | None
    failed_steps: int
    divergence: Divergence | None = None


def verify_log(replayer: Replayer, note: Callable[[str], None]) -> Verified:
    """Replay and compare every step (and snapshot) until the first difference; ``note`` is told each
    notice on the way."""
    replayer.skip_quiet = True  # a quiet step compares equal: compare() would return None at once
    events = commands = snapshots = 0
    divergence: Divergence | None = None
    for item in replayer:
        if isinstance(item, Notice):
            note(item.message)
        elif isinstance(item, SnapshotSeen):
            if replayer.schema_matches:
                snapshots += 1
                if (divergence := compare_state(item)) is not None:
                    break
        else:
            events += 1
            commands += len(item.commands)
            if item.recorded is not None and (divergence := compare(item)) is not None:
                break
    return Verified(
        events + replayer.quiet_steps,
        commands,
        snapshots,
        replayer.first_seq,
        replayer.last_seq,
        replayer.failed_steps,
        divergence,
    )
