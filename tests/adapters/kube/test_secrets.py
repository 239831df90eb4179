"""The Secret watcher: exactly the named Secrets, provider-only ones by label, values only in the vault."""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from kubernetes_asyncio import client

from adapters.kube import KubeApi, SecretWatcher
from adapters.kube import watch as watch_module
from adapters.vault import SecretVault
from catalog_core.commands import SecretWatch, WatchSecrets
from catalog_core.events import (
    CommandCompleted,
    ObjectDeleted,
    ObjectUpserted,
    Outcome,
    SourceKind,
    SourceListed,
)
from catalog_core.sealing import REDACTED
from catalog_core.sources.common import PROVIDER_SECRET_LABEL
from tests.adapters.kube.helpers import FAST, deleted, listed, names, running, upserted
from tests.core import builders as b
from tests.core.harness import Cluster
from tests.fixtures.kube_peer import create_namespace

pytestmark = [pytest.mark.kube, pytest.mark.anyio]


def _value(tag: str) -> str:
    return f"sk-{tag}-{uuid.uuid4().hex}"


def _secret(name: str, value: str, labelled: bool) -> dict[str, Any]:
    labels = {PROVIDER_SECRET_LABEL: "true"} if labelled else {}
    data = {"apiKey": base64.b64encode(value.encode()).decode()}
    return {"metadata": {"name": name, "labels": labels}, "data": data}


