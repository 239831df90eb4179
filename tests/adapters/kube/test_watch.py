"""The table-driven watches against the real kube-apiserver."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any
from urllib.parse import urlparse

import anyio
import attrs
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from adapters.kube import KubeApi, KubeStats, WatchSource, WatchSpec, watch_specs
from adapters.kube.settings import (
    FORBIDDEN_TOTAL,
    GONE_TOTAL,
    RECONNECTS_TOTAL,
    RELISTS_TOTAL,
    WATCH_REQUESTS_TOTAL,
)
from adapters.vault import SecretVault
from catalog_core.config import CatalogConfig
from catalog_core.events import (
    Event,
    ObjectDeleted,
    ObjectUpserted,
    SourceKind,
    SourceListed,
    SourceUnavailable,
    Ticked,
    Unavailability,
)
from catalog_core.sealing import REDACTED
from contracts.kinds import RESOURCES, Resource
from tests.adapters.kube.helpers import (
    FAST,
    TcpProxy,
    deleted,
    listed,
    names,
    published_ids,
    running,
    upserted,
)
from tests.fixtures.kube_peer import create_namespace, install_crd, install_crds, new_api_client

pytestmark = [pytest.mark.kube, pytest.mark.anyio]

INLINE_KEY = "sk-inline-" + uuid.uuid4().hex


def _deployment(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }


def _pod_template(name: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}


class World:
    """Create / label / delete one object of every watched kind, through the typed clients."""

    def __init__(self, api_client: Any, ns: str, appliance_ns: str) -> None:
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.ns, self.appliance_ns = ns, appliance_ns

    def objects(self) -> list[tuple[list[SourceKind], str, str, dict[str, Any]]]:
        """(sources expected to see it, kind, name, body)."""
        models_json = json.dumps(
            {"models": [{"name": "ext-a", "model": "openai/gpt-x", "apiKey": INLINE_KEY}]}
        )
        return [
            (
                [SourceKind.KUBEAI_MODELS],
                "Model",
                "m1",
                {"spec": {"features": ["TextGeneration"], "engine": "VLLM"}},
            ),
            (
                [SourceKind.EXTERNAL_MODELS],
                "ConfigMap",
                "ai-external-models",
                {"data": {"models.json": models_json}},
            ),
            (
                [SourceKind.CATALOG_CONFIGMAP],
                "ConfigMap",
                "ai-model-catalog",
                {"data": {"catalog.json": "{}"}},
            ),
            ([SourceKind.MODEL_ACTIVATIONS], "ModelActivation", "act1", {"spec": {"type": "external"}}),
            (
                [SourceKind.FREETOKEN_DEPLOYMENTS, SourceKind.DEPLOYMENTS],
                "Deployment",
                "ft1",
                _deployment("ft1", {"appliance.magicstick.dev/runtime": "freetoken"}),
            ),
            ([SourceKind.DEPLOYMENTS], "Deployment", "web", _deployment("web")),
            ([SourceKind.SERVICES], "Service", "svc1", {"spec": {"ports": [{"name": "http", "port": 8000}]}}),
            ([SourceKind.PODS], "Pod", "pod1", {"spec": {"containers": [{"name": "c", "image": "x"}]}}),
            (
                [SourceKind.REPLICASETS],
                "ReplicaSet",
                "rs1",
                {"spec": {"selector": {"matchLabels": {"app": "rs1"}}, "template": _pod_template("rs1")}},
            ),
            (
                [SourceKind.STATEFULSETS],
                "StatefulSet",
                "sts1",
                {
                    "spec": {
                        "serviceName": "sts1",
                        "selector": {"matchLabels": {"app": "sts1"}},
                        "template": _pod_template("sts1"),
                    }
                },
            ),
            (
                [SourceKind.DAEMONSETS],
                "DaemonSet",
                "ds1",
                {"spec": {"selector": {"matchLabels": {"app": "ds1"}}, "template": _pod_template("ds1")}},
            ),
            (
                [SourceKind.AGENT_TEMPLATES],
                "AgentTemplate",
                "litellm-default",
                {"spec": {"config": {"x": 1}}},
            ),
            ([], "ConfigMap", "unrelated", {"data": {"a": "b"}}),  # no source selects it
        ]

    async def create(self, kind: str, name: str, body: dict[str, Any]) -> None:
        body = {**body, "metadata": {**body.get("metadata", {}), "name": name}}
        await self._call(kind, "create", name, body)

    async def label(self, kind: str, name: str) -> None:
        await self._call(kind, "patch", name, {"metadata": {"labels": {"step": "modified"}}})

    async def delete(self, kind: str, name: str) -> None:
        await self._call(kind, "delete", name, None)

    async def _call(self, kind: str, verb: str, name: str, body: dict[str, Any] | None) -> None:
        custom = {
            "Model": ("kubeai.org", "v1", "models", self.ns),
            "ModelActivation": (
                "appliance.magicstick.dev",
                "v1alpha1",
                "modelactivations",
                self.appliance_ns,
            ),
            "AgentTemplate": ("kubeopencode.io", "v1alpha1", "agenttemplates", self.ns),
        }
        if kind in custom:
            group, version, plural, ns = custom[kind]
            if verb == "create":
                await self.custom.create_namespaced_custom_object(
                    group,
                    version,
                    ns,
                    plural,
                    {"apiVersion": f"{group}/{version}", "kind": kind, **(body or {})},
                )
            elif verb == "patch":
                await self.custom.patch_namespaced_custom_object(
                    group, version, ns, plural, name, body, _content_type="application/merge-patch+json"
                )
            else:
                await self.custom.delete_namespaced_custom_object(group, version, ns, plural, name)
            return
        snake = {
            "ConfigMap": "config_map",
            "Deployment": "deployment",
            "Service": "service",
            "Pod": "pod",
            "ReplicaSet": "replica_set",
            "StatefulSet": "stateful_set",
            "DaemonSet": "daemon_set",
        }[kind]
        api = self.apps if kind in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet") else self.core
        method = getattr(api, f"{verb}_namespaced_{snake}")
        if verb == "create":
            await method(self.ns, body)
        elif verb == "patch":
            await method(name, self.ns, body)
        else:
            await method(name, self.ns)


async def test_every_source_sees_create_modify_delete_in_order(kube_client: Any) -> None:
    await install_crds(kube_client)
    ns, appliance_ns = await create_namespace(kube_client), await create_namespace(kube_client, "mcsys")
    config = CatalogConfig(namespace=ns, appliance_namespace=appliance_ns)
    vault = SecretVault()
    api = KubeApi(kube_client)
    specs = watch_specs(config)
    assert {s.source for s in specs} == set(RESOURCES) - {SourceKind.SECRETS}
    sources = [WatchSource(api, spec, vault=vault, settings=FAST) for spec in specs]
    world = World(kube_client, ns, appliance_ns)

    async with running(sources) as (events, _):
        for spec in specs:  # every source starts with a (here empty) complete listing
            await events.wait_for(listed(spec.source, lambda e: e.objects == ()))
        for _, kind, name, body in world.objects():
            await world.create(kind, name, body)
        for _, kind, name, _ in world.objects():
            await world.label(kind, name)
        for _, kind, name, _ in world.objects():
            await world.delete(kind, name)
        last = [(s, n) for sources_, _, n, _ in world.objects() for s in sources_]
        for source, name in last:
            await events.wait_for(deleted(source, name))

    for sources_, kind, name, _ in world.objects():
        for source in sources_:
            seen = events.of(source, name)
            kinds = [type(e).__name__ for e in seen]
            # (A pod's graceful deletion first shows it with a deletionTimestamp.)
            between = ["ObjectUpserted"] if kind == "Pod" and len(seen) == 4 else []
            assert kinds == ["ObjectUpserted", "ObjectUpserted", *between, "ObjectDeleted"], (
                source,
                name,
                kinds,
            )
            created, modified, gone = (seen[0].object, seen[1].object, seen[-1].object)  # type: ignore[attr-defined]
            if between:
                assert seen[2].object["metadata"]["deletionTimestamp"]  # type: ignore[attr-defined]
            assert "step" not in (created["metadata"].get("labels") or {})
            assert modified["metadata"]["labels"]["step"] == "modified"
            assert gone["metadata"]["name"] == name
            for obj in (created, modified, gone):
                assert obj["kind"] == kind and isinstance(obj["apiVersion"], str)
                assert obj["metadata"]["resourceVersion"] and "managedFields" not in obj["metadata"]
    # Unselected objects never reach a source; each source saw only its own kind.
    assert not any(
        isinstance(e, ObjectUpserted | ObjectDeleted) and e.object["metadata"]["name"] == "unrelated"
        for e in events.events
    )
    for event in events.events:
        if isinstance(event, ObjectUpserted | ObjectDeleted):
            assert event.object["kind"] == RESOURCES[event.source].kind
    # The inline key of models.json was redacted before it became an event, and kept in the vault.
    external = events.of(SourceKind.EXTERNAL_MODELS, "ai-external-models")[0]
    assert isinstance(external, ObjectUpserted)
    text = external.object["data"]["models.json"]
    assert INLINE_KEY not in text and REDACTED in text
    assert INLINE_KEY not in repr(events.events)
    assert INLINE_KEY in vault.values()


async def test_relist_after_410_detects_a_deletion_made_during_the_gap(kube_client: Any) -> None:
    """The consumer stops reading: the source has listed but cannot send, so it is not watching.
    Meanwhile the object is deleted and the list's resourceVersion is compacted. When the consumer
    reads again the watch gets 410 Gone, and the relist's SourceListed no longer has the object."""
    ns = await create_namespace(kube_client)
    config = CatalogConfig(namespace=ns)
    core = client.CoreV1Api(kube_client)
    await core.create_namespaced_config_map(
        ns, {"metadata": {"name": "ai-external-models"}, "data": {"x": "1"}}
    )
    spec = next(s for s in watch_specs(config) if s.source is SourceKind.EXTERNAL_MODELS)
    stats = KubeStats()
    source = WatchSource(KubeApi(kube_client), spec, settings=FAST, stats=stats)
    send, receive = anyio.create_memory_object_stream[Event](1)
    send.send_nowait(Ticked(0.0))  # the buffer is full: the source's first send blocks
    with send, receive:
        async with anyio.create_task_group() as tg:
            tg.start_soon(source.run, send)
            with anyio.fail_after(10):
                while stats.total(RELISTS_TOTAL) < 1:  # listed (with the object), now blocked on send
                    await anyio.sleep(0.02)
            await core.delete_namespaced_config_map("ai-external-models", ns)
            marker = await core.create_namespaced_config_map(ns, {"metadata": {"name": "churn"}})
            before = int(marker.metadata.resource_version) - 1
            with anyio.fail_after(30):  # wait until everything up to the deletion is compacted
                while True:
                    try:
                        await core.list_namespaced_config_map(
                            ns, resource_version=str(before), resource_version_match="Exact"
                        )
                    except ApiException as exc:
                        if exc.status == 410:
                            break
                        raise
                    await anyio.sleep(0.5)
            got: list[Event] = []
            with anyio.fail_after(20):
                async for event in receive:
                    got.append(event)
                    if (
                        isinstance(event, SourceListed)
                        and len([e for e in got if isinstance(e, SourceListed)]) == 2
                    ):
                        break
            tg.cancel_scope.cancel()
    listings = [e for e in got if isinstance(e, SourceListed)]
    assert names(listings[0]) == {"ai-external-models"}  # the stale listing, sent after the gap
    assert names(listings[1]) == set()  # the relist after 410: the deletion is detected
    assert stats.total(GONE_TOTAL, source="external-models") >= 1
    assert not any(isinstance(e, ObjectUpserted | ObjectDeleted) for e in got)


