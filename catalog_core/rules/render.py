"""The generated ConfigMap/ai-model-catalog: the keys apps read (behaviour §5.1) plus routes.json
(behaviour §7)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import attrs

from catalog_core.config import CatalogConfig
from catalog_core.jsonval import Fragment, canonical_join, pretty, short_hash
from catalog_core.rules.limits import openclaw_compaction, opencode_limits, paperclip_limits
from catalog_core.sources.catalog_configmap import data_fingerprint
from catalog_core.state import CatalogEntry, RouteRecord
from catalog_core.urls import published_url
from catalog_core.values import ModelType

# Key names are literal (behaviour §5.1): consumers read them by name, e.g. AnythingLLM's Deployment has a
# configMapKeyRef to AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL. Only READY and HASH carry MODEL_CATALOG_.
READY_KEY = "AI_APPLIANCE_MODEL_CATALOG_READY"
HASH_KEY = "AI_APPLIANCE_MODEL_CATALOG_HASH"
DEFAULT_CHAT_KEY = "AI_APPLIANCE_DEFAULT_CHAT_MODEL"
DEFAULT_OPENCODE_KEY = "AI_APPLIANCE_DEFAULT_OPENCODE_MODEL"
DEFAULT_EMBEDDING_KEY = "AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL"
MODEL_COUNT_KEY = "AI_APPLIANCE_MODEL_COUNT"
CHAT_COUNT_KEY = "AI_APPLIANCE_CHAT_MODEL_COUNT"
EMBEDDING_COUNT_KEY = "AI_APPLIANCE_EMBEDDING_MODEL_COUNT"
BOOTSTRAP_HASH = "bootstrap"


@attrs.frozen
class RenderedCatalog:
    data: tuple[tuple[str, str], ...]
    catalog_hash: str
    fingerprint: str

    def as_dict(self) -> dict[str, str]:
        return dict(self.data)


def entry_json(entry: CatalogEntry) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": entry.id,
        "name": entry.name,
        "type": entry.model_type.value,
        "provider": "litellm",
        "modelRef": f"litellm/{entry.id}",
        "source": entry.source,
        "managed": entry.managed,
        # LiteLLM's row keeps the URL as given (the provider may need it); apps never see its credentials
        "litellm": {"model": entry.litellm_model, "apiBase": published_url(entry.api_base)},
        "routes": [{"order": r.order, "locality": r.locality, "owner": r.owner} for r in entry.routes],
    }
    if entry.context_window is not None:
        out["contextWindow"] = entry.context_window
    if entry.max_output_tokens is not None:
        out["maxOutputTokens"] = entry.max_output_tokens
    if entry.aliases:
        out["aliases"] = list(entry.aliases)
    return out


T = TypeVar("T")
P = TypeVar("P")


class PerObject(Generic[T, P]):
    """Memo of what is derived from one frozen value (an entry, a record) under one configuration.

    Performance (issue 7): a render used to encode every model again, ~1 s at 10,000 models with
    ``json.dumps(indent=2)``; now each entry's parts are rendered once, when the entry object first
    appears, and every later render splices their text. Keyed by identity (the state keeps an unchanged
    entry as the same object), dropped when the object is; so it holds what the live state holds and
    never changes a result.
    """

    def __init__(self, build: Callable[[T, CatalogConfig], P]) -> None:
        self._build = build
        self._slots: dict[int, tuple[weakref.ref[Any], CatalogConfig, P]] = {}

    def get(self, obj: T, config: CatalogConfig) -> P:
        key = id(obj)
        hit = self._slots.get(key)
        if hit is not None and hit[0]() is obj and hit[1] is config:
            return hit[2]
        value = self._build(obj, config)
        slots = self._slots

        def drop(ref: weakref.ref[Any], key: int = key) -> None:
            current = slots.get(key)
            if current is not None and current[0] is ref:
                del slots[key]

        slots[key] = (weakref.ref(obj, drop), config, value)
        return value


class _EntryParts:
    """One entry's pieces of every file it appears in, rendered once."""

    __slots__ = ("adapter", "hermes", "model", "openclaw", "opencode", "paperclip")

    def __init__(self, e: CatalogEntry, config: CatalogConfig) -> None:
        self.model = Fragment(entry_json(e), hashed=True)
        if e.model_type is not ModelType.CHAT:
            return
        ctx = {"contextWindow": e.context_window} if e.context_window else {}
        self.openclaw = Fragment({"id": e.id, "name": e.name} | ctx)
        self.hermes = Fragment(
            {"name": e.name} | ({"context_length": e.context_window} if e.context_window else {})
        )
        self.opencode = Fragment(_provider_model(e, opencode_limits, config))
        self.paperclip = Fragment(_provider_model(e, paperclip_limits, config))
        self.adapter = Fragment({"id": f"litellm/{e.id}", "label": e.name})