async def test_watches_exactly_the_named_secrets_and_never_reads_a_non_provider_secret(
    kube_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ns = await create_namespace(kube_client)
    core = client.CoreV1Api(kube_client)
    values = {
        n: _value(n) for n in ("provider-a", "plain-b", "ai-model-provider-c", "other", "a2", "b2", "d")
    }
    await core.create_namespaced_secret(ns, _secret("provider-a", values["provider-a"], labelled=True))
    await core.create_namespaced_secret(ns, _secret("plain-b", values["plain-b"], labelled=False))
    await core.create_namespaced_secret(
        ns, _secret("ai-model-provider-c", values["ai-model-provider-c"], False)
    )
    await core.create_namespaced_secret(ns, _secret("other", values["other"], labelled=True))  # not asked for

    vault = SecretVault()
    watcher = SecretWatcher(KubeApi(kube_client), vault, namespace=ns, settings=FAST)
    command = WatchSecrets(
        ns,
        (
            SecretWatch("ai-model-provider-c", provider_only=False),
            SecretWatch("missing-d", provider_only=False),
            SecretWatch("plain-b", provider_only=True),
            SecretWatch("provider-a", provider_only=True),
        ),
    )
    async with running([watcher]) as (events, _):
        assert watcher.handles(command)
        done = await watcher.execute(command)
        assert done == [CommandCompleted(command.key, command.id, Outcome.APPLIED)]
        first = await events.wait_for(listed(SourceKind.SECRETS))
        assert isinstance(first, SourceListed)
        assert first.scope == ("ai-model-provider-c", "missing-d", "plain-b", "provider-a")
        assert names(first) == {"provider-a", "ai-model-provider-c"}  # plain-b lacks the label: not returned
        for obj in first.objects:
            assert obj["data"]["apiKey"][REDACTED].startswith("fp1:")
            assert obj["metadata"]["uid"] and obj["metadata"]["resourceVersion"]
        assert vault.values() == {values["provider-a"], values["ai-model-provider-c"]}

        # A rotated key: one upsert with a new fingerprint; the vault holds only the new value.
        await core.patch_namespaced_secret(
            "provider-a", ns, _secret("provider-a", values["a2"], labelled=True)
        )
        before = next(o for o in first.objects if o["metadata"]["name"] == "provider-a")["data"]["apiKey"]
        await events.wait_for(
            upserted(SourceKind.SECRETS, "provider-a", lambda o: o["data"]["apiKey"] != before)
        )
        assert values["a2"] in vault.values() and values["provider-a"] not in vault.values()

        # plain-b becomes a provider Secret: now it is seen; losing the label again reads as a deletion.
        await core.patch_namespaced_secret(
            "plain-b", ns, {"metadata": {"labels": {PROVIDER_SECRET_LABEL: "true"}}}
        )
        await events.wait_for(upserted(SourceKind.SECRETS, "plain-b"))
        assert values["plain-b"] in vault.values()
        await core.patch_namespaced_secret(
            "plain-b", ns, {"metadata": {"labels": {PROVIDER_SECRET_LABEL: None}}}
        )
        await events.wait_for(deleted(SourceKind.SECRETS, "plain-b"))
        assert values["plain-b"] not in vault.values()
        # Changed while unlabelled: not seen (checked at the end: no unlabelled plain-b in any event).
        b2 = {"data": {"apiKey": base64.b64encode(values["b2"].encode()).decode()}}
        await core.patch_namespaced_secret("plain-b", ns, b2)

        # A Secret that appears later, and one that is deleted.
        await core.create_namespaced_secret(ns, _secret("missing-d", values["d"], labelled=False))
        await events.wait_for(upserted(SourceKind.SECRETS, "missing-d"))
        await core.delete_namespaced_secret("ai-model-provider-c", ns)
        await events.wait_for(deleted(SourceKind.SECRETS, "ai-model-provider-c"))
        assert vault.values() == {values["a2"], values["d"]}

        # A smaller set: a fresh listing of exactly that scope; the others leave the vault.
        smaller = WatchSecrets(ns, (SecretWatch("provider-a", provider_only=True),))
        mark = len(events.events)
        assert await watcher.execute(smaller) == [CommandCompleted(smaller.key, smaller.id, Outcome.APPLIED)]
        narrowed = await events.wait_for(listed(SourceKind.SECRETS), after=mark)
        assert narrowed.scope == ("provider-a",)  # type: ignore[attr-defined]
        assert names(narrowed) == {"provider-a"}  # type: ignore[arg-type]
        assert vault.values() == {values["a2"]}
        await core.patch_namespaced_secret("missing-d", ns, {"metadata": {"labels": {"touched": "yes"}}})
        await core.patch_namespaced_secret("provider-a", ns, {"metadata": {"labels": {"touched": "yes"}}})
        await events.wait_for(
            upserted(SourceKind.SECRETS, "provider-a", lambda o: "touched" in o["metadata"]["labels"])
        )
        assert events.of(SourceKind.SECRETS, "missing-d")[-1] is not events.events[-1]
        assert not any(
            isinstance(e, ObjectUpserted | ObjectDeleted) and e.object["metadata"]["name"] == "missing-d"
            for e in events.events[mark:]
        )  # no longer watched

    # Never: an unlabelled plain-b, 'other', or any value outside the vault.
    for event in events.events:
        objs: list[Any] = []
        if isinstance(event, SourceListed):
            objs = list(event.objects)
        elif isinstance(event, ObjectUpserted | ObjectDeleted):
            objs = [event.object]
        for obj in objs:
            assert obj["metadata"]["name"] != "other"
            if obj["metadata"]["name"] == "plain-b" and isinstance(event, ObjectUpserted):
                assert obj["metadata"]["labels"][PROVIDER_SECRET_LABEL] == "true"
    text = repr(events.events) + caplog.text
    for value in values.values():
        assert value not in text


MASTER_SECRET = "litellm-masterkey-secret"


class WireApi(KubeApi):
    """Measures the Secret requests on the shared client: how many are open at once (each holds one of
    its pooled connections), the watch queries, and every Secret name the API server sent."""

    def __init__(self, api_client: Any) -> None:
        super().__init__(api_client)
        self.watches_now = self.watches_most = 0
        self.requests_now = self.requests_most = 0
        self.watch_queries: list[dict[str, str]] = []
        self.sent: set[str] = set()  # names of Secrets that came over the wire

    def _open(self, watch: bool, delta: int) -> None:
        self.requests_now += delta
        self.requests_most = max(self.requests_most, self.requests_now)
        if watch:
            self.watches_now += delta
            self.watches_most = max(self.watches_most, self.watches_now)

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        assert path.endswith("/secrets")  # the watcher makes no other request
        self._open(False, 1)
        try:
            answer = await super().request(method, path, **kwargs)
        finally:
            self._open(False, -1)
        self.sent.update(item["metadata"]["name"] for item in answer.get("items") or ())
        return answer

    @asynccontextmanager
    async def watch(
        self, path: str, query: Any, server_timeout: int, grace: float, **options: Any
    ) -> AsyncIterator[Any]:
        assert path.endswith("/secrets")
        self.watch_queries.append(dict(query))
        self._open(True, 1)
        try:
            async with super().watch(path, query, server_timeout, grace, **options) as events:
                yield self._recorded(events)
        finally:
            self._open(True, -1)

    async def _recorded(self, events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        async for event in events:
            self.sent.add(str((event.get("object") or {}).get("metadata", {}).get("name")))
            yield event


def _ref(model: str, secret: str) -> dict[str, Any]:
    return {"name": model, "model": "openai/x", "apiKeySecretRef": {"name": secret, "key": "apiKey"}}


async def test_a_hundred_and_forty_referenced_names_hold_a_bounded_number_of_connections(
    kube_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12 item 5: each referenced name used to open its own watch on the shared client (pool of
    100, shared with the writers): ~88 names, which need not exist, starved the Lease. Now: one
    label-selected watch, at most 32 by name, the other ai-model-provider-* names re-listed one at a time;
    the Secret holding LiteLLM's master key is never sent by the API server (item 2), labelled or not, and
    labelled Secrets nobody refers to are never fingerprinted."""
    ns = await create_namespace(kube_client)
    core = client.CoreV1Api(kube_client)
    value = {n: _value(n) for n in ("master", "p7", "w00", "w35", "w36", "late", "unwanted")}
    await core.create_namespaced_secret(ns, _secret(MASTER_SECRET, value["master"], labelled=True))
    await core.create_namespaced_secret(ns, _secret("provider-7", value["p7"], labelled=True))
    await core.create_namespaced_secret(ns, _secret("unwanted", value["unwanted"], labelled=True))
    # allowed by name, not labelled: one within the watch budget, one beyond it
    await core.create_namespaced_secret(ns, _secret("ai-model-provider-00", value["w00"], labelled=False))
    await core.create_namespaced_secret(ns, _secret("ai-model-provider-35", value["w35"], labelled=False))
    refs = [_ref(f"m{i}", f"provider-{i}") for i in range(100)]
    refs += [_ref(f"n{i:02d}", f"ai-model-provider-{i:02d}") for i in range(40)]
    refs.append(_ref("steal", MASTER_SECRET))
    cluster = Cluster(NAMESPACE=ns)
    cluster.start(b.external_configmap(refs) | {"metadata": {"name": "ai-external-models", "namespace": ns}})
    command = next(c for c in cluster.commands if isinstance(c, WatchSecrets))
    assert MASTER_SECRET not in {s.name for s in command.secrets}
    assert sum(not s.provider_only for s in command.secrets) == 40  # every ai-model-provider-* by name

    fingerprinted: list[str] = []
    real_redact = watch_module.redact_for_source

    def recording(source: Any, obj: Any) -> Any:
        fingerprinted.append(obj["metadata"]["name"])
        return real_redact(source, obj)

    monkeypatch.setattr(watch_module, "redact_for_source", recording)
    vault = SecretVault()
    api = WireApi(kube_client)
    watcher = SecretWatcher(api, vault, namespace=ns, never=(MASTER_SECRET,), settings=FAST)
    async with running([watcher]) as (events, _):
        assert (await watcher.execute(command))[0].detail == ""  # listed within the wait
        first = await events.wait_for(listed(SourceKind.SECRETS))
        assert isinstance(first, SourceListed) and len(first.scope or ()) == 140
        assert names(first) == {"provider-7", "ai-model-provider-00", "ai-model-provider-35"}
        assert watcher.watches == 1 + 32
        assert watcher.polled == {f"ai-model-provider-{i}" for i in range(32, 40)}

        # A labelled Secret created later under a wanted name arrives through the one label-selected watch.
        await core.create_namespaced_secret(ns, _secret("provider-42", value["late"], labelled=True))
        await events.wait_for(upserted(SourceKind.SECRETS, "provider-42"))
        assert watcher.watches == 1 + 32
        # Beyond the watch budget, created, rotated and deleted: seen at the next re-list.
        await core.create_namespaced_secret(ns, _secret("ai-model-provider-36", value["w36"], labelled=False))
        await events.wait_for(upserted(SourceKind.SECRETS, "ai-model-provider-36"))
        await core.patch_namespaced_secret("ai-model-provider-35", ns, {"metadata": {"labels": {"x": "y"}}})
        await events.wait_for(
            upserted(SourceKind.SECRETS, "ai-model-provider-35", lambda o: "x" in o["metadata"]["labels"])
        )
        await core.delete_namespaced_secret("ai-model-provider-36", ns)
        await events.wait_for(deleted(SourceKind.SECRETS, "ai-model-provider-36"))
        # The master key Secret and an unwanted one, touched while the namespace is watched by label.
        for name in (MASTER_SECRET, "unwanted"):
            await core.patch_namespaced_secret(name, ns, {"metadata": {"labels": {"x": "y"}}})
        await core.patch_namespaced_secret("provider-7", ns, {"metadata": {"labels": {"x": "y"}}})
        await events.wait_for(
            upserted(SourceKind.SECRETS, "provider-7", lambda o: "x" in o["metadata"]["labels"])
        )

    # measured on the wire: 1 + 32 watches at most, and one re-list request besides
    assert api.watches_most <= 1 + 32
    assert api.requests_most <= 1 + 32 + 1
    labelled = [q for q in api.watch_queries if "labelSelector" in q]
    assert labelled and all(q["fieldSelector"] == f"metadata.name!={MASTER_SECRET}" for q in labelled)
    assert not any(q.get("fieldSelector") == "metadata.name=provider-42" for q in api.watch_queries)
    assert MASTER_SECRET not in api.sent and "unwanted" in api.sent
    assert "unwanted" not in fingerprinted and MASTER_SECRET not in fingerprinted
    assert vault.values() == {value["p7"], value["late"], value["w00"], value["w35"]}
    assert value["master"] not in repr(events.events) and value["unwanted"] not in repr(events.events)
    for event in events.events:
        objects = event.objects if isinstance(event, SourceListed) else [getattr(event, "object", {})]
        assert not {o["metadata"]["name"] for o in objects} & {MASTER_SECRET, "unwanted"}


async def test_the_master_key_secret_is_never_read_even_when_a_command_names_it(kube_client: Any) -> None:
    """Defence in depth (issue 12 item 2): whatever a WatchSecrets says, the watcher never reads the
    master key's Secret, by name or by label, and never hands its value to the vault."""
    ns = await create_namespace(kube_client)
    core = client.CoreV1Api(kube_client)
    master = _value("master")
    await core.create_namespaced_secret(ns, _secret(MASTER_SECRET, master, labelled=True))
    vault = SecretVault()
    api = WireApi(kube_client)
    watcher = SecretWatcher(api, vault, namespace=ns, never=(MASTER_SECRET,), settings=FAST)
    command = WatchSecrets(
        ns, (SecretWatch(MASTER_SECRET, provider_only=False), SecretWatch("provider-a", provider_only=True))
    )
    async with running([watcher]) as (events, _):
        await watcher.execute(command)
        first = await events.wait_for(listed(SourceKind.SECRETS))
        assert isinstance(first, SourceListed) and first.scope == ("provider-a",) and not first.objects
        await core.patch_namespaced_secret(MASTER_SECRET, ns, {"metadata": {"labels": {"x": "y"}}})
        await core.create_namespaced_secret(ns, _secret("provider-a", _value("a"), labelled=True))
        await events.wait_for(upserted(SourceKind.SECRETS, "provider-a"))
    assert MASTER_SECRET not in api.sent
    assert f"metadata.name={MASTER_SECRET}" not in {q.get("fieldSelector") for q in api.watch_queries}
    assert master not in vault.values() and master not in repr(events.events)