async def test_reconnects_after_dropped_refused_and_half_open_connections(
    kube_peer: Any, kube_client: Any
) -> None:
    await install_crds(kube_client)
    ns = await create_namespace(kube_client)
    target = urlparse(kube_peer.server)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 443)
    port = await proxy.start()
    via_proxy = await new_api_client(kube_peer, host=f"https://127.0.0.1:{port}")
    custom = client.CustomObjectsApi(kube_client)
    stats = KubeStats()
    settings = attrs.evolve(FAST, watch_timeout_seconds=2, timeout_grace_seconds=1.0)
    spec = WatchSpec(SourceKind.KUBEAI_MODELS, RESOURCES[SourceKind.KUBEAI_MODELS], ns)
    source = WatchSource(KubeApi(via_proxy), spec, settings=settings, stats=stats)

    async def model(name: str) -> None:
        body = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": name}, "spec": {}}
        await custom.create_namespaced_custom_object("kubeai.org", "v1", ns, "models", body)

    try:
        async with running([source]) as (events, _):
            await events.wait_for(listed(SourceKind.KUBEAI_MODELS))
            await model("m1")
            await events.wait_for(upserted(SourceKind.KUBEAI_MODELS, "m1"))

            # 1. Every connection dropped: the watch reconnects from its resourceVersion (no relist needed).
            relists = stats.total(RELISTS_TOTAL)
            proxy.drop_all()
            await model("m2")
            await events.wait_for(upserted(SourceKind.KUBEAI_MODELS, "m2"))
            # resumed from its resourceVersion, whether the cut hit a watch or fell between two of them
            assert stats.total(RELISTS_TOTAL) == relists

            # 2. The server is unreachable for a while: FAILING once, then a relist shows what changed.
            await proxy.refuse()
            mark = len(events.events)
            await custom.delete_namespaced_custom_object("kubeai.org", "v1", ns, "models", "m1")
            await model("m3")
            failing = await events.wait_for(
                lambda e: isinstance(e, SourceUnavailable) and e.status is Unavailability.FAILING, after=mark
            )
            assert "models.kubeai.org" in failing.detail  # type: ignore[attr-defined]
            assert source.name in stats.stale  # issue 18: /readyz and a metric say which, and since when
            await proxy.start()
            relisted = await events.wait_for(listed(SourceKind.KUBEAI_MODELS), after=mark)
            assert names(relisted) == {"m2", "m3"}  # type: ignore[arg-type]
            assert stats.total(RELISTS_TOTAL) > relists
            no_empty = [e for e in events.events[mark:] if isinstance(e, SourceListed) and not e.objects]
            assert no_empty == []

            # 3. Half-open: the connections stay up but nothing arrives. The client-side timeout ends the
            #    watch (the server's own close is lost too) and a fresh connection catches up.
            #    (Watches are renewed every few seconds over fresh connections: freeze right after a watch
            #    delivered a change, with no await in between, so the freeze catches that watch's own
            #    connection, not only an idle pooled one while the next watch's is still being opened.)
            await model("m3b")
            await events.wait_for(upserted(SourceKind.KUBEAI_MODELS, "m3b"))
            requests = stats.total(WATCH_REQUESTS_TOTAL)
            assert proxy.freeze_all() >= 1
            await model("m4")
            await events.wait_for(upserted(SourceKind.KUBEAI_MODELS, "m4"), timeout=30)
            assert stats.total(WATCH_REQUESTS_TOTAL) > requests  # m4 came over a watch opened after it
            assert source.name not in stats.stale  # streaming again
            assert stats.total(WATCH_REQUESTS_TOTAL, source="kubeai-models") >= 4
    finally:
        await via_proxy.close()
        await proxy.close()