def _provider_model(e: CatalogEntry, limits: Any, config: CatalogConfig) -> dict[str, Any]:
    return {
        "name": e.name,
        "limit": dict(
            zip(("context", "output"), limits(e.context_window, e.max_output_tokens, config), strict=True)
        ),
    }


_ENTRY_PARTS: PerObject[CatalogEntry, _EntryParts] = PerObject(_EntryParts)
_RECORD_JSON: PerObject[RouteRecord, Fragment] = PerObject(lambda r, _: Fragment(r.as_json()))


def pick_default(wanted: str, ids: list[str]) -> str:
    """The configured id if it exists among models of that type; else the first in sorted order; else ''."""
    if wanted in ids:
        return wanted
    return ids[0] if ids else ""


def render_catalog(
    entries: Iterable[CatalogEntry],
    records: Iterable[RouteRecord],
    config: CatalogConfig,
    *,
    placeholder: bool = False,
) -> RenderedCatalog:
    """Every data key of behaviour §5.1 plus routes.json. ``placeholder``: the bootstrap form (READY false,
    hash ``bootstrap``) that deploy/ ships so consumers can start before the first catalog
    (behaviour §5.2)."""
    ordered = sorted(entries, key=lambda e: (e.model_type.value, e.id))
    parts = [_ENTRY_PARTS.get(e, config) for e in ordered]
    models = [p.model for p in parts]
    chat = [e for e in ordered if e.model_type is ModelType.CHAT]
    chat_parts = [p for p, e in zip(parts, ordered, strict=True) if e.model_type is ModelType.CHAT]
    embedding = [e for e in ordered if e.model_type is ModelType.EMBEDDING]
    chat_json = [p.model for p in chat_parts]
    embedding_json = [
        p.model for p, e in zip(parts, ordered, strict=True) if e.model_type is ModelType.EMBEDDING
    ]
    default_chat = pick_default(config.default_chat_model, [e.id for e in chat])
    default_embedding = pick_default(config.default_embedding_model, [e.id for e in embedding])
    default_entry = next((e for e in chat if e.id == default_chat), None)
    compaction = openclaw_compaction(default_entry.context_window if default_entry else None)
    catalog_hash = (
        BOOTSTRAP_HASH
        if placeholder
        else short_hash(
            canonical_join(
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
    )
    ready = "false" if placeholder else "true"
    opencode_model = f"litellm/{default_chat}" if default_chat else ""
    base = config.litellm_api_base

    def provider(models: dict[str, Fragment]) -> dict[str, Any]:
        return {
            "litellm": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "LiteLLM",
                "options": {"baseURL": base, "apiKey": "{env:OPENAI_API_KEY}"},
                "models": models,
            }
        }

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
            f"{k}={v}\n"
            for k, v in (
                (READY_KEY, ready),
                (HASH_KEY, catalog_hash),
                (DEFAULT_CHAT_KEY, default_chat),
                (DEFAULT_OPENCODE_KEY, opencode_model),
                (DEFAULT_EMBEDDING_KEY, default_embedding),
                (MODEL_COUNT_KEY, len(ordered)),
                (CHAT_COUNT_KEY, len(chat)),
                (EMBEDDING_COUNT_KEY, len(embedding)),
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
                            "models": [p.openclaw for p in chat_parts],
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
                        "models": {e.id: p.hermes for e, p in zip(chat, chat_parts, strict=True)},
                    }
                },
            }
        ),
        "opencode-providers.json": pretty(
            provider({e.id: p.opencode for e, p in zip(chat, chat_parts, strict=True)})
        ),
        "paperclip-opencode-providers.json": pretty(
            provider({e.id: p.paperclip for e, p in zip(chat, chat_parts, strict=True)})
        ),
        "paperclip-adapter-models.json": pretty({"opencode_local": [p.adapter for p in chat_parts]}),
        "routes.json": pretty(
            [_RECORD_JSON.get(r, config) for r in sorted(records, key=lambda r: (r.source, r.name))]
        ),
        READY_KEY: ready,
        HASH_KEY: catalog_hash,
        DEFAULT_CHAT_KEY: default_chat,
        DEFAULT_OPENCODE_KEY: opencode_model,
        DEFAULT_EMBEDDING_KEY: default_embedding,
    }
    pairs = tuple(sorted(data.items()))
    return RenderedCatalog(pairs, catalog_hash, data_fingerprint(dict(pairs)))


def bootstrap_data(config: CatalogConfig) -> dict[str, str]:
    """The placeholder shipped in deploy/ (behaviour §5.2): every data key with today's empty values, so
    every consumer can start (and mount the keys it reads) before the first catalog is written."""
    return render_catalog((), (), config, placeholder=True).as_dict()
