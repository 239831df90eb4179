"""Issue 32 items 1-3: a credential goes only where its owner sent it.

1. A provider Secret names the API bases its key may be sent to (annotation
   ``appliance.magicstick.dev/model-provider-api-bases``); an item that references it with any other
   ``apiBase`` is refused (``SecretApiBaseNotAllowed``, with the ``kubectl annotate`` command).
2. A keyless route to a custom API base never lets LiteLLM fall back to its own credentials: an
   OpenAI-compatible one carries the explicit key ``none``, any other provider is refused
   (``AmbientCredentialRejected``) unless the cluster admin allowed that API base
   (``CATALOG_AMBIENT_CREDENTIAL_API_BASES``).
3. Losing the right to a Secret (deleted, unlabelled, un-annotated) withdraws its key from LiteLLM in the
   tick that sees it; the last good route stays for every other kind of bad input.

Each attack test reproduces what the issue describes against the pure core (the real LiteLLM peer repeats
the canary version in tests/adapters/litellm/test_credential_canary.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core.commands import (
    CreateLiteLLMModel,
    DeleteLiteLLMModel,
    LiteralKey,
    RecreateLiteLLMModel,
    SecretKey,
    UpdateLiteLLMModel,
)
from catalog_core.events import ObjectDeleted, SourceKind, Ticked
from catalog_core.fold import step
from tests.core import builders as b
from tests.core.harness import Cluster

OPENAI_KEY = "sk-openai-canary-0123456789"
ATTACKER = "https://attacker.example/v1"
REF = {"name": "openai", "key": "apiKey"}
ANNOTATION = "appliance.magicstick.dev/model-provider-api-bases"
WRITES = (CreateLiteLLMModel, UpdateLiteLLMModel, RecreateLiteLLMModel)


def _writes(c: Cluster) -> list[Any]:
    return [x for x in c.commands if isinstance(x, WRITES)]


def _sent_to(c: Cluster, host: str) -> list[Any]:
    """The writes whose route sends a Secret's key to ``host``."""
    return [
        x
        for x in _writes(c)
        if isinstance(x.api_key, SecretKey) and host in str(x.litellm_params.value().get("api_base", ""))
    ]


def _openai_secret(api_bases: str | None = None, **kw: Any) -> dict[str, Any]:
    return b.secret("openai", {"apiKey": OPENAI_KEY}, api_bases=api_bases, **kw)


# --- 1. a provider Secret names where its key may go ------------------------------------------------


@pytest.mark.parametrize("source", ["activation", "models.json"])
def test_an_allow_listed_secret_is_never_sent_to_the_authors_api_base(source):
    """The attack of issue 32 item 1: an activation (or models.json item) names the allow-listed OpenAI
    Secret together with its own apiBase. Before, the route was published and LiteLLM sent the real key
    and every prompt there."""
    external = {"model": "openai/gpt-4o", "apiBase": ATTACKER, "apiKeySecretRef": REF}
    obj = (
        b.activation("exfil", external=external)
        if source == "activation"
        else b.external_configmap([{"name": "exfil", **external}])
    )
    c = Cluster()
    c.start(
        obj, _openai_secret(), b.activation("fine", external={"model": "openai/x", "apiKeySecretRef": REF})
    )
    assert c.model_ids() == ["fine"]  # the Secret still works toward its provider's own API
    rec = c.record("exfil")
    assert (rec["state"], rec["reason"]) == ("error", "SecretApiBaseNotAllowed")
    command = f"kubectl annotate secret -n ai openai --overwrite {ANNOTATION}=https://attacker.example"
    assert command in rec["message"]
    assert any(e.reason == "SecretApiBaseNotAllowed" and command in e.message for e in c.world.events)
    assert _sent_to(c, "attacker.example") == []
    assert "attacker.example" not in json.dumps(c.world.rows)
    assert OPENAI_KEY not in repr(c.state) + repr(c.world.events) + json.dumps(c.world.catalog)


