"""Named constructors: raw objects in, typed values or typed problems out (behaviour §1.1, §1.2, §1.3,
§1.4, §1.5, §11)."""

import json

import pytest

from catalog_core.reasons import Reason
from catalog_core.redact import redact_activation, redact_configmap, redact_secret
from catalog_core.sources.activation import ModelActivation
from catalog_core.sources.agent_template import AgentTemplateInfo
from catalog_core.sources.consumers import ConsumerPod, is_consumer
from catalog_core.sources.external import ExternalModelsDocument, InlineKey, SecretKeyRef
from catalog_core.sources.freetoken import FreeTokenRuntime, ServicePort
from catalog_core.sources.kubeai import KubeAIModel
from catalog_core.sources.litellm_row import LiteLLMRow, whitelist_row
from catalog_core.sources.secret import SecretInfo
from catalog_core.values import ModelType
from tests.core import builders as b


# --- KubeAI (behaviour §1.1, §11)
@pytest.mark.parametrize(
    ("features", "name", "expected"),
    [
        (["TextGeneration"], "m", ModelType.CHAT),
        (["TextEmbedding"], "m", ModelType.EMBEDDING),
        (["textembedding", "TextGeneration"], "m", ModelType.EMBEDDING),  # embedding first, case-insensitive
        (["Reranking"], "m", ModelType.RERANK),
        (["SpeechToText"], "m", ModelType.AUDIO),
        (["Chat"], "m", ModelType.CHAT),
        ([], "bge-embedding-small", ModelType.EMBEDDING),  # name fallback
        ([], "plain", ModelType.CHAT),
    ],
)
def test_kubeai_types(features, name, expected):
    m = KubeAIModel.from_k8s(b.kubeai_model(name, features=features))
    assert m is not None
    assert m.model_type is expected


@pytest.mark.parametrize(
    ("ready", "expected"), [(1, True), ("2", True), (0, False), (None, False), (True, False)]
)
def test_kubeai_ready_needs_a_positive_int(ready, expected):
    m = KubeAIModel.from_k8s(b.kubeai_model("m", ready=ready))
    assert m is not None
    assert m.ready is expected


def test_kubeai_context_window_annotation_first_then_first_flag():
    args = ["--max-model-len=4096", "--max-model-len=8192"]
    assert KubeAIModel.from_k8s(b.kubeai_model("m", args=args)).context_window == 4096
    assert (
        KubeAIModel.from_k8s(b.kubeai_model("m", args=["--x", "--max-model-len", "2048"])).context_window
        == 2048
    )
    assert KubeAIModel.from_k8s(b.kubeai_model("m", args=["--max-model-len 1024"])).context_window == 1024
    ann = {"ai-appliance.io/context-window": "16384", "ai-appliance.io/max-output-tokens": "512"}
    m = KubeAIModel.from_k8s(b.kubeai_model("m", args=args, annotations=ann))
    assert (m.context_window, m.max_output_tokens) == (16384, 512)


def test_kubeai_max_tokens_arg_is_not_a_context_source():
    m = KubeAIModel.from_k8s(b.kubeai_model("m", args=["--max-tokens=4096"]))
    assert m.context_window is None


def test_kubeai_absurd_max_model_len_is_dropped_with_a_warning():
    m = KubeAIModel.from_k8s(b.kubeai_model("m", args=["--max-model-len=999999999999"]))
    assert m.problem is None and m.context_window is None
    assert [(w.field, w.reason) for w in m.warnings] == [("--max-model-len", Reason.INVALID_FIELD)]


@pytest.mark.parametrize("bad", ["4k", "0", "8192.5", "-1", ""])
def test_kubeai_unparsable_context_annotation_falls_back_to_max_model_len(bad):
    """behaviour §5.2: a context annotation that does not parse is dropped; --max-model-len applies."""
    m = KubeAIModel.from_k8s(
        b.kubeai_model(
            "m", annotations={"ai-appliance.io/context-window": bad}, args=["--max-model-len", "20000"]
        )
    )
    assert m.problem is None
    assert m.context_window == 20000
    assert [w.field for w in m.warnings] == ["ai-appliance.io/context-window"]


