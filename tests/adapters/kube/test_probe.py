"""FreeToken health: a Deployment that becomes Ready, a /health that turns healthy, then fails twice."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from kubernetes_asyncio import client

from adapters.identity import USER_AGENT
from adapters.kube import KubeAdapters
from adapters.kube.probe import RuntimeProber, parse_resolve
from adapters.vault import SecretVault
from catalog_core.commands import ProbeRuntime
from catalog_core.config import CatalogConfig
from catalog_core.events import Event, RuntimeProbed, SourceKind
from catalog_core.reasons import Reason
from tests.adapters.kube.helpers import FAST, HealthServer, Pipeline, listed, names, record_of
from tests.fixtures.kube_peer import create_namespace, install_crds


class ManualClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.kube
@pytest.mark.anyio
async def test_freetoken_runtime_ready_then_healthy_then_failing_twice(kube_client: Any) -> None:
    await install_crds(kube_client)
    ns, appliance_ns = await create_namespace(kube_client), await create_namespace(kube_client, "mcsys")
    config = CatalogConfig(namespace=ns, appliance_namespace=appliance_ns)
    custom, core, apps = (
        client.CustomObjectsApi(kube_client),
        client.CoreV1Api(kube_client),
        client.AppsV1Api(kube_client),
    )
    await custom.create_namespaced_custom_object(
        "appliance.magicstick.dev",
        "v1alpha1",
        appliance_ns,
        "modelactivations",
        {
            "apiVersion": "appliance.magicstick.dev/v1alpha1",
            "kind": "ModelActivation",
            "metadata": {"name": "ft-model"},
            "spec": {"type": "local", "engine": "freetoken", "modelType": "chat"},
        },
    )
    await core.create_namespaced_service(
        ns, {"metadata": {"name": "ft-runtime"}, "spec": {"ports": [{"name": "http", "port": 8000}]}}
    )
    labels = {
        "appliance.magicstick.dev/runtime": "freetoken",
        "appliance.magicstick.dev/modelactivation": "ft-model",
    }
    await apps.create_namespaced_deployment(
        ns,
        {
            "metadata": {"name": "ft-runtime", "labels": labels},
            "spec": {
                "selector": {"matchLabels": {"app": "ft"}},
                "template": {
                    "metadata": {"labels": {"app": "ft"}},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                },
            },
        },
    )
    health = HealthServer()
    port = await health.start()
    host = f"ft-runtime.{ns}.svc.cluster.local:8000"
    adapters = KubeAdapters(
        kube_client, config, SecretVault(), settings=FAST, probe_resolve={host: f"127.0.0.1:{port}"}
    )
    clock = ManualClock()
    send, receive = anyio.create_memory_object_stream[Event](1000)
    pipeline = Pipeline(config, adapters.executors, receive, clock)

    def probes() -> list[RuntimeProbed]:
        return [e for e in pipeline.seen if isinstance(e, RuntimeProbed)]

    try:
        with send, receive:
            async with anyio.create_task_group() as tg:
                tg.start_soon(adapters.run, send)
                observed = listed(SourceKind.FREETOKEN_DEPLOYMENTS, lambda e: "ft-runtime" in names(e))
                await pipeline.until(lambda: any(observed(e) for e in pipeline.seen), what="runtime listed")
                for _ in range(5):
                    await pipeline.turn()
                assert probes() == [] and health.requests == []  # not Ready: never probed

                # The test plays the Deployment controller: the status subresource says Ready.
                await apps.patch_namespaced_deployment_status(
                    "ft-runtime",
                    ns,
                    {
                        "status": {
                            "observedGeneration": 1,
                            "replicas": 1,
                            "readyReplicas": 1,
                            "availableReplicas": 1,
                            "conditions": [
                                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}
                            ],
                        }
                    },
                )
                health.status = 200
                await pipeline.until(lambda: len(probes()) == 1, what="first probe")
                # The route's write waits out the burst probe (issue 14); this clock moves only when told.
                await pipeline.until(lambda: bool(pipeline.state.damping.waiting), what="the write held")
                clock.now += config.litellm_burst_probe_seconds
                # The next ticks re-plan the runtime: its route is written, then published.
                await pipeline.until(
                    lambda: _reason(pipeline) is Reason.PUBLISHED,
                    timeout=5,
                )
                assert "ai-appliance-freetoken-ft-model" in pipeline.world.rows

                health.status = 503
                for expected in (2, 3):
                    clock.now += config.runtime_health_seconds  # the next probe falls due
                    await pipeline.until(lambda n=expected: len(probes()) == n, what=f"probe {expected}")  # type: ignore[misc]
                await pipeline.turn()
                final = _reason(pipeline)
                tg.cancel_scope.cancel()
    finally:
        await health.close()
        await adapters.aclose()

    url = f"http://{host}/health"
    assert [(p.runtime, p.url, p.healthy, p.detail) for p in probes()] == [
        ("ft-runtime", url, True, "HTTP 200"),
        ("ft-runtime", url, False, "HTTP 503"),
        ("ft-runtime", url, False, "HTTP 503"),
    ]
    assert health.requests == [("GET /health HTTP/1.1", host)] * 3  # exactly the URL, sent to the override
    assert final is Reason.HEALTH_CHECK_FAILED  # withdrawn after the second failure
    probe_commands = [c for c in pipeline.commands if isinstance(c, ProbeRuntime)]
    assert [c.url for c in probe_commands] == [url] * 3
    assert pipeline.state.source(SourceKind.FREETOKEN_DEPLOYMENTS).known


def _reason(pipeline: Pipeline) -> Reason | None:
    record = record_of(pipeline.state, "freetoken", "ft-model")
    return record.reason if record is not None else None


@pytest.mark.anyio
async def test_probe_errors_are_short_details() -> None:
    health = HealthServer()
    port = await health.start()
    await health.close()  # nothing listens there any more
    # a refused connection is told at once: a long timeout, so a loaded machine cannot turn it into one
    prober = RuntimeProber(timeout=30, resolve={"rt.ns.svc.cluster.local:80": f"127.0.0.1:{port}"})
    try:
        [refused] = await prober.execute(ProbeRuntime("rt", "http://rt.ns.svc.cluster.local/health"))
        assert refused == RuntimeProbed("rt", "http://rt.ns.svc.cluster.local/health", False, "ConnectError")
    finally:
        await prober.aclose()
    silent = HealthServer()  # accepts, never answers
    silent._serve = _never  # type: ignore[method-assign]
    silent_port = await silent.start()
    prober = RuntimeProber(timeout=0.5)
    try:
        [slow] = await prober.execute(ProbeRuntime("rt", f"http://127.0.0.1:{silent_port}/health"))
        assert (slow.healthy, slow.detail) == (False, "ReadTimeout")  # type: ignore[union-attr]
    finally:
        await prober.aclose()
        await silent.close()
    assert parse_resolve("a.b:80=127.0.0.1:1, c:1=[::1]:2") == {"a.b:80": "127.0.0.1:1", "c:1": "[::1]:2"}
    with pytest.raises(ValueError, match="host:port=addr:port"):
        parse_resolve("a.b=127.0.0.1")


async def _never(reader: Any, writer: Any) -> None:
    """Accept, read, never answer; close once the client gives up."""
    try:
        while await reader.read(1024):
            pass
    finally:
        writer.close()


@pytest.mark.anyio
async def test_a_probe_names_us_in_its_user_agent() -> None:
    health = HealthServer()
    health.status = 200
    port = await health.start()
    prober = RuntimeProber(timeout=2.0)
    try:
        [answer] = await prober.execute(ProbeRuntime("rt", f"http://127.0.0.1:{port}/health"))
        assert answer.healthy  # type: ignore[union-attr]
    finally:
        await prober.aclose()
        await health.close()
    assert health.user_agents == [USER_AGENT]
    assert USER_AGENT.startswith("model-catalog/")
