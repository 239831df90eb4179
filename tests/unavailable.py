"""What a test does when a peer or a test tool is missing: skip locally, fail in CI.

A plain module, not the conftest: bench/ and helper scripts import the fixtures (and so this) without
pytest's session, and importing tests/conftest.py would shift their monotonic clocks (tests/clock.py)
while the processes they start keep the machine's, making every cross-process timing meaningless.
"""

from __future__ import annotations

import os

import pytest

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
