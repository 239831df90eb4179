"""Hypothesis strategies for realistic recorded runs: raw objects as the cluster and LiteLLM hold them.

Names come from small pools so that sources collide (the same name from KubeAI
and a ConfigMap, Mesh rows beside our own, Secrets that exist or not), which is
where the fold has the most to decide.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import strategies as st

from catalog_core.events import Outcome, SourceKind, Unavailability
from tests.core import builders as b

NS = "ai"
MODELS = ("llama-3.1-8b", "qwen2.5-coder-7b", "nomic-embed-text", "gpt-4o", "phi-4-mini", "whisper-small")
SECRETS = ("openai-credentials", "ai-model-provider-mistral", "litellm-master-key")
ACTIVATIONS = ("phi-4-mini", "mistral-large", "gpt-4o")
RUNTIMES = ("phi-4-mini-runtime", "mistral-large-runtime")

names = st.sampled_from(MODELS)
small_ints = st.integers(min_value=1, max_value=1_000_000)
limits = st.one_of(
    st.none(),
    st.integers(min_value=1, max_value=2_000_000),
    st.integers(min_value=1, max_value=200_000).map(str),
    st.sampled_from(["lots", "0", "-5", "4k", ""]),
)


@st.composite
def kubeai_model(draw: st.DrawFn, name: str | None = None) -> dict[str, Any]:
    name = name or draw(names)
    annotations: dict[str, Any] = {}
    context = draw(limits)
    if context is not None:
        annotations["ai-appliance.io/context-window"] = str(context)
    if draw(st.booleans()):
        annotations["ai-appliance.io/max-output-tokens"] = str(draw(small_ints))
    args: list[str] = []
    arg_style = draw(st.sampled_from(["none", "eq", "space"]))
    if arg_style == "eq":
        args = [f"--max-model-len={draw(small_ints)}"]
    elif arg_style == "space":
        args = ["--max-model-len", str(draw(small_ints)), "--max-num-seqs=8"]
    features = draw(
        st.lists(
            st.sampled_from(["TextGeneration", "TextEmbedding", "Reranking", "SpeechToText"]), max_size=2
        )
    )
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-model-{name}",
            "resourceVersion": str(draw(small_ints)),
            "annotations": annotations,
        },
        "spec": {
            "features": features,
            "engine": draw(st.sampled_from(["VLLM", "OLlama", "FasterWhisper"])),
            "resourceProfile": draw(st.sampled_from(["nvidia-gpu-l4:1", "cpu:2", "amd-gpu-mi210:1"])),
            "args": args,
        },
        "status": {"replicas": {"all": 1, "ready": draw(st.sampled_from([0, 1, 2, None, "1"]))}},
    }


@st.composite
def definition(draw: st.DrawFn) -> dict[str, Any]:
    """One external model definition of models.json (sometimes with problems)."""
    name = draw(names)
    item: dict[str, Any] = {"name": name, "model": f"openai/{name}"}
    key = draw(st.sampled_from(["secret", "inline", "none"]))
    if key == "secret":
        item["apiKeySecretRef"] = {"name": draw(st.sampled_from(SECRETS)), "key": "apiKey"}
    elif key == "inline":
        item["apiKey"] = draw(st.text(alphabet="abcdefghijklmnop0123456789-", min_size=4, max_size=20))
    context = draw(limits)
    if context is not None:
        item["contextWindow"] = context
    if draw(st.integers(0, 9)) == 0:
        item["enabled"] = False
    if draw(st.integers(0, 9)) == 0:
        item["type"] = draw(st.sampled_from(["chat", "embedding", "rerank", "audio", "video"]))
    return item


@st.composite
def external_configmap(draw: st.DrawFn) -> dict[str, Any]:
    shape = draw(st.sampled_from(["object", "array", "invalid", "empty"]))
    items = draw(st.lists(definition(), max_size=4))
    if shape == "object":
        text = json.dumps({"models": items}, indent=2)
    elif shape == "array":
        text = json.dumps(items)
    elif shape == "invalid":
        text = json.dumps({"models": items})[: draw(st.integers(1, 30))] + draw(
            st.sampled_from(["", ",", "}}"])
        )
    else:
        text = ""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "ai-external-models",
            "namespace": NS,
            "uid": "uid-external",
            "resourceVersion": str(draw(small_ints)),
        },
        "data": {"models.json": text},
    }


@st.composite
def secret(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(st.sampled_from(SECRETS))
    value = draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=8, max_size=24))
    labels = {"appliance.magicstick.dev/model-provider-secret": "true"} if draw(st.booleans()) else {}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-secret-{name}",
            "resourceVersion": str(draw(small_ints)),
            "labels": labels,
        },
        "data": {"apiKey": base64.b64encode(value.encode()).decode()},
    }


@st.composite
def activation(draw: st.DrawFn, name: str | None = None, kind: str | None = None) -> dict[str, Any]:
    name = name or draw(st.sampled_from(ACTIVATIONS))
    kind = kind or draw(st.sampled_from(["local", "external"]))
    spec: dict[str, Any] = {"type": kind, "modelType": draw(st.sampled_from(["chat", "embedding"]))}
    if kind == "external":
        spec["external"] = {
            "model": f"mistral/{name}",
            "apiKeySecretRef": {"name": draw(st.sampled_from(SECRETS)), "key": "apiKey"},
        }
    if draw(st.integers(0, 5)) == 0:
        spec["enabled"] = False
    meta: dict[str, Any] = {"name": name, "namespace": "ai-system", "uid": f"uid-act-{name}"}
    if draw(st.integers(0, 9)) == 0:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "apiVersion": "appliance.magicstick.dev/v1alpha1",
        "kind": "ModelActivation",
        "metadata": meta,
        "spec": spec,
    }


@st.composite
def freetoken_deployment(draw: st.DrawFn) -> dict[str, Any]:
    index = draw(st.integers(0, len(RUNTIMES) - 1))
    name, model = RUNTIMES[index], ACTIVATIONS[index]
    ready = draw(st.booleans())
    annotations: dict[str, str] = {}
    if draw(st.integers(0, 4)) == 0:
        annotations["ai-appliance.io/endpoint"] = draw(
            st.sampled_from([f"http://{name}.ai.svc.cluster.local:8080/v1", "http://evil.example.com/v1"])
        )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-dep-{name}",
            "generation": 2,
            "labels": {
                "appliance.magicstick.dev/runtime": "freetoken",
                "appliance.magicstick.dev/modelactivation": model,
            },
            "annotations": annotations,
        },
        "status": {
            "observedGeneration": 2,
            "readyReplicas": 1 if ready else 0,
            "conditions": [{"type": "Available", "status": "True" if ready else "False"}],
        },
    }


services = st.builds(b.service, st.sampled_from(RUNTIMES), st.sampled_from([8080, 8000]))


@st.composite
def litellm_row(draw: st.DrawFn) -> dict[str, Any]:
    """A /model/info row: ours, legacy ours, a Private Mesh fallback or alias, or someone else's."""
    name = draw(names)
    kind = draw(st.sampled_from(["mesh", "mesh-alias", "share", "foreign", "ours", "legacy"]))
    if kind == "mesh":
        return {
            "model_name": name,
            "litellm_params": {
                "model": f"openai/{name}",
                "api_base": "http://mesh-bridge.ai.svc:8080/v1",
                "order": 1,
            },
            "model_info": {
                "id": f"private-mesh-{name}",
                "ai_appliance_owner": "private-mesh",
                "ai_appliance_logical_name": name,
                "ai_appliance_scheduler": {"locality": "mesh"},
            },
        }
    if kind in ("mesh-alias", "share"):
        prefix = "mesh/" if kind == "mesh-alias" else "share/"
        return {
            "model_name": prefix + name,
            "litellm_params": {"model": f"openai/{name}"},
            "model_info": {"id": f"private-mesh-{kind}-{name}", "ai_appliance_owner": "private-mesh"},
        }
    if kind == "foreign":
        return {
            "model_name": name,
            "litellm_params": {"model": f"openai/{name}"},
            "model_info": {"id": f"hand-made-{name}", "mode": "chat", "max_input_tokens": draw(small_ints)},
        }
    family = draw(st.sampled_from(["kubeai", "external", "freetoken"]))
    info: dict[str, Any] = {"id": f"ai-appliance-{family}-{name}", "ai_appliance_managed": True}
    if kind == "ours":
        info["ai_appliance_owner"] = "model-catalog"
    return {"model_name": name, "litellm_params": {"model": f"openai/{name}"}, "model_info": info}


