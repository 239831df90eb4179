"""Summaries of repeated measurements: median and spread, never a single run."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation between closest ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary(values: Sequence[float]) -> dict[str, Any]:
    """median, p10, p90, min, max and the count of ``values``."""
    if not values:
        return {
            "n": 0,
            "median": math.nan,
            "p10": math.nan,
            "p90": math.nan,
            "min": math.nan,
            "max": math.nan,
        }
    return {
        "n": len(values),
        "median": statistics.median(values),
        "p10": percentile(values, 0.10),
        "p90": percentile(values, 0.90),
        "min": min(values),
        "max": max(values),
    }


def latency(values: Sequence[float]) -> dict[str, Any]:
    """Latency distribution: p50, p90, p99, max (and the count)."""
    return {
        "n": len(values),
        "p50": percentile(values, 0.50),
        "p90": percentile(values, 0.90),
        "p99": percentile(values, 0.99),
        "max": max(values) if values else math.nan,
        "min": min(values) if values else math.nan,
    }


def spread(s: dict[str, Any], unit: str = "", digits: int = 1, scale: float = 1.0) -> str:
    """'median (min-max, n runs)' for a summary."""
    if not s.get("n"):
        return "n/a"

    def f(v: float) -> str:
        return f"{v * scale:,.{digits}f}"

    return f"{f(s['median'])}{unit} ({f(s['min'])}-{f(s['max'])}, n={s['n']})"
