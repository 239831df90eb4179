"""One ``peer`` fixture, parametrized over the in-process fake and the real LiteLLM proxy, each of the two
releases the project is measured against: 1.84.0 (the appliance's) and 1.108.7 (the latest). A real
proxy is that release's peer (``tests/fixtures/litellm_peer.py``); a fake answers like that release
(``FakeLiteLLM(release=...)``). ``peer.traits`` is what the proxy does where releases differ, probed from
it once per session (``traits.probe``)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import attrs
import httpx
import pytest

from adapters.litellm.client import LiteLLMClient
from tests.adapters.litellm.traits import Traits, probe
from tests.fakes.litellm import RELEASES, FakeLiteLLM
from tests.fixtures.litellm_peer import APPLIANCE, LATEST, TEST_PREFIX, LiteLLMPeer, database_url

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
    release: str = LATEST  # the release it is (a real peer) or answers like (a fake)
    traits: Traits | None = None  # probed (``peer`` sets it; ``fake_peer`` leaves it unset)
    clients: list[LiteLLMClient] = attrs.field(factory=list)
    # A real peer of ours: its PostgreSQL, where LiteLLM keeps the rows its router serves and lists.
    database_url: str | None = attrs.field(default=None, repr=False)

    @property
    def probed(self) -> Traits:
        assert self.traits is not None, "traits are probed for the parametrized peer fixture"
        return self.traits

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

    async def stored_ids(self) -> set[str] | None:
        """The ids of this test's rows in LiteLLM's database (what its router reloads from), or None
        when there is no database of ours to read or the read failed."""
        out = await self._sql(
            "SELECT model_id FROM \"LiteLLM_ProxyModelTable\" WHERE starts_with(model_name, :'prefix');"
        )
        return None if out is None else {line for line in out.splitlines() if line}

    async def forget_stored(self, model_id: str) -> bool:
        """Delete one of this test's rows from LiteLLM's database alone, leaving its router as it is (the
        state LiteLLM 1.84.0's reload race leaves a deleted row in); whether a row was deleted."""
        out = await self._sql(
            "DELETE FROM \"LiteLLM_ProxyModelTable\" WHERE model_id = :'id'"
            " AND starts_with(model_name, :'prefix') RETURNING model_id;",
            id=model_id,
        )
        return out is not None and out.strip() == model_id

    async def _sql(self, statement: str, **values: str) -> str | None:
        """psql's unaligned output of one statement on the real peer's database; None when unavailable.
        Values are psql variables (``:'name'`` quotes them), never spliced into the text."""
        if self.database_url is None:
            return None
        command = ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", self.database_url]
        for name, value in {"prefix": self.prefix, **values}.items():
            command += ["-v", f"{name}={value}"]
        try:
            with anyio.fail_after(10):
                done = await anyio.run_process(command, input=statement.encode(), check=False)
        except (OSError, TimeoutError):
            return None
        return done.stdout.decode() if done.returncode == 0 else None

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


_PROBED: dict[tuple[str, str], Traits] = {}  # (kind, release) -> traits, once per session


async def traits_of(kind: str, release: str, real: LiteLLMPeer | None) -> Traits:
    """The release's traits, probed once per session: on the real peer, or on a fake of that release
    (its own table, so a test's fake and its request counts are untouched)."""
    key = (kind, release)
    if key not in _PROBED:
        if real is not None:
            _PROBED[key] = await probe(real.base_url, real.master_key)
        else:
            fake = FakeLiteLLM(MASTER_KEY, release=RELEASES[release])
            _PROBED[key] = await probe(FAKE_URL, MASTER_KEY, httpx.MockTransport(fake.handle))
    return _PROBED[key]


_REAL_FIXTURE = {LATEST: "litellm_peer", APPLIANCE: "litellm_appliance_peer"}
_REAL_MARK = {LATEST: pytest.mark.litellm, APPLIANCE: pytest.mark.litellm_appliance}


@pytest.fixture(
    params=[
        *(pytest.param(("fake", v), id=f"fake-{v}") for v in (APPLIANCE, LATEST)),
        *(pytest.param(("real", v), id=f"real-{v}", marks=_REAL_MARK[v]) for v in (APPLIANCE, LATEST)),
    ]
)
async def peer(request: pytest.FixtureRequest) -> AsyncIterator[Peer]:
    kind, release = request.param
    if kind == "fake":
        fake = FakeLiteLLM(MASTER_KEY, release=RELEASES[release])
        traits = await traits_of(kind, release, None)
        handle = Peer("fake", FAKE_URL, MASTER_KEY, fake, new_prefix(), release, traits)
    else:
        real: LiteLLMPeer = request.getfixturevalue(_REAL_FIXTURE[release])
        traits = await traits_of(kind, release, real)
        handle = Peer("real", real.base_url, real.master_key, None, new_prefix(), release, traits)
        if real.root is not None:
            handle.database_url = database_url(real.root)
    try:
        yield handle
    finally:
        await handle.cleanup()
