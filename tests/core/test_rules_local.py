"""KubeAI routes (behaviour §1.1, §2.2) and spec-hash write discipline (behaviour §2.3)."""

from catalog_core.commands import (
    CreateLiteLLMModel,
    DeleteLiteLLMModel,
    EmitKubernetesEvent,
    ObserveLiteLLM,
    UpdateLiteLLMModel,
    WriteCatalog,
)
from catalog_core.events import SourceKind, SourceListed, SourceUnavailable, Unavailability
from tests.core import builders as b
from tests.core.harness import Cluster


def test_ready_model_becomes_an_owned_local_route():
    c = Cluster()
    c.start(
        b.kubeai_model(
            "llama",
            args=["--max-model-len=8192", "--max-num-seqs=4"],
            annotations={"ai-appliance.io/max-output-tokens": "1024"},
            profile="nvidia-gpu-l4:1",
        )
    )
    body = c.world.rows["ai-appliance-kubeai-llama"]
    assert body["model_name"] == "llama"
    assert body["litellm_params"] == {
        "model": "openai/llama",
        "api_base": "http://kubeai.ai.svc.cluster.local/openai/v1",
        "order": 0,
    }
    info = body["model_info"]
    assert info["id"] == "ai-appliance-kubeai-llama"
    assert info["ai_appliance_managed"] is True
    assert info["ai_appliance_owner"] == "model-catalog"
    assert info["ai_appliance_source"] == info["source"] == "kubeai"
    assert info["ai_appliance_type"] == "chat"
    assert info["features"] == ["TextGeneration"]
    assert (info["max_input_tokens"], info["max_output_tokens"]) == (8192, 1024)
    assert info["ai_appliance_scheduler"] == {
        "trusted": True,
        "locality": "local",
        "engine": "vllm",
        "computeTarget": "nvidia-gpu",
        "contextWindow": 8192,
        "maxOutputTokens": 1024,
        "maxNumSeqs": 4,
    }
    assert len(info["ai_appliance_spec_hash"]) == 16
    # the key travels as a reference; the literal "none" for local runtimes
    create = next(x for x in c.commands if isinstance(x, CreateLiteLLMModel))
    assert create.api_key is not None
    assert c.record("llama") == {
        "source": "kubeai",
        "name": "llama",
        "logicalName": "llama",
        "state": "published",
        "reason": "Published",
        "id": "ai-appliance-kubeai-llama",
    }


def test_unready_model_is_withdrawn_and_its_row_deleted_by_id():
    c = Cluster()
    c.start(b.kubeai_model("llama"), b.kubeai_model("qwen"))
    assert c.model_ids() == ["llama", "qwen"]
    commands = c.apply(b.kubeai_model("llama", ready=0))
    assert [type(x) for x in commands] == [DeleteLiteLLMModel, WriteCatalog]
    assert commands[0].model_id == "ai-appliance-kubeai-llama"
    assert c.model_ids() == ["qwen"]
    assert "ai-appliance-kubeai-llama" not in c.world.rows
    assert c.record("llama")["state"] == "withheld"
    assert c.record("llama")["reason"] == "NotReady"
    # ready again: published again
    c.apply(b.kubeai_model("llama"))
    assert c.model_ids() == ["llama", "qwen"]


def test_deleted_model_is_withdrawn():
    c = Cluster()
    c.start(b.kubeai_model("llama"))
    c.delete(b.kubeai_model("llama"))
    assert c.world.rows == {}
    assert c.model_ids() == []
    assert c.routes() == []


def test_steady_state_and_volatile_changes_write_nothing():
    c = Cluster()
    c.start(b.kubeai_model("llama", ready=1))
    writes = len(c.world.writes)
    assert c.apply(b.kubeai_model("llama", ready=3)) == []  # replica count: not part of the route
    assert c.rows_changed() == []  # resync of an unchanged LiteLLM
    assert c.run() == []  # time passing
    assert len(c.world.writes) == writes


def test_changed_limits_update_the_row_once():
    c = Cluster()
    c.start(b.kubeai_model("llama", args=["--max-model-len=4096"]))
    commands = c.apply(b.kubeai_model("llama", args=["--max-model-len=8192"]))
    # the write, the re-read the catalog waits for, then the catalog
    assert [type(x) for x in commands] == [UpdateLiteLLMModel, ObserveLiteLLM, WriteCatalog]
    assert c.world.rows["ai-appliance-kubeai-llama"]["model_info"]["max_input_tokens"] == 8192
    assert c.entry("llama")["contextWindow"] == 8192


def test_removed_limit_recreates_the_row():
    """LiteLLM's updates merge, so a field that disappears needs a fresh row."""
    c = Cluster()
    c.start(b.kubeai_model("llama", args=["--max-model-len=4096"]))
    commands = c.apply(b.kubeai_model("llama"))
    assert type(commands[0]).__name__ == "RecreateLiteLLMModel"
    assert "max_input_tokens" not in c.world.rows["ai-appliance-kubeai-llama"]["model_info"]


