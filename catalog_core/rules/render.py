"""The generated ConfigMap/ai-model-catalog: the keys apps read (contracts A.5) plus routes.json (B.5)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import attrs

from catalog_core.config import CatalogConfig
from catalog_core.jsonval import canonical, pretty, short_hash
from catalog_core.rules.limits import openclaw_compaction, opencode_limits, paperclip_limits
from catalog_core.sources.catalog_configmap import data_fingerprint
from catalog_core.state import CatalogEntry, RouteRecord
from catalog_core.values import ModelType

PREFIX = "AI_APPLIANCE_MODEL_CATALOG_"
_USERINFO = re.compile(r"^(https?://)[^/@\s]*@")


@attrs.frozen
class RenderedCatalog:
    data: tuple[tuple[str, str], ...]
    catalog_hash: str
    fingerprint: str

    def as_dict(self) -> dict[str, str]:
        return dict(self.data)


def _strip_userinfo(url: str | None) -> str | None:
    """Credentials embedded in a URL are secrets too: never publish them."""
    return _USERINFO.sub(r"\1", url) if url else url


def entry_json(entry: CatalogEntry) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": entry.id,
        "name": entry.name,
        "type": entry.model_type.value,
        "provider": "litellm",
        "modelRef": f"litellm/{entry.id}",
        "source": entry.source,
        "managed": entry.managed,
        "litellm": {"model": entry.litellm_model, "apiBase": _strip_userinfo(entry.api_base)},
        "routes": [{"order": r.order, "locality": r.locality, "owner": r.owner} for r in entry.routes],
    }
    if entry.context_window is not None:
        out["contextWindow"] = entry.context_window
    if entry.max_output_tokens is not None:
        out["maxOutputTokens"] = entry.max_output_tokens
    if entry.aliases:
        out["aliases"] = list(entry.aliases)
    return out


def pick_default(wanted: str, ids: list[str]) -> str:
    """The configured id if it exists among models of that type; else the first in sorted order; else ''."""
    if wanted in ids:
        return wanted
    return ids[0] if ids else ""


def render_catalog(
    entries: Iterable[CatalogEntry], records: Iterable[RouteRecord], config: CatalogConfig
) -> RenderedCatalog:
    ordered = sorted(entries, key=lambda e: (e.model_type.value, e.id))
    models = [entry_json(e) for e in ordered]
    chat = [e for e in ordered if e.model_type is ModelType.CHAT]
    embedding = [e for e in ordered if e.model_type is ModelType.EMBEDDING]
    chat_json = [m for m, e in zip(models, ordered, strict=True) if e.model_type is ModelType.CHAT]
    embedding_json = [m for m, e in zip(models, ordered, strict=True) if e.model_type is ModelType.EMBEDDING]
    default_chat = pick_default(config.default_chat_model, [e.id for e in chat])
    default_embedding = pick_default(config.default_embedding_model, [e.id for e in embedding])
    default_entry = next((e for e in chat if e.id == default_chat), None)
    compaction = openclaw_compaction(default_entry.context_window if default_entry else None)
    catalog_hash = short_hash(
        canonical(
            {
                "models": models,
                "defaultChatModel": default_chat,
                "defaultEmbeddingModel": default_embedding,
                "opencodeDefaultContextTokens": config.opencode_default_context_tokens,
                "opencodeDefaultOutputTokens": config.opencode_default_output_tokens,
                "paperclipOpenCodeMaxOutputTokens": config.paperclip_max_output_tokens,
                "paperclipOpenCodeContextHeadroomTokens": config.paperclip_headroom_tokens,
                "openclawCompaction": compaction,
                "openclawToolsProfile": config.openclaw_tools_profile,
            }
        )
    )
    opencode_model = f"litellm/{default_chat}" if default_chat else ""
    base = config.litellm_api_base

    def provider(limits: Any) -> dict[str, Any]:
        return {
            "litellm": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "LiteLLM",
                "options": {"baseURL": base, "apiKey": "{env:OPENAI_API_KEY}"},
                "models": {
                    e.id: {
                        "name": e.name,
                        "limit": dict(
                            zip(
                                ("context", "output"),
                                limits(e.context_window, e.max_output_tokens, config),
                                strict=True,
                            )
                        ),
                    }
                    for e in chat
                },
            }
        }

    hermes_models: dict[str, Any] = {}
    for e in chat:
        hermes_models[e.id] = {"name": e.name} | (
            {"context_length": e.context_window} if e.context_window else {}
        )
    data = {
        "catalog.json": pretty(
            {
                "hash": catalog_hash,
                "models": models,
                "defaultChatModel": default_chat,
                "defaultEmbeddingModel": default_embedding,
            }
        ),
        "chat-models.json": pretty({"models": chat_json, "defaultModel": default_chat}),
        "embedding-models.json": pretty({"models": embedding_json, "defaultModel": default_embedding}),
        "defaults.env": "".join(
            f"{PREFIX}{k}={v}\n"
            for k, v in (
                ("READY", "true"),
                ("HASH", catalog_hash),
                ("DEFAULT_CHAT_MODEL", default_chat),
                ("DEFAULT_OPENCODE_MODEL", opencode_model),
                ("DEFAULT_EMBEDDING_MODEL", default_embedding),
                ("MODEL_COUNT", len(ordered)),
                ("CHAT_MODEL_COUNT", len(chat)),
                ("EMBEDDING_MODEL_COUNT", len(embedding)),
            )
        ),
        "openclaw.json": pretty(
            {
                "models": {
                    "providers": {
                        "litellm": {
                            "baseUrl": base,
                            "apiKey": "${LITELLM_API_KEY}",
                            "api": "openai-completions",
                            "models": [
                                {"id": e.id, "name": e.name}
                                | ({"contextWindow": e.context_window} if e.context_window else {})
                                for e in chat
                            ],
                        }
                    }
                },
                "agents": {"defaults": {"compaction": compaction, "model": {"primary": opencode_model}}},
                "tools": {"profile": config.openclaw_tools_profile},
            }
        ),
        "hermes.yaml": pretty(
            {
                "model": {
                    "default": default_chat,
                    "provider": "litellm",
                    "base_url": base,
                    "api_mode": "chat_completions",
                },
                "providers": {
                    "litellm": {
                        "name": "LiteLLM",
                        "base_url": base,
                        "key_env": "OPENAI_API_KEY",
                        "api_mode": "chat_completions",
                        "default_model": default_chat,
                        "discover_models": False,
                        "models": hermes_models,
                    }
                },
            }
        ),
        "opencode-providers.json": pretty(provider(opencode_limits)),
        "paperclip-opencode-providers.json": pretty(provider(paperclip_limits)),
        "paperclip-adapter-models.json": pretty(
            {"opencode_local": [{"id": f"litellm/{e.id}", "label": e.name} for e in chat]}
        ),
        "routes.json": pretty([r.as_json() for r in sorted(records, key=lambda r: (r.source, r.name))]),
        f"{PREFIX}READY": "true",
        f"{PREFIX}HASH": catalog_hash,
        f"{PREFIX}DEFAULT_CHAT_MODEL": default_chat,
        f"{PREFIX}DEFAULT_OPENCODE_MODEL": opencode_model,
        f"{PREFIX}DEFAULT_EMBEDDING_MODEL": default_embedding,
    }
    pairs = tuple(sorted(data.items()))
    return RenderedCatalog(pairs, catalog_hash, data_fingerprint(dict(pairs)))


def bootstrap_data() -> dict[str, str]:
    """The placeholder shipped in deploy/ so consumers can start before the first catalog (A.5)."""
    return {
        f"{PREFIX}READY": "false",
        f"{PREFIX}HASH": "bootstrap",
        "defaults.env": f"{PREFIX}READY=false\n{PREFIX}HASH=bootstrap\n",
    }
