"""The data keys of the generated ``ConfigMap/ai-model-catalog``: one declaration each (behaviour §5.1, §7).

A ``CatalogFile`` says everything about one key: its name (literal: apps read it by name), which published
models it lists and the fragment each one contributes, the document around them, its text format and the
labels of the pods that read it (they are consumers, rolled when the catalog changes: behaviour §9).
``FILES`` lists them; nothing else declares a key (``contracts/eventlog.py`` keeps the keys runs rendered
before headers recorded them: a fact about those runs). The renderer (``rules/render.py``) keeps one run
of fragments per listing file up to date, takes the data's size bound over those runs, and renders the
declared files of ``CatalogConfig.catalog_keys`` (every one in a running controller; a replay, those its
log's header records), the bootstrap placeholder included (its value is the file's document with no
model, READY ``false`` and the hash ``bootstrap``); ``sources/consumers.py`` reads the consumers' labels.
``tests/core/test_catalog_files.py`` holds every declaration to what it says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, Protocol

import attrs

from catalog_core.rules.limits import RenderSettings, opencode_limits, paperclip_limits
from catalog_core.sources.catalog_configmap import DEFAULT_CHAT_KEY, DEFAULT_EMBEDDING_KEY, READY_KEY
from catalog_core.urls import published_url
from catalog_core.values import ModelType

# Scalar keys only READY and HASH carry MODEL_CATALOG_ (behaviour §5.1). READY and the default models' keys
# are read back from the written catalog, so they are declared with it (sources/catalog_configmap.py).
HASH_KEY = "AI_APPLIANCE_MODEL_CATALOG_HASH"
DEFAULT_OPENCODE_KEY = "AI_APPLIANCE_DEFAULT_OPENCODE_MODEL"
MODEL_COUNT_KEY = "AI_APPLIANCE_MODEL_COUNT"
CHAT_COUNT_KEY = "AI_APPLIANCE_CHAT_MODEL_COUNT"
EMBEDDING_COUNT_KEY = "AI_APPLIANCE_EMBEDDING_MODEL_COUNT"


class RouteLike(Protocol):
    """One route of a published model, as catalog.json shows it."""

    @property
    def order(self) -> int | None: ...

    @property
    def locality(self) -> str: ...

    @property
    def owner(self) -> str: ...


class PublishedModel(Protocol):
    """What a file may read of a published model (``state.CatalogEntry`` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def model_type(self) -> ModelType: ...

    @property
    def source(self) -> str: ...

    @property
    def managed(self) -> bool: ...

    @property
    def litellm_model(self) -> str: ...

    @property
    def api_base(self) -> str | None: ...

    @property
    def context_window(self) -> int | None: ...

    @property
    def max_output_tokens(self) -> int | None: ...

    @property
    def routes(self) -> tuple[RouteLike, ...]: ...

    @property
    def aliases(self) -> tuple[str, ...]: ...


class Format(Enum):
    JSON = "json"  # indent 2, sorted keys, trailing newline (behaviour §5.1)
    # The same JSON text, read as YAML: a character beyond the BMP is written as itself, not as a surrogate
    # pair (PyYAML reads a pair as two lone surrogates, libyaml refuses it). The size bound leaves it out.
    YAML = "yaml"
    TEXT = "text"  # the document is the text itself


EVERY_TYPE: frozenset[ModelType] = frozenset(ModelType)
CHAT: frozenset[ModelType] = frozenset({ModelType.CHAT})
EMBEDDING: frozenset[ModelType] = frozenset({ModelType.EMBEDDING})


@attrs.frozen
class Models:
    """A file lists the published models of ``types``: one fragment each, in an array (or, ``keyed``, an
    object keyed by the model's id), sorted by id (by type, then id, when it lists more than one type).

    ``fragment`` is called once per model object and configuration, and its text reused by every render
    and by every file that declares the same function. ``hashed``: the catalog hash is taken over these
    members (exactly one file, over every type: catalog.json; behaviour §5.1), and the default models
    are picked among them."""

    types: frozenset[ModelType]
    fragment: Callable[[PublishedModel, RenderSettings], Any]
    keyed: bool
    hashed: bool = False


class RouteRecords(Enum):
    """A file lists the routes.json record of every source item (behaviour §7), by (source, name)."""

    ALL = "all"


ROUTE_RECORDS = RouteRecords.ALL


class Published:
    """What a document may say besides its own members: the defaults, the hash, the counts."""

    __slots__ = (
        "catalog_hash",
        "compaction",
        "config",
        "counts",
        "default_chat",
        "default_embedding",
        "default_opencode",
        "ready",
    )

    def __init__(
        self,
        config: RenderSettings,
        *,
        ready: bool,
        catalog_hash: str,
        default_chat: str,
        default_embedding: str,
        compaction: Any,
        counts: Mapping[ModelType, int],
    ) -> None:
        self.config = config
        self.ready = "true" if ready else "false"
        self.catalog_hash = catalog_hash
        self.default_chat = default_chat
        self.default_embedding = default_embedding
        self.default_opencode = f"litellm/{default_chat}" if default_chat else ""  # OpenCode's model ref
        self.compaction = compaction  # OpenClaw's, from the default chat model's context window
        self.counts = counts  # published models by type

    @property
    def base_url(self) -> str:
        return self.config.litellm_api_base


Labels = tuple[tuple[str, str], ...]


def labels(pairs: Mapping[str, str]) -> Labels:
    """The labels that make a pod one app's: it has every one of them."""
    return tuple(sorted(pairs.items()))


# The apps of behaviour §9 that read the catalog at start, by the labels their manifests give their pods.
ANYTHING_LLM = labels({"app": "anything-llm"})
HERMES = labels({"app.kubernetes.io/instance": "hermes", "app.kubernetes.io/name": "hermes-agent"})
OPENCLAW = labels({"app.kubernetes.io/instance": "openclaw", "app.kubernetes.io/name": "openclaw"})
PAPERCLIP = labels({"app.kubernetes.io/instance": "paperclip", "app.kubernetes.io/component": "server"})
# Read by tools that mount the whole ConfigMap or by pods that carry the consumer mark
# (ai-appliance.io/model-catalog-consumer): no app of their own to recognise.
MARKED_ONLY: tuple[Labels, ...] = ()


@attrs.frozen
class CatalogFile:
    """One data key of the catalog (see the module's docstring). ``members`` is None for a file that
    lists nothing; ``document(members, published)`` is its content (with the members' run where they go),
    a string for ``Format.TEXT``; ``consumers``: the labels of the apps whose pods read it."""

    key: str
    members: Models | RouteRecords | None
    document: Callable[[Any, Published], Any]
    format: Format
    consumers: tuple[Labels, ...]


def entry_json(e: PublishedModel, _: RenderSettings) -> dict[str, Any]:
    """A catalog entry (behaviour §5.1, §6)."""
    out: dict[str, Any] = {
        "id": e.id,
        "name": e.name,
        "type": e.model_type.value,
        "provider": "litellm",
        "modelRef": f"litellm/{e.id}",
        "source": e.source,
        "managed": e.managed,
        # LiteLLM's row keeps the URL as given (the provider may need it); apps never see its credentials
        "litellm": {"model": e.litellm_model, "apiBase": published_url(e.api_base)},
        "routes": [{"order": r.order, "locality": r.locality, "owner": r.owner} for r in e.routes],
    }
    if e.context_window is not None:
        out["contextWindow"] = e.context_window
    if e.max_output_tokens is not None:
        out["maxOutputTokens"] = e.max_output_tokens
    if e.aliases:
        out["aliases"] = list(e.aliases)
    return out


def _opencode_model(e: PublishedModel, config: RenderSettings) -> dict[str, Any]:
    context, output = opencode_limits(e.context_window, e.max_output_tokens, config)
    return {"name": e.name, "limit": {"context": context, "output": output}}


def _paperclip_model(e: PublishedModel, config: RenderSettings) -> dict[str, Any]:
    context, output = paperclip_limits(e.context_window, e.max_output_tokens, config)
    return {"name": e.name, "limit": {"context": context, "output": output}}


def _openclaw_model(e: PublishedModel, _: RenderSettings) -> dict[str, Any]:
    return {"id": e.id, "name": e.name} | ({"contextWindow": e.context_window} if e.context_window else {})


def _hermes_model(e: PublishedModel, _: RenderSettings) -> dict[str, Any]:
    return {"name": e.name} | ({"context_length": e.context_window} if e.context_window else {})


def _adapter_model(e: PublishedModel, _: RenderSettings) -> dict[str, Any]:
    return {"id": f"litellm/{e.id}", "label": e.name}


def _litellm_provider(models: Any, p: Published) -> dict[str, Any]:
    """OpenCode's provider block (and Paperclip's, with its own limits)."""
    return {
        "litellm": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "LiteLLM",
            "options": {"baseURL": p.base_url, "apiKey": "{env:OPENAI_API_KEY}"},
            "models": models,
        }
    }


