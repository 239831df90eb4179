"""The LiteLLM contract: the same assertions against the in-process fake and the real proxy, each of the
appliance's release (1.84.0) and the latest one measured (1.108.7).

Whatever the fake answers here, the real proxy of that release was seen to answer too; the adapters rely on
nothing else. Where releases differ, an expectation reads ``peer.probed`` (what the running proxy does,
``traits.probe``), never the version.
"""

from __future__ import annotations

from typing import Any

import pytest

from adapters.litellm.client import REFUSED_KEY_TEXT, Answer, LiteLLMClient
from adapters.litellm.observer import no_models_loaded
from catalog_core.commands import LiteralKey
from catalog_core.config import CatalogConfig
from catalog_core.registry import BY_SOURCE
from catalog_core.rules.litellm_plan import needs_recreate, row_matches
from catalog_core.rules.routes import external_route, kubeai_route
from catalog_core.sources.external import ExternalModel
from catalog_core.sources.kubeai import KubeAIModel
from catalog_core.sources.litellm_row import LiteLLMRow, whitelist_row
from catalog_core.values import ModelType, Source
from tests.adapters.litellm.conftest import Peer, traits_of
from tests.fixtures.litellm_peer import APPLIANCE, LATEST, LiteLLMPeer

pytestmark = pytest.mark.anyio

SECRET = "sk-provider-secret-0123456789"


def full_body(peer: Peer, suffix: str = "full") -> dict[str, Any]:
    """Every field our commands set, with the shapes they have."""
    name = peer.name(suffix)
    return {
        "model_name": name,
        "litellm_params": {
            "model": f"openai/{name}",
            "api_base": "http://kubeai.ai.svc.cluster.local/openai/v1",
            "order": 0,
            "api_version": "2024-06-01",
            "custom_llm_provider": "openai",
            "tpm": 100000,
            "rpm": 600,
            "api_key": SECRET,
        },
        "model_info": {
            "id": peer.id(suffix),
            "ai_appliance_managed": True,
            "ai_appliance_owner": "model-catalog",
            "ai_appliance_source": "kubeai",
            "ai_appliance_type": "chat",
            "source": "kubeai",
            "features": ["TextGeneration", "Tools"],
            "max_input_tokens": 32768,
            "max_output_tokens": 4096,
            "ai_appliance_scheduler": {
                "trusted": True,
                "locality": "local",
                "engine": "vllm",
                "computeTarget": "nvidia-gpu",
                "contextWindow": 32768,
                "maxOutputTokens": 4096,
                "maxNumSeqs": 16,
            },
            "ai_appliance_spec_hash": "0123456789abcdef",
        },
    }


async def row(client: LiteLLMClient, model_id: str) -> dict[str, Any] | None:
    answer = await client.info()
    if no_models_loaded(answer):  # a proxy that never had a model
        return None
    assert answer.status == 200
    for item in answer.body["data"]:
        if item["model_info"].get("id") == model_id:
            return dict(item)
    return None


async def created(client: LiteLLMClient, body: dict[str, Any]) -> Answer:
    answer = await client.new(body)
    assert answer.status == 200, answer
    return answer


# --- GET /model/info


async def test_info_lists_rows_with_litellm_extras_and_never_the_api_key(peer: Peer) -> None:
    client = peer.client()
    body = full_body(peer)
    await created(client, body)
    answer = await client.info()
    assert answer.status == 200
    assert isinstance(answer.body, dict) and isinstance(answer.body["data"], list)
    assert SECRET not in answer.text and SECRET not in str(answer.body)
    got = await row(client, body["model_info"]["id"])
    assert got is not None
    assert set(got) >= {"model_name", "litellm_params", "model_info"}
    assert "api_key" not in got["litellm_params"]
    assert got["litellm_params"]["use_in_pass_through"] is False  # LiteLLM adds booleans
    assert got["model_info"]["db_model"] is True  # and its own model_info keys


# --- POST /model/new