async def test_a_watch_that_streamed_for_a_while_reconnects_at_once_after_each_drop(
    kube_peer: Any, kube_client: Any
) -> None:
    """Regression (fault suite): the reconnect backoff grew with every dropped connection, even when the
    watch had streamed fine in between, so after a few drops each reconnect waited seconds (up to the
    30 s cap) and a change made meanwhile reached the catalog that much later. A watch that streamed
    for ``watch_stable_seconds`` before it broke now reconnects with the shortest backoff."""
    await install_crds(kube_client)
    ns = await create_namespace(kube_client)
    target = urlparse(kube_peer.server)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 443)
    port = await proxy.start()
    via_proxy = await new_api_client(kube_peer, host=f"https://127.0.0.1:{port}")
    custom = client.CustomObjectsApi(kube_client)
    stats = KubeStats()
    settings = attrs.evolve(
        FAST, retry_base_seconds=0.5, retry_cap_seconds=30.0, watch_stable_seconds=1.0, failing_after=3
    )
    spec = WatchSpec(SourceKind.KUBEAI_MODELS, RESOURCES[SourceKind.KUBEAI_MODELS], ns)
    source = WatchSource(KubeApi(via_proxy), spec, settings=settings, stats=stats)

    async def model(name: str) -> None:
        body = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": name}, "spec": {}}
        await custom.create_namespaced_custom_object("kubeai.org", "v1", ns, "models", body)

    try:
        async with running([source]) as (events, _):
            await events.wait_for(listed(SourceKind.KUBEAI_MODELS))
            relists = stats.total(RELISTS_TOTAL)
            seen: list[float] = []
            for i in range(5):
                await anyio.sleep(1.5)  # the watch streams (healthy) for longer than watch_stable_seconds
                proxy.drop_all()
                began = anyio.current_time()
                await model(f"m{i}")
                name = f"m{i}"
                seen_in_relist = listed(SourceKind.KUBEAI_MODELS, lambda e, n=name: n in names(e))
                await events.wait_for(
                    lambda e, n=name, r=seen_in_relist: upserted(SourceKind.KUBEAI_MODELS, n)(e) or r(e),
                    timeout=20,
                )
                seen.append(anyio.current_time() - began)
            # Before the fix: 0.25-0.5 s, 0.5-1 s, a relist, then 1-2 s and 2-4 s.
            assert max(seen) < 1.5, seen
            assert stats.total(RELISTS_TOTAL) == relists  # each drop is a first failure: no relist
            assert stats.total(RECONNECTS_TOTAL) >= 5
    finally:
        await via_proxy.close()
        await proxy.close()