def test_kubeai_scheduler_facts():
    m = KubeAIModel.from_k8s(
        b.kubeai_model("m", engine="VLLM", profile="nvidia-gpu-l4:1", args=["--max-num-seqs=8"])
    )
    assert (m.engine, m.compute_target, m.max_num_seqs) == ("vllm", "nvidia-gpu", 8)
    ann = {"ai-appliance.io/compute-target": "intel-gpu"}
    assert KubeAIModel.from_k8s(b.kubeai_model("m", annotations=ann)).compute_target == "intel-gpu"
    bad = KubeAIModel.from_k8s(
        b.kubeai_model("m", profile="nvidia-gpu-l4:1", annotations={"ai-appliance.io/compute-target": "tpu"})
    )
    # an unknown compute target is dropped (the resource profile decides), never a withheld model
    # (behaviour §5.2)
    assert bad.problem is None and bad.compute_target == "nvidia-gpu"
    assert [w.field for w in bad.warnings] == ["ai-appliance.io/compute-target"]


def test_kubeai_volatile_replica_counts_do_not_change_the_value():
    a = b.kubeai_model("m", ready=1)
    c = b.kubeai_model("m", ready=3)
    assert KubeAIModel.from_k8s(a) == KubeAIModel.from_k8s(c)


def test_kubeai_without_name_is_skipped():
    obj = b.kubeai_model("x")
    obj["metadata"]["name"] = "  "
    assert KubeAIModel.from_k8s(obj) is None


# --- models.json (behaviour §1.2)
def _doc(items, **kw):
    return ExternalModelsDocument.from_configmap(b.external_configmap(items, **kw), "ai")


def test_external_first_key_wins_and_whitelist():
    doc = _doc(
        [
            {
                "name": " gpt ",
                "litellm": {
                    "model": "openai/gpt-4o",
                    "apiBase": "https://a.example/v1",
                    "tpm": 5,
                    "order": 9,
                },
                "model": "ignored",
                "api_base": "https://ignored",
                "tpm": "10",
                "apiVersion": "2024-01",
                "ai_appliance_scheduler": {"trusted": True},
                "contextWindow": "8000",
                "max_input_tokens": 1,
                "maxOutputTokens": 100,
                "modelType": "Embedding",
            }
        ]
    )
    (item,) = doc.items
    m = item.model
    assert m is not None
    assert (m.name, m.litellm_model, m.api_base) == ("gpt", "openai/gpt-4o", "https://a.example/v1")
    assert (m.param("tpm"), m.param("api_version")) == (10, "2024-01")  # top level overrides litellm.*
    assert (m.context_window, m.max_output_tokens, m.model_type) == (8000, 100, ModelType.EMBEDDING)


def test_external_bare_array_and_blank_values():
    assert len(ExternalModelsDocument.from_text('[{"name":"a","model":"x/y"}]', "ai").items) == 1
    assert ExternalModelsDocument.from_text("   ", "ai").items == ()
    assert ExternalModelsDocument.from_configmap(None, "ai").items == ()
    cm = b.external_configmap([])
    del cm["data"]["models.json"]
    assert ExternalModelsDocument.from_configmap(cm, "ai").items == ()


@pytest.mark.parametrize(("enabled", "expected"), [(False, False), ("false", True), (0, True), (None, True)])
def test_external_only_boolean_false_disables(enabled, expected):
    item = {"name": "a", "model": "x/y"}
    if enabled is not None:
        item["enabled"] = enabled
    (parsed,) = _doc([item]).items
    assert parsed.model.enabled is expected


