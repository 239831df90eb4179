"""A watch does not keep the whole objects of its listing while it runs (issue 15, memory per model).

The list answer holds every object whole (managedFields, the full spec and status); the core keeps only
what it reads of them. A watch runs for minutes after its list, so anything its frame still references
stays in memory that long: at 1,000 KubeAI Models that was ~5 MiB. A fake API hands out objects that can
be weakly referenced and then blocks in the watch; by then no object of the listing may be alive.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from adapters.kube import WatchSource, WatchSpec
from adapters.kube.watch import Unavailability
from catalog_core.events import SourceKind
from contracts.kinds import RESOURCES

pytestmark = pytest.mark.anyio


class Whole(dict[str, Any]):
    """A decoded object that a weak reference can follow (plain dicts cannot be weakly referenced)."""


def model(i: int) -> Whole:
    return Whole(
        metadata={
            "name": f"m{i}",
            "namespace": "ai",
            "uid": f"u{i}",
            "resourceVersion": str(i),
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:args": {}}}}] * 20,
        },
        spec={"features": ["TextGeneration"], "engine": "VLLM", "args": ["--max-model-len=8192"] * 10},
        status={"replicas": {"all": 1, "ready": 1}},
    )


class BlockingApi:
    """Answers the list once, then opens a watch that never sends anything."""

    def __init__(self, items: list[Whole]) -> None:
        self._items: list[Whole] | None = items
        self.watching = anyio.Event()

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        items, self._items = self._items or [], None  # the fake keeps none of them itself
        return {"metadata": {"resourceVersion": "7"}, "items": items}

    @asynccontextmanager
    async def watch(
        self, path: str, query: Any, server_timeout: int, grace: float, **_: Any
    ) -> AsyncIterator[Any]:
        async def nothing() -> AsyncIterator[dict[str, Any]]:
            await anyio.sleep_forever()
            yield {}

        self.watching.set()
        yield nothing()


class Sink:
    def __init__(self) -> None:
        self.listings: list[int] = []

    async def listed(self, objects: tuple[Any, ...]) -> None:
        self.listings.append(len(objects))

    async def changed(self, obj: Any, deleted: bool) -> None:
        raise AssertionError("the fake watch sends nothing")

    async def unavailable(self, status: Unavailability, detail: str) -> None:
        raise AssertionError(f"unavailable: {status} {detail}")


async def test_a_running_watch_keeps_no_object_of_its_listing() -> None:
    items = [model(i) for i in range(5)]
    alive = [weakref.ref(item) for item in items]
    api = BlockingApi(items)
    del items
    sink = Sink()
    spec = WatchSpec(SourceKind.KUBEAI_MODELS, RESOURCES[SourceKind.KUBEAI_MODELS], "ai")
    source = WatchSource(api, spec)  # type: ignore[arg-type]  # the fake has the two methods used
    async with anyio.create_task_group() as group:
        group.start_soon(source.run_into, sink)
        with anyio.fail_after(10):
            await api.watching.wait()
        await anyio.sleep(0.05)
        gc.collect()
        assert sink.listings == [5]
        assert [ref() for ref in alive] == [None] * 5
        group.cancel_scope.cancel()