def _openclaw(models: Any, p: Published) -> dict[str, Any]:
    return {
        "models": {
            "providers": {
                "litellm": {
                    "baseUrl": p.base_url,
                    "apiKey": "${LITELLM_API_KEY}",
                    "api": "openai-completions",
                    "models": models,
                }
            }
        },
        "agents": {"defaults": {"compaction": p.compaction, "model": {"primary": p.default_opencode}}},
        "tools": {"profile": p.config.openclaw_tools_profile},
    }


def _hermes(models: Any, p: Published) -> dict[str, Any]:
    return {
        "model": {
            "default": p.default_chat,
            "provider": "litellm",
            "base_url": p.base_url,
            "api_mode": "chat_completions",
        },
        "providers": {
            "litellm": {
                "name": "LiteLLM",
                "base_url": p.base_url,
                "key_env": "OPENAI_API_KEY",
                "api_mode": "chat_completions",
                "default_model": p.default_chat,
                "discover_models": False,
                "models": models,
            }
        },
    }


def _defaults_env(_: None, p: Published) -> str:
    """Exactly these lines, in this order, then a trailing newline (behaviour §5.1)."""
    lines = (
        (READY_KEY, p.ready),
        (HASH_KEY, p.catalog_hash),
        (DEFAULT_CHAT_KEY, p.default_chat),
        (DEFAULT_OPENCODE_KEY, p.default_opencode),
        (DEFAULT_EMBEDDING_KEY, p.default_embedding),
        (MODEL_COUNT_KEY, sum(p.counts.values())),
        (CHAT_COUNT_KEY, p.counts[ModelType.CHAT]),
        (EMBEDDING_COUNT_KEY, p.counts[ModelType.EMBEDDING]),
    )
    return "".join(f"{k}={v}\n" for k, v in lines)