def test_external_invalid_json_is_a_document_problem():
    doc = _doc(None, raw_text='{"models": [ {"name": "a",, } ]}')
    assert doc.problem is not None
    assert doc.problem.reason is Reason.INVALID_JSON
    assert "line 1" in doc.problem.message


def test_external_invalid_json_survives_redaction():
    red = redact_configmap(b.external_configmap(None, raw_text='{"models": [oops'), "models.json")
    doc = ExternalModelsDocument.from_configmap(red.obj, "ai")
    assert doc.problem.reason is Reason.INVALID_JSON
    assert "oops" not in json.dumps(red.obj)


@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_external_nested_too_deeply_is_invalid_json_not_an_exception(depth):
    """Regression (fault suite): a few KB of brackets in models.json raised RecursionError out of the
    redaction and the parse: the source restarted forever and, after a restart, never listed, so the
    controller published nothing at all (behaviour §8)."""
    text = '{"models": ' + "[" * depth + "]" * depth + "}"
    red = redact_configmap(b.external_configmap(None, raw_text=text), "models.json")
    assert red.secrets == {}
    for doc in (ExternalModelsDocument.from_configmap(red.obj, "ai"), _doc(None, raw_text=text)):
        assert doc.problem is not None
        assert doc.problem.reason is Reason.INVALID_JSON
        assert "nested too deeply" in doc.problem.message


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ({"model": "x/y"}, Reason.MISSING_FIELD),
        ({"name": "a"}, Reason.MISSING_FIELD),
        ({"name": "a", "model": 5}, Reason.INVALID_FIELD),
        ({"name": "a", "model": "x/y", "type": "video"}, Reason.INVALID_FIELD),
        ({"name": "a", "model": "x/y", "apiBase": "ftp://x"}, Reason.INVALID_FIELD),
        ({"name": "a", "model": "x/y", "apiKeySecretRef": "s"}, Reason.INVALID_FIELD),
        ({"name": "a", "model": "x/y", "apiKeySecretRef": {"name": "s"}}, Reason.INVALID_FIELD),
        ("just a string", Reason.INVALID_FIELD),
    ],
)
def test_external_item_problems(item, reason):
    (parsed,) = _doc([item]).items
    assert parsed.model is None
    assert parsed.problem.reason is reason


@pytest.mark.parametrize(
    ("fields", "dropped"),
    [
        ({"contextWindow": 0}, "contextWindow"),
        ({"contextWindow": "4k"}, "contextWindow"),
        ({"contextWindow": 8192.5}, "contextWindow"),
        ({"contextWindow": True}, "contextWindow"),
        ({"maxOutputTokens": 4096.0}, "maxOutputTokens"),
        ({"max_output_tokens": -1}, "max_output_tokens"),
        ({"tpm": "lots"}, "tpm"),
        ({"rpm": -1}, "rpm"),
        ({"apiVersion": 5}, "apiVersion"),
    ],
)
def test_external_unusable_optional_field_is_dropped_with_a_warning(fields, dropped):
    """behaviour §5.2: the item is published without the field; only required fields make it an error."""
    (parsed,) = _doc([{"name": "a", "model": "x/y", **fields}]).items
    assert parsed.problem is None
    assert parsed.model is not None
    assert [w.field for w in parsed.model.warnings] == [dropped]
    assert parsed.model.warnings[0].reason is Reason.INVALID_FIELD


def test_external_nulls_mean_absent():
    (parsed,) = _doc([{"name": "a", "model": "x/y", "tpm": None, "contextWindow": None}]).items
    assert parsed.model.param("tpm") is None
    assert parsed.model.context_window is None


def test_external_duplicate_names_the_last_definition_wins():
    """behaviour §5.2: as today, the last definition wins; each earlier one is reported, naming it."""
    doc = _doc([{"name": "a", "model": "x/1"}, {"name": "b", "model": "x/b"}, {"name": "a", "model": "x/2"}])
    winner = next(i for i in doc.items if i.name == "a")
    assert winner.model.litellm_model == "x/2"
    (shadowed,) = [i for i in doc.items if i.problem is not None]
    assert shadowed.problem.reason is Reason.DUPLICATE_NAME
    assert "models.json[2]" in shadowed.problem.message


