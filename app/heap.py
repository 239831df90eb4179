"""Keep the collector's full passes off the loop's path: freeze the heap once the first convergence settled.

Why: at 10,000 models the state is ~550,000 tracked objects, and CPython's full (generation 2)
collection walks all of them: ~150 ms in the bare core, more in the service. A pause that long makes the
watch deliver changes made 100 ms apart back to back, which the write damping reads as rows changing
together (a burst: every change then waits its settle window, issue 15). ``gc.freeze()`` moves what is
alive into a permanent generation the collector skips; objects made later are collected as usual, and
memory is still freed by reference counting. What the freeze cannot reclaim is cyclic garbage among the
frozen objects, so once every ``refreeze_seconds`` the heap is unfrozen, collected once and frozen again
(one full pass an hour instead of whenever the collector's own rule calls for one).

When: once the first convergence has settled after every source was read (the LiteLLM rows written
and observed, nothing queued): most of the state is made by then, and the first catalog is written.

A process-wide setting: ``model-catalog run`` turns it on; a host embedding the library chooses
(``HeapOptions``), and the freeze is undone when the catalog stops.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable

import anyio

log = logging.getLogger("model_catalog.heap")

SETTLED_POLL_SECONDS = 0.5
SETTLED_WAIT_CAP_SECONDS = 600.0  # a catalog that never settles is frozen as it is by then


async def keep_heap_frozen(ready: anyio.Event, settled: Callable[[], bool], refreeze_seconds: float) -> None:
    """Once ``settled()`` after ``ready``, collect the heap once and freeze it; every ``refreeze_seconds``
    after that, collect it once and freeze it again."""
    await ready.wait()
    try:
        # Not at once: the first catalog is being written then, and the first full collection walks
        # every module imported (P8 measured the pause in the first start: 1.05 -> 1.40 s).
        with anyio.move_on_after(SETTLED_WAIT_CAP_SECONDS):
            while not settled():
                await anyio.sleep(SETTLED_POLL_SECONDS)
        _collect_and_freeze("the first convergence")
        while True:
            await anyio.sleep(refreeze_seconds)
            gc.unfreeze()
            _collect_and_freeze("the hourly pass")
    finally:
        gc.unfreeze()


def _collect_and_freeze(after: str) -> None:
    began = time.perf_counter()
    gc.collect()
    gc.freeze()
    pause_ms = round((time.perf_counter() - began) * 1000, 1)
    log.info(
        "heap frozen after %s",
        after,
        extra={"frozen_objects": gc.get_freeze_count(), "pause_ms": pause_ms},
    )