def test_kubeai_crd_not_installed_is_an_empty_source():
    c = Cluster()
    c.start(b.kubeai_model("llama"))
    c.run(SourceUnavailable(SourceKind.KUBEAI_MODELS, Unavailability.NOT_INSTALLED))
    assert c.model_ids() == []


def test_a_local_activation_that_needs_kubeai_says_so_while_its_crd_is_not_installed():
    """Issue 33 (3): with KubeAI absent, a vLLM or Ollama activation can never be served; it was silent."""
    c = Cluster()
    c.start(
        b.activation("llama", kind="local", engine="vLLM"),
        b.activation("qwen", kind="local", engine="ollama", enabled=False),
        b.activation("phi", kind="local", engine="freetoken"),
        b.external_configmap([{"name": "gpt", "model": "openai/gpt-4o", "apiKey": "sk-1"}]),
    )
    not_installed = SourceUnavailable(SourceKind.KUBEAI_MODELS, Unavailability.NOT_INSTALLED, "absent")
    commands = c.run(not_installed)
    record = c.record("llama")
    assert (record["source"], record["state"], record["reason"]) == (
        "modelactivation",
        "error",
        "KubeAINotInstalled",
    )
    assert "models.kubeai.org" in record["message"] and "install KubeAI" in record["message"]
    # not qwen (disabled), not phi (FreeToken runs on its own)
    assert [r["name"] for r in c.routes() if r["source"] == "modelactivation"] == ["llama"]
    (event,) = [x for x in commands if isinstance(x, EmitKubernetesEvent)]
    assert (event.involved.kind, event.involved.namespace, event.involved.name) == (
        "ModelActivation",
        "ai-system",
        "llama",
    )
    assert event.reason == "KubeAINotInstalled"
    assert c.model_ids() == ["gpt"]  # the others are untouched
    # an activation created while KubeAI is absent is reported too; one disabled again is not
    c.apply(b.activation("mistral", kind="local", engine="vllm"))
    assert c.record("mistral")["reason"] == "KubeAINotInstalled"
    c.apply(b.activation("mistral", kind="local", engine="vllm", enabled=False))
    assert [r["name"] for r in c.routes() if r["source"] == "modelactivation"] == ["llama"]
    # KubeAI is installed: the records go, the Model is published when it is ready
    c.run(SourceListed(SourceKind.KUBEAI_MODELS, ()))
    assert [r for r in c.routes() if r["source"] == "modelactivation"] == []
    c.apply(b.kubeai_model("llama"))
    assert c.model_ids() == ["gpt", "llama"]


def test_forbidden_source_keeps_its_last_good_value():
    c = Cluster()
    c.start(b.kubeai_model("llama"))
    assert c.run(SourceUnavailable(SourceKind.KUBEAI_MODELS, Unavailability.FORBIDDEN, "list models")) == []
    assert c.model_ids() == ["llama"]
    assert "ai-appliance-kubeai-llama" in c.world.rows


def test_unparsable_annotation_is_dropped_and_max_model_len_applies():
    """behaviour §5.2: the model stays published; the unusable annotation gives way to --max-model-len."""
    c = Cluster()
    c.start(b.kubeai_model("llama", annotations={"ai-appliance.io/context-window": "8192"}))
    c.apply(
        b.kubeai_model(
            "llama", annotations={"ai-appliance.io/context-window": "eight"}, args=["--max-model-len=4096"]
        )
    )
    rec = c.record("llama")
    assert (rec["state"], rec["reason"]) == ("published", "Published")
    assert rec["warnings"][0]["field"] == "ai-appliance.io/context-window"
    assert c.entry("llama")["contextWindow"] == 4096
    assert any(e.reason == "InvalidField" and e.involved.kind == "Model" for e in c.world.events)


def test_unknown_compute_target_still_publishes():
    c = Cluster()
    c.start(b.kubeai_model("llama", annotations={"ai-appliance.io/compute-target": "quantum"}))
    assert c.record("llama")["state"] == "published"
    assert c.record("llama")["warnings"][0]["field"] == "ai-appliance.io/compute-target"


def test_a_standby_plans_but_never_writes_then_takes_over():
    from catalog_core.events import LeadershipChanged

    c = Cluster()
    c.feed(LeadershipChanged(False))
    commands = c.start(
        b.kubeai_model("llama"),
        b.kubeai_model("gone", ready=0),
        rows=[b.row("old", "ai-appliance-kubeai-old", owner="model-catalog")],
    )
    assert {type(x).__name__ for x in commands} == {"WatchSecrets"}  # reads only
    assert c.world.writes == []
    assert set(c.state.derived.entries) == set()  # nothing in LiteLLM yet: nothing published
    assert c.state.derived.winners  # but the desired state is warm
    commands = c.run(LeadershipChanged(True))
    kinds = sorted(type(x).__name__ for x in commands)
    assert kinds == ["CreateLiteLLMModel", "DeleteLiteLLMModel", "ObserveLiteLLM", "WriteCatalog"]
    assert c.model_ids() == ["llama"]
    # losing leadership stops writes at once
    c.feed(LeadershipChanged(False))
    assert c.apply(b.kubeai_model("llama", ready=0)) == []
