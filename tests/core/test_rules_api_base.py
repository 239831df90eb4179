"""Issue 12 (low): credentials in an apiBase. ``user:password@``, a query (``?api-key=...``) and a fragment
never reach the catalog ConfigMap; a ModelActivation may not carry them at all (behaviour §1.5: inline
credentials in ModelActivations are rejected)."""

from __future__ import annotations

import json

import pytest

from catalog_core.sources.litellm_row import LiteLLMRow, whitelist_row
from tests.core import builders as b
from tests.core.harness import Cluster

CANARY = "canary-7d1f"


def _ext(name: str, api_base: str) -> dict[str, str]:
    return {"name": name, "model": f"openai/{name}", "apiBase": api_base}


@pytest.mark.parametrize(
    "api_base",
    [
        f"https://me:p@ss-{CANARY}@api.example.com/v1",  # an unescaped "@" in the password
        f"https://me:{CANARY}@api.example.com/v1?api-key={CANARY}#{CANARY}",
        f"https://api.example.com/v1?x=1&key={CANARY}",
    ],
)
def test_the_catalog_publishes_an_api_base_without_its_credentials(api_base):
    c = Cluster()
    c.start(b.external_configmap([_ext("m", api_base)]))
    assert c.entry("m")["litellm"]["apiBase"] == "https://api.example.com/v1"
    assert CANARY not in json.dumps(c.data)


def test_an_api_base_whose_host_cannot_be_told_apart_is_not_published_at_all():
    """``/`` in a password ends the authority early: no host to publish, so no apiBase rather than a guess."""
    c = Cluster()
    c.start(b.external_configmap([_ext("m", f"https://me:pw/{CANARY}@api.example.com/v1")]))
    assert c.entry("m")["litellm"]["apiBase"] is None
    assert CANARY not in json.dumps(c.data)


@pytest.mark.parametrize(
    "api_base",
    [
        f"https://me:{CANARY}@api.example.com/v1",
        f"https://api.example.com/v1?api-key={CANARY}",
        f"https://api.example.com/v1#{CANARY}",
    ],
)
def test_a_model_activation_may_not_carry_credentials_in_its_api_base(api_base):
    c = Cluster()
    c.start(b.activation("act", external={"model": "openai/act", "apiBase": api_base}))
    rec = c.record("act")
    assert (rec["state"], rec["reason"]) == ("error", "InlineKeyRejected")
    assert "apiKeySecretRef" in rec["message"]
    assert c.world.rows == {}
    everything = json.dumps([c.data, [e.message for e in c.world.events]])
    assert CANARY not in everything


def test_a_model_activation_api_base_without_credentials_is_published():
    c = Cluster()
    c.start(b.activation("act", external={"model": "openai/act", "apiBase": "https://api.example.com/v1"}))
    assert c.record("act")["reason"] == "Published"
    assert c.world.rows["ai-appliance-external-act"]["litellm_params"]["api_base"] == (
        "https://api.example.com/v1"
    )


def test_the_credentials_in_a_foreign_rows_api_base_never_enter_the_core():
    """Rows are whitelisted so that credentials of rows we do not own never get in (nor into the event
    log); an api_base's user:password@ and query are such credentials."""
    c = Cluster()
    hand = b.row("hand", "hand-made", api_base=f"https://me:{CANARY}@h.example/v1?key={CANARY}")
    c.start(rows=[hand])
    assert CANARY not in repr(c.state)
    assert c.entry("hand")["litellm"]["apiBase"] == "https://h.example/v1"
    assert CANARY in json.dumps(c.world.rows["hand-made"])  # never touched


def test_our_own_rows_keep_their_api_base_as_written():
    """We compare what LiteLLM holds with what we wrote: a stripped read-back would rewrite it forever."""
    c = Cluster()
    c.start(b.external_configmap([_ext("m", f"https://api.example.com/v1?api-version={CANARY}")]))
    writes = len(c.commands)
    c.rows_changed()
    assert len(c.commands) == writes


@pytest.mark.parametrize(
    "info",
    [
        {"ai_appliance_owner": "model-catalog"},
        {"ai_appliance_managed": True},  # legacy row of ours (our id family)
        {"ai_appliance_managed": True, "ai_appliance_owner": 5},
        {"ai_appliance_managed": True, "ai_appliance_owner": "private-mesh"},
        {"ai_appliance_managed": "true"},
        {},
    ],
)
def test_only_rows_we_own_keep_their_api_base_whole(info):
    row = {
        "model_name": "m",
        "litellm_params": {"model": "openai/m", "api_base": "https://h.example/v1?k=v"},
        "model_info": {"id": "ai-appliance-external-m", **info},
    }
    parsed = LiteLLMRow.from_info(row)
    assert parsed is not None
    kept = whitelist_row(row)["litellm_params"]["api_base"]
    assert kept == ("https://h.example/v1?k=v" if parsed.ours else "https://h.example/v1")
