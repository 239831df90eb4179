"""Kube adapter tests run on anyio's asyncio backend (kubernetes-asyncio and aiohttp need asyncio)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
