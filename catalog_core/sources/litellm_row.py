"""Rows of LiteLLM's ``GET /model/info`` — ownership (behaviour §3) and Mesh metadata (behaviour §6).

Rows are reduced to a whitelist before they enter the core: credentials in
``litellm_params`` of rows we do not own (cloud keys, tokens) never get in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.external_fields import FIXED_PARAMS, READ_BACK_PARAMS
from catalog_core.jsonval import Json
from catalog_core.urls import published_url
from catalog_core.values import (
    ID_PREFIX,
    MESH_OWNER,
    OWNER,
    TRUSTED_OWNERS,
    ModelType,
    features_type,
    logical_name,
    positive_int,
    text_problem,
)

# What is compared with the route on every read: the parameters the controller sets and the declared
# optional fields LiteLLM returns (external_fields.FIELDS).
PARAM_KEYS = (*FIXED_PARAMS, *READ_BACK_PARAMS)
# Where a row of ours records the optional keys it set (LiteLLM fills others in; see observed_row).
SET_KEYS_KEY = "ai_appliance_set_keys"
# The limits LiteLLM fills into a row that does not set them, and the prices that show its own model map
# knows the row's model.
FILLED_LIMITS = ("max_input_tokens", "max_output_tokens")
PRICE_KEYS = ("input_cost_per_token", "output_cost_per_token")
# Where a row states its limits, first positive wins (behaviour §5.2). LiteLLM fills max_input_tokens and
# max_output_tokens from its own model map, so a known model has limits even when no source gave any.
# Never max_tokens (behaviour §11): LiteLLM uses it for the output limit of some models.
CONTEXT_KEYS = ("max_input_tokens", "contextWindow", "context_window", "context_length", "max_context_length")
OUTPUT_KEYS = ("max_output_tokens", "maxOutputTokens", "max_completion_tokens")
INFO_KEYS = ("id", "source", "features", "mode", "team_public_model_name", *CONTEXT_KEYS, *OUTPUT_KEYS)
_INFO_KEYS = frozenset(INFO_KEYS)
_MODE_TYPES = {
    "embedding": ModelType.EMBEDDING,
    "rerank": ModelType.RERANK,
    "audio_transcription": ModelType.AUDIO,
    "chat": ModelType.CHAT,
    "completion": ModelType.CHAT,
    "responses": ModelType.CHAT,
}


def whitelist_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a /model/info row the core may see."""
    params = raw.mapping(row, "litellm_params")
    info = raw.mapping(row, "model_info")
    kept = {k: params[k] for k in PARAM_KEYS if params.get(k) is not None}
    api_base = kept.get("api_base")
    if isinstance(api_base, str) and not _owned(info):
        # only published: its user:password@ and query are credentials of a row we do not own
        kept.pop("api_base")
        if (published := published_url(api_base)) is not None:
            kept["api_base"] = published
    return {
        "model_name": row.get("model_name"),
        "litellm_params": kept,
        "model_info": {
            k: v
            for k, v in info.items()
            if v is not None and (k in _INFO_KEYS or (isinstance(k, str) and k.startswith("ai_appliance_")))
        },
    }


def observed_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """What the observer sends for one /model/info row (behaviour §5.2): ``whitelist_row``, less, on a row
    of ours, a limit LiteLLM filled in for a model it has no price for.

    LiteLLM fills the limits a row does not set from its model map under the row's
    ``litellm_params.model``: the built-in entries (a price list: a model it knows has a price), and the
    limits other rows of that model registered there (1.108.7 for every row it adds, 1.84.0 for the rows
    it starts with; deleted rows' stay). For a model it has no price for, such a limit is another row's,
    not this one's: the published figure of a model of ours is then the source's, or none, whichever
    release runs. A legacy row (no set-keys record) is kept as it is."""
    clean = whitelist_row(row)
    info = raw.mapping(row, "model_info")
    set_keys = info.get(SET_KEYS_KEY)
    if not _owned(info) or not isinstance(set_keys, list) or _priced(info):
        return clean
    kept = clean["model_info"]
    for key in FILLED_LIMITS:
        if key in kept and f"model_info.{key}" not in set_keys:
            del kept[key]
    return clean


def _priced(info: Mapping[str, Any]) -> bool:
    """LiteLLM reports a price for the row's model: its own model map knows it (a limit another row
    registered brings no price: LiteLLM leaves prices out of what rows register for a shared model)."""
    for key in PRICE_KEYS:
        value = info.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return True
    return False


