"""The generated ConfigMap (behaviour §5.1), Mesh awareness (behaviour §6), routes.json (behaviour §7),
types (behaviour §11)."""

import json

from catalog_core import catalog_files
from catalog_core.commands import CreateLiteLLMModel, EmitKubernetesEvent, WriteCatalog
from catalog_core.config import CatalogConfig
from catalog_core.jsonval import canonical, short_hash
from tests.core import builders as b
from tests.core.harness import Cluster

# Literal key names from behaviour §5.1 (consumers read them by name); only READY, HASH have MODEL_CATALOG_.


def _cluster(**env):
    c = Cluster(**env)
    c.start(
        b.kubeai_model(
            "llama", args=["--max-model-len=20000"], annotations={"ai-appliance.io/max-output-tokens": "8192"}
        ),
        b.kubeai_model(
            "small", args=["--max-model-len=8192"], annotations={"ai-appliance.io/max-output-tokens": "8192"}
        ),
        b.kubeai_model("embed", features=["TextEmbedding"]),
        b.kubeai_model("rerank", features=["Reranking"]),
        b.kubeai_model("whisper", features=["SpeechToText"]),
    )
    return c


def test_every_data_key_is_present_and_json_is_formatted():
    c = _cluster()
    assert set(c.data) == catalog_files.KEYS
    assert set(c.data) >= {
        "catalog.json",
        "chat-models.json",
        "embedding-models.json",
        "defaults.env",
        "openclaw.json",
        "hermes.yaml",
        "opencode-providers.json",
        "paperclip-opencode-providers.json",
        "paperclip-adapter-models.json",
        "routes.json",
        "AI_APPLIANCE_MODEL_CATALOG_READY",
        "AI_APPLIANCE_MODEL_CATALOG_HASH",
        "AI_APPLIANCE_DEFAULT_CHAT_MODEL",
        "AI_APPLIANCE_DEFAULT_OPENCODE_MODEL",
        "AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL",
    }
    for key, value in c.data.items():
        if key.endswith((".json", ".yaml")):
            assert value == json.dumps(json.loads(value), indent=2, sort_keys=True) + "\n", key


def test_entries_sorted_by_type_then_id_with_the_contract_fields():
    c = _cluster()
    models = c.catalog()["models"]
    assert [(m["type"], m["id"]) for m in models] == [
        ("audio", "whisper"),
        ("chat", "llama"),
        ("chat", "small"),
        ("embedding", "embed"),
        ("rerank", "rerank"),
    ]
    llama = c.entry("llama")
    assert llama == {
        "id": "llama",
        "name": "llama",
        "type": "chat",
        "provider": "litellm",
        "modelRef": "litellm/llama",
        "source": "kubeai",
        "managed": True,
        "litellm": {"model": "openai/llama", "apiBase": "http://kubeai.ai.svc.cluster.local/openai/v1"},
        "contextWindow": 20000,
        "maxOutputTokens": 8192,
        "routes": [{"order": 0, "locality": "local", "owner": "model-catalog"}],
    }


def test_hash_covers_exactly_the_contract_inputs():
    c = _cluster()
    cat = c.catalog()
    expected = short_hash(
        canonical(
            {
                "models": cat["models"],
                "defaultChatModel": "llama",
                "defaultEmbeddingModel": "embed",
                "opencodeDefaultContextTokens": 131072,
                "opencodeDefaultOutputTokens": 8192,
                "paperclipOpenCodeMaxOutputTokens": 4096,
                "paperclipOpenCodeContextHeadroomTokens": 4096,
                "openclawCompaction": {"reserveTokens": 4096, "reserveTokensFloor": 0},
                "openclawToolsProfile": "coding",
            }
        )
    )
    assert cat["hash"] == expected == c.data["AI_APPLIANCE_MODEL_CATALOG_HASH"]
    assert c.world.catalog["metadata"]["annotations"]["ai-appliance.io/catalog-hash"] == expected


