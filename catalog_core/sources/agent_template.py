"""KubeOpenCode ``AgentTemplate`` (kubeopencode.io/v1alpha1) — behaviour §9, §9.1."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.jsonval import Json
from catalog_core.sources.common import APPINSTANCE_LABEL, unreadable

_PATH = ("spec", "config", "provider", "litellm")


API_VERSION = "kubeopencode.io/v1alpha1"


@attrs.frozen
class AgentTemplateInfo:
    name: str
    uid: str
    resource_version: str
    app_instance: bool
    models: Json | None  # current spec.config.provider.litellm.models
    model: str | None
    small_model: str | None
    shape_problem: str | None  # set when patching could clobber something that is not ours

    @classmethod
    def from_k8s(cls, obj: Mapping[str, Any]) -> AgentTemplateInfo | None:
        name = raw.name_of(obj)
        if not name:
            return None
        labels = raw.string_map(obj, "metadata", "labels")
        stub = unreadable(obj)
        problem: str | None = stub.message if stub is not None else None
        node: Any = obj
        for depth, field in enumerate(_PATH):
            node = node.get(field) if isinstance(node, Mapping) else None
            if node is None:
                break
            if not isinstance(node, Mapping):
                problem = f"{'.'.join(_PATH[: depth + 1])} is not an object"
                break
        models_raw = raw.path(obj, "spec", "config", "provider", "litellm", "models")
        if problem is None and models_raw is not None and not isinstance(models_raw, Mapping):
            problem = "spec.config.provider.litellm.models is not an object"
        config = raw.mapping(obj, "spec", "config")
        model, small = config.get("model"), config.get("small_model")
        for field, value in (("model", model), ("small_model", small)):
            if problem is None and value is not None and not isinstance(value, str):
                problem = f"spec.config.{field} is not a string"
        models: Json | None = None
        if isinstance(models_raw, Mapping):
            try:
                models = Json.of(models_raw)
            except (TypeError, ValueError):  # not JSON: keys that are not strings, an integer str() refuses
                problem = problem or "spec.config.provider.litellm.models is not a JSON object"
        return cls(
            name=name,
            uid=raw.uid_of(obj),
            resource_version=raw.resource_version_of(obj),
            app_instance=APPINSTANCE_LABEL in labels,
            models=models,
            model=model if isinstance(model, str) else None,
            small_model=small if isinstance(small, str) else None,
            shape_problem=problem,
        )
