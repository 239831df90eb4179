"""FreeToken runtime Deployments and the Services that give their endpoints — behaviour §1.4."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.sources.common import (
    ACTIVATION_LABEL,
    COMPUTE_TARGET_ANNOTATION,
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
from catalog_core.trim import REJECTED
from catalog_core.values import COMPUTE_TARGETS, MAX_TOKENS, RESERVED_NAMES, compute_target_from_profile

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
    # The uid its ownerReference to its ModelActivation gives (kind ModelActivation, the activation's
    # name), "" when it has none: the operator's mark, which counts only when it is that activation's uid.
    activation_owner_uid: str = ""

    @classmethod
    def from_k8s(cls, obj: Mapping[str, Any], runtime: LabelMatch = RUNTIME_MATCH) -> FreeTokenRuntime | None:
        """None when the Deployment is not a runtime of this kind (label appliance.magicstick.dev/runtime);
        another runtime served the same way (a Deployment, a Service, /health) passes its own ``runtime``.

        Performance (bench P6): this was the most expensive parse of a replay. A Deployment of the
        common, well-formed shape is read by ``_from_plain`` (no warning, no problem possible); anything
        else by ``from_k8s_careful``, which decides every odd case. Both give equal values on every input
        the fast one accepts (``tests/core/test_freetoken_fast_path.py``)."""
        plain = _from_plain(obj, runtime)
        return plain if plain is not None else cls.from_k8s_careful(obj, runtime)

    @classmethod
    def from_k8s_careful(
        cls, obj: Mapping[str, Any], runtime: LabelMatch = RUNTIME_MATCH
    ) -> FreeTokenRuntime | None:
        """``from_k8s`` for any object: every field checked, unusable optional ones dropped with a warning."""
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
        refs = raw.path(obj, "metadata", "ownerReferences")
        objects = [ref for ref in refs if isinstance(ref, dict)] if isinstance(refs, list) else None
        owner_uid = activation_owner_uid(objects, activation)
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
            activation_owner_uid=owner_uid or "",
        )


def activation_owner_uid(refs: Any, activation: str | None) -> str | None:
    """The uid of the ownerReference to ModelActivation ``activation`` in ``refs`` ("" when there is none);
    None when ``refs`` is not a list of objects (the careful path reads what it can of it)."""
    if refs is None or activation is None:
        return ""
    if type(refs) is not list:
        return None
    for ref in refs:
        if type(ref) is not dict:
            return None
        if ref.get("kind") == "ModelActivation" and ref.get("name") == activation:
            uid = ref.get("uid")
            return uid if type(uid) is str else None
    return ""


# A name the API server accepts (a DNS subdomain, or any case of one; a label value is narrower): printable
# ASCII on one line, shorter than MAX_NAME_LENGTH, with no alias prefix: unless it is one of RESERVED_NAMES,
# ``checked_name`` finds no problem.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}").fullmatch
_NO_ANNOTATIONS: Mapping[str, Any] = {}


def _plain_limit(value: Any) -> int | None:
    """A string of ASCII digits in 1..MAX_TOKENS as an int; None for anything the careful path must judge
    (it may warn). Only strings: the careful path reads annotations as a string map, so it ignores an int."""
    if type(value) is str and value.isdigit() and value.isascii() and len(value) <= 12:
        number = int(value)
        return number if 0 < number <= MAX_TOKENS else None
    return None


def _from_plain(obj: Mapping[str, Any], runtime: LabelMatch) -> FreeTokenRuntime | None:
    """The runtime of a well-formed Deployment, read directly; None when anything is unusual (not a runtime
    of this kind, a stub, a name or activation that needs checking, a field of another type, a limit that
    is not a plain positive number, an unknown compute target), which ``from_k8s_careful`` then reads.

    Every value it accepts is one the careful path accepts without a warning, so the two agree."""
    if type(obj) is not dict or REJECTED in obj:
        return None
    meta = obj.get("metadata")
    if type(meta) is not dict:
        return None
    name = meta.get("name")
    uid = meta.get("uid", "")
    labels = meta.get("labels")
    annotations = meta.get("annotations", _NO_ANNOTATIONS)
    if (
        type(name) is not str
        or type(uid) is not str
        or type(labels) is not dict
        or type(annotations) is not dict
    ):
        return None
    if _PLAIN_NAME(name) is None or name in RESERVED_NAMES:
        return None
    kind = labels.get(runtime.key)
    # The careful path's own test (LabelMatch.matches) on the label's string: not matching, it gives None too.
    if type(kind) is not str or kind.strip().lower() != runtime.value:
        return None
    activation = labels.get(ACTIVATION_LABEL)
    if activation is not None and (
        type(activation) is not str or _PLAIN_NAME(activation) is None or activation in RESERVED_NAMES
    ):
        return None

    context = annotations.get(CONTEXT_WINDOW_ANNOTATION)
    max_output = annotations.get(MAX_OUTPUT_ANNOTATION)
    max_num_seqs = annotations.get(MAX_NUM_SEQS_ANNOTATION)
    if context is not None and (context := _plain_limit(context)) is None:
        return None
    if max_output is not None and (max_output := _plain_limit(max_output)) is None:
        return None
    if max_num_seqs is not None and (max_num_seqs := _plain_limit(max_num_seqs)) is None:
        return None
    endpoint = annotations.get(ENDPOINT_ANNOTATION)
    engine = annotations.get(ENGINE_ANNOTATION)
    target = annotations.get(COMPUTE_TARGET_ANNOTATION)
    if endpoint is not None and type(endpoint) is not str:
        return None
    if engine is not None and type(engine) is not str:
        return None
    if target is not None and not (type(target) is str and target in COMPUTE_TARGETS):
        return None

    owner_uid = activation_owner_uid(meta.get("ownerReferences"), activation)
    if owner_uid is None:
        return None
    ready, why = _plain_ready_gate(meta, obj.get("status"))
    if why is None:  # an unusual status: the careful path's own gate reads it
        ready, why = _ready_gate(obj)
    return FreeTokenRuntime(
        name,
        uid,
        activation,
        (endpoint.strip() or None) if endpoint is not None else None,
        ready,
        why,
        (engine or runtime.value).strip().lower(),
        target or _plain_target_from_resources(obj),
        context,
        max_output,
        max_num_seqs,
        activation_owner_uid=owner_uid,
    )


def _plain_ready_gate(meta: dict[str, Any], status: Any) -> tuple[bool, str | None]:
    """``_ready_gate`` of the usual status (integer generations and ready count, a list of conditions as
    objects with string fields); (False, None) when the status is shaped otherwise."""
    generation = meta.get("generation")
    if type(status) is not dict or type(generation) is not int:
        return False, None
    observed = status.get("observedGeneration")
    if type(observed) is not int:
        return False, None
    if observed < generation:
        return False, "the Deployment's latest generation is not observed yet"
    count = status.get("readyReplicas")
    if count is None:  # a Deployment with no ready replica leaves the field out
        return False, "no ready replicas"
    if type(count) is not int:
        return False, None
    if count < 1:
        return False, "no ready replicas"
    conditions = status.get("conditions")
    if type(conditions) is not list:
        return False, None
    for cond in conditions:
        if type(cond) is not dict:
            return False, None
        kind = cond.get("type")
        if type(kind) is not str:
            return False, None
        if kind == "Available":
            value = cond.get("status")
            if type(value) is not str:
                return False, None
            return (True, "") if value == "True" else (False, "condition Available is not True")
    return False, "condition Available is missing"


def _plain_target_from_resources(obj: dict[str, Any]) -> str:
    """``_target_from_resources`` of the usual containers (objects all the way down, resource names as
    strings); the careful one reads any other shape."""
    spec = obj.get("spec")
    template = spec.get("template") if type(spec) is dict else None
    pod = template.get("spec") if type(template) is dict else None
    containers = pod.get("containers") if type(pod) is dict else None
    if type(containers) is not list:
        return _target_from_resources(obj)
    for container in containers:
        if type(container) is not dict:
            return _target_from_resources(obj)
        resources = container.get("resources")
        if resources is None:  # a container that asks for nothing
            continue
        if type(resources) is not dict:
            return _target_from_resources(obj)
        for section in ("limits", "requests"):
            amounts = resources.get(section)
            if amounts is None:
                continue
            if type(amounts) is not dict:
                return _target_from_resources(obj)
            for resource in amounts:
                if type(resource) is not str:
                    return _target_from_resources(obj)
                target = compute_target_from_profile(resource)
                if target != "cpu":
                    return target
    return "cpu"


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