def test_defaults_and_scalars():
    c = _cluster()
    assert c.data["defaults.env"] == (
        "AI_APPLIANCE_MODEL_CATALOG_READY=true\n"
        f"AI_APPLIANCE_MODEL_CATALOG_HASH={c.catalog()['hash']}\n"
        "AI_APPLIANCE_DEFAULT_CHAT_MODEL=llama\n"
        "AI_APPLIANCE_DEFAULT_OPENCODE_MODEL=litellm/llama\n"
        "AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL=embed\n"
        "AI_APPLIANCE_MODEL_COUNT=5\n"
        "AI_APPLIANCE_CHAT_MODEL_COUNT=2\n"
        "AI_APPLIANCE_EMBEDDING_MODEL_COUNT=1\n"
    )
    assert c.data["AI_APPLIANCE_MODEL_CATALOG_READY"] == "true"
    assert c.data["AI_APPLIANCE_DEFAULT_OPENCODE_MODEL"] == "litellm/llama"
    configured = _cluster(
        AI_APPLIANCE_DEFAULT_CHAT_MODEL="small", AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL="nope"
    )
    assert configured.catalog()["defaultChatModel"] == "small"
    assert configured.catalog()["defaultEmbeddingModel"] == "embed"  # not an embedding id: first in order
    empty = Cluster()
    empty.start()
    assert empty.catalog()["defaultChatModel"] == ""
    assert empty.data["AI_APPLIANCE_DEFAULT_OPENCODE_MODEL"] == ""


def test_agent_fragments_hold_chat_models_only_with_their_limits():
    c = _cluster()
    opencode = json.loads(c.data["opencode-providers.json"])["litellm"]
    assert opencode["npm"] == "@ai-sdk/openai-compatible"
    assert opencode["options"] == {
        "baseURL": "http://litellm.ai.svc.cluster.local:4000/v1",
        "apiKey": "{env:OPENAI_API_KEY}",
    }
    assert opencode["models"] == {
        "llama": {"name": "llama", "limit": {"context": 20000, "output": 8192}},
        "small": {"name": "small", "limit": {"context": 8192, "output": 8192}},
    }
    paperclip = json.loads(c.data["paperclip-opencode-providers.json"])["litellm"]["models"]
    assert paperclip["llama"]["limit"] == {"context": 15904, "output": 3976}
    assert paperclip["small"]["limit"] == {"context": 6144, "output": 1536}
    assert json.loads(c.data["paperclip-adapter-models.json"]) == {
        "opencode_local": [
            {"id": "litellm/llama", "label": "llama"},
            {"id": "litellm/small", "label": "small"},
        ]
    }
    openclaw = json.loads(c.data["openclaw.json"])
    provider = openclaw["models"]["providers"]["litellm"]
    assert provider["apiKey"] == "${LITELLM_API_KEY}"
    assert provider["api"] == "openai-completions"
    assert [m["id"] for m in provider["models"]] == ["llama", "small"]
    assert openclaw["agents"]["defaults"] == {
        "compaction": {"reserveTokens": 4096, "reserveTokensFloor": 0},
        "model": {"primary": "litellm/llama"},
    }
    assert openclaw["tools"] == {"profile": "coding"}
    hermes = json.loads(c.data["hermes.yaml"])
    assert hermes["model"] == {
        "default": "llama",
        "provider": "litellm",
        "base_url": "http://litellm.ai.svc.cluster.local:4000/v1",
        "api_mode": "chat_completions",
    }
    assert hermes["providers"]["litellm"]["models"] == {
        "llama": {"name": "llama", "context_length": 20000},
        "small": {"name": "small", "context_length": 8192},
    }
    assert hermes["providers"]["litellm"]["key_env"] == "OPENAI_API_KEY"
    assert hermes["providers"]["litellm"]["discover_models"] is False
    chat_list = json.loads(c.data["chat-models.json"])
    assert [m["id"] for m in chat_list["models"]] == ["llama", "small"]
    assert chat_list["defaultModel"] == "llama"


def test_routes_json_changes_never_change_the_hash():
    c = Cluster()
    c.start(b.kubeai_model("llama"), b.kubeai_model("qwen", ready=0))
    before = c.catalog()["hash"]
    c.apply(b.external_configmap([{"name": "broken", "model": "x", "apiBase": "ftp://x"}]))
    assert any(r["name"] == "broken" for r in c.routes())
    assert c.catalog()["hash"] == before


# --- Private Mesh awareness (behaviour §6)
MESH_FALLBACK = b.row(
    "llama", "mesh-llama", owner="private-mesh", order=1, api_base="http://mesh/v1", max_input_tokens=4096
)
MESH_ALIAS = b.row("mesh/llama", "mesh-alias-llama", owner="private-mesh", api_base="http://mesh/v1")
LOCAL_ALIAS = b.row("local/llama", "mesh-local-llama", owner="private-mesh")
EXPORT = b.row("share/llama", "mesh-export-llama", owner="private-mesh")
EXPORT_FLAG = b.row("llama-export", "mesh-export2", owner="private-mesh", ai_appliance_export_only=True)


