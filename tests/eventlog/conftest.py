"""Fixtures of the event-log tests."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def example_log() -> Path:
    return EXAMPLES / "event-log.jsonl"
