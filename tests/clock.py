"""The test process's monotonic clocks, made to start near zero: the clocks of a machine booted moments ago.

A CI machine is often freshly booted, so ``time.monotonic()`` (and every asyncio loop's ``time()``, which
reads it) is small there and large on a developer's machine that has been up for days. A test whose
tolerance depends on the clock's value (``pytest.approx`` on a clock reading is relative by default) or
that assumes the clock is large passes on one and fails on the other. ``tests/conftest.py`` shifts the
clocks of the whole test process before anything is imported, so every run is a run on a fresh machine:

    MODEL_CATALOG_CLOCK_START=60        # the default: the clocks read 60 s when the session starts
    MODEL_CATALOG_CLOCK_START=1         # a machine booted a second ago
    MODEL_CATALOG_CLOCK_START=machine   # the machine's own clocks, unshifted

The shift is the same constant for the life of the process, so the clocks still only move forward at the
real rate: only their origin moves. Processes a test starts (peers, ``model-catalog run``, the examples)
keep the machine's clocks.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

ENV = "MODEL_CATALOG_CLOCK_START"
DEFAULT_START = 60.0
MACHINE = "machine"

# The clocks asyncio, anyio, the adapters and the tests read, each shifted by its own offset so each reads
# the start at the moment of the shift (on Linux they are one clock, and stay equal).
_SECONDS = ("monotonic", "perf_counter")
_NANOSECONDS = ("monotonic_ns", "perf_counter_ns")
CLOCKS = _SECONDS + _NANOSECONDS


class Shift:
    """What ``start_clocks_at`` did: the seconds subtracted from each clock (0 when it was already small)."""

    def __init__(self, start: float | None, offsets: dict[str, float]) -> None:
        self.start = start
        self.offsets = offsets

    @property
    def active(self) -> bool:
        return any(self.offsets.values())


def start_clocks_at(start: float) -> Shift:
    """Shift ``time.monotonic`` (and ``monotonic_ns``, ``perf_counter``, ``perf_counter_ns``) so they read
    ``start`` seconds now. A clock already below ``start`` is left as it is (a clock never goes back).
    Code that bound one of them before the shift (``from time import monotonic``) keeps the machine's
    clock, which is consistent on its own."""
    offsets: dict[str, float] = {}
    for name in _SECONDS:
        real: Callable[[], float] = getattr(time, name)
        offset = max(0.0, real() - start)
        offsets[name] = offset
        if offset:
            setattr(time, name, _shifted(real, offset))
    for name in _NANOSECONDS:
        real_ns: Callable[[], int] = getattr(time, name)
        offset_ns = max(0, real_ns() - int(start * 1e9))
        offsets[name] = offset_ns / 1e9
        if offset_ns:
            setattr(time, name, _shifted_ns(real_ns, offset_ns))
    return Shift(start, offsets)


def _shifted(real: Callable[[], float], offset: float) -> Callable[[], float]:
    def clock() -> float:
        return real() - offset

    clock.__name__ = real.__name__
    return clock


def _shifted_ns(real: Callable[[], int], offset: int) -> Callable[[], int]:
    def clock() -> int:
        return real() - offset

    clock.__name__ = real.__name__
    return clock


def from_environment() -> Shift:
    """Apply ``MODEL_CATALOG_CLOCK_START`` (default 60 s; ``machine``: no shift)."""
    value = os.environ.get(ENV, "").strip() or str(DEFAULT_START)
    if value == MACHINE:
        return Shift(None, {})
    try:
        start = float(value)
    except ValueError:
        raise SystemExit(f"{ENV}={value!r}: seconds (e.g. 60) or {MACHINE!r}") from None
    if not start >= 0:
        raise SystemExit(f"{ENV}={value!r}: seconds must be >= 0")
    return start_clocks_at(start)
