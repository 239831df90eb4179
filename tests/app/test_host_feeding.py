"""What a host feeds (``ModelCatalog.listed`` / ``upserted`` / ``deleted`` / ``read_failed``): redacted off
the event loop as the watches redact, redacted once per content, and a failed read of the host's own
keeps the last good content.

No peer: the catalog's loop runs alone (its Kubernetes sources and LiteLLM observer are not started), which
is all that feeding touches.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
import pytest

from adapters.kube import watch
from app.library import ModelCatalog
from catalog_core import redact, sealing
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from catalog_core.state import SourceStatus
from tests.core import builders as b

pytestmark = pytest.mark.anyio

ACTIVATIONS = SourceKind.MODEL_ACTIVATIONS


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def hostile(name: str, keys: int = 256) -> dict[str, Any]:
    """An activation whose author filled its spec with secret-shaped fields, each too long to be memoised:
    every one costs a PBKDF2 fingerprint."""
    external: dict[str, Any] = {"model": "openai/gpt-4o-mini"}
    for i in range(keys):
        external[f"apiKey{i}"] = {"apiKey": f"{i:04d}" + "k" * 600}
    return b.activation(name, external=external)


@pytest.fixture
async def catalog() -> AsyncIterator[ModelCatalog]:
    """A catalog whose loop runs (what feeding reaches); no Kubernetes client, no LiteLLM."""
    catalog = ModelCatalog(CatalogConfig(), None, litellm_master_key="sk-unused", host_sources={ACTIVATIONS})
    async with anyio.create_task_group() as tg:
        await tg.start(catalog.loop.run)
        yield catalog
        tg.cancel_scope.cancel()


async def until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


@pytest.mark.parametrize("feed", ["listed", "upserted"])
async def test_fingerprinting_what_a_host_feeds_never_stalls_the_event_loop(
    catalog: ModelCatalog, monkeypatch: pytest.MonkeyPatch, feed: str
) -> None:
    # While the keys of a hostile activation are fingerprinted (the real PBKDF2: 256 keys take seconds, 16
    # here), the loop the catalog runs on keeps running: a heartbeat task on it beats meanwhile.
    beats = 0
    during: list[tuple[int, bool]] = []
    loop_thread = threading.current_thread()
    real = redact.redact_for_source

    def observed(source: SourceKind | str, obj: Mapping[str, Any]) -> redact.Redacted:
        before = beats
        out = real(source, obj)
        during.append((beats - before, threading.current_thread() is loop_thread))
        return out

    monkeypatch.setattr(watch, "redact_for_source", observed)
    monkeypatch.setattr("app.library.redact_for_source", observed, raising=False)

    async def heartbeat() -> None:
        nonlocal beats
        while True:
            beats += 1
            await anyio.sleep(0.005)

    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        if feed == "listed":
            await catalog.listed(ACTIVATIONS, [hostile("mct-hostile", keys=16)])
        else:
            await catalog.upserted(ACTIVATIONS, hostile("mct-hostile", keys=16))
        tg.cancel_scope.cancel()
    assert during, "nothing was redacted"
    (moved, on_loop_thread) = during[0]
    assert not on_loop_thread, "fingerprinted on the event loop's thread"
    assert moved > 0, "the event loop stood still while the keys were fingerprinted"
    # and what was fed arrived, sealed
    await until(lambda: "mct-hostile" in catalog.loop.state.stored(ACTIVATIONS))


async def test_a_host_that_lists_the_same_content_again_is_not_fingerprinted_again(
    catalog: ModelCatalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = 0
    real = sealing._fingerprint

    def counting(raw: bytes) -> str:
        nonlocal counted
        counted += 1
        return real(raw)

    monkeypatch.setattr(sealing, "_fingerprint", counting)
    cached = [hostile("mct-a", keys=4), hostile("mct-b", keys=4)]
    await catalog.listed(ACTIVATIONS, cached)
    assert counted == 8
    # The host's next passes list its cache again, as it is: no fingerprint is computed again.
    for _ in range(3):
        await catalog.listed(ACTIVATIONS, cached)
    assert counted == 8
    # It changes one of its cached objects in place: that one is redacted again, the other is not.
    cached[0]["spec"]["external"]["apiKey0"] = {"apiKey": "changed" + "k" * 600}
    await catalog.listed(ACTIVATIONS, cached)
    assert counted == 12
    # A call the host gave up on (its timeout) still keeps the work done: the next pass is cheap.
    with anyio.move_on_after(0.001):
        await catalog.listed(ACTIVATIONS, [*cached, hostile("mct-c", keys=4)])
    assert counted == 16
    await catalog.listed(ACTIVATIONS, [*cached, hostile("mct-c", keys=4)])
    assert counted == 16
    await until(lambda: "mct-c" in catalog.loop.state.stored(ACTIVATIONS))
    # What a reused redaction gives is what a fresh one gives.
    (reused,) = await catalog._redacted(ACTIVATIONS, (cached[1],))
    assert counted == 16
    assert reused == redact.redact_for_source(ACTIVATIONS, cached[1]).obj


async def test_a_failed_read_of_the_hosts_keeps_the_last_listing_an_empty_listing_does_not(
    catalog: ModelCatalog,
) -> None:
    await catalog.listed(ACTIVATIONS, [b.activation("mct-kept", external={"model": "openai/gpt-4o-mini"})])
    await until(lambda: "mct-kept" in catalog.loop.state.stored(ACTIVATIONS))
    # The host's own read failed: it says so, and the catalog keeps what it had.
    await catalog.read_failed(ACTIVATIONS, "HTTP 503 listing modelactivations")
    await until(lambda: catalog.loop.state.source(ACTIVATIONS).status is SourceStatus.FAILING)
    state = catalog.loop.state
    assert "mct-kept" in state.stored(ACTIVATIONS)
    assert state.source(ACTIVATIONS).detail == "HTTP 503 listing modelactivations"
    await catalog.read_failed(ACTIVATIONS, "HTTP 403", forbidden=True)
    await until(lambda: catalog.loop.state.source(ACTIVATIONS).status is SourceStatus.FORBIDDEN)
    assert "mct-kept" in catalog.loop.state.stored(ACTIVATIONS)
    # The next good listing ends it.
    await catalog.listed(ACTIVATIONS, [b.activation("mct-kept", external={"model": "openai/gpt-4o-mini"})])
    await until(lambda: catalog.loop.state.source(ACTIVATIONS).status is SourceStatus.LISTED)
    # An empty listing, by contrast, says the source is empty: everything in it is gone.
    await catalog.listed(ACTIVATIONS, [])
    await until(lambda: "mct-kept" not in catalog.loop.state.stored(ACTIVATIONS))


async def test_a_failed_read_before_any_listing_leaves_the_catalog_not_ready(catalog: ModelCatalog) -> None:
    await catalog.read_failed(ACTIVATIONS, "timed out")
    await until(lambda: catalog.loop.state.source(ACTIVATIONS).status is SourceStatus.FAILING)
    assert not catalog.loop.state.source(ACTIVATIONS).known
    view = catalog.view()
    assert not view.ready and view.routes == () and view.catalog is None
