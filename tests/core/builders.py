"""Raw Kubernetes objects and LiteLLM rows for core tests, shaped like the API server returns them."""

from __future__ import annotations

import base64
import json
from typing import Any

NS = "ai"
APPLIANCE_NS = "ai-system"

# Annotations a Model or a runtime Deployment may carry (contracts.md: literal names, not the core's own)
CONTEXT_ANNOTATION = "ai-appliance.io/context-window"
MAX_OUTPUT_ANNOTATION = "ai-appliance.io/max-output-tokens"
MAX_SEQS_ANNOTATION = "ai-appliance.io/max-num-seqs"
ENGINE_ANNOTATION = "ai-appliance.io/engine"
TARGET_ANNOTATION = "ai-appliance.io/compute-target"
ENDPOINT_ANNOTATION = "ai-appliance.io/endpoint"


def _meta(name: str, namespace: str = NS, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}
    meta.update({k: v for k, v in extra.items() if v is not None})
    return meta


def kubeai_model(
    name: str,
    *,
    ready: Any = 1,
    features: list[str] | None = None,
    args: list[str] | None = None,
    annotations: dict[str, str] | None = None,
    engine: str = "VLLM",
    profile: str = "cpu:1",
    min_replicas: Any = 1,
    max_replicas: Any = None,
    autoscaling_disabled: Any = None,
    pods: Any = 1,
) -> dict[str, Any]:
    """A Model; by default one that cannot scale from zero (``minReplicas: 1``, as the appliance's operator
    creates them), so it is published only while ready. ``min_replicas=None`` leaves the field out (KubeAI
    reads 0: it scales from zero); ``pods`` is ``status.replicas.all``."""
    spec: dict[str, Any] = {
        "features": features if features is not None else ["TextGeneration"],
        "engine": engine,
        "url": f"hf://example/{name}",
        "resourceProfile": profile,
        "args": args or [],
    }
    for key, value in (
        ("minReplicas", min_replicas),
        ("maxReplicas", max_replicas),
        ("autoscalingDisabled", autoscaling_disabled),
    ):
        if value is not None:
            spec[key] = value
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": _meta(name, annotations=annotations),
        "spec": spec,
        "status": {"replicas": {"all": pods, "ready": ready}},
    }


def external_configmap(
    items: Any, *, raw_text: str | None = None, name: str = "ai-external-models"
) -> dict[str, Any]:
    text = raw_text if raw_text is not None else json.dumps({"models": items})
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name), "data": {"models.json": text}}


PROVIDER_LABELS = {"appliance.magicstick.dev/model-provider-secret": "true"}


API_BASES_ANNOTATION = "appliance.magicstick.dev/model-provider-api-bases"


