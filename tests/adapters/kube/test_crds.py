"""The CRD schemas in contracts/crds install on the v1.20 peer and keep every field the catalog reads."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from contracts.kinds import RESOURCES
from tests.fixtures.kube_peer import crd_documents, create_namespace, install_crds

pytestmark = [pytest.mark.kube, pytest.mark.anyio]


def test_every_crd_source_has_a_schema() -> None:
    crds = {(d["spec"]["group"], d["spec"]["names"]["plural"]): d for d in crd_documents()}
    for resource in RESOURCES.values():
        if resource.crd:
            crd = crds[(resource.group, resource.plural)]
            assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
            assert crd["spec"]["names"]["kind"] == resource.kind
            assert [v["name"] for v in crd["spec"]["versions"]] == [resource.version]
            assert crd["spec"]["scope"] == "Namespaced"
            assert "x-kubernetes-validations" not in str(crd)  # no CEL: v1.20 would drop it silently


async def test_fields_the_catalog_reads_survive_and_bad_types_are_rejected(kube_client: Any) -> None:
    await install_crds(kube_client)
    ns = await create_namespace(kube_client)
    custom = client.CustomObjectsApi(kube_client)
    external = {
        "name": "gpt-x",
        "enabled": True,
        "litellm": {"model": "openai/gpt-x", "apiBase": "https://api.example/v1", "rpm": 60, "extra": "kept"},
        "apiKeySecretRef": {"name": "ai-model-provider-x", "key": "apiKey"},
        "type": "chat",
        "contextWindow": "128000",
        "maxOutputTokens": 4096,
        "tpm": "1000",
    }
    activation = {
        "apiVersion": "appliance.magicstick.dev/v1alpha1",
        "kind": "ModelActivation",
        "metadata": {"name": "gpt-x"},
        "spec": {
            "type": "external",
            "enabled": True,
            "modelType": "chat",
            "engine": "litellm",
            "external": external,
            "localOnlyField": {"a": 1},
        },
    }
    args = ("appliance.magicstick.dev", "v1alpha1", ns, "modelactivations")
    created = await custom.create_namespaced_custom_object(*args, activation)
    assert created["spec"] == activation["spec"]  # nothing pruned
    status = {"status": {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True"}]}}
    patched = await custom.patch_namespaced_custom_object_status(
        *args, "gpt-x", status, _content_type="application/merge-patch+json"
    )
    assert patched["status"] == status["status"]
    with pytest.raises(ApiException) as bad:
        await custom.create_namespaced_custom_object(
            *args, {**activation, "metadata": {"name": "bad"}, "spec": {"enabled": "no"}}
        )
    assert bad.value.status == 422

    model = {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": "qwen"},
        "spec": {
            "features": ["TextGeneration"],
            "engine": "VLLM",
            "url": "hf://Qwen/Qwen2.5",
            "args": ["--max-model-len", "32768"],
            "resourceProfile": "nvidia-gpu-l4:1",
            "minReplicas": 1,
            "cacheProfile": "standard",
        },
    }
    margs = ("kubeai.org", "v1", ns, "models")
    assert (await custom.create_namespaced_custom_object(*margs, model))["spec"] == model["spec"]
    ready = {"status": {"replicas": {"all": 2, "ready": 1}, "cache": {"loaded": True}}}
    got = await custom.patch_namespaced_custom_object_status(
        *margs, "qwen", ready, _content_type="application/merge-patch+json"
    )
    assert got["status"] == ready["status"]

    config = {
        "model": "litellm/a",
        "provider": {"litellm": {"models": {"a": {"name": "A"}}}},
        "mcp": {"x": [1, 2]},
    }
    template = {
        "apiVersion": "kubeopencode.io/v1alpha1",
        "kind": "AgentTemplate",
        "metadata": {"name": "t"},
        "spec": {"config": config, "agent": {"image": "opencode"}},
    }
    targs = ("kubeopencode.io", "v1alpha1", ns, "agenttemplates")
    assert (await custom.create_namespaced_custom_object(*targs, template))["spec"] == template["spec"]
