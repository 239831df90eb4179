"""The library API, embedded in a host's own task group with the host's own API client (issue 6).

The host (like the Magic Stick Operator) feeds the ModelActivations it already
caches instead of letting the catalog watch them a second time. Real
kube-apiserver, in-process LiteLLM fake.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from kubernetes_asyncio import client

from app.library import CatalogView, ModelCatalog
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from tests.adapters.kube.helpers import FAST
from tests.core import builders as b
from tests.fakes.litellm import FakeLiteLLM
from tests.fixtures.kube_peer import create_namespace, install_crds

pytestmark = [pytest.mark.kube, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _until(catalog: ModelCatalog, predicate: Any, timeout: float = 20.0) -> CatalogView:
    with anyio.move_on_after(timeout):
        async for view in catalog.changes():
            if predicate(view):
                return view
    state = catalog.state
    raise AssertionError(
        f"timed out; inflight: {list(state.control.inflight)}; retries: {state.control.retries}; "
        f"failures: {state.control.failures}; observed: {state.cluster.catalog}; "
        f"desired: {state.derived.desired_catalog_hash}; pending: {state.pending}; "
        f"settled: {state.control.settled}; "
        f"sources: {state.sources}; litellm: {state.litellm.status}"
    )


async def _create_ready_model(custom: Any, ns: str, name: str) -> None:
    """A KubeAI Model created in the API server, then its status set ready (the status subresource)."""
    model = b.kubeai_model(name, ready=0)
    del model["status"]
    model["metadata"] = {"name": name, "namespace": ns}
    await custom.create_namespaced_custom_object("kubeai.org", "v1", ns, "models", model)
    await custom.patch_namespaced_custom_object_status(
        "kubeai.org",
        "v1",
        ns,
        "models",
        name,
        {"status": {"replicas": {"all": 1, "ready": 1}}},
        _content_type="application/merge-patch+json",
    )


async def test_embedded_in_a_host_task_group_with_host_fed_activations(kube_client: Any) -> None:
    await install_crds(kube_client)
    ns, appliance_ns = await create_namespace(kube_client), await create_namespace(kube_client, "mcsys")
    config = CatalogConfig(namespace=ns, appliance_namespace=appliance_ns)
    fake = FakeLiteLLM()
    catalog = ModelCatalog(
        config,
        kube_client,  # the host's client: the catalog never closes it
        litellm_master_key="sk-test",
        host_sources={SourceKind.MODEL_ACTIVATIONS},
        kube_settings=FAST,
        litellm_transport=httpx.MockTransport(fake.handle),
        catalog_min_write_interval=0.0,
    )
    custom = client.CustomObjectsApi(kube_client)
    async with anyio.create_task_group() as host:
        await host.start(catalog.run)
        # The host's cache of ModelActivations, fed instead of watched.
        await catalog.listed(
            SourceKind.MODEL_ACTIVATIONS,
            [b.activation("mistral", external={"model": "mistral/large", "apiKey": "sk-inline-not-allowed"})],
        )
        with anyio.fail_after(20):
            await catalog.wait_ready()
        view = await _until(catalog, lambda v: v.route("mistral"))
        assert (
            view.route("mistral")[0]["reason"] == "InlineKeyRejected"
        )  # behaviour §1.5, decided from a fed object
        # A KubeAI Model appears in the API server and becomes ready: the catalog publishes it.
        await _create_ready_model(custom, ns, "llama")
        view = await _until(
            catalog, lambda v: v.catalog is not None and '"llama"' in v.catalog["catalog.json"]
        )
        assert view.route("llama")[0]["state"] == "published"
        assert "ai-appliance-kubeai-llama" in {r["model_info"]["id"] for r in (await fake_rows(fake))}
        # The host fixes its activation: an update from the host's cache.
        await catalog.upserted(
            SourceKind.MODEL_ACTIVATIONS, b.activation("mistral", external={"model": "mistral/large"})
        )
        view = await _until(
            catalog,
            lambda v: (
                any(r["state"] == "published" for r in v.route("mistral"))
                and v.catalog_hash == json.loads(v.catalog["catalog.json"])["hash"]
            ),  # written, not only decided
        )
        # The written ConfigMap is the one the view shows.
        cm = await client.CoreV1Api(kube_client).read_namespaced_config_map("ai-model-catalog", ns)
        assert cm.data["catalog.json"] == catalog.view().catalog["catalog.json"]
        host.cancel_scope.cancel()
    # the host's API client is still usable: the catalog did not close it
    assert (await client.CoreV1Api(kube_client).read_namespace(ns)).metadata.name == ns


async def fake_rows(fake: FakeLiteLLM) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(transport=httpx.MockTransport(fake.handle), base_url="http://fake") as http:
        answer = await http.get("/model/info", headers={"Authorization": "Bearer sk-test"})
        return list(answer.json()["data"])


async def test_the_documented_embedding_example_runs(
    kube_client: Any, kube_peer: Any, litellm_peer: Any
) -> None:
    """examples/embedded_operator.py, as ARCHITECTURE.md tells a reader to run it."""
    import subprocess
    import sys
    from pathlib import Path

    await install_crds(kube_client)
    ns, appliance_ns = await create_namespace(kube_client), await create_namespace(kube_client, "mcsys")
    await client.CustomObjectsApi(kube_client).create_namespaced_custom_object(
        "appliance.magicstick.dev",
        "v1alpha1",
        appliance_ns,
        "modelactivations",
        {
            **b.activation("embedded-ext", external={"model": "openai/gpt-4o-mini"}),
            "metadata": {"name": "embedded-ext"},
        },
    )
    repo = Path(__file__).resolve().parents[2]
    env = {
        "PATH": "/usr/bin:/bin",
        "KUBECONFIG": str(kube_peer.kubeconfig),
        "NAMESPACE": ns,
        "APPLIANCE_NAMESPACE": appliance_ns,
        "LITELLM_BASE_URL": litellm_peer.base_url,
        "LITELLM_MASTER_KEY": litellm_peer.master_key,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(repo),
    }
    process = subprocess.Popen(
        [sys.executable, str(repo / "examples" / "embedded_operator.py")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines: list[str] = []
        with anyio.fail_after(60):
            while not any("'embedded-ext'" in line for line in lines):
                line = await anyio.to_thread.run_sync(process.stdout.readline)  # type: ignore[union-attr]
                assert line, "".join(lines)
                lines.append(line)
        assert any(line.startswith("catalog ") for line in lines)
    finally:
        process.terminate()
        process.wait(10)
        rows = httpx.get(
            f"{litellm_peer.base_url}/model/info",
            headers={"Authorization": f"Bearer {litellm_peer.master_key}"},
        ).json()["data"]
        for row in rows:
            if row["model_info"]["id"] == "ai-appliance-external-embedded-ext":
                httpx.post(
                    f"{litellm_peer.base_url}/model/delete",
                    json={"id": row["model_info"]["id"]},
                    headers={"Authorization": f"Bearer {litellm_peer.master_key}"},
                )


async def test_a_new_row_is_published_after_the_read_the_core_plans_once_the_write_is_answered(
    kube_client: Any,
) -> None:
    """The catalog waits for a read of LiteLLM after a row is created (LiteLLM fills in its limits). Once
    that write is answered and no other is in flight, the core plans the read at once: with the observer's
    own resync ten minutes away, the model is still published within seconds, after exactly one read."""
    await install_crds(kube_client)
    ns, appliance_ns = await create_namespace(kube_client), await create_namespace(kube_client, "mcsys")
    fake = FakeLiteLLM()
    catalog = ModelCatalog(
        CatalogConfig(namespace=ns, appliance_namespace=appliance_ns),
        kube_client,
        litellm_master_key="sk-test",
        kube_settings=FAST,
        litellm_transport=httpx.MockTransport(fake.handle),
        catalog_min_write_interval=0.0,
    )
    catalog.observer.resync_seconds = 600.0
    async with anyio.create_task_group() as host:
        await host.start(catalog.run)
        with anyio.fail_after(20):
            await catalog.wait_ready()
        polls = catalog.observer.polls
        await _create_ready_model(client.CustomObjectsApi(kube_client), ns, "qwen")
        view = await _until(
            catalog,
            lambda v: (
                v.catalog is not None
                and '"qwen"' in v.catalog["catalog.json"]
                and v.catalog_hash == json.loads(v.catalog["catalog.json"])["hash"]
            ),  # written, not only decided
            timeout=15.0,
        )
        assert view.route("qwen")[0]["state"] == "published"
        assert "ai-appliance-kubeai-qwen" in {r["model_info"]["id"] for r in (await fake_rows(fake))}
        assert catalog.observer.polls == polls + 1  # the planned read covered the write: no other
        host.cancel_scope.cancel()