def test_external_keys_secret_ref_then_inline():
    (parsed,) = _doc(
        [{"name": "a", "model": "x", "apiKeySecretRef": {"name": "s", "key": "k"}, "apiKey": "v"}]
    ).items
    assert parsed.model.api_key == SecretKeyRef("s", "k")
    red = redact_configmap(
        b.external_configmap([{"name": "a", "model": "x", "litellm": {"apiKey": "sk-1"}}]), "models.json"
    )
    assert "sk-1" not in json.dumps(red.obj)
    (parsed,) = ExternalModelsDocument.from_configmap(red.obj, "ai").items
    assert isinstance(parsed.model.api_key, InlineKey)
    assert list(red.secrets.values()) == ["sk-1"]


# --- ModelActivation (behaviour §1.3, §1.5)
def test_activation_external_reads_a2_rules_with_metadata_name():
    act = ModelActivation.from_k8s(
        b.activation(
            "mistral", external={"name": "ignored", "model": "mistral/large"}, model_type="embedding"
        ),
        "ai",
    )
    assert act.external.name == "mistral"
    assert act.external.model_type is ModelType.EMBEDDING
    assert act.active


def test_activation_rejects_inline_keys_and_foreign_namespaces():
    red = redact_activation(b.activation("a", external={"model": "x", "apiKey": "sk-canary"})).obj
    assert "sk-canary" not in json.dumps(red)
    act = ModelActivation.from_k8s(red, "ai")
    assert act.problem.reason is Reason.INLINE_KEY_REJECTED
    act = ModelActivation.from_k8s(
        b.activation(
            "a",
            external={"model": "x", "apiKeySecretRef": {"name": "s", "key": "k", "namespace": "kube-system"}},
        ),
        "ai",
    )
    assert act.problem.reason is Reason.SECRET_NOT_ALLOWED


def test_activation_states():
    assert not ModelActivation.from_k8s(
        b.activation("a", external={"model": "x"}, enabled=False), "ai"
    ).active
    assert not ModelActivation.from_k8s(
        b.activation("a", external={"model": "x"}, deleting=True), "ai"
    ).active
    assert ModelActivation.from_k8s(b.activation("a", external={"model": "x"}, enabled="false"), "ai").active
    local = ModelActivation.from_k8s(b.activation("a", kind="local"), "ai")
    assert local.external is None
    assert local.problem is None


# --- FreeToken (behaviour §1.4)
@pytest.mark.parametrize(
    ("kwargs", "ready"),
    [
        ({}, True),
        ({"ready": False}, False),
        ({"generation": 3, "observed_generation": 2}, False),
    ],
)
def test_freetoken_ready_gate(kwargs, ready):
    rt = FreeTokenRuntime.from_k8s(b.freetoken_deployment("d", activation_name="a", **kwargs))
    assert rt.ready is ready


def test_freetoken_needs_the_runtime_label():
    obj = b.freetoken_deployment("d", activation_name="a")
    obj["metadata"]["labels"]["appliance.magicstick.dev/runtime"] = "vllm"
    assert FreeTokenRuntime.from_k8s(obj) is None
    rt = FreeTokenRuntime.from_k8s(b.freetoken_deployment("d", activation_name="a"))
    assert (rt.activation, rt.compute_target, rt.engine) == ("a", "nvidia-gpu", "freetoken")


def test_service_port_prefers_http():
    svc = b.service("s")
    svc["spec"]["ports"] = [{"name": "metrics", "port": 9090}, {"name": "http", "port": 8080}]
    assert ServicePort.from_k8s(svc) == ServicePort("s", 8080)


