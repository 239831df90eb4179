"""AgentTemplate content (contracts A.6, C.7): replace exactly provider.litellm.models, keep chosen models."""

from __future__ import annotations

from typing import Any

from catalog_core.config import CatalogConfig
from catalog_core.rules.limits import opencode_limits
from catalog_core.rules.render import pick_default
from catalog_core.sources.agent_template import AgentTemplateInfo
from catalog_core.state import CatalogEntry
from catalog_core.values import ModelType


def desired_models(chat: list[CatalogEntry], config: CatalogConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for e in chat:
        context, output = opencode_limits(e.context_window, e.max_output_tokens, config)
        out[e.id] = {"name": e.name, "limit": {"context": context, "output": output}}
    return out


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
    template: AgentTemplateInfo, entries: list[CatalogEntry], config: CatalogConfig
) -> dict[str, Any] | None:
    """The merge patch for one template, or None when it already matches (or must be left alone)."""
    chat = sorted((e for e in entries if e.model_type is ModelType.CHAT), key=lambda e: e.id)
    if not chat or template.shape_problem is not None:
        return None  # no chat model: skip (A.6); an unexpected shape is reported, not overwritten
    models = desired_models(chat, config)
    current = template.models.value() if template.models is not None else None
    config_patch: dict[str, Any] = {}
    if current != models:
        config_patch["provider"] = {"litellm": {"models": merge_diff(current, models) if current else models}}
    refs = {f"litellm/{e.id}" for e in chat}
    default = f"litellm/{pick_default(config.default_chat_model, [e.id for e in chat])}"
    for field, value in (("model", template.model), ("small_model", template.small_model)):
        if value not in refs:
            config_patch[field] = default
    if not config_patch:
        return None
    return {"metadata": {"resourceVersion": template.resource_version}, "spec": {"config": config_patch}}


def applied_content(entries: list[CatalogEntry], config: CatalogConfig) -> dict[str, Any]:
    """What every target template ends up with (for render's ``agentTemplate`` output)."""
    chat = sorted((e for e in entries if e.model_type is ModelType.CHAT), key=lambda e: e.id)
    if not chat:
        return {}
    default = f"litellm/{pick_default(config.default_chat_model, [e.id for e in chat])}"
    return {
        "spec": {
            "config": {
                "provider": {"litellm": {"models": desired_models(chat, config)}},
                "model": default,
                "small_model": default,
            }
        }
    }