def test_following_the_annotate_command_publishes_the_route():
    external = {"model": "openai/gpt-4o", "apiBase": "https://gateway.example.com/v1", "apiKeySecretRef": REF}
    c = Cluster()
    c.start(b.activation("gw", external=external), _openai_secret())
    assert c.record("gw")["reason"] == "SecretApiBaseNotAllowed"
    c.apply(_openai_secret("https://gateway.example.com", rv="2"))
    assert c.model_ids() == ["gw"]
    (route,) = _sent_to(c, "gateway.example.com")
    assert route.api_key.name == "openai"


def test_the_command_keeps_what_the_secret_already_allows():
    c = Cluster()
    c.start(
        b.activation("m", external={"model": "openai/x", "apiBase": ATTACKER, "apiKeySecretRef": REF}),
        _openai_secret("https://api.openai.com, *.openai.azure.com"),
    )
    message = c.record("m")["message"]
    assert "only to its provider's own API and https://api.openai.com, https://*.openai.azure.com" in message
    assert (
        f"--overwrite '{ANNOTATION}=https://api.openai.com,https://*.openai.azure.com,https://attacker.example'"
        in message
    )


@pytest.mark.parametrize(
    ("allowed", "api_base"),
    [
        ("https://api.openai.com", "https://api.openai.com/v1"),
        ("api.openai.com", "https://API.OpenAI.com./v1/"),  # a bare host: https; DNS is case-insensitive
        ("https://api.openai.com", "https://api.openai.com:443/v1"),
        ("*.openai.azure.com", "https://myco.openai.azure.com/"),
        ("http://vllm.ai.svc:8000/v1", "http://vllm.ai.svc:8000/v1/"),
        ("https://gw.example.com/openai", "https://gw.example.com/openai/v1"),
        ("https://a.example,\nhttps://api.openai.com", "https://api.openai.com/v1"),
    ],
)
def test_an_api_base_the_secret_names_is_allowed(allowed, api_base):
    c = Cluster()
    c.start(
        b.activation("m", external={"model": "openai/x", "apiBase": api_base, "apiKeySecretRef": REF}),
        _openai_secret(allowed),
    )
    assert c.record("m")["reason"] == "Published", c.record("m")


@pytest.mark.parametrize(
    ("allowed", "api_base"),
    [
        (
            "https://api.openai.com",
            "https://api.openai.com@attacker.example/v1",
        ),  # userinfo: the host is after
        ("https://api.openai.com", "https://api.openai.com.attacker.example/v1"),
        ("https://api.openai.com", "http://api.openai.com/v1"),  # another scheme: the key in clear
        ("https://api.openai.com", "https://api.openai.com:8443/v1"),
        ("api.openai.com", "https://attacker.example/api.openai.com"),
        ("*.openai.azure.com", "https://openai.azure.com/"),
        ("*.openai.azure.com", "https://evil-openai.azure.com/"),
        ("https://gw.example.com/openai", "https://gw.example.com/other"),
        ("https://gw.example.com/openai", "https://gw.example.com/openai/../other"),
        ("https://gw.example.com/openai", "https://gw.example.com/openaiX"),
        ("https://api.openai.com", "https://api%2eopenai.com/v1"),
        ("*", ATTACKER),  # not a pattern: ignored, and said so
        ("*.com", ATTACKER),
        ("ftp://attacker.example", ATTACKER),
    ],
)
def test_an_api_base_the_secret_does_not_name_is_refused(allowed, api_base):
    c = Cluster()
    c.start(
        b.external_configmap(
            [{"name": "m", "model": "openai/x", "apiBase": api_base, "apiKeySecretRef": REF}]
        ),
        _openai_secret(allowed),
    )
    assert c.record("m")["reason"] == "SecretApiBaseNotAllowed"
    assert c.world.rows == {}


