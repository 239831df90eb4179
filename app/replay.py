"""``model-catalog replay``: fold a recorded event log again, offline, and print or verify the commands.

The log is streamed (one line at a time, so its size does not matter). The
fold starts from ``initial_state`` with the configuration in the header, or
from a snapshot; each event goes through the same ``step`` as in the live run.
With ``--verify`` every step's commands are compared, byte for byte in their
log encoding, with the commands record the live run wrote (and the state with
each snapshot on the way): the first difference is reported with both versions.

An event whose step raises is skipped with the state before it kept, reported as a note (its line, the
event, the exception's type and where it was raised), and the replay goes on: that is what the live loop
did (``app.stepping``), so the rest of the log replays exactly as it ran, and ``--verify`` still compares
every step. Stopping there would leave the rest of a log that shows such a bug unreadable.

Exit codes: 0 replayed (and identical, with ``--verify``); 1 the replay
diverges from the recording; 2 the log is unreadable or refused (``file:line``
and the reason on stderr).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from adapters.eventlog.reader import DEFAULT_MAX_LINE_BYTES, LogReadError
from app.replay_parts import verify_in_parts
from app.replayer import (
    EXIT_DIVERGED,
    EXIT_OK,
    Divergence,
    Notice,
    Step,
    command_line,
    command_streams,
    reading,
    unreadable,
    verify_log,
)
from contracts import eventlog as wire


def run(
    path: str,
    *,
    until: int | None = None,
    from_snapshot: bool = False,
    verify: bool = False,
    as_json: bool = False,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    jobs: int = 1,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
) -> int:
    """``jobs``: with ``verify``, how many processes may verify parts of the log at once."""
    with command_streams(path, out, err) as streams:
        progress, out, err = streams

        def note(message: str) -> None:
            print(f"note: {message}", file=err)

        try:
            replayer = reading(
                path, progress, until=until, from_snapshot=from_snapshot, max_line_bytes=max_line_bytes
            )
            if verify:
                if not replayer.schema_matches:
                    note("the snapshots were written with another state shape; only commands are compared")
                result = None
                if jobs > 1:
                    result = verify_in_parts(replayer, jobs, note)
                if result is None:
                    result = verify_log(replayer, note)
                if result.divergence is not None:
                    return _diverged(result.divergence, out)
                print(
                    f"verified {path}: {result.events} events ({_span(result.first_seq, result.last_seq)}), "
                    f"{result.commands} commands and {result.snapshots} snapshots replay identically",
                    file=out,
                )
                _failed_steps(result.failed_steps, note)
                return EXIT_OK
            events = commands = 0
            for item in replayer:
                if isinstance(item, Notice):
                    note(item.message)
                elif isinstance(item, Step):
                    events += 1
                    commands += len(item.commands)
                    if as_json:
                        for body in wire.unstructure_commands(item.commands):
                            print(wire.dumps({"answers": item.seq, "command": body}).decode(), file=out)
                    else:
                        for command in item.commands:
                            print(command_line(item.seq, command), file=out)
        except (LogReadError, wire.LogFormatError) as exc:
            return unreadable(exc, path, err)
        span = _span(replayer.first_seq, replayer.last_seq)
        print(f"replayed {events} events ({span}): {commands} commands", file=err)
        _failed_steps(replayer.failed_steps, note)
        return EXIT_OK


def _span(first: int | None, last: int | None) -> str:
    return f"seq {first}..{last}" if first is not None else "no events"


def _failed_steps(count: int, note: Callable[[str], None]) -> None:
    if count:
        note(f"{count} events were skipped: their step raised")


def _diverged(divergence: Divergence, out: IO[str]) -> int:
    print(f"diverged at seq {divergence.seq}: {divergence.message}", file=out)
    print(f"  recorded: {divergence.recorded}", file=out)
    print(f"  replayed: {divergence.replayed}", file=out)
    return EXIT_DIVERGED