def agent_template(models: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "kubeopencode.io/v1alpha1",
        "kind": "AgentTemplate",
        "metadata": {"name": "litellm-default", "namespace": NS, "uid": "uid-tpl", "resourceVersion": "1"},
        "spec": {"config": {"model": "litellm/old", "provider": {"litellm": {"models": models or {}}}}},
    }


OBJECTS = {
    SourceKind.KUBEAI_MODELS: kubeai_model(),
    SourceKind.EXTERNAL_MODELS: external_configmap(),
    SourceKind.MODEL_ACTIVATIONS: activation(),
    SourceKind.FREETOKEN_DEPLOYMENTS: freetoken_deployment(),
    SourceKind.SERVICES: services,
}

outcomes = st.sampled_from(["applied"] * 6 + ["retry", "terminal", "gone"])


@st.composite
def action(draw: st.DrawFn) -> tuple[Any, ...]:
    """One thing that happens to the controller."""
    kind = draw(
        st.sampled_from(
            ["upsert"] * 6
            + ["delete", "list", "unavailable", "rows", "unreachable", "probe", "secrets"]
            + ["tick"] * 5
        )
    )
    if kind in ("upsert", "delete"):
        source = draw(st.sampled_from(sorted(OBJECTS)))
        return (kind, source, draw(OBJECTS[source]))
    if kind == "list":
        source = draw(st.sampled_from(sorted(OBJECTS)))
        return (kind, source, draw(st.lists(OBJECTS[source], max_size=3)))
    if kind == "unavailable":
        source = draw(st.sampled_from(sorted(OBJECTS)))
        return (kind, source, draw(st.sampled_from(list(Unavailability))))
    if kind == "rows":
        return (kind, draw(st.lists(litellm_row(), max_size=5)))
    if kind == "unreachable":
        return (kind, draw(st.sampled_from(["unauthorized", "unreachable", "error"])))
    if kind == "probe":
        return (kind, draw(st.sampled_from(RUNTIMES)), draw(st.booleans()))
    if kind == "secrets":
        return (kind, draw(st.lists(secret(), max_size=3)))
    return (
        kind,
        draw(st.sampled_from([0.5, 1.0, 5.0, 16.0, 40.0])),
        tuple(draw(st.lists(outcomes, max_size=4))),
    )


