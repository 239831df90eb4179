"""``model_list_healthy_only`` (LiteLLM 1.108.7 on): ``/model/info`` leaves out the rows of a model name whose
deployments all failed LiteLLM's background health check. Such a row is still there (and still served):
the controller must not read it as missing and create it again, over and over, while it stays unhealthy.

Run on the fake with the setting on and on the real 1.108.7 peer, started with it on and health-checking
the one model name ``HEALTH_CHECKED_NAME`` (tests/fixtures/litellm_peer.py); a row of that name whose
``api_base`` does not resolve fails the check within a few seconds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from adapters.litellm import observer as observer_module
from adapters.litellm.observer import LiteLLMObserver
from catalog_core.commands import CreateLiteLLMModel, UpdateLiteLLMModel
from catalog_core.events import Event, LiteLLMRowsObserved, Outcome
from catalog_core.registry import route_id
from catalog_core.values import Source
from tests.adapters.litellm.conftest import FAKE_URL, MASTER_KEY, Peer
from tests.adapters.litellm.harness import Harness
from tests.fakes.litellm import NEW, FakeLiteLLM
from tests.fixtures.litellm_peer import HEALTH_CHECKED_NAME, LiteLLMPeer

pytestmark = pytest.mark.anyio

UNREACHABLE = "https://mct-health-checked.invalid/v1"  # never resolves: LiteLLM's health check fails
SUFFIX = "checked"
PREFIX = HEALTH_CHECKED_NAME.removesuffix(SUFFIX)  # the rows' names are HEALTH_CHECKED_NAME
# Seconds for the real peer's health check (every 2 s) to mark a new row unhealthy: often before the
# first listing after its creation, so the tests tell the observer of a row the way a write of it does.
HIDE_TIMEOUT = 90.0


# The ids these tests give their rows: deleted by id before and after (a hidden row is in no listing, so
# the usual clean-up by name would leave it behind).
ROW_IDS = (f"{PREFIX}hidden-id", route_id(Source.EXTERNAL, HEALTH_CHECKED_NAME))


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.litellm)])
async def hiding_peer(request: pytest.FixtureRequest) -> AsyncIterator[Peer]:
    if request.param == "fake":
        fake = FakeLiteLLM(MASTER_KEY, healthy_only_listing=True)
        handle = Peer("fake", FAKE_URL, MASTER_KEY, fake, PREFIX)
    else:
        real: LiteLLMPeer = request.getfixturevalue("litellm_peer")
        handle = Peer("real", real.base_url, real.master_key, None, PREFIX)
    admin = handle.client()
    for model_id in ROW_IDS:
        await admin.delete(model_id)
    try:
        yield handle
    finally:
        for model_id in ROW_IDS:
            await admin.delete(model_id)
        await handle.cleanup()


async def hidden(peer: Peer, model_id: str) -> None:
    """Mark the row unhealthy (the fake) or wait for LiteLLM's health check to (the real peer); return
    once the listing leaves it out while a lookup by id still finds it."""
    if peer.fake is not None:
        peer.fake.unhealthy.add(model_id)
    client = peer.client()
    with anyio.fail_after(HIDE_TIMEOUT):
        while True:
            listed = (await client.info()).body["data"]
            if all(r["model_info"]["id"] != model_id for r in listed):
                break
            await anyio.sleep(0.5)
    looked_up = await client.info_of(model_id)
    assert looked_up.status == 200 and looked_up.body["data"][0]["model_info"]["id"] == model_id


def observed_ids(events: list[Event]) -> set[str]:
    [event] = [e for e in events if isinstance(e, LiteLLMRowsObserved)]
    return {r["model_info"]["id"] for r in event.rows}


async def poll(observer: LiteLLMObserver) -> list[Event]:
    send, receive = anyio.create_memory_object_stream[Event](10)
    await observer.poll_once(send)
    events = []
    while True:
        try:
            events.append(receive.receive_nowait())
        except anyio.WouldBlock:
            return events


async def test_a_row_hidden_as_unhealthy_is_observed_and_one_deleted_meanwhile_is_not(
    hiding_peer: Peer,
) -> None:
    client = hiding_peer.client()
    rid = hiding_peer.id("hidden")
    created = await client.new(
        {
            "model_name": HEALTH_CHECKED_NAME,
            "litellm_params": {"model": f"openai/{HEALTH_CHECKED_NAME}", "api_base": UNREACHABLE},
            "model_info": {"id": rid},
        }
    )
    assert created.status == 200, created
    observer = LiteLLMObserver(client)
    observer.shared.present(rid)  # as the writer notes after a create (LiteLLM may hide the row at once)
    assert rid in observed_ids(await poll(observer))
    await hidden(hiding_peer, rid)

    before = observer.lookups
    assert rid in observed_ids(await poll(observer))  # looked up by id, not read as missing
    assert observer.lookups == before + 1
    assert (await client.delete(rid)).status == 200  # behind the observer's back
    assert rid not in observed_ids(await poll(observer))
    assert observer.lookups == before + 2
    assert rid not in observed_ids(await poll(observer)) and observer.lookups == before + 2  # forgotten


async def test_the_controller_does_not_create_a_hidden_row_again_and_updates_it(hiding_peer: Peer) -> None:
    h = Harness.build(hiding_peer)
    fields = {"model": f"openai/{HEALTH_CHECKED_NAME}", "apiBase": UNREACHABLE}
    name = h.add_external(SUFFIX, **fields)
    assert name == HEALTH_CHECKED_NAME
    rid = route_id(Source.EXTERNAL, name)
    await h.start()
    assert rid in observed_ids([[e for e in h.observed if isinstance(e, LiteLLMRowsObserved)][-1]])
    await hidden(hiding_peer, rid)

    assert await h.resync() == []  # hidden, not missing: nothing to create
    h.add_external(SUFFIX, **fields, contextWindow=4096)
    assert [type(c) for c in await h.resync()] == [UpdateLiteLLMModel]

    # A controller that starts while the row is hidden has never seen it: its one create is refused
    # (the id exists), which makes the observer look the row up; then it is seen, and left alone.
    fresh = Harness.build(hiding_peer)
    fresh.add_external(SUFFIX, **fields, contextWindow=4096)
    executed = await fresh.start()
    assert [type(c) for c in executed] == [CreateLiteLLMModel]
    assert [o.outcome for o in fresh.outcomes] == [Outcome.RETRY]
    assert await fresh.resync() == []
    looked_up = await fresh.client.info_of(rid)
    assert looked_up.body["data"][0]["model_info"]["max_input_tokens"] == 4096
    if hiding_peer.fake is not None:
        assert hiding_peer.fake.requests[NEW] == 2  # the first start's create and the fresh one's


async def test_lookups_are_bounded_per_poll_and_one_that_fails_fails_the_poll(
    fake_peer: Peer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeLiteLLM(MASTER_KEY, healthy_only_listing=True)
    peer = Peer("fake", FAKE_URL, MASTER_KEY, fake, fake_peer.prefix)
    ids = [fake.seed(peer.name(f"m{i}"), {"model": "openai/m"}, {"id": peer.id(f"m{i}")}) for i in range(5)]
    observer = LiteLLMObserver(peer.client())
    assert observed_ids(await poll(observer)) == set(ids)
    fake.unhealthy.update(ids[:3])  # three names hidden
    monkeypatch.setattr(observer_module, "MAX_LOOKUPS_PER_POLL", 2)
    assert observed_ids(await poll(observer)) == set(ids) - {ids[2]} and observer.lookups == 2
    # the one left over has its turn; the two looked up before are observed as they were then
    assert observed_ids(await poll(observer)) == set(ids) and observer.lookups == 4
    assert fake.remove(ids[2]) is None and observed_ids(await poll(observer)) == set(ids)  # not its turn
    assert observed_ids(await poll(observer)) == set(ids) - {ids[2]} and observer.lookups == 8

    listing = fake.answer

    async def lookups_fail(method: str, target: str, headers: Any, body: bytes) -> tuple[int, Any]:
        if "litellm_model_id" in target:
            return 503, {"error": {"message": "busy"}}
        return await listing(method, target, headers, body)

    monkeypatch.setattr(fake, "answer", lookups_fail)
    events = await poll(observer)  # the listing answers, a lookup does not: LiteLLM erroring, none missing
    assert [type(e).__name__ for e in events] == ["LiteLLMUnreachable"]