CATALOG_JSON = CatalogFile(
    "catalog.json",
    members=Models(EVERY_TYPE, entry_json, keyed=False, hashed=True),
    document=lambda models, p: {
        "hash": p.catalog_hash,
        "models": models,
        "defaultChatModel": p.default_chat,
        "defaultEmbeddingModel": p.default_embedding,
    },
    format=Format.JSON,
    consumers=MARKED_ONLY,
)
CHAT_MODELS_JSON = CatalogFile(
    "chat-models.json",
    members=Models(CHAT, entry_json, keyed=False),
    document=lambda models, p: {"models": models, "defaultModel": p.default_chat},
    format=Format.JSON,
    consumers=MARKED_ONLY,
)
EMBEDDING_MODELS_JSON = CatalogFile(
    "embedding-models.json",
    members=Models(EMBEDDING, entry_json, keyed=False),
    document=lambda models, p: {"models": models, "defaultModel": p.default_embedding},
    format=Format.JSON,
    consumers=MARKED_ONLY,
)
OPENCLAW_JSON = CatalogFile(
    "openclaw.json",
    members=Models(CHAT, _openclaw_model, keyed=False),
    document=_openclaw,
    format=Format.JSON,
    consumers=(OPENCLAW,),
)
HERMES_YAML = CatalogFile(
    "hermes.yaml",
    members=Models(CHAT, _hermes_model, keyed=True),
    document=_hermes,
    format=Format.YAML,
    consumers=(HERMES,),
)
OPENCODE_PROVIDERS_JSON = CatalogFile(
    "opencode-providers.json",
    members=Models(CHAT, _opencode_model, keyed=True),
    document=_litellm_provider,
    format=Format.JSON,
    consumers=MARKED_ONLY,
)
PAPERCLIP_OPENCODE_PROVIDERS_JSON = CatalogFile(
    "paperclip-opencode-providers.json",
    members=Models(CHAT, _paperclip_model, keyed=True),
    document=_litellm_provider,
    format=Format.JSON,
    consumers=(PAPERCLIP,),
)
PAPERCLIP_ADAPTER_MODELS_JSON = CatalogFile(
    "paperclip-adapter-models.json",
    members=Models(CHAT, _adapter_model, keyed=False),
    document=lambda models, _: {"opencode_local": models},
    format=Format.JSON,
    consumers=(PAPERCLIP,),
)
ROUTES_JSON = CatalogFile(
    "routes.json",
    members=ROUTE_RECORDS,
    document=lambda records, _: records,
    format=Format.JSON,
    consumers=MARKED_ONLY,
)
DEFAULTS_ENV = CatalogFile(
    "defaults.env",
    members=None,
    document=_defaults_env,
    format=Format.TEXT,
    consumers=(ANYTHING_LLM,),  # its init container waits for READY=true here
)
READY = CatalogFile(
    READY_KEY, members=None, document=lambda _, p: p.ready, format=Format.TEXT, consumers=MARKED_ONLY
)
HASH = CatalogFile(
    HASH_KEY, members=None, document=lambda _, p: p.catalog_hash, format=Format.TEXT, consumers=MARKED_ONLY
)
DEFAULT_CHAT = CatalogFile(
    DEFAULT_CHAT_KEY,
    members=None,
    document=lambda _, p: p.default_chat,
    format=Format.TEXT,
    consumers=MARKED_ONLY,
)
DEFAULT_OPENCODE = CatalogFile(
    DEFAULT_OPENCODE_KEY,
    members=None,
    document=lambda _, p: p.default_opencode,
    format=Format.TEXT,
    consumers=MARKED_ONLY,
)
DEFAULT_EMBEDDING = CatalogFile(
    DEFAULT_EMBEDDING_KEY,
    members=None,
    document=lambda _, p: p.default_embedding,
    format=Format.TEXT,
    consumers=(ANYTHING_LLM,),  # a configMapKeyRef of AnythingLLM's Deployment
)

