"""``replay --verify --jobs N``: the log cut at snapshots into parts, each part verified in its own process.

A part starts from the snapshot record that ends the part before it, restored as ``--from-snapshot``
restores one, and ends by comparing its replayed state with the snapshot record the next part starts
from. The fold is deterministic and a snapshot holds the whole state, so when every part passes, the
sequential verify passes too: the state replayed up to each cut equals the recorded one, from which the
next part goes on exactly as the sequential replay would. Parts are reported in log order: the first
difference (or unreadable line) in the log is the one reported, with the notes of the parts before it.

Used only where it can give the same answer: ``--verify`` of a whole log (no ``--until``, no
``--from-snapshot``) whose snapshots this version can read, larger than ``MIN_BYTES_PER_PART`` per part.
"""

from __future__ import annotations

import multiprocessing
import signal
import threading
from collections.abc import Callable
from pathlib import Path

import attrs

from app.replayer import Replayer, Verified, verify_log

MIN_BYTES_PER_PART = 32 * 1024 * 1024  # below this a process's start and a restore cost more than they save


def cuts(replayer: Replayer, jobs: int) -> list[int]:
    """Byte offsets of the snapshot records where parts begin (after the first), about equally apart."""
    size = Path(replayer.log.path).stat().st_size
    parts = min(jobs, size // MIN_BYTES_PER_PART)
    found: list[int] = []
    for k in range(1, parts):
        offset = replayer.log.snapshot_after(size * k // parts)
        if offset is None:
            break
        if not found or offset > found[-1]:
            found.append(offset)
    return found


def verify_in_parts(replayer: Replayer, jobs: int, note: Callable[[str], None]) -> Verified | None:
    """The verify of ``replayer``'s log in up to ``jobs`` processes; None when it cannot be cut (too small,
    no snapshot to cut at, snapshots of another state shape): the caller then verifies it in one."""
    if jobs < 2 or replayer.until is not None or replayer.from_snapshot or not replayer.schema_matches:
        return None
    points = cuts(replayer, jobs)
    if not points:
        return None
    bounds = list(zip([0, *points], [*points, None], strict=True))
    note(f"verifying in {len(bounds)} parts at once, cut at snapshots")
    # fork starts a worker in milliseconds with everything imported; with other threads alive (a progress
    # bar's monitor) a forked child could inherit a held lock, so spawn then.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    if threading.active_count() > 1:
        method = "spawn"
    path, limit = str(replayer.log.path), replayer.log.max_line_bytes
    context = multiprocessing.get_context(method)
    # Leaving the pool terminates its workers: after a difference or an unreadable line, after Ctrl-C
    # (the parent's alone: workers ignore SIGINT), the parts still running stop at once.
    with context.Pool(len(bounds), initializer=_ignore_interrupts) as pool:
        pending = [pool.apply_async(_verify_part, (path, limit, part)) for part in bounds]
        total: Verified | None = None
        for result in pending:
            part, notes = result.get()  # a LogReadError of a part is raised here, in log order
            for message in notes:
                note(message)
            total = part if total is None else _joined(total, part)
            if part.divergence is not None:
                break
    return total


def _ignore_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _verify_part(path: str, max_line_bytes: int, part: tuple[int, int | None]) -> tuple[Verified, list[str]]:
    notes: list[str] = []
    replayer = Replayer(path, max_line_bytes=max_line_bytes, part=part)
    return verify_log(replayer, notes.append), notes


def _joined(earlier: Verified, later: Verified) -> Verified:
    return attrs.evolve(
        later,
        events=earlier.events + later.events,
        commands=earlier.commands + later.commands,
        snapshots=earlier.snapshots + later.snapshots,
        first_seq=earlier.first_seq if earlier.first_seq is not None else later.first_seq,
        last_seq=later.last_seq if later.last_seq is not None else earlier.last_seq,
        failed_steps=earlier.failed_steps + later.failed_steps,
    )