async def test_every_field_we_set_round_trips_exactly(peer: Peer) -> None:
    client = peer.client()
    body = full_body(peer)
    await created(client, body)
    got = await row(client, body["model_info"]["id"])
    assert got is not None
    seen = whitelist_row(got)
    sent_params = {k: v for k, v in body["litellm_params"].items() if k != "api_key"}
    assert seen == {
        "model_name": body["model_name"],
        "litellm_params": sent_params,
        "model_info": body["model_info"],
    }


async def test_the_cores_routes_read_back_as_matching(peer: Peer) -> None:
    """The drift check itself: a route the core would send reads back as ``row_matches``."""
    client = peer.client()
    config = CatalogConfig()
    kubeai = KubeAIModel(
        name=peer.name("kubeai"),
        uid="u1",
        ready=True,
        model_type=ModelType.CHAT,
        features=("TextGeneration",),
        engine="vllm",
        compute_target="cpu",
        context_window=8192,
        max_output_tokens=2048,
        max_num_seqs=8,
    )
    external = ExternalModel(
        name=peer.name("external"),
        litellm_model=f"azure/{peer.name('external')}",
        api_base="https://example.openai.azure.com",
        params=(("api_version", "2024-06-01"), ("custom_llm_provider", "azure"), ("tpm", 1000), ("rpm", 10)),
        model_type=ModelType.EMBEDDING,
        context_window=8191,
        max_output_tokens=512,
        api_key=None,
        enabled=True,
    )
    routes = [
        kubeai_route(kubeai, f"kubeai/{kubeai.name}", BY_SOURCE[Source.KUBEAI], config),
        external_route(external, f"external/{external.name}", BY_SOURCE[Source.EXTERNAL], LiteralKey("none")),
    ]
    for route in routes:
        await created(
            client,
            {
                "model_name": route.model_name,
                "litellm_params": {**route.litellm_params.value(), "api_key": "none"},
                "model_info": route.model_info.value(),
            },
        )
    for route in routes:
        got = await row(client, route.id)
        assert got is not None
        parsed = LiteLLMRow.from_info(whitelist_row(got))
        assert parsed is not None
        assert row_matches(route, parsed), (route.litellm_params, route.model_info, whitelist_row(got))
        assert not needs_recreate(route, parsed)


async def test_create_of_an_existing_id_is_an_opaque_500(peer: Peer) -> None:
    client = peer.client()
    body = full_body(peer)
    await created(client, body)
    again = await client.new({**body, "model_name": peer.name("other")})
    assert again.status == 500
    assert peer.id("full") not in again.error_message()  # opaque: it does not say "exists"
    got = await row(client, body["model_info"]["id"])
    assert got is not None and got["model_name"] == body["model_name"]  # the row is untouched


async def test_create_validation_answers(peer: Peer) -> None:
    client = peer.client()
    name = peer.name("bad")
    no_model = await client.new(
        {"model_name": name, "litellm_params": {}, "model_info": {"id": peer.id("b1")}}
    )
    assert no_model.status == 422
    assert "litellm_params.model" in no_model.error_message()
    bad_tpm = await client.new(
        {
            "model_name": name,
            "litellm_params": {"model": "openai/x", "tpm": "lots"},
            "model_info": {"id": peer.id("b2")},
        }
    )
    assert bad_tpm.status == 422
    assert "tpm" in bad_tpm.error_message()
    bad_name = await client.new(
        {"model_name": 5, "litellm_params": {"model": "openai/x"}, "model_info": {"id": peer.id("b3")}}
    )
    assert bad_name.status == 422
    # A missing top-level field is not a 422 but LiteLLM's generic 500.
    no_params = await client.new({"model_name": name, "model_info": {"id": peer.id("b4")}})
    assert no_params.status == 500
    no_name = await client.new({"litellm_params": {"model": "openai/x"}, "model_info": {"id": peer.id("b5")}})
    assert no_name.status == 500
    for i in range(1, 6):
        assert await row(client, peer.id(f"b{i}")) is None


