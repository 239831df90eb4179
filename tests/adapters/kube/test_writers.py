"""The command executors against the real kube-apiserver, and their outcome mapping."""

from __future__ import annotations

import itertools
import logging
import re
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from adapters.kube import KubeApi, KubeStats
from adapters.kube.api import KubeError
from adapters.kube.settings import FORBIDDEN_TOTAL
from adapters.kube.watch import list_objects, watch_specs
from adapters.kube.writers import (
    CONFLICT_ATTEMPTS,
    AgentTemplatePatcher,
    CatalogWriter,
    EventRecorder,
    Outcomes,
    PodEvictor,
    WorkloadRoller,
    event_name,
)
from catalog_core.commands import (
    EmitKubernetesEvent,
    EvictPod,
    ObjectRef,
    PatchAgentTemplate,
    RollWorkload,
    WriteCatalog,
)
from catalog_core.config import CatalogConfig
from catalog_core.events import CommandCompleted, Event, ObjectUpserted, Outcome, SourceKind, SourceListed
from catalog_core.fold import initial_state, step
from catalog_core.jsonval import Json
from catalog_core.redact import redact_for_source
from catalog_core.rules.agent_templates import merge_diff
from catalog_core.rules.rollouts import targets
from catalog_core.simulate import SimulatedWorld
from tests.adapters.kube.helpers import FAST
from tests.fixtures.kube_peer import create_namespace, install_crds, new_api_client

pytestmark = [pytest.mark.kube, pytest.mark.anyio]

FLUX = "kustomize.toolkit.fluxcd.io/ssa"
HASH = "ai-appliance.io/catalog-hash"


def _only(events: Sequence[Event]) -> CommandCompleted:
    done = [e for e in events if isinstance(e, CommandCompleted)]
    assert len(done) == 1, events
    return done[0]


def _write(ns: str, data: dict[str, str], catalog_hash: str) -> WriteCatalog:
    return WriteCatalog(
        ns, "ai-model-catalog", tuple(sorted(data.items())), catalog_hash, f"fp-{catalog_hash}"
    )


async def test_catalog_is_created_then_replaced_keeping_foreign_metadata(kube_client: Any) -> None:
    ns = await create_namespace(kube_client)
    core = client.CoreV1Api(kube_client)
    writer = CatalogWriter(KubeApi(kube_client))
    first = _write(ns, {"catalog.json": '{"models": []}\n', "AI_APPLIANCE_MODEL_CATALOG_READY": "true"}, "h1")
    assert writer.handles(first)

    events = await writer.execute(first)
    # The same events as the simulator reports for this command.
    simulated = SimulatedWorld().execute(first)
    assert [type(e) for e in events] == [type(e) for e in simulated]
    assert _only(events) == CommandCompleted(first.key, first.id, Outcome.APPLIED)
    written = events[1]
    assert isinstance(written, ObjectUpserted) and written.source is SourceKind.CATALOG_CONFIGMAP
    assert written.object["metadata"]["annotations"][HASH] == "h1"
    assert written.object["kind"] == "ConfigMap" and written.object["data"] == dict(first.data)

    # Flux and other tools annotate and label it; someone adds a stray key.
    await core.patch_namespaced_config_map(
        "ai-model-catalog",
        ns,
        {
            "metadata": {
                "annotations": {FLUX: "IfNotPresent"},
                "labels": {"app.kubernetes.io/part-of": "ai"},
            },
            "data": {"stray": "x"},
        },
    )
    second = _write(ns, {"catalog.json": '{"models": [1]}\n', "defaults.env": "A=1\n"}, "h2")
    assert _only(await writer.execute(second)).outcome is Outcome.APPLIED
    cm = await core.read_namespaced_config_map("ai-model-catalog", ns)
    assert cm.data == dict(second.data)  # replaced exactly: the stray key is gone
    synced = cm.metadata.annotations.pop("ai-appliance.io/last-sync")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", synced)  # as the previous controller wrote it
    # the hash it replaced: what consumers started before this write read (rules/rollouts.py)
    assert cm.metadata.annotations == {
        FLUX: "IfNotPresent",
        HASH: "h2",
        "ai-appliance.io/previous-catalog-hash": "h1",
    }
    assert cm.metadata.labels == {"app.kubernetes.io/part-of": "ai", "app": "ai-model-catalog"}