def _owned(info: Mapping[str, Any]) -> bool:
    """``LiteLLMRow.ours`` on a raw model_info: our rows are compared with what we wrote, so kept whole."""
    owner, row_id = info.get("ai_appliance_owner"), info.get("id")
    owner = owner if isinstance(owner, str) and owner else None
    managed = info.get("ai_appliance_managed") is True
    return owner == OWNER or (
        owner is None and managed and isinstance(row_id, str) and row_id.startswith(ID_PREFIX)
    )


@attrs.frozen
class LiteLLMRow:
    id: str
    model_name: str
    litellm_params: Json
    model_info: Json
    owner: str | None
    managed: bool
    order: int | None
    logical_name: str
    export_only: bool
    model_type: ModelType
    locality: str
    litellm_model: str
    api_base: str | None
    context_window: int | None
    max_output_tokens: int | None
    display_name: str | None
    source: str

    @property
    def ours(self) -> bool:
        """Owned by the catalog, or a legacy row of ours (managed, no owner, our id family)."""
        return self.owner == OWNER or (self.owner is None and self.managed and self.id.startswith(ID_PREFIX))

    @classmethod
    def from_info(cls, row: Mapping[str, Any]) -> LiteLLMRow | None:
        return cls.from_clean(whitelist_row(row))

    @classmethod
    def from_clean(
        cls, clean: Mapping[str, Any], params_json: Json | None = None, info_json: Json | None = None
    ) -> LiteLLMRow | None:
        """From a whitelisted row (``whitelist_row``); its params and info as ``Json`` when already made."""
        params, info = clean["litellm_params"], clean["model_info"]
        row_id = info.get("id")
        name = clean["model_name"]
        if not isinstance(row_id, str) or not row_id or not isinstance(name, str) or not name:
            return None
        owner = info.get("ai_appliance_owner")
        owner = owner if isinstance(owner, str) and owner else None
        trusted = owner in TRUSTED_OWNERS
        logical = info.get("ai_appliance_logical_name")
        logical = logical if trusted and isinstance(logical, str) and logical.strip() else logical_name(name)
        order = params.get("order")
        scheduler = info.get("ai_appliance_scheduler")
        locality = raw.string(scheduler, "locality") if trusted else None
        if locality is None:
            locality = "mesh" if owner == MESH_OWNER else "external"
        source = _text(info.get("source")) or _text(info.get("ai_appliance_source")) or "litellm"
        display = info.get("team_public_model_name")
        model = params.get("model")
        api_base = params.get("api_base")
        try:
            params_json = params_json if params_json is not None else Json.of(params)
            info_json = info_json if info_json is not None else Json.of(info)
        except (TypeError, ValueError):
            return None  # not JSON (a host's value: keys that are not strings, an integer str() refuses)
        return cls(
            id=row_id,
            model_name=name,
            litellm_params=params_json,
            model_info=info_json,
            owner=owner,
            managed=info.get("ai_appliance_managed") is True,
            order=order if isinstance(order, int) and not isinstance(order, bool) else None,
            logical_name=logical.strip(),
            export_only=name.startswith("share/") or info.get("ai_appliance_export_only") is True,
            model_type=_row_type(info, name),
            locality=locality,
            litellm_model=model if isinstance(model, str) else name,
            api_base=api_base if isinstance(api_base, str) else None,
            context_window=_first_limit(info, CONTEXT_KEYS),
            max_output_tokens=_first_limit(info, OUTPUT_KEYS),
            # (not one that is not valid text: a lone surrogate would make hermes.yaml unreadable)
            display_name=display
            if isinstance(display, str) and display.strip() and not text_problem(display)
            else None,
            source=str(source),
        )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _first_limit(info: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        parsed = positive_int(info.get(key), key)
        if isinstance(parsed, int):
            return parsed
    return None


def _row_type(info: Mapping[str, Any], name: str) -> ModelType:
    """behaviour §5.2: the declared type, else the features (behaviour §1.1 mapping), else an embedding
    name, else
    LiteLLM's mode, else chat."""
    declared = info.get("ai_appliance_type")
    if isinstance(declared, str):
        try:
            return ModelType(declared.strip().lower())
        except ValueError:
            pass
    features = info.get("features")
    if isinstance(features, list):
        from_features = features_type(tuple(f for f in features if isinstance(f, str)))
        if from_features is not None:
            return from_features
    if "embedding" in name.lower():
        return ModelType.EMBEDDING
    mode = info.get("mode")
    if isinstance(mode, str) and mode in _MODE_TYPES:
        return _MODE_TYPES[mode]
    return ModelType.CHAT