def test_a_backslash_in_the_authority_is_never_matched():
    """WHATWG parsers read ``\\`` as ``/``: the host would be attacker.example for them."""
    c = Cluster()
    c.start(
        b.external_configmap(
            [
                {
                    "name": "m",
                    "model": "openai/x",
                    "apiBase": "https://attacker.example\\@api.openai.com/v1",
                    "apiKeySecretRef": REF,
                }
            ]
        ),
        _openai_secret("https://api.openai.com"),
    )
    assert c.record("m")["reason"] == "SecretApiBaseNotAllowed"


def test_a_secret_without_the_annotation_still_serves_its_providers_own_api():
    """Upgrade: items that name no apiBase are unchanged; only a custom apiBase needs the annotation."""
    c = Cluster()
    c.start(
        b.external_configmap([{"name": "m", "model": "openai/gpt-4o", "apiKeySecretRef": REF}]),
        _openai_secret(),
    )
    assert c.model_ids() == ["m"]


def test_only_the_api_bases_annotation_of_a_secret_reaches_the_core():
    secret = _openai_secret("https://api.openai.com")
    secret["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = json.dumps(
        {"stringData": {"apiKey": OPENAI_KEY}}
    )
    c = Cluster()
    c.start(b.activation("m", external={"model": "openai/x", "apiKeySecretRef": REF}), secret)
    held = c.world.secrets["openai"]["metadata"]["annotations"]
    assert held == {ANNOTATION: "https://api.openai.com"}
    assert OPENAI_KEY not in repr(c.state)


_HOSTS = st.sampled_from(["api.openai.com", "attacker.example", "gw.example.com", "myco.openai.azure.com"])


