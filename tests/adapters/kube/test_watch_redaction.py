"""What the watch adapters do to each raw object before it becomes an event (issue 12 items 4 and 6):
a hostile object is rejected alone, and sealing thousands of inline keys never stalls the event loop
(the Lease is renewed on the same loop)."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest

from adapters.kube.watch import redact, redact_all
from catalog_core.events import SourceKind
from catalog_core.sealing import MAX_INLINE_KEYS, TOO_MANY, redacted_fingerprint
from catalog_core.sources.activation import ModelActivation
from catalog_core.trim import rejection

pytestmark = pytest.mark.anyio


def _deep(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(levels):
        node = {"a": node}
    return node


def _activation(name: str, external: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "appliance.magicstick.dev/v1alpha1",
        "kind": "ModelActivation",
        "metadata": {"name": name, "namespace": "ai-system", "uid": f"uid-{name}", "resourceVersion": "7"},
        "spec": {"type": "external", "external": external},
    }


async def test_an_object_nested_600_levels_is_rejected_alone_and_its_listing_goes_on() -> None:
    """Before: RecursionError in redaction's deepcopy; the source relisted forever and never listed."""
    deep = _activation("deep", {"model": "openai/x", "extra": _deep(600)})
    good = _activation("good", {"model": "openai/y"})
    listed = await redact_all(SourceKind.MODEL_ACTIVATIONS, [deep, good])
    assert rejection(listed[0].obj) is not None
    assert listed[0].obj["metadata"]["name"] == "deep" and len(json.dumps(listed[0].obj)) < 1000
    parsed = ModelActivation.from_k8s(listed[0].obj, "ai")
    assert parsed is not None and parsed.problem is not None
    assert parsed.problem.reason == "NestedTooDeeply"
    assert rejection(listed[1].obj) is None
    good_parsed = ModelActivation.from_k8s(listed[1].obj, "ai")
    assert good_parsed is not None and good_parsed.external is not None


async def test_sealing_2000_inline_keys_leaves_the_event_loop_free() -> None:
    """Before: 2,000 inline keys stalled the loop 12.9 s (past the 10 s lease renew deadline)."""
    models = [
        {"name": f"m{i}", "model": f"openai/m{i}", "apiKey": f"sk-unique-{i}-{'x' * 40}"} for i in range(2000)
    ]
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ai-external-models", "namespace": "ai"},
        "data": {"models.json": json.dumps({"models": models})},
    }
    gaps: list[float] = []
    done = anyio.Event()

    async def heartbeat() -> None:
        last = time.monotonic()
        while not done.is_set():
            await anyio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        began = time.monotonic()
        out = await redact(SourceKind.EXTERNAL_MODELS, cm)
        took = time.monotonic() - began
        done.set()
    sealed = json.loads(out.obj["data"]["models.json"])["models"]
    fps = [redacted_fingerprint(m["apiKey"]) for m in sealed]
    assert len(out.secrets) == MAX_INLINE_KEYS  # the work per object is bounded
    assert fps.count(TOO_MANY) == 2000 - MAX_INLINE_KEYS
    # The loop kept turning while the keys were sealed (a generous bound: the work itself takes seconds
    # on a slow machine, a blocked loop would show one gap as long as all of it).
    assert max(gaps) < max(0.5, took / 4), (max(gaps), took)
