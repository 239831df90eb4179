"""Core benchmarks: parse+fold throughput, planning cost per change, render time (issue 2, P5).

.venv/bin/python -m bench.core [--sizes 1000 10000] [--events 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import time
from collections.abc import Iterator
from typing import Any

from catalog_core.config import CatalogConfig
from catalog_core.events import Event, LiteLLMRowsObserved, ObjectUpserted, SourceKind, SourceListed, Ticked
from catalog_core.fold import initial_state, step
from catalog_core.plan import rendered_catalog
from catalog_core.simulate import SimulatedWorld, converge
from catalog_core.state import CatalogState


def model(i: int, *, ready: int = 1, ctx: int = 8192) -> dict[str, Any]:
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {
            "name": f"model-{i:05d}",
            "namespace": "ai",
            "uid": f"uid-{i}",
            "resourceVersion": str(1000 + i),
            "annotations": {"ai-appliance.io/max-output-tokens": "1024"},
        },
        "spec": {
            "features": ["TextGeneration"] if i % 7 else ["TextEmbedding"],
            "engine": "VLLM",
            "url": f"hf://example/model-{i}",
            "resourceProfile": "nvidia-gpu-l4:1",
            "args": [f"--max-model-len={ctx}", "--max-num-seqs=8"],
        },
        "status": {"replicas": {"all": 1, "ready": ready}},
    }


def steady_state(n: int) -> CatalogState:
    """A converged catalog of ``n`` ready KubeAI models (LiteLLM already holds their rows)."""
    config = CatalogConfig()
    world = SimulatedWorld()
    events: list[Event] = [
        SourceListed(s, tuple(model(i) for i in range(n)) if s is SourceKind.KUBEAI_MODELS else ())
        for s in SourceKind
        if s is not SourceKind.SECRETS
    ]
    events.append(LiteLLMRowsObserved(()))
    state, _, _ = converge(initial_state(config), world, start=0.0, events=events, max_rounds=10)
    return state


def watch_events(n: int, count: int) -> list[ObjectUpserted]:
    """Realistic churn: each event changes one model (context window or readiness flips)."""
    out = []
    for k in range(count):
        i = (k * 7919) % n
        out.append(
            # ready is a replica count: an int (a bool is no count, and the parse rejects it)
            ObjectUpserted(
                SourceKind.KUBEAI_MODELS, model(i, ready=int(k % 5 != 0), ctx=8192 + (k % 3) * 1024)
            )
        )
    return out


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """The heap as ``model-catalog run`` keeps it once its first convergence has settled (app/heap.py):
    collected once and frozen, so the collector's full passes skip the state built until then. A host
    that embeds the library without freezing pays those passes (P5 reports that figure apart)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def fold_throughput(state: CatalogState, events: list[ObjectUpserted]) -> float:
    start = time.perf_counter()
    for event in events:
        state = step(state, event).state
    return len(events) / (time.perf_counter() - start)


def plan_cost(state: CatalogState, events: list[ObjectUpserted], burst: int) -> float:
    """Seconds per changed item for the tick that follows a burst (planning, not rendering)."""
    for event in events[:burst]:
        state = step(state, event).state
    start = time.perf_counter()
    step(state, Ticked(10_000.0))
    return (time.perf_counter() - start) / burst


def render_time(state: CatalogState) -> float:
    start = time.perf_counter()
    rendered_catalog(state)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results: dict[int, dict[str, float]] = {}
    for n in args.sizes:
        state = steady_state(n)
        events = watch_events(n, args.events)
        with frozen_heap():
            tput = [fold_throughput(state, events) for _ in range(args.repeat)]
        unfrozen = [fold_throughput(state, events) for _ in range(args.repeat)]
        plans = [plan_cost(state, events, 100) for _ in range(args.repeat)]
        renders = [render_time(state) for _ in range(args.repeat)]
        results[n] = {
            "events_per_s": statistics.median(tput),
            "events_per_s_min": min(tput),
            "events_per_s_max": max(tput),
            "unfrozen_events_per_s": statistics.median(unfrozen),
            "plan_us_per_change": statistics.median(plans) * 1e6,
            "render_ms": statistics.median(renders) * 1e3,
        }
        r = results[n]
        print(
            f"{n:>6} models: parse+fold {r['events_per_s']:,.0f} events/s (min {r['events_per_s_min']:,.0f},"
            f" max {r['events_per_s_max']:,.0f}; heap not frozen {r['unfrozen_events_per_s']:,.0f});"
            f" plan {r['plan_us_per_change']:.0f} us/changed item"
            f" (burst of 100); render {r['render_ms']:.1f} ms"
        )
    if len(args.sizes) >= 2:
        small, large = args.sizes[0], args.sizes[-1]
        ratio = results[small]["events_per_s"] / results[large]["events_per_s"]
        print(f"per-event cost ratio {large}/{small}: {ratio:.2f}")


if __name__ == "__main__":
    main()