async def test_create_without_model_info_id_gets_a_generated_id(peer: Peer) -> None:
    client = peer.client()
    answer = await created(client, {"model_name": peer.name("anon"), "litellm_params": {"model": "openai/x"}})
    model_id = answer.body["model_id"]
    got = await row(client, model_id)
    assert got is not None and got["model_name"] == peer.name("anon")
    assert len(model_id) == 36  # a UUID


async def test_create_echo_is_not_what_was_sent(peer: Peer) -> None:
    """Never compare echoes: litellm_params come back encrypted."""
    answer = await created(peer.client(), full_body(peer))
    echoed = answer.body["litellm_params"]
    assert echoed["api_base"] != "http://kubeai.ai.svc.cluster.local/openai/v1"
    assert echoed["tpm"] == 100000
    assert SECRET not in answer.text


# --- the master key


async def test_a_wrong_or_missing_master_key_is_401_everywhere(peer: Peer) -> None:
    client = peer.client()
    body = full_body(peer)
    await created(client, body)
    for wrong in (peer.client(master_key="sk-wrong"), peer.client(master_key="")):
        answers = [
            await wrong.info(),
            await wrong.new({**body, "model_info": {"id": peer.id("x")}}),
            await wrong.patch_update(peer.id("full"), {"litellm_params": {"rpm": 1}}),
            await wrong.update({"litellm_params": {"rpm": 1}, "model_info": {"id": peer.id("full")}}),
            await wrong.delete(peer.id("full")),
        ]
        assert [a.status for a in answers] == [401] * 5
        # LiteLLM's own text quotes the key (1.84.0: its last characters and SHA-256): never kept
        assert all(a.error_message() == REFUSED_KEY_TEXT[401] and a.body is None for a in answers)
    got = await row(client, peer.id("full"))
    assert got is not None and got["litellm_params"]["rpm"] == 600


# --- PATCH /model/{id}/update


async def test_patch_merges_params_and_model_info_one_level_deep(peer: Peer) -> None:
    client = peer.client()
    body = full_body(peer)
    await created(client, body)
    patch = {
        "model_name": peer.name("renamed"),
        "litellm_params": {
            "api_base": "http://other/v1",
            "tpm": None,
            "model": body["litellm_params"]["model"],
        },
        "model_info": {
            "id": "some-other-id",  # the path wins
            "ai_appliance_spec_hash": "fedcba9876543210",
            "max_output_tokens": None,  # null keeps the old value
            "ai_appliance_scheduler": {"trusted": True, "locality": "local"},  # replaced whole
            "features": ["Embedding"],
        },
    }
    answer = await client.patch_update(peer.id("full"), patch)
    assert answer.status == 200
    got = await row(client, peer.id("full"))
    assert got is not None
    seen = whitelist_row(got)
    assert seen["model_name"] == peer.name("renamed")
    assert seen["litellm_params"] == {
        **{k: v for k, v in body["litellm_params"].items() if k != "api_key"},
        "api_base": "http://other/v1",
    }
    assert seen["model_info"] == {
        **body["model_info"],
        "ai_appliance_spec_hash": "fedcba9876543210",
        "ai_appliance_scheduler": {"trusted": True, "locality": "local"},
        "features": ["Embedding"],
    }
    assert await row(client, "some-other-id") is None


async def test_patch_with_absent_sections_keeps_them(peer: Peer) -> None:
    client = peer.client()
    body = full_body(peer)
    await created(client, body)
    assert (
        await client.patch_update(peer.id("full"), {"model_info": {"ai_appliance_spec_hash": "h2"}})
    ).status == 200
    assert (await client.patch_update(peer.id("full"), {"litellm_params": {"rpm": 7}})).status == 200
    got = await row(client, peer.id("full"))
    assert got is not None
    seen = whitelist_row(got)
    assert seen["model_name"] == body["model_name"]
    assert seen["litellm_params"]["order"] == 0 and seen["litellm_params"]["rpm"] == 7
    assert seen["model_info"]["ai_appliance_spec_hash"] == "h2"
    assert seen["model_info"]["ai_appliance_scheduler"] == body["model_info"]["ai_appliance_scheduler"]


