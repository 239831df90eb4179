"""What the figures were measured on: machine, software, revision, load."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LIBRARIES = (
    "attrs", "cattrs", "orjson", "anyio", "httpx", "kubernetes-asyncio", "aiohttp",
    "opentelemetry-sdk", "py-spy",
)  # fmt: skip


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return float("nan")


def _git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    return out.stdout.strip()


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def describe() -> dict[str, Any]:
    versions = {}
    for name in LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": round(_mem_total_gib(), 1),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "libraries": versions,
        "git_revision": _git("rev-parse", "HEAD") + (" (uncommitted changes)" if dirty else ""),
        "git_branch": _git("rev-parse", "--abbrev-ref", "HEAD"),
        "load_average_at_start": load_average(),
    }
