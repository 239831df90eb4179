"""Benchmark: ``model-catalog replay --verify`` on a big event log (not part of the test suite).

    .venv/bin/python -m bench.replay_bench [LOG] [--records N]
    # LOG defaults to bench/results/big-event-log.jsonl.tmp, generated first (bench.make_big_log) if missing

Runs ``model-catalog replay LOG --verify`` as users run it (its defaults: one
part per usable CPU), then with ``--jobs 1`` pinned to one CPU, and reports each
one's wall time, CPU time and peak RSS, with the RSS of every process sampled
every 0.2 s so a growing footprint would show (it must stay flat in each: the
log is streamed). Then, in this process, it times the event-log layer alone (read,
parse, check and decode every record, no fold) to show how the total splits
between the log and the core's fold.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from adapters.eventlog.reader import LogFile
from bench.make_big_log import DEFAULT_OUT, generate
from contracts import eventlog as wire


def _rss_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it (the parts of a ``--jobs`` verify are its children)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            with open(f"/proc/{current}/task/{current}/children", encoding="ascii") as children:
                todo.extend(int(c) for c in children.read().split())
        except OSError:
            continue
    return found


def flatness(samples: dict[int, list[tuple[float, int]]]) -> dict[str, float]:
    """Per process, the largest RSS in the first and in the second half of its own samples; the worst
    process of each (MiB). A streamed verify stays flat in every process: the parent and each part."""
    first = second = 0
    for series in samples.values():
        if len(series) < 2:
            continue
        half = len(series) // 2
        first = max(first, *(kib for _, kib in series[:half]))
        second = max(second, *(kib for _, kib in series[half:]))
    return {"rss_first_half_mib": first / 1024, "rss_second_half_mib": second / 1024}


def replay_verify(log: Path, jobs: int | None = None) -> dict[str, Any]:
    """``model-catalog replay LOG --verify`` as users run it (``jobs`` None: its defaults, every CPU this
    process may use), or with ``--jobs N``; ``--jobs 1`` runs pinned to one CPU (the one-CPU figure).
    The RSS of every process of the command is sampled every 0.2 s, each process apart."""
    args = ["replay", str(log), "--verify", *(["--jobs", str(jobs)] if jobs is not None else [])]
    command = [sys.executable, "-m", "app.cli", *args]
    cpu = sorted(os.sched_getaffinity(0))[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=(lambda: os.sched_setaffinity(0, {cpu})) if jobs == 1 else None,  # noqa: PLW1509
    )
    samples: dict[int, list[tuple[float, int]]] = {}
    while child.poll() is None:
        for pid in _tree(child.pid):
            rss = _rss_kib(pid)
            if rss is not None:
                samples.setdefault(pid, []).append((time.perf_counter() - began, rss))
        time.sleep(0.2)
    out, err = child.communicate()
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "command": " ".join(["model-catalog", *args]),
        "exit": child.returncode,
        "output": (out + err).strip(),
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "processes": len(samples),
        "rss_samples": samples.get(child.pid, []),
        "rss_by_process": samples,
    }


def decode_only(log: Path) -> tuple[float, int]:
    """Read, parse, check and decode every record (events structured, commands re-encoded): no fold."""
    began = time.perf_counter()
    count = 0
    for line in LogFile(log).records():
        raw = line.raw
        if raw["k"] == "event":
            wire.structure_event(raw["event"])
        elif raw["k"] == "commands":
            wire.dumps(raw["commands"])
        count += 1
    return time.perf_counter() - began, count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time `model-catalog replay --verify` on a big log.")
    parser.add_argument("log", nargs="?", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--records", type=int, default=1_000_000, help="records to generate when LOG is missing"
    )
    args = parser.parse_args(argv)
    if not args.log.exists():
        print(f"generating {args.log} ({args.records} records)...", file=sys.stderr)
        args.log.parent.mkdir(parents=True, exist_ok=True)
        generate(args.log, args.records, seed=1)
    size = args.log.stat().st_size
    print(f"log: {args.log} ({size / 1e6:.0f} MB)")
    exits = []
    for jobs, label in ((None, "its defaults"), (1, "one CPU")):
        result = replay_verify(args.log, jobs)
        exits.append(result["exit"])
        flat = flatness(result["rss_by_process"])
        print(f"command ({label}): {result['command']}")
        print(f"result (exit {result['exit']}): {result['output']}")
        print(
            f"wall {result['wall_s']:.1f} s, cpu {result['cpu_s']:.1f} s, {result['processes']} process(es); "
            f"RSS max per process {flat['rss_first_half_mib']:.0f} MiB in its first half, "
            f"{flat['rss_second_half_mib']:.0f} MiB in its second"
        )
    seconds, count = decode_only(args.log)
    print(
        f"event-log layer alone (read, parse, check, decode; no fold): {seconds:.1f} s for {count} records "
        f"({seconds / count * 1e6:.1f} us/record)"
    )
    return 0 if exits == [0, 0] else 1


if __name__ == "__main__":
    raise SystemExit(main())