async def test_a_crd_installed_after_start_is_watched_within_the_recheck_period(
    kube_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A CRD of its own (unique group) under the KubeAI source kind: the same code path as any CRD source."""
    ns = await create_namespace(kube_client)
    group = f"late{uuid.uuid4().hex[:8]}.test.model-catalog.dev"
    resource = Resource(group, "v1", "widgets", "Widget", "namespace", crd=True)
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }
    source = WatchSource(
        KubeApi(kube_client), WatchSpec(SourceKind.KUBEAI_MODELS, resource, ns), settings=FAST
    )
    ext = client.ApiextensionsV1Api(kube_client)
    caplog.set_level(logging.DEBUG, logger="model_catalog.kube")
    try:
        async with running([source]) as (events, _):
            absent = await events.wait_for(lambda e: isinstance(e, SourceUnavailable))
            assert absent == SourceUnavailable(
                SourceKind.KUBEAI_MODELS,
                Unavailability.NOT_INSTALLED,
                f"CustomResourceDefinition widgets.{group} is not installed",
            )
            await anyio.sleep(4 * FAST.crd_recheck_seconds)  # rechecked several times, reported once
            assert [e for e in events.events if isinstance(e, SourceUnavailable | SourceListed)] == [absent]
            assert len([r for r in caplog.records if "is not installed" in r.getMessage()]) == 1

            await install_crd(kube_client, crd)
            with anyio.fail_after(FAST.crd_recheck_seconds + 5):
                await events.wait_for(listed(SourceKind.KUBEAI_MODELS, lambda e: e.objects == ()))
            body = {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w1"}}
            await client.CustomObjectsApi(kube_client).create_namespaced_custom_object(
                group, "v1", ns, "widgets", body
            )
            await events.wait_for(upserted(SourceKind.KUBEAI_MODELS, "w1"))

            mark = len(events.events)
            await ext.delete_custom_resource_definition(f"widgets.{group}")
            gone = await events.wait_for(lambda e: isinstance(e, SourceUnavailable), after=mark)
            assert gone.status is Unavailability.NOT_INSTALLED  # type: ignore[attr-defined]
    finally:
        try:
            await ext.delete_custom_resource_definition(f"widgets.{group}")
        except ApiException as exc:
            if exc.status != 404:
                raise


async def test_forbidden_keeps_the_last_good_content(
    kube_peer: Any, kube_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    await install_crds(kube_client)
    ns = await create_namespace(kube_client)
    user = f"catalog-{uuid.uuid4().hex[:6]}"
    rbac = client.RbacAuthorizationV1Api(kube_client)
    custom = client.CustomObjectsApi(kube_client)
    await rbac.create_namespaced_role(
        ns,
        {
            "metadata": {"name": "read-models"},
            "rules": [
                {"apiGroups": ["kubeai.org"], "resources": ["models"], "verbs": ["get", "list", "watch"]}
            ],
        },
    )
    binding = {
        "metadata": {"name": "read-models"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-models"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    await rbac.create_namespaced_role_binding(ns, binding)
    body = {"apiVersion": "kubeai.org/v1", "kind": "Model", "metadata": {"name": "m1"}, "spec": {}}
    await custom.create_namespaced_custom_object("kubeai.org", "v1", ns, "models", body)
    await custom.patch_namespaced_custom_object_status(
        "kubeai.org",
        "v1",
        ns,
        "models",
        "m1",
        {"status": {"replicas": {"all": 1, "ready": 1}}},
        _content_type="application/merge-patch+json",
    )

    as_user = await new_api_client(kube_peer, impersonate=user)
    api = KubeApi(as_user)
    stats = KubeStats()
    settings = attrs.evolve(FAST, watch_timeout_seconds=1, timeout_grace_seconds=1.0)
    config = CatalogConfig(namespace=ns, appliance_namespace=ns)
    kubeai = WatchSource(
        api,
        WatchSpec(SourceKind.KUBEAI_MODELS, RESOURCES[SourceKind.KUBEAI_MODELS], ns),
        settings=settings,
        stats=stats,
    )
    activations = WatchSource(
        api,
        WatchSpec(SourceKind.MODEL_ACTIVATIONS, RESOURCES[SourceKind.MODEL_ACTIVATIONS], ns),
        settings=settings,
        stats=stats,
    )
    caplog.set_level(logging.INFO, logger="model_catalog.kube")
    try:
        async with running([kubeai, activations]) as (events, _):
            # Never allowed: reported at once, one log line naming verb and resource, counted, no listing.
            denied = await events.wait_for(
                lambda e: isinstance(e, SourceUnavailable) and e.source is SourceKind.MODEL_ACTIVATIONS
            )
            assert denied == SourceUnavailable(
                SourceKind.MODEL_ACTIVATIONS,
                Unavailability.FORBIDDEN,
                f"forbidden: list modelactivations.appliance.magicstick.dev in {ns}",
            )
            first = await events.wait_for(listed(SourceKind.KUBEAI_MODELS))
            assert names(first) == {"m1"}  # type: ignore[arg-type]

            # Revoked while running: the next watch is refused; the source is FORBIDDEN, not empty.
            mark = len(events.events)
            await rbac.delete_namespaced_role_binding("read-models", ns)
            revoked = await events.wait_for(
                lambda e: isinstance(e, SourceUnavailable) and e.source is SourceKind.KUBEAI_MODELS,
                after=mark,
            )
            assert revoked.status is Unavailability.FORBIDDEN  # type: ignore[attr-defined]
            assert revoked.detail in (  # type: ignore[attr-defined]
                f"forbidden: watch models.kubeai.org in {ns}",
                f"forbidden: list models.kubeai.org in {ns}",
            )
            await anyio.sleep(2.0)  # several refused retries later...
            after = events.events[mark:]
            assert not any(isinstance(e, SourceListed) for e in after)
            assert len([e for e in after if isinstance(e, SourceUnavailable)]) == 1  # ...still reported once

            # The real core keeps publishing the last good model; an empty listing would have withdrawn it.
            kubeai_events = [
                e for e in events.events if getattr(e, "source", None) is SourceKind.KUBEAI_MODELS
            ]
            assert published_ids(config, kubeai_events) == ["m1"]
            assert published_ids(config, [*kubeai_events, SourceListed(SourceKind.KUBEAI_MODELS, ())]) == []

            # Allowed again: a fresh complete listing.
            await rbac.create_namespaced_role_binding(ns, binding)
            again = await events.wait_for(listed(SourceKind.KUBEAI_MODELS), after=mark, timeout=15)
            assert names(again) == {"m1"}  # type: ignore[arg-type]
    finally:
        await as_user.close()
    assert stats.total(FORBIDDEN_TOTAL, source="model-activations", verb="list") >= 1
    forbidden_lines = [
        r.getMessage() for r in caplog.records if "forbidden: list modelactivations" in r.getMessage()
    ]
    assert len(forbidden_lines) == 1, forbidden_lines
