"""Generate a big event log (1,000,000 records by default) for the replay benchmark.

    .venv/bin/python -m bench.make_big_log [OUT] [--records N] [--seed S]
    # default OUT: bench/results/big-event-log.jsonl.tmp (git-ignored; about 0.9 GB)

The log is a recorded run, produced like the example log (real fold, real
recorder, the core's simulated world carrying out the commands), of an
appliance over many simulated days:

- 12 KubeAI Models (status-only updates that change nothing; about every ten
  minutes one restarts or finishes pulling), 8 external models in
  ``ai-external-models`` (edited about hourly, sometimes with invalid JSON,
  then fixed), 3 FreeToken runtimes with their ModelActivations and Services,
  probed every 15 s (now and then unhealthy long enough to be withdrawn);
- LiteLLM polled every 30 s, Private Mesh fallback rows coming and going;
- LiteLLM writes that are mostly ``applied`` and sometimes ``retry`` (5%);
- a tick when events arrived or a deadline (probe, retry) fell due, as the
  shell sends them, and again after the outcomes of its commands.

Every commands record is what the fold really emitted, so ``replay --verify``
passes on it. The run is seeded: the same seed and count give the same file
(record timestamps follow the simulated clock).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from adapters.eventlog.recorder import Recorder, RecorderSettings
from catalog_core.config import CatalogConfig
from tests.simulation import BusyAppliance, SimulatedShell

# .tmp: git-ignored (bench/results/*.tmp), and it is one: regenerate it at will.
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "big-event-log.jsonl.tmp"
START = 1_767_225_600.0


def generate(out: Path, records: int, seed: int) -> Recorder:
    config = CatalogConfig()
    rng = random.Random(seed)
    settings = RecorderSettings(out, max_bytes=1 << 40, max_files=1, ring_size=0)
    shell = SimulatedShell(config, now=START)
    cluster = BusyAppliance(shell, rng)
    shell.executor = cluster.execute
    recorder = Recorder(settings, config, writer="inline", clock=lambda: shell.now, run_id=f"bench-{seed}")
    shell.recorder = recorder
    cluster.start()
    while recorder.last_seq + 1 < records:
        cluster.second()
    recorder.close()
    return recorder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate a big event log for the replay benchmark.")
    parser.add_argument("out", nargs="?", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    recorder = generate(args.out, args.records, args.seed)
    stats = recorder.stats
    print(
        f"wrote {args.out}: {stats.records_written} records, {stats.bytes_written / 1e6:.1f} MB, "
        f"{stats.snapshots} snapshots, in {time.perf_counter() - began:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