@settings(max_examples=60)
@given(
    allowed=st.lists(
        st.one_of(_HOSTS, _HOSTS.map(lambda h: f"https://{h}"), st.just("*.openai.azure.com")), max_size=3
    ),
    bases=st.lists(
        st.one_of(
            st.none(),
            _HOSTS.map(lambda h: f"https://{h}/v1"),
            _HOSTS.map(lambda h: f"http://{h}/v1"),
            st.tuples(_HOSTS, _HOSTS).map(lambda p: f"https://{p[0]}@{p[1]}/v1"),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_no_route_sends_a_secrets_key_anywhere_it_does_not_name(allowed, bases):
    items = [
        {"name": f"m{i}", "model": "openai/x", "apiKeySecretRef": REF}
        | ({"apiBase": base} if base is not None else {})
        for i, base in enumerate(bases)
    ]
    c = Cluster()
    c.start(b.external_configmap(items), _openai_secret(",".join(allowed)))
    hosts = {h.removeprefix("https://") for h in allowed}
    for write in _writes(c):
        if not isinstance(write.api_key, SecretKey):
            continue
        base = write.litellm_params.value().get("api_base")
        if base is None:
            continue
        host = base.split("://", 1)[1].split("/", 1)[0].rpartition("@")[2]
        assert base.startswith("https://"), base
        assert host in hosts or ("*.openai.azure.com" in hosts and host.endswith(".openai.azure.com")), (
            base,
            allowed,
        )


# --- 2. LiteLLM's own credentials -------------------------------------------------------------------


def _api_key_of(c: Cluster, name: str, source: str = "external") -> Any:
    (write,) = [x for x in _writes(c) if x.model_name == name]
    return write.api_key


def test_a_keyless_openai_compatible_route_to_a_custom_api_base_carries_an_explicit_key():
    """The attack of issue 32 item 2: an item with no key and its own apiBase was written without
    ``api_key``, and LiteLLM then sent OPENAI_API_KEY from its environment there. A local OpenAI-compatible
    server without a key keeps working: LiteLLM sends the literal ``none``, which it never replaces."""
    c = Cluster()
    c.start(
        b.external_configmap(
            [
                {"name": "local", "model": "openai/qwen", "apiBase": "http://10.0.0.7:8000/v1"},
                {"name": "vllm", "model": "hosted_vllm/qwen", "apiBase": "http://vllm.lan:8000/v1"},
                {"name": "custom", "model": "qwen", "customLlmProvider": "openai", "apiBase": ATTACKER},
            ]
        )
    )
    assert c.model_ids() == ["custom", "local", "vllm"]
    for name in ("local", "vllm", "custom"):
        assert _api_key_of(c, name) == LiteralKey("none"), name
    row = c.world.rows["ai-appliance-external-local"]
    assert "litellm_params.api_key" in row["model_info"]["ai_appliance_set_keys"]


@pytest.mark.parametrize(
    "item",
    [
        {"model": "azure/gpt-4o"},  # AZURE_API_KEY, AZURE_AD_TOKEN, the pod's Azure identity
        {"model": "gpt-4o", "customLlmProvider": "azure"},
        {"model": "vertex_ai/gemini-1.5-pro"},  # the pod's Google identity
        {"model": "bedrock/anthropic.claude-3"},  # the pod's AWS identity
        {"model": "anthropic/claude-3-5-sonnet"},
        {"model": "ollama/llama3"},  # OLLAMA_API_KEY is read whatever the route's key
        {"model": "gpt-4o"},  # no provider: LiteLLM guesses one from the name
        {"model": "gemini-1.5-pro"},  # ...here vertex_ai
    ],
)
def test_a_keyless_route_that_would_use_litellms_own_identity_is_refused(item):
    for source in ("models.json", "activation"):
        external = {**item, "apiBase": ATTACKER}
        obj = (
            b.activation("amb", external=external)
            if source == "activation"
            else b.external_configmap([{"name": "amb", **external}])
        )
        c = Cluster()
        c.start(obj, b.external_configmap([]) if source == "activation" else b.activation("x", kind="local"))
        rec = c.record("amb")
        assert (rec["state"], rec["reason"]) == ("error", "AmbientCredentialRejected"), (source, rec)
        assert "https://attacker.example" in rec["message"]
        assert "CATALOG_AMBIENT_CREDENTIAL_API_BASES" in rec["message"]
        assert c.world.rows == {}


def test_an_inline_key_does_not_stop_azure_from_sending_litellms_ad_token():
    """LiteLLM's Azure client prefers AZURE_AD_TOKEN (from its environment) over the route's api key."""
    c = Cluster()
    c.start(
        b.external_configmap(
            [
                {"name": "az", "model": "azure/gpt-4o", "apiBase": ATTACKER, "apiKey": "sk-authors-own"},
                {"name": "oa", "model": "openai/gpt-4o", "apiBase": ATTACKER, "apiKey": "sk-authors-own"},
            ]
        )
    )
    assert c.record("az")["reason"] == "AmbientCredentialRejected"
    assert c.record("oa")["reason"] == "Published"  # the author's own key, to the author's host


def test_the_cluster_admin_allows_litellms_own_credentials_toward_named_api_bases():
    """The Azure case: LiteLLM's AZURE_API_KEY serves keyless items toward the company's Azure resource."""
    c = Cluster(CATALOG_AMBIENT_CREDENTIAL_API_BASES="https://myco.openai.azure.com")
    c.start(
        b.external_configmap(
            [
                {"name": "az", "model": "azure/gpt-4o", "apiBase": "https://myco.openai.azure.com"},
                {"name": "other", "model": "azure/gpt-4o", "apiBase": "https://other.openai.azure.com"},
                {"name": "oa", "model": "openai/gpt-4o", "apiBase": "https://myco.openai.azure.com/v1"},
            ]
        )
    )
    assert c.model_ids() == ["az", "oa"]
    assert _api_key_of(c, "az") is None and _api_key_of(c, "oa") is None  # LiteLLM's own key, as allowed
    assert c.record("other")["reason"] == "AmbientCredentialRejected"


def test_a_keyless_route_to_its_providers_own_api_is_unchanged():
    c = Cluster()
    c.start(
        b.external_configmap([{"name": "m", "model": "azure/gpt-4o"}, {"name": "o", "model": "openai/x"}])
    )
    assert c.model_ids() == ["m", "o"]
    assert _api_key_of(c, "m") is None and _api_key_of(c, "o") is None


def test_an_invalid_ambient_setting_is_one_line():
    from catalog_core.config import CatalogConfig, ConfigError

    error = CatalogConfig.from_env({"CATALOG_AMBIENT_CREDENTIAL_API_BASES": "https://ok.example, *"})
    assert isinstance(error, ConfigError)
    assert str(error).startswith("CATALOG_AMBIENT_CREDENTIAL_API_BASES: '*' is not an API base pattern")


# --- 3. revocation ----------------------------------------------------------------------------------


def _published_with_secret(api_bases: str | None = None, api_base: str | None = None) -> Cluster:
    item: dict[str, Any] = {"name": "m", "model": "openai/gpt-4o", "apiKeySecretRef": REF}
    if api_base is not None:
        item["apiBase"] = api_base
    c = Cluster()
    c.start(b.external_configmap([item, {"name": "other", "model": "openai/y"}]), _openai_secret(api_bases))
    assert "ai-appliance-external-m" in c.world.rows
    return c


def _one_tick(c: Cluster, *events: Any) -> list[Any]:
    """Fold ``events`` and plan once: what the tick that sees them emits (then carried out, and the
    cluster converged)."""
    c.feed(*events)
    c.now += 1.0
    result = step(c.state, Ticked(c.now))
    c.state = result.state
    outcomes = [e for command in result.commands for e in c.world.execute(command)]
    c.run(*outcomes)
    return list(result.commands)


def _deletes(commands: list[Any]) -> list[str]:
    return [x.model_id for x in commands if isinstance(x, DeleteLiteLLMModel)]


@pytest.mark.parametrize("revoke", ["unlabelled", "deleted"])
def test_losing_the_right_to_a_secret_withdraws_its_key_in_the_tick_that_sees_it(revoke):
    """Issue 32 item 3: before, the route stayed as last good and LiteLLM kept sending the key."""
    c = _published_with_secret()
    # the item turns bad too: even its last good route goes, because that route carries the key
    c.apply(
        b.external_configmap(
            [
                {"name": "m", "model": "openai/gpt-4o", "apiKeySecretRef": REF, "type": "banana"},
                {"name": "other", "model": "openai/y"},
            ]
        )
    )
    assert c.record("m")["servingLastGood"] is True
    if revoke == "deleted":
        c.world.secrets.pop("openai")
        events = [ObjectDeleted(SourceKind.SECRETS, c._redacted(SourceKind.SECRETS, _openai_secret(rv="2")))]
    else:
        events = c.upserts(_openai_secret(rv="2", labels={}))
    assert _deletes(_one_tick(c, *events)) == ["ai-appliance-external-m"]
    assert "ai-appliance-external-m" not in c.world.rows
    assert "ai-appliance-external-other" in c.world.rows
    rec = c.record("m")
    assert "servingLastGood" not in rec and "last good route is withdrawn" in rec["message"]


def test_removing_the_api_base_from_the_annotation_withdraws_the_key():
    c = _published_with_secret("https://gw.example.com", "https://gw.example.com/v1")
    commands = _one_tick(c, *c.upserts(_openai_secret("https://api.openai.com", rv="2")))
    assert _deletes(commands) == ["ai-appliance-external-m"]
    rec = c.record("m")
    assert rec["reason"] == "SecretApiBaseNotAllowed" and "servingLastGood" not in rec
    assert c.world.rows.keys() == {"ai-appliance-external-other"}


def test_a_revocation_is_not_held_back_by_write_damping():
    """A row written a moment ago waits to settle before its next write (issue 14), a revocation never."""
    c = _published_with_secret()
    c.apply(
        b.external_configmap(
            [
                {"name": "m", "model": "openai/gpt-4o", "apiKeySecretRef": REF, "tpm": 5},
                {"name": "other", "model": "openai/y"},
            ]
        )
    )
    c.apply(
        b.external_configmap(
            [
                {"name": "m", "model": "openai/gpt-4o", "apiKeySecretRef": REF, "type": "x"},
                {"name": "other", "model": "openai/y"},
            ]
        )
    )
    assert _deletes(_one_tick(c, *c.upserts(_openai_secret(rv="3", labels={})))) == [
        "ai-appliance-external-m"
    ]


def test_a_secret_deleted_and_created_again_does_not_revive_the_old_key():
    c = _published_with_secret()
    c.apply(
        b.external_configmap(
            [
                {"name": "m", "model": "openai/gpt-4o", "apiKeySecretRef": REF, "type": "x"},
                {"name": "other", "model": "openai/y"},
            ]
        )
    )
    c.apply(_openai_secret(rv="9", uid="uid-new"))
    assert "ai-appliance-external-m" not in c.world.rows
    assert "deleted and created again" in c.record("m")["message"]


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"apiKey": ""}, id="value-emptied"),
        pytest.param({"other": "v"}, id="key-removed"),
        pytest.param({"apiKey": "sk-rotated"}, id="value-rotated"),
    ],
)
def test_other_secret_edits_keep_the_last_good_route(change):
    """ "Keep the last good value" stays for everything but losing the right to the Secret."""
    c = _published_with_secret()
    c.apply(b.secret("openai", change, rv="2"))
    assert "ai-appliance-external-m" in c.world.rows
    if change.get("apiKey"):
        assert c.record("m")["reason"] == "Published"  # a rotation rewrites the row with the new key
    else:
        assert c.record("m")["servingLastGood"] is True