async def test_patch_of_an_unknown_id_is_404_not_found_error(peer: Peer) -> None:
    answer = await peer.client().patch_update(peer.id("missing"), {"litellm_params": {"rpm": 1}})
    assert answer.status == 404
    assert answer.body["error"]["type"] == "not_found_error"
    assert answer.error_message() == f"Model {peer.id('missing')} not found on proxy."


async def test_patch_validation_is_422(peer: Peer) -> None:
    client = peer.client()
    await created(client, full_body(peer))
    answer = await client.patch_update(peer.id("full"), {"litellm_params": {"tpm": "lots"}})
    assert answer.status == 422


# --- POST /model/update (the old endpoint; the executor does not use it)


async def test_old_update_merges_params_drops_order_and_ignores_model_info(peer: Peer) -> None:
    client = peer.client()
    body = full_body(peer)
    await created(client, body)
    answer = await client.update(
        {
            "model_name": body["model_name"],
            "litellm_params": {"api_base": "http://other/v1", "rpm": None},
            "model_info": {"id": peer.id("full"), "ai_appliance_spec_hash": "new"},
        }
    )
    assert answer.status == 200
    got = await row(client, peer.id("full"))
    assert got is not None
    params = whitelist_row(got)["litellm_params"]
    assert params["api_base"] == "http://other/v1"
    assert params["rpm"] == 600  # null keeps
    assert "order" not in params  # not in the patch: dropped
    assert got["model_info"]["ai_appliance_spec_hash"] == "0123456789abcdef"  # model_info untouched


async def test_old_update_error_answers(peer: Peer) -> None:
    client = peer.client()
    unknown = await client.update(
        {"model_name": "x", "litellm_params": {"rpm": 1}, "model_info": {"id": peer.id("nope")}}
    )
    assert unknown.status == 400
    assert "model not found" in unknown.error_message()
    no_info = await client.update({"model_name": "x", "litellm_params": {"rpm": 1}})
    assert no_info.status == 400
    assert "model_info not provided" in no_info.error_message()


# --- POST /model/delete


async def test_delete_answers(peer: Peer) -> None:
    client = peer.client()
    await created(client, full_body(peer))
    assert (await client.delete(peer.id("full"))).status == 200
    assert await row(client, peer.id("full")) is None
    again = await client.delete(peer.id("full"))
    assert again.status == 400
    assert "not found" in again.error_message()
    raw = await client._http.post("/model/delete", json={})  # no id at all
    assert raw.status_code == 422


# --- limits LiteLLM fills in


async def test_unset_limits_of_a_model_litellm_knows_come_from_its_own_model_map(peer: Peer) -> None:
    """Keys a row does not set come from LiteLLM's built-in map for its ``model`` (every release)."""
    client = peer.client()
    await created(
        client,
        {
            "model_name": peer.name("gpt"),
            "litellm_params": {"model": "openai/gpt-4o"},
            "model_info": {"id": peer.id("gpt")},
        },
    )
    gpt = await row(client, peer.id("gpt"))
    assert gpt is not None
    gpt_info = whitelist_row(gpt)["model_info"]
    assert gpt_info["mode"] == "chat"
    assert isinstance(gpt_info["max_input_tokens"], int) and gpt_info["max_input_tokens"] > 0


