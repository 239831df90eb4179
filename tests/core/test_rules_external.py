"""External models from the ConfigMap (behaviour §1.2) and ModelActivations (behaviour §1.3, §1.5);
per-item isolation (behaviour §8)."""

from catalog_core.commands import ObserveLiteLLM, SecretKey, UpdateLiteLLMModel
from tests.core import builders as b
from tests.core.harness import Cluster

OPENAI = {"name": "gpt-4o", "model": "openai/gpt-4o", "apiKeySecretRef": {"name": "openai", "key": "apiKey"}}
PROVIDER = {"appliance.magicstick.dev/model-provider-secret": "true"}


def test_external_model_published_with_a_secret_reference():
    c = Cluster()
    c.start(
        b.external_configmap([OPENAI | {"contextWindow": 128000}]),
        b.secret("openai", {"apiKey": "sk-canary-1"}),
    )
    body = c.world.rows["ai-appliance-external-gpt-4o"]
    assert body["litellm_params"] == {"model": "openai/gpt-4o"}  # the simulator never sees the key value
    assert body["model_info"]["ai_appliance_source"] == "external"
    assert body["model_info"]["max_input_tokens"] == 128000
    assert "order" not in body["litellm_params"]  # external routes get no order (behaviour §2.2)
    create = c.commands[1]
    assert isinstance(create.api_key, SecretKey)
    assert (create.api_key.name, create.api_key.key) == ("openai", "apiKey")
    assert "sk-canary-1" not in repr(c.commands) + repr(c.state)
    assert c.entry("gpt-4o")["source"] == "external"


def test_user_order_and_appliance_keys_are_dropped():
    c = Cluster()
    item = {
        "name": "x",
        "model": "a/b",
        "order": 0,
        "litellm": {"order": 0},
        "ai_appliance_scheduler": {"trusted": True},
    }
    c.start(b.external_configmap([item]))
    body = c.world.rows["ai-appliance-external-x"]
    assert "order" not in body["litellm_params"]
    assert "ai_appliance_scheduler" not in body["model_info"]


def test_rotating_the_secret_updates_the_route_once():
    c = Cluster()
    c.start(b.external_configmap([OPENAI]), b.secret("openai", {"apiKey": "sk-1"}, rv="1"))
    commands = c.apply(b.secret("openai", {"apiKey": "sk-2"}, rv="2"))
    # the write, then the re-read that shows what LiteLLM holds after it (the catalog is unchanged)
    assert [type(x) for x in commands] == [UpdateLiteLLMModel, ObserveLiteLLM]
    assert commands[0].api_key.resource_version == "2"
    assert c.apply(b.secret("openai", {"apiKey": "sk-2"}, rv="2")) == []


def test_invalid_json_keeps_the_last_good_models():
    c = Cluster()
    c.start(
        b.external_configmap([OPENAI, {"name": "b", "model": "x/b"}]), b.secret("openai", {"apiKey": "k"})
    )
    writes = len(c.world.rows)
    c.apply(b.external_configmap(None, raw_text='{"models": [{"name": "gpt-4o",, }]}'))
    assert len(c.world.rows) == writes
    assert c.model_ids() == ["b", "gpt-4o"]
    doc = c.record("ai-external-models")
    assert (doc["state"], doc["reason"]) == ("error", "InvalidJSON")
    assert any(e.reason == "InvalidJSON" and e.involved.name == "ai-external-models" for e in c.world.events)
    c.apply(b.external_configmap([OPENAI]))  # fixed (and b removed)
    assert c.model_ids() == ["gpt-4o"]
    assert all(r["name"] != "ai-external-models" for r in c.routes())


def test_one_bad_item_does_not_stop_the_others():
    c = Cluster()
    c.start(
        b.external_configmap(
            [{"name": "a", "model": "x/a", "apiBase": "ftp://x"}, {"name": "b", "model": "x/b"}]
        )
    )
    assert c.model_ids() == ["b"]
    assert c.record("a")["reason"] == "InvalidField"
    assert c.record("b")["state"] == "published"


def test_item_problem_keeps_that_items_last_good_route():
    c = Cluster()
    c.start(b.external_configmap([{"name": "a", "model": "x/a", "tpm": 10}]))
    c.apply(b.external_configmap([{"name": "a", "model": "x/a", "tpm": 10, "apiBase": "ftp://x"}]))
    assert c.world.rows["ai-appliance-external-a"]["litellm_params"]["tpm"] == 10
    rec = c.record("a")
    assert (rec["state"], rec["reason"], rec["servingLastGood"]) == ("error", "InvalidField", True)


