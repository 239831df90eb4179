"""Benchmark: ``model-catalog replay --verify`` on a big event log (not part of the test suite).

    .venv/bin/python -m bench.replay_bench [LOG] [--records N]
    # LOG defaults to bench/results/big-event-log.jsonl.tmp, generated first (bench.make_big_log) if missing

Runs ``model-catalog replay LOG --verify`` in a child process pinned to one CPU
and reports its wall time, CPU time and peak RSS, with the RSS sampled every
0.2 s so a growing footprint would show (it must stay flat: the log is
streamed). Then, in this process, it times the event-log layer alone (read,
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


def replay_verify(log: Path, jobs: int = 1) -> dict[str, Any]:
    """One CPU (pinned) by default; with ``jobs`` > 1, ``--jobs`` on every CPU this process may use (the
    RSS sampled is then the parent's alone)."""
    args = ["replay", str(log), "--verify", *(["--jobs", str(jobs)] if jobs > 1 else [])]
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
    samples: list[tuple[float, int]] = []
    while child.poll() is None:
        rss = _rss_kib(child.pid)
        if rss is not None:
            samples.append((time.perf_counter() - began, rss))
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
        "peak_rss_mib": after.ru_maxrss / 1024,
        "rss_samples": samples,
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
    result = replay_verify(args.log)
    samples = result["rss_samples"]
    assert isinstance(samples, list)
    print(f"log: {args.log} ({size / 1e6:.0f} MB)")
    print(f"command: {result['command']}")
    print(f"result (exit {result['exit']}): {result['output']}")
    print(
        f"wall {result['wall_s']:.1f} s, cpu {result['cpu_s']:.1f} s (one core), "
        f"peak RSS {result['peak_rss_mib']:.0f} MiB"
    )
    if samples:
        picks = [samples[min(len(samples) - 1, int(len(samples) * q))] for q in (0.1, 0.25, 0.5, 0.75, 1.0)]
        print("RSS over the run: " + ", ".join(f"{t:.0f}s {kib / 1024:.0f} MiB" for t, kib in picks))
    seconds, count = decode_only(args.log)
    print(
        f"event-log layer alone (read, parse, check, decode; no fold): {seconds:.1f} s for {count} records "
        f"({seconds / count * 1e6:.1f} us/record)"
    )
    return 0 if result["exit"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
