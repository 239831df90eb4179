"""Forged owners on the real API server (issue 32 #4).

A user who may create pods, and read Deployments and ReplicaSets, but not patch Deployments, writes
consumer-labelled pods whose ownerReferences claim LiteLLM's Deployment: directly (with a made-up uid and
with its true one) and through LiteLLM's own ReplicaSet (every uid true). RBAC lets each pod in. The real
watches and writers around the real core must roll the genuine consumer onto the new catalog and never
patch LiteLLM's Deployment (the controller holds patch on Deployments; this user does not).
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
from catalog_core.commands import EvictPod, RollWorkload
from catalog_core.config import CatalogConfig
from catalog_core.events import Event
from tests.adapters.kube.helpers import FAST, Pipeline
from tests.fixtures.kube_peer import KubePeer, create_namespace, install_crds, new_api_client

pytestmark = [pytest.mark.kube, pytest.mark.anyio]

HASH = "ai-appliance.io/catalog-hash"
CONSUMER = {"ai-appliance.io/model-catalog-consumer": "true"}
MALLORY = "mallory"


def _workload(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app": labels["app"]}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }


def _owned_by(kind: str, name: str, uid: str) -> list[dict[str, Any]]:
    return [{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": True}]


def _pod(name: str, labels: dict[str, str], owners: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels, "ownerReferences": owners},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }


async def _grant_pod_author(kube_client: Any, ns: str) -> None:
    """``mallory`` may create pods and read workloads in ``ns``, and nothing else."""
    rbac = client.RbacAuthorizationV1Api(kube_client)
    await rbac.create_namespaced_role(
        ns,
        {
            "metadata": {"name": "pod-author"},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list"]},
                {
                    "apiGroups": ["apps"],
                    "resources": ["deployments", "replicasets"],
                    "verbs": ["get", "list"],
                },
            ],
        },
    )
    await rbac.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "pod-author"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-author"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": MALLORY}],
        },
    )


async def test_a_pod_author_cannot_make_the_controller_roll_litellm(
    kube_peer: KubePeer, kube_client: Any
) -> None:
    await install_crds(kube_client)
    ns, appliance_ns = await create_namespace(kube_client), await create_namespace(kube_client, "mcsys")
    config = CatalogConfig(namespace=ns, appliance_namespace=appliance_ns)
    core, apps = client.CoreV1Api(kube_client), client.AppsV1Api(kube_client)
    custom = client.CustomObjectsApi(kube_client)

    # LiteLLM (not a consumer) and a genuine consumer, each Deployment -> ReplicaSet (the test plays the
    # controller manager: the peer runs none).
    litellm = await apps.create_namespaced_deployment(ns, _workload("litellm", {"app": "litellm"}))
    litellm_rs_body = _workload("litellm-6f7", {"app": "litellm"})
    litellm_rs_body["metadata"]["ownerReferences"] = _owned_by("Deployment", "litellm", litellm.metadata.uid)
    litellm_rs = await apps.create_namespaced_replica_set(ns, litellm_rs_body)
    chat = await apps.create_namespaced_deployment(ns, _workload("chat-ui", {"app": "chat-ui", **CONSUMER}))
    chat_rs_body = _workload("chat-ui-7c9", {"app": "chat-ui", **CONSUMER})
    chat_rs_body["metadata"]["ownerReferences"] = _owned_by("Deployment", "chat-ui", chat.metadata.uid)
    chat_rs = await apps.create_namespaced_replica_set(ns, chat_rs_body)
    await core.create_namespaced_pod(
        ns,
        _pod(
            "chat-ui-7c9-x1",
            {"app": "chat-ui", **CONSUMER},
            _owned_by("ReplicaSet", "chat-ui-7c9", chat_rs.metadata.uid),
        ),
    )

    await _grant_pod_author(kube_client, ns)
    mallory = await new_api_client(kube_peer, impersonate=MALLORY)
    try:
        as_mallory = client.AppsV1Api(mallory)
        seen = await as_mallory.read_namespaced_deployment("litellm", ns)  # she can read its uid...
        with pytest.raises(ApiException) as refused:  # ...but not patch it
            await as_mallory.patch_namespaced_deployment(
                "litellm", ns, {"spec": {"template": {"metadata": {"annotations": {HASH: "x"}}}}}
            )
        assert refused.value.status == 403
        forged = {
            "forged-made-up-uid": _owned_by("Deployment", "litellm", "00000000-0000-4000-8000-000000000000"),
            "forged-true-uid": _owned_by("Deployment", "litellm", seen.metadata.uid),
            "forged-true-chain": _owned_by("ReplicaSet", "litellm-6f7", litellm_rs.metadata.uid),
        }
        for name, owners in forged.items():
            await client.CoreV1Api(mallory).create_namespaced_pod(ns, _pod(name, CONSUMER, owners))
    finally:
        await mallory.close()
    litellm_version = (await apps.read_namespaced_deployment("litellm", ns)).metadata.resource_version

    adapters = KubeAdapters(kube_client, config, SecretVault(), settings=FAST)
    send, receive = anyio.create_memory_object_stream[Event](1000)
    pipeline = Pipeline(config, adapters.executors, receive)

    async def catalog_hash(with_model: bool = True) -> str | None:
        try:
            cm = await core.read_namespaced_config_map("ai-model-catalog", ns)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        if with_model and "phi-4-mini" not in [
            m["id"] for m in json.loads(cm.data["catalog.json"])["models"]
        ]:
            return None
        return str((cm.metadata.annotations or {}).get(HASH))

    async def first_catalog() -> bool:
        return await catalog_hash(with_model=False) is not None

    try:
        with send, receive:
            async with anyio.create_task_group() as tg:
                tg.start_soon(adapters.run, send)
                # Pods running before the first catalog read that one: the change comes after it.
                await pipeline.until(first_catalog, what="the first, empty catalog")
                await custom.create_namespaced_custom_object(
                    "kubeai.org",
                    "v1",
                    ns,
                    "models",
                    {
                        "apiVersion": "kubeai.org/v1",
                        "kind": "Model",
                        "metadata": {"name": "phi-4-mini"},
                        "spec": {"features": ["TextGeneration"], "engine": "VLLM"},
                    },
                )
                await custom.patch_namespaced_custom_object_status(
                    "kubeai.org",
                    "v1",
                    ns,
                    "models",
                    "phi-4-mini",
                    {"status": {"replicas": {"all": 1, "ready": 1}}},
                    _content_type="application/merge-patch+json",
                )

                async def chat_rolled() -> bool:
                    published = await catalog_hash()
                    dep = await apps.read_namespaced_deployment("chat-ui", ns)
                    current = (dep.spec.template.metadata.annotations or {}).get(HASH)
                    return published is not None and current == published

                await pipeline.until(chat_rolled, what="the genuine consumer rolled onto the new catalog")
                for _ in range(10):  # a few more turns: anything else that was going to be rolled is now
                    await pipeline.turn()
                tg.cancel_scope.cancel()
    finally:
        await adapters.aclose()

    after = await apps.read_namespaced_deployment("litellm", ns)
    assert after.metadata.resource_version == litellm_version  # never written
    assert HASH not in (after.spec.template.metadata.annotations or {})
    rolls = {(c.kind, c.name) for c in pipeline.commands if isinstance(c, RollWorkload)}
    assert rolls == {("Deployment", "chat-ui")}
    assert not [c for c in pipeline.commands if isinstance(c, EvictPod)]  # the forged pods are left alone