def test_mesh_rows_merge_into_one_logical_entry():
    c = Cluster()
    c.start(
        b.kubeai_model("llama", args=["--max-model-len=32768"]),
        rows=[MESH_FALLBACK, MESH_ALIAS, LOCAL_ALIAS, EXPORT, EXPORT_FLAG],
    )
    assert c.model_ids() == ["llama"]  # aliases and export-only rows are not entries
    llama = c.entry("llama")
    assert llama["routes"] == [
        {"order": 0, "locality": "local", "owner": "model-catalog"},
        {"order": 1, "locality": "mesh", "owner": "private-mesh"},
    ]
    assert llama["aliases"] == ["local/llama", "mesh/llama"]
    assert llama["contextWindow"] == 32768  # metadata from the owned local row
    assert llama["managed"] is True
    assert [m["id"] for m in json.loads(c.data["chat-models.json"])["models"]] == ["llama"]
    for key in (
        "opencode-providers.json",
        "paperclip-opencode-providers.json",
        "openclaw.json",
        "hermes.yaml",
        "defaults.env",
    ):
        assert "mesh/llama" not in c.data[key] and "share/llama" not in c.data[key]
    assert "share/llama" not in c.data["catalog.json"]
    assert "llama-export" not in c.data["catalog.json"]
    assert {"mesh-llama", "mesh-alias-llama", "mesh-local-llama", "mesh-export-llama", "mesh-export2"} <= set(
        c.world.rows
    )


def test_mesh_fallback_alone_is_listed_and_the_local_route_takes_over_metadata():
    c = Cluster()
    c.start(b.kubeai_model("llama", ready=0), rows=[MESH_FALLBACK])
    assert c.entry("llama")["managed"] is False
    assert c.entry("llama")["contextWindow"] == 4096
    c.apply(b.kubeai_model("llama", args=["--max-model-len=32768"]))
    assert c.entry("llama")["managed"] is True
    assert [r["order"] for r in c.entry("llama")["routes"]] == [0, 1]


def test_row_order_never_changes_the_hash():
    a, z = Cluster(), Cluster()
    rows = [MESH_FALLBACK, MESH_ALIAS, b.row("llama", "mesh-llama-2", owner="private-mesh", order=2)]
    a.start(b.kubeai_model("llama"), rows=rows)
    z.start(b.kubeai_model("llama"), rows=list(reversed(rows)))
    assert a.catalog()["hash"] == z.catalog()["hash"]


def test_alias_without_a_route_is_not_an_entry_and_creates_nothing():
    c = Cluster()
    c.start(rows=[MESH_ALIAS])
    assert c.model_ids() == []
    assert set(c.world.rows) == {"mesh-alias-llama"}


def test_trusted_logical_name():
    c = Cluster()
    c.start(
        rows=[
            b.row("llama", "r1", owner="private-mesh"),
            b.row("peer-b/llama-8b", "r2", owner="private-mesh", ai_appliance_logical_name="llama"),
        ]
    )
    assert c.entry("llama")["aliases"] == ["peer-b/llama-8b"]


def test_config_changes_change_the_hash():
    a = _cluster()
    b_ = _cluster(OPENCODE_DEFAULT_CONTEXT_TOKENS="65536")
    assert a.catalog()["hash"] != b_.catalog()["hash"]
    assert CatalogConfig().openclaw_tools_profile == "coding"


def test_a_catalog_that_outgrows_one_configmap_is_not_written_and_the_last_one_stays():
    c = Cluster()
    c.start(b.external_configmap([{"name": "small", "model": "openai/small"}]))
    assert c.model_ids() == ["small"]
    many = [{"name": f"many-{i}", "model": f"openai/many-{i}"} for i in range(900)]
    commands = c.apply(b.external_configmap(many))
    # LiteLLM still gets every route; the catalog write, which the API server would refuse, is not issued
    assert sum(isinstance(x, CreateLiteLLMModel) for x in commands) == 900
    assert not any(isinstance(x, WriteCatalog) for x in commands)
    warnings = [x for x in commands if isinstance(x, EmitKubernetesEvent)]
    assert [(w.involved.name, w.reason) for w in warnings] == [("ai-model-catalog", "CatalogTooLarge")]
    assert "at most 1048576" in warnings[0].message
    assert c.model_ids() == ["small"]  # apps keep the last written catalog
    # said once, not on every change while it stays too big
    again = c.apply(b.external_configmap([*many, {"name": "one-more", "model": "openai/x"}]))
    assert not any(isinstance(x, (WriteCatalog, EmitKubernetesEvent)) for x in again)
    # back under the limit: written again
    commands = c.apply(b.external_configmap(many[:10]))
    assert any(isinstance(x, WriteCatalog) for x in commands)
    assert len(c.model_ids()) == 10


