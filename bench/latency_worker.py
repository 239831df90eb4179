"""P1's measured process: the embeddable ModelCatalog (app/library.py) on the real kube-apiserver and
the fast LiteLLM fake (bench.fake_server, in a process of its own on loopback, so LiteLLM's own latency
and CPU are excluded).

    python -m bench.latency_worker --kubeconfig K --namespace NS --appliance-namespace ANS \
        --litellm-url URL --expect N

Prints ``CONVERGED <seconds>`` (from the catalog's start, imports excluded) and ``READY <rows>`` once it
has converged (``N`` rows observed, nothing queued), then ``R`` (a
Model watch event received from the API server and handed to the loop), ``E`` (that event folded) and
``Q`` (a LiteLLM command queued) lines with CLOCK_MONOTONIC times, ``P`` (a /model/info answer parsed)
and ``O`` (an observation of the rows folded) lines with the start and end of each (the loop runs
nothing else meanwhile: where P1's tail comes from), and ``RSS
<KiB>`` at the end. It stops when its standard input closes. The driver (bench.scenarios) writes to
the API server from another process and compares its own send times with these and the fake's.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

import anyio
import anyio.to_thread

from adapters.kube.watch import EventSink
from app.kube_client import load_api_client
from app.library import ModelCatalog
from app.options import CatalogOptions, HeapOptions, LiteLLMOptions
from catalog_core.commands import Command
from catalog_core.config import CatalogConfig, ConfigError
from catalog_core.events import Event, LiteLLMRowsObserved, ObjectUpserted, SourceKind
from catalog_core.redact import Redacted


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


Lines = list[tuple[str, float, str]]


def _trace_stages(catalog: ModelCatalog, trace: Lines, slow: Lines | None = None) -> None:
    """Also note when each Model event is folded (``E``) and each LiteLLM command is queued (``Q``),
    to split the latency into API server + watch, fold + plan, queue + request. Kept in memory and
    printed at the end: writing to the pipe meanwhile could block the loop being measured."""
    loop = catalog.loop
    apply, submit = loop._apply, loop.queue.submit
    clock = time.monotonic

    def traced_apply(event: Event) -> tuple[Command, ...]:
        began = clock()
        commands = apply(event)
        if slow is not None and clock() - began > 0.010:  # an event whose fold took long (``A``)
            took, source = (clock() - began) * 1000, getattr(event, "source", "")
            what = f"{type(event).__name__} {source} {len(commands)} commands"
            slow.append(("A", began, f"{took:.1f}ms {what}"))
        if isinstance(event, LiteLLMRowsObserved):
            trace.append(("O", began, f"{clock():.6f}"))
        elif isinstance(event, ObjectUpserted) and event.source is SourceKind.KUBEAI_MODELS:
            trace.append(("E", clock(), (event.object.get("metadata") or {}).get("name", "?")))
        return commands

    def traced_submit(command: Command, submitted_at: float | None = None) -> None:
        if command.key.startswith("litellm/"):
            trace.append(("Q", clock(), command.key[8:]))
        submit(command, submitted_at)

    parse = catalog.observer._parse

    def traced_parse(content: bytes) -> object:
        began = clock()
        try:
            return parse(content)
        finally:
            trace.append(("P", began, f"{clock():.6f}"))

    changed = EventSink.changed

    async def traced_changed(self: EventSink, obj: Redacted, deleted: bool) -> None:
        # the watch event as the controller gets it: decoded, about to enter the loop's stream
        if self.source is SourceKind.KUBEAI_MODELS and not deleted:
            trace.append(("R", clock(), (obj.obj.get("metadata") or {}).get("name", "?")))
        await changed(self, obj, deleted)

    loop._apply = traced_apply  # type: ignore[method-assign]
    catalog.observer._parse = traced_parse  # type: ignore[method-assign]
    loop.queue.submit = traced_submit  # type: ignore[method-assign]
    EventSink.changed = traced_changed  # type: ignore[method-assign]


def _record_slow_steps(trace: list[tuple[str, float, str]], threshold: float = 0.015) -> None:
    """Diagnostics (``BENCH_SLOW_STEPS=<file>``): note every step of the event loop that ran longer than
    ``threshold`` (``L`` lines in that file, with the phases' ``R``/``E``/``Q``/``P``/``O`` lines: its start,
    length and the task it ran), which is what delays a change that arrives meanwhile. Off by default:
    it wraps every callback."""
    import asyncio.events

    run, clock = asyncio.events.Handle._run, time.monotonic

    def timed(handle: asyncio.events.Handle) -> None:
        began = clock()
        run(handle)
        took = clock() - began
        if took > threshold:
            callback = getattr(handle, "_callback", None)  # asyncio's own attribute, not typed
            owner = getattr(callback, "__self__", None)
            what = owner.get_name() if isinstance(owner, asyncio.Task) else repr(callback)[:80]
            trace.append(("L", began, f"{took * 1000:.1f}ms {what}"))

    asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]


async def main(args: argparse.Namespace) -> None:
    config = CatalogConfig.from_env(
        {
            # the core's settings from the environment, as `model-catalog run` reads them (experiments)
            **{k: v for k, v in os.environ.items() if k.startswith("CATALOG_LITELLM_")},
            "NAMESPACE": args.namespace,
            "APPLIANCE_NAMESPACE": args.appliance_namespace,
            "LITELLM_BASE_URL": "http://litellm.bench.invalid:4000",
        }
    )
    assert not isinstance(config, ConfigError), config
    api_client = await load_api_client(args.kubeconfig)
    catalog = ModelCatalog(
        config,
        api_client,
        litellm_master_key="sk-test",
        # as `model-catalog run` does by default (CATALOG_GC_FREEZE): the heap frozen after the first sync
        options=CatalogOptions(
            litellm=LiteLLMOptions(args.litellm_url, 30.0), heap=HeapOptions(freeze_after_sync=True)
        ),
    )
    async with api_client, anyio.create_task_group() as tg:
        began = time.monotonic()
        await tg.start(catalog.run)
        await catalog.wait_ready()
        while len(catalog.state.litellm.rows) < args.expect or catalog.loop.queue.depth:
            await anyio.sleep(0.05)
        # From the catalog's start (imports excluded) to every row written and nothing queued.
        print(f"CONVERGED {time.monotonic() - began:.3f}", flush=True)
        # The rows were just written, many of them in a burst (issue 14): wait until no write is held,
        # no burst is on and every row has been still for the settle window, so what follows measures
        # a change to a model not written for a while, as P1 means it.
        # (A burst lasts a settle window after its last change: once nothing waits, one more window.)
        while catalog.state.damping.waiting:
            await anyio.sleep(0.1)
        await anyio.sleep(config.litellm_settle_seconds + 0.5)
        # The service's one start-up pause, the heap's first collection and freeze once it settled (at
        # 10,000 models ~270 ms: the changes made meanwhile arrive together, a burst), is not what P1
        # measures: wait for it (bounded; app/heap.py).
        with anyio.move_on_after(120):
            while gc.get_freeze_count() == 0:
                await anyio.sleep(0.1)
        trace: list[tuple[str, float, str]] = []
        slow: list[tuple[str, float, str]] = []
        slow_file = os.environ.get("BENCH_SLOW_STEPS")
        _trace_stages(catalog, trace, slow if slow_file else None)
        if slow_file:
            _record_slow_steps(slow)
        print(f"READY {len(catalog.state.litellm.rows)}", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)  # until the driver closes our stdin
        print(f"RSS {_rss_kib()}", flush=True)
        d = catalog.state.damping
        # why writes waited, if they did (the driver ignores this line; it is for the worker's log)
        print(
            f"DAMPING deferred={d.deferred_total} burst={d.burst_deferred_total} "
            f"cancelled={d.cancelled_total}",
            flush=True,
        )
        print("".join(f"{kind} {t:.6f} {what}\n" for kind, t, what in trace), end="", flush=True)
        if slow_file:
            lines = sorted([*trace, *slow], key=lambda line: line[1])
            Path(slow_file).write_text("".join(f"{kind} {t:.6f} {what}\n" for kind, t, what in lines))
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--appliance-namespace", required=True)
    parser.add_argument("--litellm-url", required=True)
    parser.add_argument("--expect", type=int, required=True, help="rows to wait for before READY")
    anyio.run(main, parser.parse_args())
