"""FreeToken runtime Deployments and the Services that give their endpoints — behaviour §1.4."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.sources.common import (
    ACTIVATION_LABEL,
    CONTEXT_WINDOW_ANNOTATION,
    ENDPOINT_ANNOTATION,
    ENGINE_ANNOTATION,
    MAX_NUM_SEQS_ANNOTATION,
    MAX_OUTPUT_ANNOTATION,
    RUNTIME_LABEL,
    FieldWarning,
    LabelMatch,
    OptionalFields,
    Problem,
    checked_name,
    compute_target,
    unreadable,
)
from catalog_core.values import compute_target_from_profile

FREETOKEN = "freetoken"
# A Deployment is a FreeToken runtime when labelled appliance.magicstick.dev/runtime=freetoken.
RUNTIME_MATCH = LabelMatch(RUNTIME_LABEL, FREETOKEN)


@attrs.frozen
class FreeTokenRuntime:
    """A FreeToken Deployment reduced to the gates and metadata the catalog needs."""

    name: str
    uid: str
    activation: str | None
    endpoint_annotation: str | None
    ready: bool
    not_ready_because: str
    engine: str
    compute_target: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    max_num_seqs: int | None = None
    problem: Problem | None = None  # the runtime cannot be published (its last good route stays)
    warnings: tuple[FieldWarning, ...] = ()  # optional fields dropped; published without them

    @classmethod
    def from_k8s(cls, obj: Mapping[str, Any], runtime: LabelMatch = RUNTIME_MATCH) -> FreeTokenRuntime | None:
        """None when the Deployment is not a runtime of this kind (label appliance.magicstick.dev/runtime);
        another runtime served the same way (a Deployment, a Service, /health) passes its own ``runtime``."""
        name = raw.name_of(obj)
        labels = raw.string_map(obj, "metadata", "labels")
        if not name or not runtime.matches(obj):
            return None
        name, problem = checked_name(name)
        activation = labels.get(ACTIVATION_LABEL, "").strip() or None
        if activation is not None:
            activation, activation_problem = checked_name(activation, f"label {ACTIVATION_LABEL}")
            problem = problem or activation_problem
        stub = unreadable(obj)
        if stub is not None:
            return cls(
                name,
                raw.uid_of(obj),
                activation,
                None,
                False,
                stub.message,
                runtime.value,
                "cpu",
                problem=stub,
            )
        annotations = raw.string_map(obj, "metadata", "annotations")
        ready, why = _ready_gate(obj)
        fields = OptionalFields()
        target = compute_target(annotations, fields)
        return cls(
            name=name,
            uid=raw.uid_of(obj),
            activation=activation,
            endpoint_annotation=(annotations.get(ENDPOINT_ANNOTATION) or "").strip() or None,
            ready=ready,
            not_ready_because=why,
            engine=(annotations.get(ENGINE_ANNOTATION) or runtime.value).strip().lower(),
            compute_target=target or _target_from_resources(obj),
            context_window=fields.limit(
                annotations.get(CONTEXT_WINDOW_ANNOTATION), CONTEXT_WINDOW_ANNOTATION
            ),
            max_output_tokens=fields.limit(annotations.get(MAX_OUTPUT_ANNOTATION), MAX_OUTPUT_ANNOTATION),
            max_num_seqs=fields.limit(annotations.get(MAX_NUM_SEQS_ANNOTATION), MAX_NUM_SEQS_ANNOTATION),
            problem=problem,
            warnings=fields.warnings,
        )


def _ready_gate(obj: Mapping[str, Any]) -> tuple[bool, str]:
    """observedGeneration >= generation, readyReplicas >= 1, condition Available=True."""
    generation = raw.path(obj, "metadata", "generation")
    observed = raw.path(obj, "status", "observedGeneration")
    if isinstance(generation, int) and not (isinstance(observed, int) and observed >= generation):
        return False, "the Deployment's latest generation is not observed yet"
    ready = raw.path(obj, "status", "readyReplicas")
    if not (isinstance(ready, int) and not isinstance(ready, bool) and ready >= 1):
        return False, "no ready replicas"
    conditions = raw.path(obj, "status", "conditions")
    for cond in conditions if isinstance(conditions, list) else []:
        if raw.string(cond, "type") == "Available":
            if raw.string(cond, "status") == "True":
                return True, ""
            return False, "condition Available is not True"
    return False, "condition Available is missing"


def _target_from_resources(obj: Mapping[str, Any]) -> str:
    containers = raw.path(obj, "spec", "template", "spec", "containers")
    for container in containers if isinstance(containers, list) else []:
        for section in ("limits", "requests"):
            for resource in raw.mapping(container, "resources", section):
                target = compute_target_from_profile(resource)
                if target != "cpu":
                    return target
    return "cpu"


@attrs.frozen
class ServicePort:
    """The port a runtime's Service offers (named ``http`` if any, else the first), and its type."""

    name: str
    port: int | None
    # spec.type; absent means ClusterIP. Only a ClusterIP Service is trusted: an ExternalName one is a DNS
    # alias to anywhere (metadata.google.internal), and NodePort/LoadBalancer ones expose it outside.
    service_type: str = "ClusterIP"

    @classmethod
    def from_k8s(cls, obj: Mapping[str, Any]) -> ServicePort | None:
        name = raw.name_of(obj)
        if not name:
            return None
        ports = raw.path(obj, "spec", "ports")
        chosen: int | None = None
        for entry in ports if isinstance(ports, list) else []:
            port = raw.path(entry, "port")
            if not isinstance(port, int) or isinstance(port, bool):
                continue
            if raw.string(entry, "name") == "http":
                chosen = port
                break
            if chosen is None:
                chosen = port
        kind = raw.path(obj, "spec", "type")
        return cls(name, chosen, kind if isinstance(kind, str) and kind else "ClusterIP")
