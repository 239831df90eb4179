"""py-spy profiles (sampled from outside the measured process) and their top costs."""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

PY_SPY = Path(sys.executable).parent / "py-spy"


def ensure_py_spy() -> str:
    """Install the ``bench`` extra (py-spy) into this venv when it is missing; its version."""
    if not PY_SPY.exists():
        repo = Path(__file__).resolve().parents[1]
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "-e",
                f"{repo}[bench]",
            ],
            check=True,
        )
    out = subprocess.run([str(PY_SPY), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def record(command: list[str], out: Path, rate: int = 250) -> subprocess.CompletedProcess[str]:
    """Run ``command`` under py-spy; raw (folded) stacks into ``out``."""
    return subprocess.run(
        [str(PY_SPY), "record", "--rate", str(rate), "--format", "raw", "--output", str(out), "--", *command],
        capture_output=True,
        text=True,
        check=False,
    )


def _frame(text: str) -> str:
    return re.sub(r" \((?:[^)]*/)?([^)/]*?)(?::\d+)?\)$", r" (\1)", text)


_NOISE = ("<module>", "_run_code", "_run_module_as_main", "run (anyio", "Runner.run", "BaseEventLoop")


def top_costs(folded: Path, limit: int = 10) -> dict[str, Any]:
    """Self and inclusive shares of the functions in a py-spy raw profile."""
    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in folded.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = [_frame(f) for f in stack.split(";")]
        own[frames[-1]] += n
        for f in set(frames):
            inclusive[f] += n
    if not total:
        return {"samples": 0, "self": [], "inclusive": []}
    return {
        "samples": total,
        "self": [(f, round(100 * n / total, 1)) for f, n in own.most_common(limit)],
        "inclusive": [
            (f, round(100 * n / total, 1))
            for f, n in inclusive.most_common(limit * 4)
            if not any(x in f for x in _NOISE)
        ][: limit * 2],
    }