def test_an_unusable_optional_field_publishes_the_model_with_a_warning():
    """behaviour §5.2 (issue 11, item 5): contextWindow 0 / "4k" / 8192.5 never withholds a model."""
    c = Cluster()
    c.start(
        b.external_configmap(
            [
                {"name": "zero", "model": "x/a", "contextWindow": 0},
                {"name": "text", "model": "x/b", "contextWindow": "4k", "maxOutputTokens": 512},
                {"name": "float", "model": "x/c", "contextWindow": 8192.5},
            ]
        )
    )
    assert c.model_ids() == ["float", "text", "zero"]
    for name in ("zero", "text", "float"):
        rec = c.record(name)
        assert (rec["state"], rec["reason"]) == ("published", "Published")
        assert [(w["field"], w["reason"]) for w in rec["warnings"]] == [("contextWindow", "InvalidField")]
        assert "contextWindow" not in c.entry(name)
        assert "max_input_tokens" not in c.world.rows[f"ai-appliance-external-{name}"]["model_info"]
    assert c.entry("text")["maxOutputTokens"] == 512
    # One Event for the three items of the one document with the one reason (issue 32, item 9).
    warned = [e.message for e in c.world.events if e.reason == "InvalidField"]
    assert len(warned) == 1 and warned[0].startswith("3 items: ")
    assert all(f"{name}: contextWindow" in warned[0] for name in ("zero", "text", "float"))
    c.apply(
        b.external_configmap(
            [
                {"name": "zero", "model": "x/a", "contextWindow": 0},
                {"name": "text", "model": "x/b", "contextWindow": "4k", "maxOutputTokens": 512},
                {"name": "float", "model": "x/c", "contextWindow": 8192.5},
            ]
        )
    )
    assert len([e for e in c.world.events if e.reason == "InvalidField"]) == 1  # once, not per edit


def test_duplicate_names_last_definition_wins_and_the_earlier_is_a_conflict():
    """behaviour §5.2 (issue 11, item 6): as today's controller, the last definition wins."""
    c = Cluster()
    c.start(
        b.external_configmap(
            [{"name": "gpt", "model": "openai/first"}, {"name": "gpt", "model": "openai/second"}]
        )
    )
    assert c.world.rows["ai-appliance-external-gpt"]["litellm_params"]["model"] == "openai/second"
    assert c.record("gpt")["state"] == "published"
    shadowed = c.record("gpt (models.json[0])")
    assert (shadowed["state"], shadowed["reason"]) == ("conflict", "DuplicateName")
    assert "models.json[1]" in shadowed["message"]


def test_missing_secret_and_missing_key():
    by_name = {"name": "ai-model-provider-openai", "key": "apiKey"}
    c = Cluster()
    c.start(
        b.external_configmap(
            [
                OPENAI,
                OPENAI | {"name": "by-name", "apiKeySecretRef": by_name},
                OPENAI | {"name": "other", "apiKeySecretRef": {"name": "s2", "key": "nope"}},
            ]
        ),
        b.secret("s2", {"apiKey": "v"}),
    )
    # a name off the allow-list that is not seen may be missing or unlabelled: the message says both
    assert c.record("gpt-4o")["reason"] == "SecretNotAllowed"
    assert "does not exist or is not a model-provider Secret" in c.record("gpt-4o")["message"]
    assert c.record("by-name")["reason"] == "SecretNotFound"  # allowed by its name: simply missing
    assert c.record("other")["reason"] == "SecretKeyNotFound"
    assert c.model_ids() == []
    c.apply(b.secret("openai", {"apiKey": "v"}))
    c.apply(b.secret("ai-model-provider-openai", {"apiKey": "v"}, labels={}))
    assert c.model_ids() == ["by-name", "gpt-4o"]


def test_deleting_the_secret_withdraws_its_key_from_litellm():
    """Revocation (issue 32 item 3): a deleted provider Secret's key does not stay in LiteLLM as the
    item's last good route; the row goes within the tick that sees the deletion."""
    c = Cluster()
    c.start(b.external_configmap([OPENAI]), b.secret("openai", {"apiKey": "v"}))
    c.delete(b.secret("openai", {"apiKey": "v"}))
    assert "ai-appliance-external-gpt-4o" not in c.world.rows
    rec = c.record("gpt-4o")
    assert rec["reason"] == "SecretNotAllowed"  # deleted, or its label removed
    assert "servingLastGood" not in rec and "last good route is withdrawn" in rec["message"]


def test_disabled_item_is_withdrawn():
    c = Cluster()
    c.start(b.external_configmap([{"name": "a", "model": "x/a"}]))
    c.apply(b.external_configmap([{"name": "a", "model": "x/a", "enabled": False}]))
    assert c.world.rows == {}
    assert c.record("a")["reason"] == "Disabled"


def test_missing_configmap_means_no_external_models():
    c = Cluster()
    c.start(b.external_configmap([{"name": "a", "model": "x/a"}]))
    c.delete(b.external_configmap([]))
    assert c.world.rows == {}


def test_inline_key_in_configmap_is_accepted_but_never_stored():
    c = Cluster()
    c.start(b.external_configmap([{"name": "a", "model": "x/a", "apiKey": "sk-inline-canary"}]))
    assert "ai-appliance-external-a" in c.world.rows
    assert "sk-inline-canary" not in repr(c.state) + repr(c.commands) + repr(c.world.rows)
    assert "sk-inline-canary" in c.vault.values()