# --- compatibility with today's controller (behaviour §5.2, issue 11)
GPT_4O_MINI = {"name": "gpt-4o-mini", "model": "openai/gpt-4o-mini", "apiKey": "sk-x"}
# LiteLLM's model map as /model/info shows it for a model it knows: limits and prices.
LITELLM_MODEL_MAP = {
    "openai/gpt-4o-mini": {
        "max_input_tokens": 128000,
        "max_output_tokens": 16384,
        "input_cost_per_token": 1.5e-07,
        "output_cost_per_token": 6e-07,
    }
}


def test_limits_litellm_reports_are_published_when_the_source_gives_none():
    """Item 4: an external openai/gpt-4o-mini with no limits gets LiteLLM's 128000/16384."""
    c = Cluster()
    c.world.model_map = dict(LITELLM_MODEL_MAP)
    c.start(b.external_configmap([GPT_4O_MINI]))
    entry = c.entry("gpt-4o-mini")
    assert (entry["contextWindow"], entry["maxOutputTokens"]) == (128000, 16384)
    opencode = json.loads(c.data["opencode-providers.json"])["litellm"]["models"]["gpt-4o-mini"]
    assert opencode["limit"] == {"context": 128000, "output": 16384}
    paperclip = json.loads(c.data["paperclip-opencode-providers.json"])["litellm"]["models"]["gpt-4o-mini"]
    assert paperclip["limit"] == {"context": 123904, "output": 4096}
    # the catalog waited for LiteLLM's answer: one write, already with the limits
    assert len([w for w in c.world.writes if isinstance(w, WriteCatalog)]) == 1


def test_a_limit_the_source_gives_wins_over_the_one_litellm_fills_in():
    c = Cluster()
    c.world.model_map = dict(LITELLM_MODEL_MAP)
    c.start(b.external_configmap([GPT_4O_MINI | {"contextWindow": 32000}]))
    entry = c.entry("gpt-4o-mini")
    assert (entry["contextWindow"], entry["maxOutputTokens"]) == (32000, 16384)


def test_a_limit_another_row_registered_for_a_custom_model_of_ours_is_not_its_figure():
    """LiteLLM fills a row's unset limits from what other rows of the same ``model`` registered (1.108.7
    for every row, 1.84.0 for the rows it starts with), with no price: the model is not in its own map.
    A custom model of ours then publishes what its source gives, or none, on every release; a row of
    another owner keeps what LiteLLM reports for it."""
    custom = {"name": "mct-custom", "model": "openai/mct-custom", "apiKey": "sk-x"}
    c = Cluster()
    c.world.model_map = {"openai/mct-custom": {"max_input_tokens": 65536, "max_output_tokens": 2048}}
    mesh = b.row("mct-custom-mesh", "mesh-1", owner="private-mesh")
    mesh["litellm_params"]["model"] = "openai/mct-custom"
    c.start(b.external_configmap([custom]), rows=[mesh])
    assert "contextWindow" not in c.entry("mct-custom") and "maxOutputTokens" not in c.entry("mct-custom")
    assert c.entry("mct-custom-mesh")["contextWindow"] == 65536
    c.apply(b.external_configmap([custom | {"contextWindow": 8192}]))
    assert c.entry("mct-custom")["contextWindow"] == 8192 and "maxOutputTokens" not in c.entry("mct-custom")


def test_foreign_rows_limits_from_every_key_the_contract_names():
    c = Cluster()
    c.start(
        rows=[
            b.row("hand", "hand-1", context_length=65536, max_completion_tokens=2048),
            b.row("other", "other-1", max_context_length=4096, maxOutputTokens=1024, max_tokens=99),
            b.row("tokens-only", "tok-1", max_tokens=8192),
        ]
    )
    assert (c.entry("hand")["contextWindow"], c.entry("hand")["maxOutputTokens"]) == (65536, 2048)
    assert (c.entry("other")["contextWindow"], c.entry("other")["maxOutputTokens"]) == (4096, 1024)
    assert "contextWindow" not in c.entry("tokens-only")  # never max_tokens (behaviour §11)