class _SecondWriter(KubeApi):
    """The real API, plus another writer that changes the ConfigMap between our read and our update."""

    def __init__(self, api_client: Any, interfere: int) -> None:
        super().__init__(api_client)
        self.interfere = interfere
        self.puts = 0
        self.run = uuid.uuid4().hex[:6]
        self.core = client.CoreV1Api(api_client)

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        if method == "PUT":
            self.puts += 1
            if self.puts <= self.interfere:
                ns = path.split("/namespaces/")[1].split("/", 1)[0]
                await self.core.patch_namespaced_config_map(
                    "ai-model-catalog",
                    ns,
                    {"metadata": {"annotations": {"other-writer": f"{self.run}-{self.puts}"}}},
                )
        return await super().request(method, path, **kwargs)


async def test_catalog_write_conflict_is_read_again_and_retried(kube_client: Any) -> None:
    ns = await create_namespace(kube_client)
    core = client.CoreV1Api(kube_client)
    await core.create_namespaced_config_map(
        ns,
        {"metadata": {"name": "ai-model-catalog", "annotations": {FLUX: "IfNotPresent"}}, "data": {"a": "1"}},
    )
    api = _SecondWriter(kube_client, interfere=1)
    command = _write(ns, {"catalog.json": "{}\n"}, "h3")
    assert _only(await CatalogWriter(api).execute(command)).outcome is Outcome.APPLIED
    assert api.puts == 2  # the first update met a conflict, the second one went through
    cm = await core.read_namespaced_config_map("ai-model-catalog", ns)
    ours = {k: v for k, v in cm.metadata.annotations.items() if k != "ai-appliance.io/last-sync"}
    assert ours == {
        FLUX: "IfNotPresent",
        "other-writer": f"{api.run}-1",
        HASH: "h3",
        "ai-appliance.io/previous-catalog-hash": "",  # it had no hash: nobody read a catalog of ours
    }
    assert cm.data == {"catalog.json": "{}\n"}

    # A writer that always gets in between: a few attempts, then a short retry for the core.
    busy = _SecondWriter(kube_client, interfere=100)
    done = _only(await CatalogWriter(busy).execute(_write(ns, {"catalog.json": "[]\n"}, "h4")))
    assert busy.puts == CONFLICT_ATTEMPTS
    assert done.outcome is Outcome.RETRY and done.reason == "WriteRejected" and 0 < done.retry_after <= 0.2
    assert "update configmaps/ai-model-catalog in " + ns in done.detail