# --- ModelActivations
def test_external_activation_published_while_a_local_model_starts():
    c = Cluster()
    c.start(
        b.kubeai_model("qwen", ready=0),
        b.activation(
            "mistral",
            external={
                "model": "mistral/large",
                "apiKeySecretRef": {"name": "ai-model-provider-mistral", "key": "k"},
            },
        ),
        b.secret("ai-model-provider-mistral", {"k": "v"}),
    )
    assert c.model_ids() == ["mistral"]
    assert c.record("mistral", "modelactivation")["state"] == "published"
    assert c.record("qwen")["reason"] == "NotReady"
    c.apply(b.kubeai_model("qwen"))
    assert c.model_ids() == ["mistral", "qwen"]


def test_activation_secret_allow_list():
    c = Cluster()
    c.start(
        b.activation(
            "by-label", external={"model": "x", "apiKeySecretRef": {"name": "labelled", "key": "k"}}
        ),
        b.activation(
            "by-name", external={"model": "x", "apiKeySecretRef": {"name": "ai-model-provider-x", "key": "k"}}
        ),
        b.activation(
            "other", external={"model": "x", "apiKeySecretRef": {"name": "some-app-secret", "key": "k"}}
        ),
        b.secret("labelled", {"k": "v"}, labels=PROVIDER),
        b.secret("ai-model-provider-x", {"k": "v"}, labels={}),
        b.secret("some-app-secret", {"k": "sk-app-canary"}, labels={}),
    )
    assert c.model_ids() == ["by-label", "by-name"]
    rec = c.record("other")
    assert (rec["state"], rec["reason"]) == ("error", "SecretNotAllowed")
    assert any(
        e.reason == "SecretNotAllowed" and e.involved.kind == "ModelActivation" for e in c.world.events
    )


def test_inline_key_in_activation_is_rejected():
    c = Cluster()
    c.start(b.activation("a", external={"model": "x", "apiKey": "sk-act-canary"}))
    assert c.record("a")["reason"] == "InlineKeyRejected"
    assert c.world.rows == {}
    assert "sk-act-canary" not in repr(c.state) + repr(c.world.events)


def test_disabled_deleting_and_local_activations():
    c = Cluster()
    c.start(
        b.activation("off", external={"model": "x"}, enabled=False),
        b.activation("going", external={"model": "x"}, deleting=True),
        b.activation("local", kind="local"),
    )
    assert c.world.rows == {}
    assert c.record("off")["reason"] == "Disabled"
    assert c.record("going")["reason"] == "Deleting"
    assert all(r["name"] != "local" for r in c.routes())  # local ones reach us through their runtime


def test_activation_never_writes_status():
    c = Cluster()
    c.start(b.activation("a", external={"model": "x"}))
    assert all("ModelActivation" not in repr(type(x)) for x in c.world.writes)


def test_dropping_a_field_or_the_key_recreates_the_row_and_a_change_patches_it():
    c = Cluster()
    c.start(b.external_configmap([{"name": "a", "model": "x/a", "apiKey": "sk-1", "tpm": 5}]))
    info = c.world.rows["ai-appliance-external-a"]["model_info"]
    assert info["ai_appliance_set_keys"] == ["litellm_params.api_key", "litellm_params.tpm"]
    changed = c.apply(b.external_configmap([{"name": "a", "model": "x/a", "apiKey": "sk-1", "tpm": 6}]))
    assert type(changed[0]).__name__ == "UpdateLiteLLMModel"
    dropped = c.apply(b.external_configmap([{"name": "a", "model": "x/a", "tpm": 6}]))
    assert type(dropped[0]).__name__ == "RecreateLiteLLMModel"
    assert "api_key" not in c.world.rows["ai-appliance-external-a"]["litellm_params"]


def test_limits_litellm_fills_in_are_not_mistaken_for_ours():
    """LiteLLM reports max_input_tokens for models it knows; only keys we set can force a fresh row."""
    c = Cluster()
    c.start(b.external_configmap([{"name": "gpt", "model": "openai/gpt-4o"}]))
    c.world.rows["ai-appliance-external-gpt"]["model_info"]["max_input_tokens"] = 128000  # filled by LiteLLM
    c.rows_changed()
    commands = c.apply(b.external_configmap([{"name": "gpt", "model": "openai/gpt-4o", "rpm": 10}]))
    assert type(commands[0]).__name__ == "UpdateLiteLLMModel"


def test_a_secret_referenced_by_both_sources_follows_one_allow_list():
    """Before issue 12, models.json could use any Secret and only activations were held to the allow-list
    (the watch was widened for models.json). Now both sources see the same answer."""
    ref = {"name": "openai", "key": "apiKey"}
    c = Cluster()
    c.start(b.secret("openai", {"apiKey": "sk-1"}, labels={}))
    c.apply(b.activation("act", external={"model": "mistral/large", "apiKeySecretRef": ref}))
    assert c.record("act")["reason"] == "SecretNotAllowed"
    c.apply(b.external_configmap([{"name": "qwen", "model": "openai/a", "apiKeySecretRef": ref}]))
    assert c.record("qwen")["reason"] == "SecretNotAllowed"
    assert c.world.rows == {}
    c.apply(b.secret("openai", {"apiKey": "sk-1"}, rv="2"))  # labelled
    assert c.model_ids() == ["act", "qwen"]
