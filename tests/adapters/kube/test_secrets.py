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
from catalog_core.redact import REDACTED
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


class CountingApi(KubeApi):
    """Counts the watch requests open at once (each holds a connection of the shared client)."""

    open_now = 0
    most = 0

    @asynccontextmanager
    async def watch(self, path: str, query: Any, server_timeout: int, grace: float) -> AsyncIterator[Any]:
        async with super().watch(path, query, server_timeout, grace) as events:
            CountingApi.open_now += 1
            CountingApi.most = max(CountingApi.most, CountingApi.open_now)
            try:
                yield events
            finally:
                CountingApi.open_now -= 1


async def test_a_hundred_referenced_names_hold_a_bounded_number_of_watches_and_the_master_key_is_never_read(
    kube_client: Any,
) -> None:
    """Issue 12 item 5: each referenced name used to open its own watch on the shared client (pool of
    100, shared with the Lease and the writers): ~88 names, which need not exist, starved the Lease.
    Now the core asks for one label-selected watch plus at most 32 by name, and never for the Secret that
    holds LiteLLM's master key (item 2), labelled or not."""
    ns = await create_namespace(kube_client)
    core = client.CoreV1Api(kube_client)
    master, provider = _value("master"), _value("provider")
    await core.create_namespaced_secret(ns, _secret("litellm-masterkey-secret", master, labelled=True))
    await core.create_namespaced_secret(ns, _secret("provider-7", provider, labelled=True))
    refs = [
        {"name": f"m{i}", "model": "openai/x", "apiKeySecretRef": {"name": f"provider-{i}", "key": "apiKey"}}
        for i in range(100)
    ]
    refs += [
        {
            "name": f"n{i}",
            "model": "openai/x",
            "apiKeySecretRef": {"name": f"ai-model-provider-{i}", "key": "k"},
        }
        for i in range(40)
    ]
    refs.append(
        {
            "name": "steal",
            "model": "openai/x",
            "apiKeySecretRef": {"name": "litellm-masterkey-secret", "key": "apiKey"},
        }
    )
    cluster = Cluster(NAMESPACE=ns)
    cluster.start(
        b.external_configmap(refs, name="ai-external-models")
        | {"metadata": {"name": "ai-external-models", "namespace": ns}}
    )
    command = next(c for c in cluster.commands if isinstance(c, WatchSecrets))
    assert "litellm-masterkey-secret" not in {s.name for s in command.secrets}
    assert sum(not s.provider_only for s in command.secrets) == 32  # the first 32 ai-model-provider-*

    vault = SecretVault()
    CountingApi.open_now = CountingApi.most = 0
    watcher = SecretWatcher(CountingApi(kube_client), vault, namespace=ns, settings=FAST)
    async with running([watcher]) as (events, _):
        await watcher.execute(command)
        first = await events.wait_for(listed(SourceKind.SECRETS))
        assert names(first) == {"provider-7"}  # type: ignore[arg-type]
        assert watcher.watches == 1 + 32
        # A labelled Secret created later under a wanted name arrives through the one label-selected watch.
        late = _value("late")
        await core.create_namespaced_secret(ns, _secret("provider-42", late, labelled=True))
        await events.wait_for(upserted(SourceKind.SECRETS, "provider-42"))
        # The master key Secret, touched while watched namespace-wide by label: never delivered.
        await core.patch_namespaced_secret(
            "litellm-masterkey-secret", ns, {"metadata": {"labels": {"x": "y"}}}
        )
        await core.patch_namespaced_secret("provider-7", ns, {"metadata": {"labels": {"x": "y"}}})
        await events.wait_for(
            upserted(SourceKind.SECRETS, "provider-7", lambda o: "x" in o["metadata"]["labels"])
        )
    assert CountingApi.most <= 1 + 32
    assert vault.values() == {provider, late}
    assert master not in repr(events.events)
    assert not any(
        isinstance(e, ObjectUpserted | ObjectDeleted)
        and e.object["metadata"]["name"] == "litellm-masterkey-secret"
        for e in events.events
    )