FILES: tuple[CatalogFile, ...] = (
    CATALOG_JSON,
    CHAT_MODELS_JSON,
    EMBEDDING_MODELS_JSON,
    OPENCLAW_JSON,
    HERMES_YAML,
    OPENCODE_PROVIDERS_JSON,
    PAPERCLIP_OPENCODE_PROVIDERS_JSON,
    PAPERCLIP_ADAPTER_MODELS_JSON,
    ROUTES_JSON,
    DEFAULTS_ENV,
    READY,
    HASH,
    DEFAULT_CHAT,
    DEFAULT_OPENCODE,
    DEFAULT_EMBEDDING,
)

KEYS: frozenset[str] = frozenset(f.key for f in FILES)
# Every app's labels, once: a pod (or a workload's pod template) with all the labels of one of them is a
# consumer (behaviour §9).
CONSUMER_LABELS: tuple[Labels, ...] = tuple(dict.fromkeys(app for f in FILES for app in f.consumers))


def check(files: tuple[CatalogFile, ...]) -> None:
    """What the renderer relies on: unique keys, one hashed listing over every type, one listing of the
    route records. Raised at import, naming the declaration."""
    keys = [f.key for f in files]
    if len(set(keys)) != len(keys):
        raise ValueError(f"catalog files declared twice: {sorted(k for k in set(keys) if keys.count(k) > 1)}")
    hashed = [f.key for f in files if isinstance(f.members, Models) and f.members.hashed]
    if len(hashed) != 1:
        raise ValueError(f"exactly one catalog file lists the hashed models; declared: {hashed}")
    catalog = next(f for f in files if f.key == hashed[0])
    assert isinstance(catalog.members, Models)
    if catalog.members.types != EVERY_TYPE:
        raise ValueError(f"{catalog.key} lists the hashed models: it must list every type")
    records = [f.key for f in files if f.members is ROUTE_RECORDS]
    if len(records) != 1:
        raise ValueError(f"exactly one catalog file lists the route records; declared: {records}")
    for f in files:
        if isinstance(f.members, Models) and not f.members.types:
            raise ValueError(f"{f.key} lists models of no type")
        if (f.format is Format.TEXT) != (f.members is None):
            raise ValueError(f"{f.key}: a text file lists nothing and a listing is JSON (or YAML)")


check(FILES)