def secret(
    name: str,
    data: dict[str, str],
    *,
    labels: dict[str, str] | None = None,
    rv: str = "1",
    api_bases: str | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """A model-provider Secret (labelled, behaviour §1.5) unless ``labels`` says otherwise; ``api_bases``
    is its annotation naming where its key may be sent besides its provider's own API."""
    meta = _meta(name, labels=PROVIDER_LABELS if labels is None else labels, resourceVersion=rv)
    if api_bases is not None:
        meta["annotations"] = {API_BASES_ANNOTATION: api_bases}
    if uid is not None:
        meta["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def activation(
    name: str,
    *,
    kind: str = "external",
    external: dict[str, Any] | None = None,
    enabled: Any = None,
    model_type: str | None = None,
    deleting: bool = False,
    engine: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": kind}
    if engine is not None:
        spec["engine"] = engine
    if external is not None:
        spec["external"] = external
    if enabled is not None:
        spec["enabled"] = enabled
    if model_type is not None:
        spec["modelType"] = model_type
    meta = _meta(name, APPLIANCE_NS, deletionTimestamp="2026-01-01T00:00:00Z" if deleting else None)
    return {
        "apiVersion": "appliance.magicstick.dev/v1alpha1",
        "kind": "ModelActivation",
        "metadata": meta,
        "spec": spec,
    }


def freetoken_deployment(
    name: str,
    *,
    activation_name: str | None,
    ready: bool = True,
    endpoint: str | None = None,
    annotations: dict[str, str] | None = None,
    generation: int = 1,
    observed_generation: int | None = None,
    owners: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """``owners``: its ownerReferences (``activation_owner`` makes the one the operator would set)."""
    labels = {"appliance.magicstick.dev/runtime": "freetoken"}
    if activation_name is not None:
        labels["appliance.magicstick.dev/modelactivation"] = activation_name
    ann = dict(annotations or {})
    if endpoint is not None:
        ann["ai-appliance.io/endpoint"] = endpoint
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(
            name, labels=labels, annotations=ann, generation=generation, ownerReferences=owners
        ),
        "spec": {
            "template": {
                "spec": {"containers": [{"name": "rt", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
            }
        },
        "status": {
            "observedGeneration": generation if observed_generation is None else observed_generation,
            "readyReplicas": 1 if ready else 0,
            "conditions": [{"type": "Available", "status": "True" if ready else "False"}],
        },
    }


def activation_owner(name: str, uid: str | None = None) -> dict[str, Any]:
    """An ownerReference to ModelActivation ``name``, by default with that activation's true uid."""
    return {
        "apiVersion": "appliance.magicstick.dev/v1alpha1",
        "kind": "ModelActivation",
        "name": name,
        "uid": uid if uid is not None else uid_of(name, APPLIANCE_NS),
        "controller": True,
    }


def service(name: str, port: int = 8080) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name),
        "spec": {"ports": [{"name": "http", "port": port}]},
    }


def row(
    model_name: str,
    rid: str,
    *,
    owner: str | None = None,
    managed: bool | None = None,
    order: int | None = None,
    api_base: str | None = None,
    **info: Any,
) -> dict[str, Any]:
    params: dict[str, Any] = {"model": f"openai/{model_name}"}
    if api_base:
        params["api_base"] = api_base
    if order is not None:
        params["order"] = order
    model_info: dict[str, Any] = {"id": rid, **info}
    if owner is not None:
        model_info["ai_appliance_owner"] = owner
    if managed is not None:
        model_info["ai_appliance_managed"] = managed
    return {"model_name": model_name, "litellm_params": params, "model_info": model_info}


def agent_template(
    name: str,
    *,
    models: Any = None,
    model: Any = None,
    small_model: Any = None,
    labels: dict[str, str] | None = None,
    config: Any = None,
    rv: str = "1",
) -> dict[str, Any]:
    if config is None:
        config = {}
        if models is not None:
            config["provider"] = {"litellm": {"npm": "@ai-sdk/openai-compatible", "models": models}}
        if model is not None:
            config["model"] = model
        if small_model is not None:
            config["small_model"] = small_model
    return {
        "apiVersion": "kubeopencode.io/v1alpha1",
        "kind": "AgentTemplate",
        "metadata": _meta(name, labels=labels, resourceVersion=rv),
        "spec": {"config": config},
    }


def deployment(
    name: str, *, labels: dict[str, str] | None = None, template_hash: str | None = None
) -> dict[str, Any]:
    ann = {"ai-appliance.io/catalog-hash": template_hash} if template_hash else {}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, labels=labels),
        "spec": {"template": {"metadata": {"labels": labels or {}, "annotations": ann}}},
    }


def statefulset(
    name: str, *, labels: dict[str, str] | None = None, template_hash: str | None = None
) -> dict[str, Any]:
    obj = deployment(name, labels=labels, template_hash=template_hash)
    obj["kind"] = "StatefulSet"
    return obj


def daemonset(
    name: str, *, labels: dict[str, str] | None = None, template_hash: str | None = None
) -> dict[str, Any]:
    obj = deployment(name, labels=labels, template_hash=template_hash)
    obj["kind"] = "DaemonSet"
    return obj


def uid_of(name: str, namespace: str = NS) -> str:
    """The uid ``_meta`` gives an object of this name: what a true owner reference to it carries."""
    return f"uid-{namespace}-{name}"


def replicaset(name: str, deployment_name: str, *, deployment_uid: str | None = None) -> dict[str, Any]:
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment_name,
        "uid": deployment_uid if deployment_uid is not None else uid_of(deployment_name),
        "controller": True,
    }
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": _meta(name, ownerReferences=[owner])}


def pod(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    owner: tuple[str, str] | None = None,
    owner_uid: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A pod; ``owner`` (kind, name) is its controller, by default with that object's true uid."""
    refs = (
        [
            {
                "apiVersion": "apps/v1",
                "kind": owner[0],
                "name": owner[1],
                "uid": owner_uid if owner_uid is not None else uid_of(owner[1]),
                "controller": True,
            }
        ]
        if owner
        else None
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(name, labels=labels, annotations=annotations, ownerReferences=refs),
    }


def catalog_configmap(
    hash_: str = "bootstrap", ready: bool = False, data: dict[str, str] | None = None
) -> dict[str, Any]:
    d = (
        data
        if data is not None
        else {
            "AI_APPLIANCE_MODEL_CATALOG_READY": str(ready).lower(),
            "AI_APPLIANCE_MODEL_CATALOG_HASH": hash_,
        }
    )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta("ai-model-catalog", annotations={"ai-appliance.io/catalog-hash": hash_}),
        "data": d,
    }
