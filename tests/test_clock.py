"""The suite runs on monotonic clocks that start near zero (tests/clock.py), as on a fresh machine."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator

import anyio
import pytest

from tests import clock
from tests.conftest import CLOCK
from tests.fixtures.shared import REPO

SESSION_BEGAN = time.time() - (time.monotonic() - (CLOCK.start or 0.0))


def test_the_process_clocks_start_near_zero_unless_the_machine_clock_was_asked_for() -> None:
    if CLOCK.start is None:
        pytest.skip(f"{clock.ENV}={clock.MACHINE}: the machine's clocks")
    # Since the shift the clocks ran at the real rate: they read the start plus the wall time since then.
    elapsed = time.time() - SESSION_BEGAN
    assert CLOCK.start <= time.monotonic() <= CLOCK.start + elapsed + 1.0
    assert abs(time.perf_counter() - time.monotonic()) < 1.0
    assert abs(time.monotonic_ns() / 1e9 - time.monotonic()) < 1.0
    assert abs(time.perf_counter_ns() / 1e9 - time.perf_counter()) < 1.0


def test_event_loops_read_the_shifted_clock() -> None:
    if CLOCK.start is None:
        pytest.skip(f"{clock.ENV}={clock.MACHINE}: the machine's clocks")

    async def loop_time() -> tuple[float, float]:
        return asyncio.get_running_loop().time(), anyio.current_time()

    before = time.monotonic()
    asyncio_time, anyio_time = anyio.run(loop_time)
    assert before <= asyncio_time <= anyio_time <= time.monotonic()


@pytest.fixture
def own_shift() -> Iterator[None]:
    """A test that shifts the clocks again gets the session's back afterwards."""
    saved = {name: getattr(time, name) for name in clock.CLOCKS}
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(time, name, function)


def test_a_shift_moves_the_origin_only(own_shift: None) -> None:
    real = time.monotonic
    shift = clock.start_clocks_at(0.5)
    first = time.monotonic()
    time.sleep(0.01)
    second = time.monotonic()
    assert 0.5 <= first < second  # still forward, at the real rate
    assert second - first >= 0.01
    assert shift.offsets["monotonic"] > 0 or real() < 0.5
    assert abs(time.perf_counter() - time.monotonic()) < 1.0  # every clock moved alike


def test_a_clock_already_below_the_start_is_not_moved(own_shift: None) -> None:
    real = time.monotonic
    shift = clock.start_clocks_at(real() + 1000.0)
    assert shift.offsets["monotonic"] == 0 and time.monotonic is real


def test_the_bench_and_the_fixtures_leave_a_process_clock_as_the_machine_keeps_it() -> None:
    # The bench's driver imports the fixtures and compares its clock with its workers' (P1): only the
    # test session shifts clocks, never an import.
    probe = (
        "import time; real = time.monotonic; "
        "import bench.run, bench.scenarios, bench.peers, bench.fake_server, "
        "tests.fixtures.kube_peer, tests.fixtures.litellm_peer, tests.unavailable; "
        "assert time.monotonic is real, 'an import shifted time.monotonic'"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], check=False, capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-2000:]
