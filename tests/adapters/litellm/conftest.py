"""One ``peer`` fixture, parametrized over the in-process fake and the real LiteLLM proxy."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import attrs
import httpx
import pytest

from adapters.litellm.client import LiteLLMClient
from adapters.litellm.fake import FakeLiteLLM
from tests.fixtures.litellm_peer import TEST_PREFIX, LiteLLMPeer

FAKE_URL = "http://fake-litellm.test"
MASTER_KEY = "sk-test"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@attrs.define
class Peer:
    """A LiteLLM to test against: the fake (with ``fake`` set) or the real proxy."""

    kind: str
    base_url: str
    master_key: str = attrs.field(repr=False)
    fake: FakeLiteLLM | None
    prefix: str  # unique per test: model names start with it, ids contain it
    clients: list[LiteLLMClient] = attrs.field(factory=list)

    def client(
        self, master_key: str | None = None, *, base_url: str | None = None, **kwargs: Any
    ) -> LiteLLMClient:
        """A client of this peer; for the fake, in-process unless ``base_url`` (where it is served)."""
        key = self.master_key if master_key is None else master_key
        if self.fake is not None and base_url is None:
            kwargs.setdefault("transport", httpx.MockTransport(self.fake.handle))
        client = LiteLLMClient(base_url or self.base_url, key, **kwargs)
        self.clients.append(client)
        return client

    def name(self, suffix: str) -> str:
        return f"{self.prefix}{suffix}"

    def id(self, suffix: str) -> str:
        return f"{self.prefix}{suffix}-id"

    async def cleanup(self) -> None:
        """Delete every row whose name carries this test's prefix, then close the clients."""
        admin = self.client()
        answer = await admin.info()
        for row in answer.body.get("data", []) if isinstance(answer.body, dict) else []:
            if str(row.get("model_name", "")).startswith(self.prefix):
                await admin.delete(row["model_info"]["id"])
        for client in self.clients:
            await client.aclose()


def new_prefix() -> str:
    return f"{TEST_PREFIX}{uuid.uuid4().hex[:8]}-"


@pytest.fixture
def fake_peer() -> Peer:
    return Peer("fake", FAKE_URL, MASTER_KEY, FakeLiteLLM(MASTER_KEY), new_prefix())


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.litellm)])
async def peer(request: pytest.FixtureRequest) -> AsyncIterator[Peer]:
    if request.param == "fake":
        handle: Peer = request.getfixturevalue("fake_peer")
    else:
        real: LiteLLMPeer = request.getfixturevalue("litellm_peer")
        handle = Peer("real", real.base_url, real.master_key, None, new_prefix())
    try:
        yield handle
    finally:
        await handle.cleanup()
