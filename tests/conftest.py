"""Shared test configuration. Fixture modules live in tests/fixtures/ and are all loaded here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

_FIXTURES = Path(__file__).parent / "fixtures"
pytest_plugins = sorted(
    f"tests.fixtures.{p.stem}" for p in _FIXTURES.glob("*.py") if p.stem not in ("__init__", "shared")
)

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.register_profile("ci", parent=settings.get_profile("default"), max_examples=100)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

REQUIRE_PEERS = os.environ.get("MODEL_CATALOG_REQUIRE_PEERS") == "1"


def skip_or_fail(reason: str) -> None:
    """Without a peer, skip with a one-line reason — but in CI (MODEL_CATALOG_REQUIRE_PEERS=1) fail."""
    if REQUIRE_PEERS:
        pytest.fail(f"required peer unavailable: {reason}", pytrace=False)
    pytest.skip(reason)


REQUIRE_TOOLS = os.environ.get("MODEL_CATALOG_REQUIRE_TOOLS") == "1"


def skip_or_fail_tool(reason: str) -> None:
    """Without a test tool (promtool), skip with a one-line reason — but in CI (MODEL_CATALOG_REQUIRE_TOOLS=1)
    fail: the rule tests must run there."""
    if REQUIRE_TOOLS:
        pytest.fail(f"required test tool unavailable: {reason}", pytrace=False)
    pytest.skip(reason)
