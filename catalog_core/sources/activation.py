"""``ModelActivation`` (appliance.magicstick.dev/v1alpha1) — behaviour §1.3, §1.5."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.sources.common import Problem, checked_name, unreadable
from catalog_core.sources.external import ExternalModel, parse_definition

# The engines of a local activation that run as KubeAI Models (behaviour §1.3); FreeToken runs on its own.
KUBEAI_ENGINES = frozenset({"vllm", "ollama"})


@attrs.frozen
class ModelActivation:
    name: str
    uid: str
    kind: str  # spec.type: "external" publishes directly; local ones reach us through their runtime
    enabled: bool
    deleting: bool
    model_type_hint: str | None
    external: ExternalModel | None = None
    problem: Problem | None = None
    engine: str = ""  # spec.engine of a local activation, lower case

    @property
    def active(self) -> bool:
        return self.enabled and not self.deleting

    @property
    def runs_on_kubeai(self) -> bool:
        """A local activation whose model the operator serves as a KubeAI Model."""
        return self.kind == "local" and self.engine in KUBEAI_ENGINES

    @classmethod
    def from_k8s(cls, obj: Mapping[str, Any], namespace: str) -> ModelActivation | None:
        """``namespace`` is where provider Secrets live (NAMESPACE, behaviour §1.2)."""
        name = raw.name_of(obj)
        if not name:
            return None
        name, name_problem = checked_name(name)
        stub = unreadable(obj)
        if stub is not None:
            # Unreadable: its kind is unknown, so it is treated as external (a local one has no item to keep)
            return cls(name, raw.uid_of(obj), "external", True, False, None, problem=stub)
        spec = raw.mapping(obj, "spec")
        kind = spec.get("type")
        kind = kind.strip().lower() if isinstance(kind, str) else ""
        hint = spec.get("modelType")
        engine = spec.get("engine")
        external: ExternalModel | None = None
        problem: Problem | None = None
        if kind == "external":
            parsed = parse_definition(
                spec.get("external") if spec.get("external") is not None else {},
                name,
                inline_keys_allowed=False,
                namespace=namespace,
                model_type_hint=hint,
            )
            external, problem = parsed.model, parsed.problem
        if name_problem is not None:
            external, problem = None, name_problem
        return cls(
            name=name,
            uid=raw.uid_of(obj),
            kind=kind,
            enabled=spec.get("enabled") is not False,
            deleting=raw.path(obj, "metadata", "deletionTimestamp") is not None,
            model_type_hint=hint if isinstance(hint, str) else None,
            external=external,
            problem=problem,
            engine=engine.strip().lower() if isinstance(engine, str) else "",
        )
