"""Shared test configuration. Fixture modules live in tests/fixtures/ and are all loaded here."""

from __future__ import annotations

from tests import clock

# First, before the fixtures and test modules import anything: the process's monotonic clocks start near
# zero, as on a freshly booted CI machine (tests/clock.py; MODEL_CATALOG_CLOCK_START=machine turns it off).
CLOCK = clock.from_environment()

import os  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

_FIXTURES = Path(__file__).parent / "fixtures"
pytest_plugins = sorted(
    f"tests.fixtures.{p.stem}" for p in _FIXTURES.glob("*.py") if p.stem not in ("__init__", "shared")
)

# Profiles: "default" (local runs) draws new examples each run and prints the blob that reproduces a
# failure; "ci" (.ci/run) is derandomized, so a CI run is reproducible from the commit alone; "explore"
# (`just explore`) is randomized and runs every property EXPLORE_SCALE times as many examples as it asks for.
# A test's own @settings(...) inherits derandomize and the rest from the profile loaded here, before any
# test module is imported.
settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile(
    "ci", parent=settings.get_profile("default"), max_examples=100, derandomize=True, database=None
)
settings.register_profile("explore", parent=settings.get_profile("default"))
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "default")
settings.load_profile(PROFILE)
EXPLORE_SCALE = 5


def pytest_report_header() -> str:
    if CLOCK.start is None:
        return f"clocks: the machine's ({clock.ENV}={clock.MACHINE})"
    shifted = "shifted" if CLOCK.active else "already smaller, not shifted"
    return f"clocks: monotonic starts at {CLOCK.start:g} s ({shifted}; {clock.ENV})"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--peers",
        choices=HALVES,
        default="all",
        help="run every test (all), only the tests that need no real peer (none), those on the "
        "kube-apiserver without LiteLLM (kube: the fault suite's own API server included), those on a "
        "real LiteLLM (litellm), or both of the last two (only). `just test` runs none, kube and litellm "
        "at once, each with its own peers, so their starts and waits overlap",
    )


HALVES = ("all", "none", "kube", "litellm", "only")


def part_of(item: pytest.Item) -> str:
    """Which part of the suite a test is in: none, kube or litellm (see ``--peers``)."""
    # imported here, not at the top: the fixture modules are loaded as plugins after this module
    from tests.fixtures.kube_peer import needs_kube
    from tests.fixtures.litellm_peer import peers_needed

    if peers_needed(item):
        return "litellm"
    if needs_kube(item) or item.get_closest_marker("faults") is not None:
        return "kube"
    return "none"


@pytest.hookimpl(tryfirst=True)  # before the peer plugins decide what to start from the items
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the part of the suite ``--peers`` asks for; under the "explore" profile, give every Hypothesis
    test EXPLORE_SCALE times its examples."""
    wanted = config.getoption("peers")
    if wanted != "all":
        parts = {"only": ("kube", "litellm")}.get(wanted, (wanted,))
        keep = [item for item in items if part_of(item) in parts]
        config.hook.pytest_deselected(items=[item for item in items if part_of(item) not in parts])
        items[:] = keep
    if PROFILE != "explore":
        return
    for item in items:
        test = getattr(item, "obj", None)
        if getattr(test, "is_hypothesis_test", False):
            # where @given keeps the test's settings, read when the test runs (hypothesis.core)
            own = test._hypothesis_internal_use_settings  # type: ignore[union-attr]
            test._hypothesis_internal_use_settings = settings(  # type: ignore[union-attr]
                own, max_examples=own.max_examples * EXPLORE_SCALE
            )
