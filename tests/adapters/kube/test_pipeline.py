"""End to end (Kubernetes side): the real watches and writers around the real core.

A KubeAI Model created and made ready in the API server ends up in the written
``ConfigMap/ai-model-catalog``; the AgentTemplate gets it; the consumer's
Deployment (found through its pod's ReplicaSet) is rolled onto the new hash; when
the Model stops being ready it is withdrawn again. LiteLLM is simulated.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from adapters.kube import KubeAdapters
from adapters.vault import SecretVault
from catalog_core.commands import PatchAgentTemplate, RollWorkload, WatchSecrets, WriteCatalog
from catalog_core.config import CatalogConfig
from catalog_core.events import Event
from tests.adapters.kube.helpers import FAST, Pipeline
from tests.fixtures.kube_peer import create_namespace, install_crds

pytestmark = [pytest.mark.kube, pytest.mark.anyio]

HASH = "ai-appliance.io/catalog-hash"
CONSUMER = {"ai-appliance.io/model-catalog-consumer": "true"}


def _workload(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, **CONSUMER}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }


async def test_a_ready_kubeai_model_reaches_the_written_catalog(kube_client: Any) -> None:
    await install_crds(kube_client)
    ns, appliance_ns = await create_namespace(kube_client), await create_namespace(kube_client, "mcsys")
    config = CatalogConfig(namespace=ns, appliance_namespace=appliance_ns)
    core, apps = client.CoreV1Api(kube_client), client.AppsV1Api(kube_client)
    custom = client.CustomObjectsApi(kube_client)

    # A consumer: Deployment -> ReplicaSet -> Pod (no controller manager here: the test creates all three).
    deployment = await apps.create_namespaced_deployment(ns, _workload("chat-ui"))
    owner = {"apiVersion": "apps/v1", "controller": True}
    rs_body = _workload("chat-ui-7c9")
    rs_body["metadata"]["ownerReferences"] = [
        {**owner, "kind": "Deployment", "name": "chat-ui", "uid": deployment.metadata.uid}
    ]
    rs = await apps.create_namespaced_replica_set(ns, rs_body)
    await core.create_namespaced_pod(
        ns,
        {
            "metadata": {
                "name": "chat-ui-7c9-x1",
                "labels": {"app": "chat-ui", **CONSUMER},
                "ownerReferences": [
                    {**owner, "kind": "ReplicaSet", "name": "chat-ui-7c9", "uid": rs.metadata.uid}
                ],
            },
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        },
    )
    template_config = {"theme": "dark", "provider": {"litellm": {"options": {"baseURL": "http://x/v1"}}}}
    await custom.create_namespaced_custom_object(
        "kubeopencode.io",
        "v1alpha1",
        ns,
        "agenttemplates",
        {
            "apiVersion": "kubeopencode.io/v1alpha1",
            "kind": "AgentTemplate",
            "metadata": {"name": "litellm-default"},
            "spec": {"config": template_config},
        },
    )

    adapters = KubeAdapters(kube_client, config, SecretVault(), settings=FAST)
    send, receive = anyio.create_memory_object_stream[Event](1000)
    pipeline = Pipeline(config, adapters.executors, receive)

    async def catalog() -> dict[str, Any] | None:
        try:
            cm = await core.read_namespaced_config_map("ai-model-catalog", ns)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return {"data": cm.data or {}, "hash": (cm.metadata.annotations or {}).get(HASH)}

    async def catalog_ids() -> list[str] | None:
        current = await catalog()
        if current is None:
            return None
        return [m["id"] for m in json.loads(current["data"]["catalog.json"])["models"]]

    try:
        with send, receive:
            async with anyio.create_task_group() as tg:
                tg.start_soon(adapters.run, send)
                # All listed, Secrets watched (none needed), LiteLLM observed: the first catalog is written.
                await pipeline.until(lambda: _has(catalog_ids(), []), what="the first, empty catalog")

                await custom.create_namespaced_custom_object(
                    "kubeai.org",
                    "v1",
                    ns,
                    "models",
                    {
                        "apiVersion": "kubeai.org/v1",
                        "kind": "Model",
                        "metadata": {"name": "phi-4-mini"},
                        "spec": {
                            "features": ["TextGeneration"],
                            "engine": "VLLM",
                            "args": ["--max-model-len=8192"],
                            "minReplicas": 1,  # published only while ready
                        },
                    },
                )
                for _ in range(10):
                    await pipeline.turn()
                assert await catalog_ids() == []  # not ready: not published

                await custom.patch_namespaced_custom_object_status(
                    "kubeai.org",
                    "v1",
                    ns,
                    "models",
                    "phi-4-mini",
                    {"status": {"replicas": {"all": 1, "ready": 1}}},
                    _content_type="application/merge-patch+json",
                )
                await pipeline.until(
                    lambda: _has(catalog_ids(), ["phi-4-mini"]), what="phi-4-mini in the catalog"
                )
                published = await catalog()
                assert published is not None
                assert published["data"]["AI_APPLIANCE_MODEL_CATALOG_READY"] == "true"
                assert published["hash"] == published["data"]["AI_APPLIANCE_MODEL_CATALOG_HASH"]
                [entry] = json.loads(published["data"]["catalog.json"])["models"]
                assert (entry["type"], entry["source"], entry["contextWindow"]) == ("chat", "kubeai", 8192)
                assert "ai-appliance-kubeai-phi-4-mini" in pipeline.world.rows

                async def rolled() -> bool:
                    dep = await apps.read_namespaced_deployment("chat-ui", ns)
                    return (dep.spec.template.metadata.annotations or {}).get(HASH) == published["hash"]

                await pipeline.until(rolled, what="the consumer's Deployment rolled onto the catalog hash")

                async def template_has_model() -> bool:
                    got = await custom.get_namespaced_custom_object(
                        "kubeopencode.io", "v1alpha1", ns, "agenttemplates", "litellm-default"
                    )
                    cfg = got["spec"]["config"]
                    return (
                        "phi-4-mini" in (cfg["provider"]["litellm"].get("models") or {})
                        and cfg["theme"] == "dark"
                    )

                await pipeline.until(template_has_model, what="the AgentTemplate lists the model")

                # Not ready any more: withdrawn from the catalog again.
                await custom.patch_namespaced_custom_object_status(
                    "kubeai.org",
                    "v1",
                    ns,
                    "models",
                    "phi-4-mini",
                    {"status": {"replicas": {"all": 1, "ready": 0}}},
                    _content_type="application/merge-patch+json",
                )
                await pipeline.until(lambda: _has(catalog_ids(), []), what="phi-4-mini withdrawn")
                tg.cancel_scope.cancel()
    finally:
        await adapters.aclose()

    kinds = {type(c).__name__ for c in pipeline.commands}
    assert {
        WatchSecrets.__name__,
        WriteCatalog.__name__,
        RollWorkload.__name__,
        PatchAgentTemplate.__name__,
    } <= kinds
    rolls = [c for c in pipeline.commands if isinstance(c, RollWorkload)]
    assert {(c.kind, c.name) for c in rolls} == {("Deployment", "chat-ui")}


async def _has(ids: Any, expected: list[str]) -> bool:
    return await ids == expected
