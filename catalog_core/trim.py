"""What of each kind of object the core may see: a per-source allow-list of fields, applied at the edge.

Adapters (and ``render``) trim every raw object before it is redacted and becomes an event, so the core,
the event log and its snapshots hold only what the named constructors read: no container ``env`` with a
``DATABASE_URL`` password, no annotation holding a copy of a Secret, no field someone added to a CR.
Values kept whole are copied with a bounded depth: an object nested deeper than ``MAX_DEPTH`` (e.g. a
ModelActivation 600 levels deep) is replaced by a stub that names it and carries a rejection, so that one
object is rejected with a reason while the rest of its source is read as usual.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from catalog_core.events import SourceKind

MAX_DEPTH: Final = 48  # JSON levels below the top of an object; Kubernetes objects need a dozen
REJECTED: Final = "$rejected"  # a stub's marker: {"reason": ..., "message": ...}
NESTED_TOO_DEEPLY: Final = "NestedTooDeeply"


class _Keep:
    """Copy this value whole (depth-bounded)."""


KEEP: Final = _Keep()


@attrs.frozen
class Prefixed:
    """A string map (annotations) of which only the keys with one of these prefixes are kept."""

    prefixes: tuple[str, ...]


@attrs.frozen
class Each:
    """A list whose items are trimmed with ``spec``."""

    spec: Any


Spec = Mapping[str, Any]

APPLIANCE_ANNOTATIONS = Prefixed(("ai-appliance.io/",))
# The one annotation of a Secret the core reads: where a provider Secret's key may be sent (behaviour §1.5).
# Its writers are whoever may edit the Secret, not the authors of the inputs that reference it.
PROVIDER_SECRET_API_BASES: Final = "appliance.magicstick.dev/model-provider-api-bases"
META: Spec = {
    "name": KEEP,
    "namespace": KEEP,
    "uid": KEEP,
    "resourceVersion": KEEP,
    "generation": KEEP,
    "deletionTimestamp": KEEP,
    "labels": KEEP,
    "annotations": APPLIANCE_ANNOTATIONS,
    "ownerReferences": Each(
        {"apiVersion": KEEP, "kind": KEEP, "name": KEEP, "uid": KEEP, "controller": KEEP}
    ),
}
# A runtime Deployment (FreeToken's, or another runtime served the same way): its readiness and resources.
RUNTIME_DEPLOYMENT: Final[Spec] = {
    "metadata": META,
    "spec": {"template": {"spec": {"containers": Each({"resources": {"limits": KEEP, "requests": KEEP}})}}},
    "status": {
        "observedGeneration": KEEP,
        "readyReplicas": KEEP,
        "conditions": Each({"type": KEEP, "status": KEEP}),
    },
}

# The route sources written in ``catalog_core/registry.py`` (a route source declared elsewhere carries its
# own trim spec); every other kind's is its declaration's (``catalog_core/kinds.py``).
TRIM: Final[Mapping[SourceKind, Spec]] = {
    SourceKind.KUBEAI_MODELS: {
        "metadata": META,
        "spec": {
            "features": KEEP,
            "args": KEEP,
            "engine": KEEP,
            "resourceProfile": KEEP,
            "minReplicas": KEEP,
            "maxReplicas": KEEP,
            "autoscalingDisabled": KEEP,
        },
        "status": {"replicas": {"all": KEEP, "ready": KEEP}},
    },
    SourceKind.EXTERNAL_MODELS: {"metadata": META, "data": {"models.json": KEEP}},
    SourceKind.MODEL_ACTIVATIONS: {
        "metadata": META,
        "spec": {"type": KEEP, "engine": KEEP, "enabled": KEEP, "modelType": KEEP, "external": KEEP},
    },
    SourceKind.FREETOKEN_DEPLOYMENTS: RUNTIME_DEPLOYMENT,
}


class TooDeepError(ValueError):
    """A value nested deeper than ``MAX_DEPTH``."""


def copy_json(value: Any, depth: int = 0) -> Any:
    """A copy of a JSON-like value; ``TooDeepError`` past ``MAX_DEPTH`` levels (never a RecursionError)."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if depth >= MAX_DEPTH:
        raise TooDeepError
    if isinstance(value, Mapping):
        return {k: copy_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [copy_json(v, depth + 1) for v in value]
    return value


def _apply(value: Any, spec: Any, depth: int) -> Any:
    if spec is KEEP:
        return copy_json(value, depth)
    if isinstance(spec, Prefixed):
        if not isinstance(value, Mapping):
            return copy_json(value, depth)
        return {k: v for k, v in value.items() if isinstance(k, str) and k.startswith(spec.prefixes)}
    if isinstance(spec, Each):
        if not isinstance(value, list):
            return copy_json(value, depth)
        return [_apply(item, spec.spec, depth + 1) for item in value]
    if not isinstance(value, Mapping):
        return copy_json(value, depth)  # a scalar where an object belongs: kept, the constructor says why
    if depth >= MAX_DEPTH:
        raise TooDeepError
    return {key: _apply(value[key], sub, depth + 1) for key, sub in spec.items() if key in value}


def trim(spec: Spec, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``obj`` that ``spec`` (its source's, ``registry.trim_spec``) keeps, plus apiVersion and
    kind; a stub with a rejection when a kept value is nested too deeply."""
    head = {k: obj[k] for k in ("apiVersion", "kind") if isinstance(obj.get(k), str)}
    try:
        body: dict[str, Any] = _apply(obj, spec, 0)
        return head | body
    except (TooDeepError, RecursionError):
        return head | stub(obj, NESTED_TOO_DEEPLY, f"nested more than {MAX_DEPTH} levels deep")


def stub(obj: Mapping[str, Any], reason: str, message: str) -> dict[str, Any]:
    """What is left of a rejected object: who it is, and why it was rejected."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    ident: dict[str, Any] = {
        k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if isinstance(meta.get(k), str)
    }
    labels = meta.get("labels")
    if isinstance(labels, Mapping):
        # which source an object belongs to (a FreeToken runtime, its activation) is told by its labels
        ident["labels"] = {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}
    return {"metadata": ident, REJECTED: {"reason": reason, "message": message}}


def rejection(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, message) when ``obj`` is the stub of a rejected object."""
    marker = obj.get(REJECTED)
    if isinstance(marker, Mapping):
        reason, message = marker.get("reason"), marker.get("message")
        if isinstance(reason, str) and isinstance(message, str):
            return reason, message
    return None