# --- Secrets (never values)
def test_secret_info_holds_fingerprints_not_values():
    red = redact_secret(
        b.secret(
            "s", {"apiKey": "sk-value"}, labels={"appliance.magicstick.dev/model-provider-secret": "true"}
        )
    )
    info = SecretInfo.from_k8s(red.obj)
    assert info.keys == frozenset({"apiKey"})
    assert info.allowed and not info.service_account_token
    assert "sk-value" not in repr(info)
    assert info.fingerprint("apiKey").startswith("fp1:")


def test_secret_last_applied_annotation_is_dropped():
    obj = b.secret("s", {"k": "v"})
    obj["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": '{"data":{"k":"djE="}}'
    }
    assert "annotations" not in redact_secret(obj).obj["metadata"]


# --- LiteLLM rows (behaviour §3, §6)
def test_row_ownership():
    assert LiteLLMRow.from_info(b.row("a", "x", owner="model-catalog")).ours
    assert LiteLLMRow.from_info(b.row("a", "ai-appliance-kubeai-a", managed=True)).ours  # legacy
    assert not LiteLLMRow.from_info(b.row("a", "random-id", managed=True)).ours  # not our id family
    assert not LiteLLMRow.from_info(
        b.row("a", "ai-appliance-kubeai-a", owner="private-mesh", managed=True)
    ).ours
    assert not LiteLLMRow.from_info(b.row("a", "x")).ours


def test_row_logical_names_and_export_only():
    mesh = LiteLLMRow.from_info(b.row("mesh/x", "m1", owner="private-mesh", ai_appliance_logical_name="y"))
    assert mesh.logical_name == "y"
    untrusted = LiteLLMRow.from_info(b.row("mesh/x", "m2", ai_appliance_logical_name="y"))
    assert untrusted.logical_name == "x"
    assert LiteLLMRow.from_info(b.row("share/x", "m3")).export_only
    assert LiteLLMRow.from_info(b.row("x", "m4", ai_appliance_export_only=True)).export_only


def test_row_whitelist_drops_credentials():
    r = b.row("a", "x")
    r["litellm_params"].update(
        {"api_key": "sk-leak", "aws_secret_access_key": "leak", "vertex_credentials": "leak"}
    )
    assert "leak" not in json.dumps(whitelist_row(r))


# --- AgentTemplates and consumers
def test_agent_template_shape():
    ok = AgentTemplateInfo.from_k8s(b.agent_template("t", models={"a": {}}, model="litellm/a"))
    assert ok.shape_problem is None
    bad = AgentTemplateInfo.from_k8s(b.agent_template("t", config={"provider": "litellm"}))
    assert bad.shape_problem == "spec.config.provider is not an object"
    bad = AgentTemplateInfo.from_k8s(b.agent_template("t", config={"provider": {"litellm": {"models": []}}}))
    assert "models" in bad.shape_problem


@pytest.mark.parametrize(
    ("labels", "annotations", "expected"),
    [
        ({"ai-appliance.io/model-catalog-consumer": "true"}, {}, True),
        ({}, {"ai-appliance.io/model-catalog-consumer": "true"}, True),
        ({"app": "anything-llm"}, {}, True),
        ({"app.kubernetes.io/instance": "hermes", "app.kubernetes.io/name": "hermes-agent"}, {}, True),
        ({"app.kubernetes.io/instance": "openclaw", "app.kubernetes.io/name": "openclaw"}, {}, True),
        ({"app.kubernetes.io/instance": "paperclip", "app.kubernetes.io/component": "server"}, {}, True),
        ({"app.kubernetes.io/instance": "paperclip", "app.kubernetes.io/component": "worker"}, {}, False),
        ({"app": "other"}, {}, False),
    ],
)
def test_consumers(labels, annotations, expected):
    assert is_consumer(labels, annotations) is expected
    assert (ConsumerPod.from_k8s(b.pod("p", labels=labels, annotations=annotations)) is not None) is expected