@st.composite
def scenario(draw: st.DrawFn) -> dict[str, Any]:
    """The cluster when the controller starts, then what happens."""
    runtimes = draw(st.lists(freetoken_deployment(), max_size=2))
    # Most runtimes come with their local ModelActivation and Service, so they reach the health gate.
    served = [r for r in runtimes if draw(st.integers(0, 4)) > 0]
    activations = draw(st.lists(activation(), max_size=2)) + [
        draw(activation(r["metadata"]["labels"]["appliance.magicstick.dev/modelactivation"], "local"))
        for r in served
    ]
    return {
        "kubeai": draw(st.lists(kubeai_model(), max_size=4)),
        "external": draw(st.lists(external_configmap(), max_size=1)),
        "activations": activations,
        "runtimes": runtimes,
        "services": draw(st.lists(services, max_size=1)) + [b.service(r["metadata"]["name"]) for r in served],
        "secrets": draw(st.lists(secret(), max_size=3)),
        "rows": draw(st.lists(litellm_row(), max_size=4)),
        "healthy": draw(st.frozensets(st.sampled_from(RUNTIMES))),
        "not_installed": draw(st.booleans()),
        "actions": draw(st.lists(action(), min_size=1, max_size=25)),
    }


outcome_names = {o.value for o in Outcome}
