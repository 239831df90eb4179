"""What the previous controller leaves behind on an appliance, written from contracts Part A.

An independent oracle (it does not call our renderer for anything a consumer reads): the LiteLLM rows of
behaviour §1.1 and §1.2 (``ai_appliance_managed: true``, no owner, today's ids) and the catalog
ConfigMap of behaviour §5.1 built
from every row LiteLLM reports, in today's format (entries without ``routes``, no ``routes.json``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

KUBEAI_API_BASE = "http://kubeai.ai.svc.cluster.local/openai/v1"
LITELLM_API_BASE = "http://litellm.ai.svc.cluster.local:4000/v1"


def kubeai_row(
    name: str, *, context: int | None = None, features: tuple[str, ...] = ("TextGeneration",)
) -> dict[str, Any]:
    """behaviour §1.1: a ready KubeAI Model's deployment, as today's controller writes it."""
    info: dict[str, Any] = {
        "id": f"ai-appliance-kubeai-{name}",
        "ai_appliance_managed": True,
        "ai_appliance_source": "kubeai",
        "ai_appliance_type": "chat",
        "source": "kubeai",
        "features": list(features),
    }
    if context:
        info["max_input_tokens"] = context
    params = {"model": f"openai/{name}", "api_base": KUBEAI_API_BASE, "api_key": "none"}
    return {"model_name": name, "litellm_params": params, "model_info": info}


def external_row(
    name: str, model: str, api_key: str | None, *, api_base: str | None = None, **limits: int
) -> dict[str, Any]:
    """behaviour §1.2: an external definition (the key read from its Secret and written in clear, as
    today; none for an item without a key)."""
    info: dict[str, Any] = {
        "id": f"ai-appliance-external-{name}",
        "ai_appliance_managed": True,
        "ai_appliance_source": "external",
        "ai_appliance_type": "chat",
        "source": "external",
        **limits,
    }
    params: dict[str, Any] = {"model": model}
    if api_base is not None:
        params["api_base"] = api_base
    if api_key is not None:
        params["api_key"] = api_key
    return {"model_name": name, "litellm_params": params, "model_info": info}


def _positive(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value > 0:
        return value
    if isinstance(value, str) and value.strip().isdigit() and int(value) > 0:
        return int(value)
    return None


def _first(info: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    return next((v for k in keys if (v := _positive(info.get(k))) is not None), None)


def _entry(row: dict[str, Any]) -> dict[str, Any]:
    """behaviour §5.1 entry of one /model/info row (behaviour §5.2 limits and type)."""
    name, info, params = row["model_name"], row.get("model_info") or {}, row.get("litellm_params") or {}
    kind = info.get("ai_appliance_type") or ("embedding" if "embedding" in name.lower() else "chat")
    entry: dict[str, Any] = {
        "id": name,
        "name": info.get("team_public_model_name") or name,
        "type": kind,
        "provider": "litellm",
        "modelRef": f"litellm/{name}",
        "source": info.get("source") or info.get("ai_appliance_source") or "litellm",
        "managed": info.get("ai_appliance_managed") is True,
        "litellm": {"model": params.get("model"), "apiBase": params.get("api_base")},
    }
    context = _first(info, ("max_input_tokens", "contextWindow", "context_window", "context_length"))
    output = _first(info, ("max_output_tokens", "maxOutputTokens", "max_completion_tokens"))
    if context:
        entry["contextWindow"] = context
    if output:
        entry["maxOutputTokens"] = output
    return entry


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def catalog(rows: list[dict[str, Any]]) -> tuple[dict[str, str], str]:
    """(data, hash) of ConfigMap/ai-model-catalog as today's controller writes it for these rows, with the
    default environment (behaviour §10). Only the keys and the hash matter to the upgrade; the agent
    fragments follow
    behaviour §5.1 for chat models without limits beyond what the rows state."""
    models = sorted((_entry(r) for r in rows), key=lambda e: (e["type"], e["id"]))
    chat = [m for m in models if m["type"] == "chat"]
    embedding = [m for m in models if m["type"] == "embedding"]
    default_chat = chat[0]["id"] if chat else ""
    default_embedding = embedding[0]["id"] if embedding else ""
    context = next((m.get("contextWindow") for m in chat if m["id"] == default_chat), None)
    compaction = (
        {"reserveTokens": max(1024, min(4096, context // 4)), "reserveTokensFloor": 0}
        if context and context <= 32768
        else {"reserveTokensFloor": 20000}
    )
    hash_input = {
        "models": models,
        "defaultChatModel": default_chat,
        "defaultEmbeddingModel": default_embedding,
        "opencodeDefaultContextTokens": 131072,
        "opencodeDefaultOutputTokens": 8192,
        "paperclipOpenCodeMaxOutputTokens": 4096,
        "paperclipOpenCodeContextHeadroomTokens": 4096,
        "openclawCompaction": compaction,
        "openclawToolsProfile": "coding",
    }
    text = json.dumps(hash_input, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    opencode_model = f"litellm/{default_chat}" if default_chat else ""

    def opencode(m: dict[str, Any]) -> dict[str, Any]:
        c = m.get("contextWindow") or 131072
        return {
            "name": m["name"],
            "limit": {"context": c, "output": min(m.get("maxOutputTokens") or 8192, c)},
        }

    def paperclip(m: dict[str, Any]) -> dict[str, Any]:
        p, o = opencode(m)["limit"].values()
        headroom = min(4096, max(1, p // 4), p - 1) if p > 1 else 0
        context = p - headroom
        return {
            "name": m["name"],
            "limit": {"context": context, "output": min(o, 4096, max(1, context // 4))},
        }

    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "LiteLLM",
        "options": {"baseURL": LITELLM_API_BASE, "apiKey": "{env:OPENAI_API_KEY}"},
    }
    data = {
        "catalog.json": _pretty(
            {
                "hash": digest,
                "models": models,
                "defaultChatModel": default_chat,
                "defaultEmbeddingModel": default_embedding,
            }
        ),
        "chat-models.json": _pretty({"models": chat, "defaultModel": default_chat}),
        "embedding-models.json": _pretty({"models": embedding, "defaultModel": default_embedding}),
        "defaults.env": (
            f"AI_APPLIANCE_MODEL_CATALOG_READY=true\nAI_APPLIANCE_MODEL_CATALOG_HASH={digest}\n"
            f"AI_APPLIANCE_DEFAULT_CHAT_MODEL={default_chat}\nAI_APPLIANCE_DEFAULT_OPENCODE_MODEL={opencode_model}\n"
            f"AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL={default_embedding}\nAI_APPLIANCE_MODEL_COUNT={len(models)}\n"
            f"AI_APPLIANCE_CHAT_MODEL_COUNT={len(chat)}\nAI_APPLIANCE_EMBEDDING_MODEL_COUNT={len(embedding)}\n"
        ),
        "openclaw.json": _pretty(
            {
                "models": {
                    "providers": {
                        "litellm": {
                            "baseUrl": LITELLM_API_BASE,
                            "apiKey": "${LITELLM_API_KEY}",
                            "api": "openai-completions",
                            "models": [
                                {"id": m["id"], "name": m["name"]}
                                | ({"contextWindow": m["contextWindow"]} if m.get("contextWindow") else {})
                                for m in chat
                            ],
                        }
                    }
                },
                "agents": {"defaults": {"compaction": compaction, "model": {"primary": opencode_model}}},
                "tools": {"profile": "coding"},
            }
        ),
        "hermes.yaml": _pretty(
            {
                "model": {
                    "default": default_chat,
                    "provider": "litellm",
                    "base_url": LITELLM_API_BASE,
                    "api_mode": "chat_completions",
                },
                "providers": {
                    "litellm": {
                        "name": "LiteLLM",
                        "base_url": LITELLM_API_BASE,
                        "key_env": "OPENAI_API_KEY",
                        "api_mode": "chat_completions",
                        "default_model": default_chat,
                        "discover_models": False,
                        "models": {
                            m["id"]: {"name": m["name"]}
                            | ({"context_length": m["contextWindow"]} if m.get("contextWindow") else {})
                            for m in chat
                        },
                    }
                },
            }
        ),
        "opencode-providers.json": _pretty(
            {"litellm": provider | {"models": {m["id"]: opencode(m) for m in chat}}}
        ),
        "paperclip-opencode-providers.json": _pretty(
            {"litellm": provider | {"models": {m["id"]: paperclip(m) for m in chat}}}
        ),
        "paperclip-adapter-models.json": _pretty(
            {"opencode_local": [{"id": m["modelRef"], "label": m["name"]} for m in chat]}
        ),
        "AI_APPLIANCE_MODEL_CATALOG_READY": "true",
        "AI_APPLIANCE_MODEL_CATALOG_HASH": digest,
        "AI_APPLIANCE_DEFAULT_CHAT_MODEL": default_chat,
        "AI_APPLIANCE_DEFAULT_OPENCODE_MODEL": opencode_model,
        "AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL": default_embedding,
    }
    return data, digest


def catalog_configmap(rows: list[dict[str, Any]], namespace: str = "ai") -> dict[str, Any]:
    data, digest = catalog(rows)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "ai-model-catalog",
            "namespace": namespace,
            "labels": {"app": "ai-model-catalog"},
            "annotations": {
                "ai-appliance.io/catalog-hash": digest,
                "ai-appliance.io/last-sync": "2026-11-30T10:00:00Z",
            },
        },
        "data": data,
    }