def test_an_unrelated_bad_edit_keeps_the_last_good_route_with_its_key():
    c = _published_with_secret()
    c.apply(
        b.external_configmap([{"name": "m", "model": "openai/gpt-4o", "apiKeySecretRef": REF, "type": "x"}])
    )
    assert "ai-appliance-external-m" in c.world.rows
    assert c.record("m")["servingLastGood"] is True
    assert "secret/openai" in c.state.derived.refs  # still watched: a revocation would be seen


def test_an_edit_to_an_api_base_the_secret_does_not_name_keeps_the_allowed_last_good_route():
    """Bad input as any other: the last good route still goes where the Secret allows, so it stays."""
    c = _published_with_secret("https://gw.example.com", "https://gw.example.com/v1")
    c.apply(
        b.external_configmap(
            [
                {"name": "m", "model": "openai/gpt-4o", "apiKeySecretRef": REF, "apiBase": ATTACKER},
                {"name": "other", "model": "openai/y"},
            ]
        )
    )
    rec = c.record("m")
    assert (rec["reason"], rec["servingLastGood"]) == ("SecretApiBaseNotAllowed", True)
    assert (
        c.world.rows["ai-appliance-external-m"]["litellm_params"]["api_base"] == "https://gw.example.com/v1"
    )
    assert _sent_to(c, "attacker.example") == []


def test_the_last_gate_refuses_any_keyless_route_to_a_custom_api_base_whatever_produced_it():
    """Defense in depth behind the external rules: a claim built by any source (a new one, a bug) whose route
    has no key and a custom API base is refused before it can be planned."""
    from catalog_core import registry
    from catalog_core.reasons import Reason
    from catalog_core.rules import candidates
    from catalog_core.rules.routes import external_route
    from catalog_core.sources.external import ExternalModel
    from catalog_core.state import Candidate
    from catalog_core.values import Source

    c = Cluster()
    c.start()
    model = ExternalModel("m", True, "azure/gpt-4o", ATTACKER, None)
    spec = registry.BY_SOURCE[Source.EXTERNAL]
    route = external_route(model, "external/m", spec, None)
    claim = Candidate("external/m", Source.EXTERNAL, "m", "uid", route, Reason.PUBLISHED)
    checked = candidates.checked(c.state, claim)
    assert checked is not None and checked.route is None
    assert checked.reason == "AmbientCredentialRejected"
    assert "a route without a key lets LiteLLM use its own credentials" in checked.message