def test_foreign_rows_are_typed_like_today():
    """Item 7: a foreign row named like an embedding model, or with embedding features, is no chat model;
    a row without source is "litellm"."""
    c = Cluster()
    c.start(
        b.kubeai_model("llama"),
        rows=[
            b.row("bge-embedding-m3", "mesh-bge", owner="private-mesh"),
            b.row("vectors", "hand-vectors", features=["TextEmbedding"]),
            b.row("ranker", "hand-ranker", mode="rerank"),
            b.row("chatty", "hand-chatty"),
        ],
    )
    types = {m["id"]: m["type"] for m in c.catalog()["models"]}
    assert types == {
        "bge-embedding-m3": "embedding",
        "vectors": "embedding",
        "ranker": "rerank",
        "chatty": "chat",
        "llama": "chat",
    }
    assert set(json.loads(c.data["opencode-providers.json"])["litellm"]["models"]) == {"chatty", "llama"}
    assert c.entry("bge-embedding-m3")["source"] == "litellm"
    assert c.entry("chatty")["source"] == "litellm"


def test_base_urls_are_published_without_a_trailing_slash():
    """Item 8: KUBEAI_API_BASE / LITELLM_API_BASE with a trailing / are used without it everywhere."""
    c = Cluster(
        KUBEAI_API_BASE="http://kubeai.ai.svc.cluster.local/openai/v1/",
        LITELLM_API_BASE="http://litellm.ai.svc.cluster.local:4000/v1/",
    )
    c.start(b.kubeai_model("llama"))
    assert c.world.rows["ai-appliance-kubeai-llama"]["litellm_params"]["api_base"] == (
        "http://kubeai.ai.svc.cluster.local/openai/v1"
    )
    assert c.entry("llama")["litellm"]["apiBase"] == "http://kubeai.ai.svc.cluster.local/openai/v1"
    base = "http://litellm.ai.svc.cluster.local:4000/v1"
    assert json.loads(c.data["openclaw.json"])["models"]["providers"]["litellm"]["baseUrl"] == base
    hermes = json.loads(c.data["hermes.yaml"])
    assert hermes["model"]["base_url"] == hermes["providers"]["litellm"]["base_url"] == base
    assert json.loads(c.data["opencode-providers.json"])["litellm"]["options"]["baseURL"] == base
    assert json.loads(c.data["paperclip-opencode-providers.json"])["litellm"]["options"]["baseURL"] == base


def test_a_foreign_row_claiming_a_trusted_owner_never_rewrites_an_owned_entry():
    """Issue 32 #7: a row that merely says ``ai_appliance_owner: private-mesh``, with an owned external
    model's name and ``order: 0``, took over the entry's type, context window, API base and display name.
    A row the catalog does not own adds a route (behaviour §6); what the owned route publishes stays."""
    owned = {
        "name": "gpt-4o",
        "model": "openai/gpt-4o",
        "apiBase": "https://api.openai.com/v1",
        "contextWindow": 128000,
        "type": "chat",
    }
    forged = b.row(
        "gpt-4o",
        "mesh-forged-gpt-4o",
        owner="private-mesh",
        order=0,
        api_base="http://attacker.example/v1",
        ai_appliance_type="embedding",
        max_input_tokens=1,
        team_public_model_name="Free GPT",
        ai_appliance_scheduler={"trusted": True, "locality": "local"},
    )
    c = Cluster()
    c.start(b.external_configmap([owned]), rows=[forged])
    entry = c.entry("gpt-4o")
    assert (entry["type"], entry["name"], entry["contextWindow"]) == ("chat", "gpt-4o", 128000)
    assert entry["litellm"] == {"model": "openai/gpt-4o", "apiBase": "https://api.openai.com/v1"}
    assert (entry["source"], entry["managed"]) == ("external", True)
    # the foreign row is one more route of the entry, and it is left as it is
    assert {"order": 0, "locality": "local", "owner": "private-mesh"} in entry["routes"]
    assert c.world.rows["mesh-forged-gpt-4o"] == forged
    assert json.loads(c.data["chat-models.json"])["models"][0]["id"] == "gpt-4o"
    assert json.loads(c.data["embedding-models.json"])["models"] == []


def test_an_owned_local_route_still_gives_its_metadata_before_an_owned_external_one():
    """The order among owned routes is unchanged (behaviour §6): a foreign row only comes after them."""
    c = Cluster()
    c.start(
        b.kubeai_model("llama", args=["--max-model-len=32768"]),
        rows=[b.row("llama", "mesh-llama", owner="private-mesh", order=0, max_input_tokens=4096)],
    )
    assert c.entry("llama")["contextWindow"] == 32768
    assert c.entry("llama")["managed"] is True