async def test_a_limit_another_row_registered_for_the_same_model_fills_in_where_the_release_shares_it(
    peer: Peer,
) -> None:
    """1.108.7 registers the limits of every row it adds under its ``model`` and fills them in for every
    row of that model that does not set the key itself (the last registration wins, and stays after that
    row is deleted); 1.84.0 registers only the rows its router is built with, so a row added later
    reports no limit it does not set (unless its own model map knows the model)."""
    client = peer.client()
    shared_model = f"openai/{peer.name('shared')}"
    # The first row of a proxy that had none builds its router, which registers it on every release:
    # these rows are added to a proxy that runs with rows (at start, every row registers).
    await created(client, full_body(peer, "first"))
    await created(
        client,
        {
            "model_name": peer.name("mesh"),
            "litellm_params": {"model": shared_model, "order": 1},
            "model_info": {
                "id": peer.id("mesh"),
                "ai_appliance_owner": "private-mesh",
                "max_input_tokens": 65536,
            },
        },
    )
    await created(
        client,
        {
            "model_name": peer.name("ours"),
            "litellm_params": {"model": shared_model, "order": 0},
            "model_info": {"id": peer.id("ours"), "ai_appliance_owner": "model-catalog"},
        },
    )
    await created(
        client,
        {
            "model_name": peer.name("own-limit"),
            "litellm_params": {"model": shared_model},
            "model_info": {"id": peer.id("own-limit"), "max_input_tokens": 1024},
        },
    )

    async def limit(suffix: str) -> int | None:
        got = await row(client, peer.id(suffix))
        assert got is not None
        value = whitelist_row(got)["model_info"].get("max_input_tokens")
        return value if isinstance(value, int) else None

    assert await limit("own-limit") == 1024  # a row's own key: every release
    assert await limit("mesh") == 65536  # its own key too
    assert await limit("ours") == (1024 if peer.probed.shares_registered_limits else None)
    assert (await client.delete(peer.id("own-limit"))).status == 200
    assert await limit("ours") == (1024 if peer.probed.shares_registered_limits else None)


# --- what a release answers where releases differ (tests/adapters/litellm/traits.py)


@pytest.mark.parametrize(
    "release",
    [
        pytest.param(APPLIANCE, marks=pytest.mark.litellm_appliance),
        pytest.param(LATEST, marks=pytest.mark.litellm),
    ],
)
async def test_the_fake_of_a_release_answers_the_probe_as_that_releases_proxy_does(
    release: str, request: pytest.FixtureRequest
) -> None:
    real: LiteLLMPeer = request.getfixturevalue(
        "litellm_appliance_peer" if release == APPLIANCE else "litellm_peer"
    )
    assert await traits_of("fake", release, None) == await traits_of("real", release, real)


async def test_a_lookup_by_id_answers_that_row_or_400_not_found(peer: Peer) -> None:
    client = peer.client()
    await created(client, full_body(peer))
    await created(client, full_body(peer, "other"))
    answer = await client.info_of(peer.id("full"))
    assert answer.status == 200
    [got] = answer.body["data"]
    listed = await row(client, peer.id("full"))
    assert listed is not None and whitelist_row(got) == whitelist_row(listed)
    assert SECRET not in answer.text
    missing = await client.info_of(peer.id("missing"))
    assert missing.status == 400
    assert f"Model id = {peer.id('missing')} not found on litellm proxy" in missing.text


async def test_an_explicit_null_keeps_our_fields_and_clears_a_price_where_the_release_does(
    peer: Peer,
) -> None:
    """Why the executor never sends a null: newer releases read it as "clear this field" (1.108.7 for a
    price in ``litellm_params``, later ones for more); 1.84.0 keeps every field."""
    client = peer.client()
    body = full_body(peer)
    body["litellm_params"]["input_cost_per_token"] = 1.5e-06
    await created(client, body)
    answer = await client.patch_update(
        peer.id("full"),
        {
            "litellm_params": {"tpm": None, "api_version": None, "input_cost_per_token": None},
            "model_info": {"max_input_tokens": None, "ai_appliance_spec_hash": None},
        },
    )
    assert answer.status == 200
    got = await row(client, peer.id("full"))
    assert got is not None
    seen = whitelist_row(got)
    assert seen["litellm_params"]["tpm"] == 100000 and seen["litellm_params"]["api_version"] == "2024-06-01"
    assert seen["model_info"]["max_input_tokens"] == 32768
    assert seen["model_info"]["ai_appliance_spec_hash"] == "0123456789abcdef"
    price = got["litellm_params"].get("input_cost_per_token")
    assert price == (None if peer.probed.null_clears_prices else 1.5e-06)
