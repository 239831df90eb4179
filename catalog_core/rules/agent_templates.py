"""AgentTemplate content (behaviour §9, §9.1): replace exactly provider.litellm.models, keep chosen models."""

from __future__ import annotations

from typing import Any

from catalog_core.config import CatalogConfig
from catalog_core.jsonval import Json
from catalog_core.rules.limits import opencode_limits
from catalog_core.rules.render import PerObject, pick_default
from catalog_core.sources.agent_template import AgentTemplateInfo
from catalog_core.state import CatalogEntry
from catalog_core.values import ModelType


def _desired_model(e: CatalogEntry, config: CatalogConfig) -> dict[str, Any]:
    context, output = opencode_limits(e.context_window, e.max_output_tokens, config)
    return {"name": e.name, "limit": {"context": context, "output": output}}


# Performance: a tick that changes one entry re-plans every template against every entry;
# each entry's part and the template's current models (parsed from its JSON) are made once per
# object. Both are only read (the patch is built of new dicts), never changed.
_DESIRED: PerObject[CatalogEntry, dict[str, Any]] = PerObject(_desired_model)
_CURRENT: PerObject[Json, Any] = PerObject(lambda models, _: models.value())


def desired_models(chat: list[CatalogEntry], config: CatalogConfig) -> dict[str, Any]:
    return {e.id: _DESIRED.get(e, config) for e in chat}


def merge_diff(current: Any, desired: Any) -> Any:
    """An RFC 7386 merge patch that turns ``current`` into exactly ``desired`` (removed keys become null)."""
    if not isinstance(current, dict) or not isinstance(desired, dict):
        return desired
    patch: dict[str, Any] = {k: None for k in current if k not in desired}
    for key, value in desired.items():
        if key not in current:
            patch[key] = value
        elif current[key] != value:
            patch[key] = merge_diff(current[key], value)
    return patch


def is_target(template: AgentTemplateInfo, config: CatalogConfig) -> bool:
    return template.name in config.agent_template_names or template.app_instance


def template_patch(
    template: AgentTemplateInfo, entries: list[CatalogEntry], config: CatalogConfig, held: str = ""
) -> dict[str, Any] | None:
    """The merge patch for one template, or None when it already matches (or must be left alone).
    ``held``: the default chat model the written catalog holds (``pick_default``)."""
    chat = sorted((e for e in entries if e.model_type is ModelType.CHAT), key=lambda e: e.id)
    if not chat or template.shape_problem is not None:
        return None  # no chat model: skip (behaviour §9); an unexpected shape is reported, not overwritten
    models = desired_models(chat, config)
    current = _CURRENT.get(template.models, config) if template.models is not None else None
    config_patch: dict[str, Any] = {}
    if current != models:
        config_patch["provider"] = {"litellm": {"models": merge_diff(current, models) if current else models}}
    ids = [e.id for e in chat]
    known = set(ids)
    default = f"litellm/{pick_default(config.default_chat_model, ids, held)}"
    for field, value in (("model", template.model), ("small_model", template.small_model)):
        # ``value in {"litellm/<id>" for each chat entry}``, without formatting every id each tick
        if not (isinstance(value, str) and value.startswith("litellm/") and value[8:] in known):
            config_patch[field] = default
    if not config_patch:
        return None
    return {"metadata": {"resourceVersion": template.resource_version}, "spec": {"config": config_patch}}


def applied_content(entries: list[CatalogEntry], config: CatalogConfig, held: str = "") -> dict[str, Any]:
    """What every target template ends up with (for render's ``agentTemplate`` output)."""
    chat = sorted((e for e in entries if e.model_type is ModelType.CHAT), key=lambda e: e.id)
    if not chat:
        return {}
    default = f"litellm/{pick_default(config.default_chat_model, [e.id for e in chat], held)}"
    return {
        "spec": {
            "config": {
                "provider": {"litellm": {"models": desired_models(chat, config)}},
                "model": default,
                "small_model": default,
            }
        }
    }
