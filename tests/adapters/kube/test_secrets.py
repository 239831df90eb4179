"""The Secret watcher: exactly the named Secrets, provider-only ones by label, values only in the vault."""

from __future__ import annotations

import base64
import logging
import uuid
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
