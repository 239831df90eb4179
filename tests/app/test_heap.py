"""app.heap: the heap is frozen once the first sync is done, collected and frozen again on schedule, and
left unfrozen when the catalog stops (an embedding host's collector is its own again)."""

from __future__ import annotations

import gc

import anyio
import pytest

from app.heap import keep_heap_frozen
from app.options import CatalogOptions, HeapOptions
from app.settings import ServiceSettings, load

pytestmark = pytest.mark.anyio


async def test_the_heap_is_frozen_after_sync_refrozen_on_schedule_and_unfrozen_at_the_end() -> None:
    gc.unfreeze()
    ready = anyio.Event()
    settled = False
    refreezes: list[int] = []
    real_freeze = gc.freeze

    def counting_freeze() -> None:
        refreezes.append(1)
        real_freeze()

    gc.freeze = counting_freeze  # type: ignore[assignment]
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_heap_frozen, ready, lambda: settled, 0.8)
            await anyio.sleep(0.05)
            assert gc.get_freeze_count() == 0 and not refreezes  # nothing before the first sync
            ready.set()
            await anyio.sleep(0.6)
            assert not refreezes  # it waits for the first convergence to settle (the first catalog)
            settled = True
            await anyio.sleep(0.6)
            assert len(refreezes) == 1
            assert gc.get_freeze_count() > 0  # what is alive now is skipped by full collections
            await anyio.sleep(1.0)
            assert len(refreezes) == 2  # then collected once and frozen again every 0.8 s
            tg.cancel_scope.cancel()
    finally:
        gc.freeze = real_freeze  # type: ignore[assignment]
    assert gc.get_freeze_count() == 0  # stopped: unfrozen


def test_model_catalog_run_freezes_by_default_and_the_library_only_when_asked() -> None:
    assert CatalogOptions().heap == HeapOptions(freeze_after_sync=False)
    settings = load({"LITELLM_MASTER_KEY": "sk-0123456789abcdef"})
    assert isinstance(settings, ServiceSettings)
    assert settings.catalog_options().heap.freeze_after_sync
    off = load({"LITELLM_MASTER_KEY": "sk-0123456789abcdef", "CATALOG_GC_FREEZE": "false"})
    assert isinstance(off, ServiceSettings)
    assert not off.catalog_options().heap.freeze_after_sync


def test_the_litellm_parse_pauses_the_collector_only_where_the_catalog_manages_the_heap() -> None:
    from app.library import ModelCatalog
    from catalog_core.config import CatalogConfig

    managed = ModelCatalog(
        CatalogConfig(), None, litellm_master_key="k", options=CatalogOptions(heap=HeapOptions(True))
    )
    assert managed.observer.collector.enabled
    assert not ModelCatalog(CatalogConfig(), None, litellm_master_key="k").observer.collector.enabled