async def test_agent_template_models_are_replaced_exactly(kube_client: Any) -> None:
    await install_crds(kube_client)
    ns = await create_namespace(kube_client)
    custom = client.CustomObjectsApi(kube_client)
    args = ("kubeopencode.io", "v1alpha1", ns, "agenttemplates")
    config = {
        "provider": {
            "litellm": {
                "options": {"baseURL": "http://litellm/v1"},
                "models": {
                    "old": {"name": "old"},
                    "keep": {"name": "keep", "limit": {"context": 1, "output": 1}},
                },
            },
            "other": {"models": {"x": {}}},
        },
        "model": "litellm/keep",
        "theme": "dark",
    }
    body = {
        "apiVersion": "kubeopencode.io/v1alpha1",
        "kind": "AgentTemplate",
        "metadata": {"name": "litellm-default"},
    }
    created = await custom.create_namespaced_custom_object(*args, {**body, "spec": {"config": config}})
    desired = {"keep": {"name": "keep", "limit": {"context": 8192, "output": 4096}}, "new": {"name": "New"}}
    # The patch the core builds (rules.agent_templates): a merge diff, guarded by the resourceVersion.
    patch = {
        "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
        "spec": {
            "config": {
                "provider": {
                    "litellm": {"models": merge_diff(config["provider"]["litellm"]["models"], desired)}
                }
            }
        },
    }
    command = PatchAgentTemplate(
        ns, "litellm-default", created["metadata"]["resourceVersion"], Json.of(patch)
    )
    patcher = AgentTemplatePatcher(KubeApi(kube_client))
    events = await patcher.execute(command)
    assert _only(events) == CommandCompleted(command.key, command.id, Outcome.APPLIED)
    assert isinstance(events[1], ObjectUpserted) and events[1].source is SourceKind.AGENT_TEMPLATES
    got = await custom.get_namespaced_custom_object(*args[:3], "agenttemplates", "litellm-default")
    assert got["spec"]["config"]["provider"]["litellm"]["models"] == desired  # "old" is gone
    assert got["spec"]["config"]["provider"]["litellm"]["options"] == {"baseURL": "http://litellm/v1"}
    assert got["spec"]["config"]["provider"]["other"] == {"models": {"x": {}}}
    assert got["spec"]["config"]["theme"] == "dark" and got["spec"]["config"]["model"] == "litellm/keep"
    # the event carries what the core reads of it (trimmed at the edge), not the whole object
    assert events[1].object["spec"] == redact_for_source(SourceKind.AGENT_TEMPLATES, got).obj["spec"]
    assert "theme" not in events[1].object["spec"]["config"]

    # The same patch again carries the old resourceVersion; the template changed since -> 409 -> retry soon.
    stale = _only(await patcher.execute(command))
    assert stale.outcome is Outcome.RETRY and stale.reason == "WriteRejected" and stale.retry_after <= 0.2
    # A template that does not exist -> gone.
    missing = PatchAgentTemplate(ns, "nope", "1", Json.of({"spec": {"config": {"model": "x"}}}))
    assert _only(await patcher.execute(missing)).outcome is Outcome.GONE


def _deployment(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, **(labels or {})}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }


async def test_rollout_reaches_the_deployment_behind_a_consumer_pods_replicaset(kube_client: Any) -> None:
    ns = await create_namespace(kube_client)
    apps, core = client.AppsV1Api(kube_client), client.CoreV1Api(kube_client)
    consumer = {"ai-appliance.io/model-catalog-consumer": "true"}
    deployment = await apps.create_namespaced_deployment(ns, _deployment("web", consumer))
    owner = {"apiVersion": "apps/v1", "controller": True, "uid": deployment.metadata.uid}
    rs_body = _deployment("web-5d4f", consumer)
    rs_body["metadata"]["ownerReferences"] = [{**owner, "kind": "Deployment", "name": "web"}]
    rs = await apps.create_namespaced_replica_set(ns, rs_body)
    pod = {
        "metadata": {
            "name": "web-5d4f-abcde",
            "labels": {"app": "web", **consumer},
            "ownerReferences": [{**owner, "kind": "ReplicaSet", "name": "web-5d4f", "uid": rs.metadata.uid}],
        },
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    await core.create_namespaced_pod(ns, pod)
    await apps.create_namespaced_stateful_set(
        ns, {**_deployment("db"), "spec": {**_deployment("db")["spec"], "serviceName": "db"}}
    )

    # The core decides the target from what the watches list: pod -> ReplicaSet -> Deployment.
    api = KubeApi(kube_client)
    config = CatalogConfig(namespace=ns)
    state = initial_state(config)
    for spec in watch_specs(config):
        if spec.source in (SourceKind.PODS, SourceKind.REPLICASETS, SourceKind.DEPLOYMENTS):
            listing = await list_objects(api, spec, FAST)
            state = step(state, SourceListed(spec.source, listing.objects)).state
    [target] = targets(state)
    assert (target.kind, target.name) == ("Deployment", "web")

    roller = WorkloadRoller(api)
    command = RollWorkload(ns, target.kind, target.name, "h5")
    events = await roller.execute(command)
    assert _only(events).outcome is Outcome.APPLIED
    rolled = await apps.read_namespaced_deployment("web", ns)
    assert rolled.spec.template.metadata.annotations == {HASH: "h5"}
    assert rolled.spec.template.metadata.labels["app"] == "web"
    assert isinstance(events[1], ObjectUpserted) and events[1].source is SourceKind.DEPLOYMENTS
    assert events[1].object["spec"]["template"]["metadata"]["annotations"] == {HASH: "h5"}

    sts = await roller.execute(RollWorkload(ns, "StatefulSet", "db", "h5"))
    assert _only(sts).outcome is Outcome.APPLIED and sts[1].source is SourceKind.STATEFULSETS  # type: ignore[attr-defined]
    assert (await apps.read_namespaced_stateful_set("db", ns)).spec.template.metadata.annotations == {
        HASH: "h5"
    }
    assert _only(await roller.execute(RollWorkload(ns, "DaemonSet", "gone", "h5"))).outcome is Outcome.GONE
    assert (
        _only(await roller.execute(RollWorkload(ns, "ReplicaSet", "web-5d4f", "h5"))).outcome
        is Outcome.TERMINAL
    )


async def test_eviction_falls_back_to_v1beta1_and_respects_disruption_budgets(kube_client: Any) -> None:
    ns = await create_namespace(kube_client)
    core = client.CoreV1Api(kube_client)
    evictor = PodEvictor(KubeApi(kube_client))

    async def pod(name: str, app: str) -> Any:
        body = {
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
        return await core.create_namespaced_pod(ns, body)

    p1 = await pod("p1", "free")
    done = _only(await evictor.execute(EvictPod(ns, "p1", p1.metadata.uid, "h")))
    assert done == CommandCompleted(done.key, done.command_id, Outcome.APPLIED)
    assert (
        evictor.VERSIONS[evictor._version] == "policy/v1beta1"
    )  # this v1.20 server does not serve policy/v1
    with pytest.raises(ApiException) as gone:
        await core.read_namespaced_pod("p1", ns)
    assert gone.value.status == 404
    # Already gone, or replaced by a new pod of the same name: nothing left to evict.
    assert _only(await evictor.execute(EvictPod(ns, "p1", p1.metadata.uid, "h"))).outcome is Outcome.APPLIED
    await pod("p1", "free")
    replaced = _only(await evictor.execute(EvictPod(ns, "p1", p1.metadata.uid, "h")))
    assert replaced.outcome is Outcome.APPLIED and "replaced" in replaced.detail
    assert (await core.read_namespaced_pod("p1", ns)).metadata.uid != p1.metadata.uid

    # A running pod guarded by a PodDisruptionBudget: 429 -> retry later, with backoff.
    guarded = await pod("p2", "guarded")
    await core.patch_namespaced_pod_status("p2", ns, {"status": {"phase": "Running"}})
    # (kubernetes-asyncio 36 has no policy/v1beta1 client, and v1.20 serves PDBs only there.)
    await KubeApi(kube_client).request(
        "POST",
        f"/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets",
        body={
            "apiVersion": "policy/v1beta1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )
    refused = _only(await evictor.execute(EvictPod(ns, "p2", guarded.metadata.uid, "h")))
    assert refused.outcome is Outcome.RETRY and refused.reason == "WriteFailed" and refused.retry_after > 0
    assert (await core.read_namespaced_pod("p2", ns)).metadata.deletion_timestamp is None


async def test_events_are_emitted_and_repeats_aggregated(kube_client: Any) -> None:
    ns = await create_namespace(kube_client)
    core = client.CoreV1Api(kube_client)
    cm = await core.create_namespaced_config_map(ns, {"metadata": {"name": "ai-external-models"}})
    ref = ObjectRef("v1", "ConfigMap", ns, "ai-external-models", cm.metadata.uid)
    command = EmitKubernetesEvent(ref, "InvalidJSON", "models.json: Expecting value at line 1 column 1")
    ticks = itertools.count(10)
    recorder = EventRecorder(KubeApi(kube_client), clock=lambda: f"2030-01-01T00:00:{next(ticks):02d}Z")

    assert _only(await recorder.execute(command)) == CommandCompleted(
        command.key, command.id, Outcome.APPLIED
    )
    event = await core.read_namespaced_event(event_name(command), ns)
    assert (event.type, event.reason, event.count, event.source.component) == (
        "Warning",
        "InvalidJSON",
        1,
        "model-catalog",
    )
    assert event.message == command.message
    assert (event.involved_object.kind, event.involved_object.name) == ("ConfigMap", "ai-external-models")
    assert event.involved_object.uid == cm.metadata.uid

    assert _only(await recorder.execute(command)).outcome is Outcome.APPLIED  # the same problem again
    again = await core.read_namespaced_event(event_name(command), ns)
    assert again.count == 2 and again.last_timestamp > again.first_timestamp
    # Another problem of the same object and reason is the same Event (as the Kubernetes event recorder
    # aggregates): its count goes up and it carries the newest message (issue 32, item 9).
    other = EmitKubernetesEvent(ref, "InvalidJSON", "models.json: another problem")
    assert event_name(other) == event_name(command)
    assert _only(await recorder.execute(other)).outcome is Outcome.APPLIED
    listed = await core.list_namespaced_event(ns)
    assert [(e.message, e.count) for e in listed.items] == [("models.json: another problem", 3)]
    # Another reason is another Event.
    third = EmitKubernetesEvent(ref, "SecretNotAllowed", "gpt: Secret x is not a model-provider Secret")
    assert _only(await recorder.execute(third)).outcome is Outcome.APPLIED
    listed = await core.list_namespaced_event(ns)
    assert sorted((e.reason, e.count) for e in listed.items) == [("InvalidJSON", 3), ("SecretNotAllowed", 1)]


async def test_forbidden_writes_are_retried_with_backoff_and_named(
    kube_peer: Any, kube_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A 403 can be mended without a new command (the Role is fixed): it is a retry, with a reason the core
    reports and a backoff that grows up to its cap, never a terminal outcome (issue 33, item 2)."""
    ns = await create_namespace(kube_client)
    as_nobody = await new_api_client(kube_peer, impersonate=f"nobody-{uuid.uuid4().hex[:6]}")
    stats = KubeStats()
    caplog.set_level(logging.WARNING, logger="model_catalog.kube")
    outcomes = Outcomes(stats, retry_cap=4.0)
    try:
        writer = CatalogWriter(KubeApi(as_nobody), outcomes)
        command = _write(ns, {"a": "b"}, "h6")
        attempts = [_only(await writer.execute(command)) for _ in range(5)]
        # A new command for the key (its input changed) starts again from the base.
        fresh = _only(await writer.execute(_write(ns, {"a": "c"}, "h6b")))
    finally:
        await as_nobody.close()
    done = attempts[0]
    assert done.outcome is Outcome.RETRY and done.reason == "Forbidden"
    assert done.detail.startswith(f"forbidden: get configmaps/ai-model-catalog in {ns}")
    assert f"forbidden: get configmaps/ai-model-catalog in {ns}" in caplog.text
    assert stats.total(FORBIDDEN_TOTAL, verb="get") == 6  # five attempts, and the new command's
    delays = [a.retry_after for a in attempts]
    assert all(a.outcome is Outcome.RETRY and a.reason == "Forbidden" for a in attempts)
    # base 1 s doubling, jittered in [c/2, c], capped at 4 s: 0.5-1, 1-2, 2-4, 2-4, 2-4
    assert 0.5 <= delays[0] <= 1.0 and all(2.0 <= d <= 4.0 for d in delays[2:])
    assert fresh.outcome is Outcome.RETRY and 0.5 <= fresh.retry_after <= 1.0


async def test_an_immutable_catalog_is_named_retried_and_written_once_deleted(kube_client: Any) -> None:
    """Issue 32, item 11: a forged ``ai-model-catalog`` with ``immutable: true`` is never rewritten. The
    writer says so (reason ``CatalogImmutable``, with the command that mends it) without sending a write
    that can only fail, retries with backoff, and writes the catalog once the forgery is deleted."""
    ns = await create_namespace(kube_client)
    core = client.CoreV1Api(kube_client)
    await core.create_namespaced_config_map(
        ns, {"metadata": {"name": "ai-model-catalog"}, "data": {"forged": "yes"}, "immutable": True}
    )
    writer = CatalogWriter(KubeApi(kube_client), Outcomes(retry_cap=4.0))
    command = _write(ns, {"catalog.json": "{}"}, "h-immutable")
    refused = _only(await writer.execute(command))
    assert refused.outcome is Outcome.RETRY and refused.reason == "CatalogImmutable"
    assert f"kubectl delete configmap -n {ns} ai-model-catalog" in refused.detail
    assert 0 < refused.retry_after <= 1.0
    assert (await core.read_namespaced_config_map("ai-model-catalog", ns)).data == {"forged": "yes"}
    await core.delete_namespaced_config_map("ai-model-catalog", ns)
    written = await writer.execute(command)
    assert _only(written).outcome is Outcome.APPLIED
    assert (await core.read_namespaced_config_map("ai-model-catalog", ns)).data == {"catalog.json": "{}"}


async def test_a_rejected_write_is_retried_not_terminal(kube_client: Any) -> None:
    """A 422 (here: a Deployment the API server's validation refuses) may be mended outside the controller
    (a webhook, a policy, an object replaced): a retry with reason ``WriteRejected``, never terminal."""
    ns = await create_namespace(kube_client)
    await client.AppsV1Api(kube_client).create_namespaced_deployment(ns, _deployment("web"))
    api = KubeApi(kube_client)
    with pytest.raises(KubeError) as refused:
        await api.request(
            "PATCH",
            f"/apis/apps/v1/namespaces/{ns}/deployments/web",
            body={"spec": {"replicas": -1}},
            content_type="application/merge-patch+json",
        )
    assert refused.value.status == 422
    command = RollWorkload(ns, "Deployment", "web", "h")
    done = Outcomes(retry_cap=4.0).failed(command, refused.value, "patch", f"deployments/web in {ns}")
    assert done.outcome is Outcome.RETRY and done.reason == "WriteRejected" and "HTTP 422" in done.detail
    assert 0.5 <= done.retry_after <= 1.0


async def test_unreachable_server_gives_retry_with_growing_backoff() -> None:
    """No server at all (a closed port): transport errors become retries with a capped, jittered backoff."""
    from kubernetes_asyncio.client import ApiClient, Configuration

    configuration = Configuration(host="https://127.0.0.1:9")
    api_client = ApiClient(configuration=configuration)
    try:
        writer = CatalogWriter(KubeApi(api_client, request_timeout=2.0), Outcomes())
        command = _write("ns", {"a": "b"}, "h7")
        delays = []
        for _ in range(4):
            done = _only(await writer.execute(command))
            assert done.outcome is Outcome.RETRY and done.reason == "WriteFailed"
            assert "ConnectError" in done.detail
            delays.append(done.retry_after)
    finally:
        await api_client.close()
    assert delays[-1] > delays[0]  # base 1 s doubling, jittered in [c/2, c]: 4th in [4, 8], 1st in [0.5, 1]
    assert KubeError(503, "ServiceUnavailable").transient and not KubeError(422, "Invalid").transient
