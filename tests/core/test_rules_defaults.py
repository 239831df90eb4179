"""The default chat and embedding models (behaviour §5.1): ``auto`` is sticky (issue 32 #6).

Whoever may create a KubeAI Model or add a models.json item could name it ``0-assistant`` and become the
default chat model of every app: ``defaults.env``, ``hermes.yaml``, ``openclaw.json`` and the
AgentTemplate. The default the catalog publishes stays while it is published; a new one is chosen only
when it goes (the first of its type in id order), and adding a model never changes it.
"""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core.commands import PatchAgentTemplate
from tests.core import builders as b
from tests.core.harness import Cluster

FILES = ("defaults.env", "hermes.yaml", "openclaw.json", "chat-models.json", "catalog.json")


def _chat_default(c: Cluster) -> str:
    return str(c.catalog()["defaultChatModel"])


def _everywhere(c: Cluster) -> set[str]:
    """The default chat model as each file that names it says it (they must agree)."""
    data = c.data
    env = dict(line.split("=", 1) for line in data["defaults.env"].splitlines())
    hermes = json.loads(data["hermes.yaml"])
    openclaw = json.loads(data["openclaw.json"])
    return {
        env["AI_APPLIANCE_DEFAULT_CHAT_MODEL"],
        env["AI_APPLIANCE_DEFAULT_OPENCODE_MODEL"].removeprefix("litellm/"),
        data["AI_APPLIANCE_DEFAULT_CHAT_MODEL"],
        hermes["model"]["default"],
        hermes["providers"]["litellm"]["default_model"],
        openclaw["agents"]["defaults"]["model"]["primary"].removeprefix("litellm/"),
        json.loads(data["chat-models.json"])["defaultModel"],
        json.loads(data["catalog.json"])["defaultChatModel"],
    }


def _template_model(c: Cluster) -> tuple[str, str]:
    config = c.world.templates["litellm-default"]["spec"]["config"]
    return config["model"], config["small_model"]


def test_a_model_named_to_sort_first_never_becomes_the_default():
    c = Cluster()
    c.start(b.kubeai_model("llama"), b.kubeai_model("qwen"))
    assert _everywhere(c) == {"llama"}
    c.apply(b.kubeai_model("0-assistant"))
    c.apply(b.external_configmap([{"name": "00-assistant", "model": "openai/x"}]))
    assert {"0-assistant", "00-assistant"} <= set(c.model_ids())
    assert _everywhere(c) == {"llama"}
    # an AgentTemplate that gets its model from the catalog now gets the same default
    c.apply(b.agent_template("litellm-default", model="litellm/retired"))
    assert _template_model(c) == ("litellm/llama", "litellm/llama")


def test_a_new_default_is_chosen_only_when_the_current_one_goes_and_then_it_stays():
    c = Cluster()
    c.start(b.kubeai_model("llama"), b.kubeai_model("qwen"), b.agent_template("litellm-default"))
    c.apply(b.kubeai_model("0-assistant"))
    assert _chat_default(c) == "llama"
    c.apply(b.kubeai_model("llama", ready=0))  # the default goes: the first chat model in id order
    assert _everywhere(c) == {"0-assistant"}
    assert _template_model(c) == ("litellm/0-assistant", "litellm/0-assistant")
    c.apply(b.kubeai_model("llama"))  # it comes back: the default it handed over to stays
    assert _everywhere(c) == {"0-assistant"}
    assert _template_model(c) == ("litellm/0-assistant", "litellm/0-assistant")


def test_a_restart_keeps_the_default_the_catalog_holds():
    first = Cluster()
    first.start(b.kubeai_model("qwen"))
    first.apply(b.kubeai_model("llama"))
    assert _chat_default(first) == "qwen"
    written = first.world.catalog
    again = Cluster()
    again.start(b.kubeai_model("qwen"), b.kubeai_model("llama"), b.kubeai_model("0-assistant"), written)
    assert _everywhere(again) == {"qwen"}


def test_the_bootstrap_placeholder_holds_no_default():
    c = Cluster()
    c.start(b.kubeai_model("qwen"), b.kubeai_model("llama"), b.catalog_configmap())
    assert _chat_default(c) == "llama"


def test_the_embedding_default_is_sticky_too():
    c = Cluster()
    c.start(b.kubeai_model("embed", features=["TextEmbedding"]))
    c.apply(b.kubeai_model("0-embedding", features=["TextEmbedding"]))
    assert c.catalog()["defaultEmbeddingModel"] == "embed"
    assert "AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL=embed" in c.data["defaults.env"].splitlines()
    c.delete(b.kubeai_model("embed", features=["TextEmbedding"]))
    assert c.catalog()["defaultEmbeddingModel"] == "0-embedding"


def test_a_configured_default_wins_when_published_and_the_fallback_is_sticky():
    c = Cluster(AI_APPLIANCE_DEFAULT_CHAT_MODEL="qwen")
    c.start(b.kubeai_model("llama"))
    assert _chat_default(c) == "llama"  # the configured one is not published: the fallback
    c.apply(b.kubeai_model("0-assistant"))
    assert _chat_default(c) == "llama"  # the fallback is sticky too
    c.apply(b.kubeai_model("qwen"))
    assert _chat_default(c) == "qwen"  # the configured one, once it is published
    c.apply(b.kubeai_model("0-assistant-2"))
    assert _chat_default(c) == "qwen"


def test_a_default_that_changes_type_is_replaced():
    c = Cluster()
    c.start(b.kubeai_model("llama"), b.kubeai_model("qwen"))
    c.apply(b.kubeai_model("llama", features=["TextEmbedding"]))
    assert _chat_default(c) == "qwen"
    assert c.catalog()["defaultEmbeddingModel"] == "llama"


def test_the_template_is_not_patched_when_only_a_model_is_added():
    c = Cluster()
    c.start(b.kubeai_model("llama"), b.agent_template("litellm-default"))
    c.apply(b.kubeai_model("0-assistant"))
    patches = [w for w in c.world.writes if isinstance(w, PatchAgentTemplate)]
    assert all("model" not in p.patch.value()["spec"]["config"] for p in patches[1:]), (
        "a later patch set the template's model"
    )
    assert _template_model(c) == ("litellm/llama", "litellm/llama")


NEW_NAMES = ["0-assistant", "a", "aa", "llama-2", "zz", "00"]


@settings(max_examples=40)
@given(
    st.lists(st.sampled_from(["llama", "qwen", "phi", "mistral"]), min_size=1, max_size=4, unique=True),
    st.sampled_from(NEW_NAMES),
    st.sampled_from(["kubeai", "models.json"]),
    st.sampled_from(["chat", "embedding"]),
)
def test_adding_a_model_never_changes_the_default(present, added, how, kind):
    features = ["TextEmbedding"] if kind == "embedding" else ["TextGeneration"]
    c = Cluster()
    c.start(*(b.kubeai_model(n, features=features) for n in present))
    key = "defaultEmbeddingModel" if kind == "embedding" else "defaultChatModel"
    before = c.catalog()[key]
    assert before
    if how == "kubeai":
        c.apply(b.kubeai_model(added, features=features))
    else:
        c.apply(b.external_configmap([{"name": added, "model": f"openai/{added}", "type": kind}]))
    assert added in c.model_ids()
    assert c.catalog()[key] == before
