"""``just bench``: every benchmark of issue 7 (P1-P8), written to bench/results/results.{md,json} and a
dated copy. Not part of ``just test``.

    just bench            # the full run (~20 min on 2 cores)
    just bench --quick    # a shorter run: fewer repeats and changes, 100 and 1,000 models, 60 s idle
    just bench --only P5,P6
    just bench --only IDLE   # idle API server requests by verb and RSS (issue 35), on a peer of its own
    just bench --only P7 --sizes 100   # only the sizes given (P1, P5, P7), e.g. RSS at 100 models
    just bench --only SOAK   # 30 min of churn on the real peers, restarts in the middle (--soak-minutes)

SOAK runs only when named (``--only SOAK``): it takes ``--soak-minutes`` (30) on top of everything else.

It starts its own kube-apiserver (``../shared/kube-peer``, a new ROOT) and, for P2, the real LiteLLM
(``../shared/litellm-peer``, the tests' reused ROOT and lock), unless ``KUBECONFIG`` /
``LITELLM_BASE_URL`` + ``LITELLM_MASTER_KEY`` point at running ones. py-spy (the ``bench`` extra) is
installed into the venv when missing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from bench import core as core_bench
from bench import idle, machine, profile, report, scenarios, soak
from bench.image_venv import build as build_image_venv
from bench.kube import Kube
from bench.make_big_log import DEFAULT_OUT, generate
from bench.peers import FakeServer, start_kube, start_litellm, wait_litellm
from bench.replay_bench import decode_only, flatness, replay_verify
from bench.stats import summary

RESULTS = Path(__file__).resolve().parent / "results"
ALL = ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "IDLE")
ON_REQUEST = ("SOAK",)  # run only when named in --only
NOTES = (
    "P1 and P7 are measured at 100, 1,000 and 10,000 models (issue 15: a change re-renders only the "
    "catalog entries it touched, so converging no longer redoes O(n) work per tick; `python -m "
    "bench.converge` measures convergence alone, with the Models' creation time).",
    "At 1,000 models the rendered catalog is larger than a ConfigMap may hold (1 MiB): the core does "
    "not write it (a CatalogTooLarge Warning Event instead) and the published catalog stays the last "
    "one written.",
    "P1's driver runs in another process and compares CLOCK_MONOTONIC times. P1 is measured from the "
    "watch event reaching the controller (decoded by the watch adapter, about to enter the loop's "
    "stream) to the fake LiteLLM receiving the request; the figure from the driver's status patch, "
    "which adds the API server's own write and watch delivery, is shown next to it. Stages: 'API "
    "server' from the patch to the event's receipt, 'stream wait' to its fold (the loop busy with "
    "earlier work), 'fold+plan' to the LiteLLM command entering the queue, 'queue+request' to the "
    "fake receiving it.",
    "P4's 1,000 patches took ~10 s, not 1 s: the API server on this shared 2-core machine takes ~100 "
    "status patches/s (100 client threads). The write counts are for that pace. The threads start "
    "together, each on a connection opened just before (started as they were created, the first "
    "thread's patch led the rest by 25-100 ms while they opened theirs). At that pace a model's next "
    "patch is now and then answered more than the 2 s settle window after its last: its row waits for "
    "the burst to calm (Gate.CALM_AFTER_BURSTS), not only for itself to be still.",
    "P4 runs on the real LiteLLM (issue 14), with one consumer Deployment and one AgentTemplate; its "
    "LiteLLM writes are counted per row from the controller's event log (every command outcome is a "
    "request made). Every model's first patch lands on a row that has been still for longer than the "
    "settle window; it is held for the burst probe (10 ms), and as the 100 models' patches reach the "
    "controller a few ms apart, the next one makes a burst: every row then waits until it has been "
    "still for the settle window, so a model that ends where it began costs no write and one that ends "
    "changed costs one. Without the probe (CATALOG_LITELLM_BURST_PROBE_SECONDS=0) the burst rule sees "
    "the burst only at its third moment, and the rows of the first two are written out and back (52 "
    "writes, 2 on unchanged models, in the run of 8ede4c7).",
    "P1 at 50 changes/s (stress) changes each of the 100 models every 2 s, which is the LiteLLM settle "
    "window: a row written less than 2 s before waits for it (issue 14), so its tail is the window.",
    "P1's worker runs as `model-catalog run` does by default: the heap frozen after the first sync and "
    "convergence (CATALOG_GC_FREEZE). At 10,000 models a full collection otherwise stalls the loop "
    "~150 ms, the watch then delivers changes made 100 ms apart back to back, and the write damping "
    "reads three of them as a burst (every change then waits the 2 s settle window). The worker starts "
    "the phases once the heap's first freeze is done (the service's one start-up pause, ~270 ms at "
    "10,000 models). The fake LiteLLM encodes its answers with orjson and keeps each row's /model/info "
    "entry per row version (its one event loop reads no write while it answers /model/info: building "
    "10,000 entries took ~150 ms per poll).",
    "P6 is judged by the command as users run it: `replay --verify` with its defaults (`--jobs auto`, "
    "one part per usable CPU: the log cut at snapshots, the parts verified at once, each in its own "
    "process). The one-CPU figure (`--jobs 1`, pinned), reported beside it, is the fold's cost. The "
    "wall time of the same command on this shared host moves by 10-25% within minutes (9.2-15.9 s in "
    "one run of three), so changes to it are measured as instructions (valgrind cachegrind, "
    "PYTHONHASHSEED=0), which the host cannot move: a verify of the log's first 30,000 records took "
    "5,161M instructions at 38fc87c and 4,300M at 1824de4 (-17%), the fold alone of its first 20,000 "
    "2,398M and 1,883M (-21%). What 1824de4 removed: the parse of a watch event that repeats the object "
    "the held value was parsed from, resourceVersion aside (98% of the upserts; compared by exact "
    "text, as LiteLLM rows are), a second fingerprint of our own catalog write's echo, a rebuild of "
    "the damping windows a few times per tick, and a keyword pass per state copy on the copies made on "
    "nearly every event (a tick's clock, a probe and its answer). What is left is flat: reading and "
    "orjson ~17% (LogFile.records), the replay loop ~6%, the marshal texts of rows and objects ~7%, "
    "state copies ~6% (~0.9 us for the 12-field state, slot by slot), persistent-map updates ~0.8-1 us "
    "each. Tried and measured, not kept: the state as a dict class copied by dict.update (fewer "
    "instructions, slower in wall time); one marshal text of all rows (-0.2%); a memo of decoded "
    "events (slower: watch events never repeat); an idle-tick fast path; skipping the fold of any "
    "event (a verify that skips the fold no longer verifies it). Measured, not adopted: the 14 core "
    "modules that define no attrs class compiled with mypyc (-15% on a 100k-record verify at the "
    "time); the rest would need the state types as mypyc native classes instead of attrs, and every "
    "install a C toolchain. An interpreter built with profile-guided optimisation, as the image's "
    "python:3.11-slim is (this host's Debian python3.11), folds ~12% faster than the dev venv's "
    "(pyenv, built without it); P6 is measured with the dev venv's.",
    "P5 folds with the heap collected and frozen after the steady state is built, as `model-catalog run` "
    "keeps it once its first convergence has settled (app/heap.py); the figure with the heap not frozen "
    "(a host that embeds the library and leaves the collector alone) is in the details: its median is "
    "within a few percent, but a full collection of the 10,000-model state (~150 ms) lands in some runs "
    "(43k events/s in the run of f6c33ea).",
    "At 10,000 models a change no longer renders the catalog (issue 15): one known to exceed the "
    "ConfigMap limit is only hashed (the render hashed ~17 MiB, ~56 ms per change, and the stall "
    "bunched the watch's deliveries into false bursts), and changes delivered within 2.5 ms of each "
    "other are one moment for the burst rule.",
)


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def p5(sizes: list[int], events: int, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {"events": events, "repeats": repeats, "sizes": {}}
    for n in sizes:
        log(f"P5: {n} models")
        state = core_bench.steady_state(n)
        stream = core_bench.watch_events(n, events)
        # measured as the service runs the fold (the heap frozen after its first convergence), and as a host
        # that does not freeze it does (reported apart)
        with core_bench.frozen_heap():
            tput = [core_bench.fold_throughput(state, stream) for _ in range(repeats)]
        unfrozen = [core_bench.fold_throughput(state, stream) for _ in range(repeats)]
        plans = [core_bench.plan_cost(state, stream, 100) * 1e6 for _ in range(repeats)]
        renders = [core_bench.render_time(state) * 1e3 for _ in range(repeats)]
        out["sizes"][str(n)] = {
            "events_per_s": summary(tput),
            "unfrozen_events_per_s": summary(unfrozen),
            "plan_us_per_changed_item": summary(plans),
            "render_ms": summary(renders),
            "first_render_ms": renders[0],
        }
    return out


def in_child(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in a forked process (its result pickled back), so nothing it builds stays here."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        return pool.apply(fn, args)


def p6(records: int, repeats: int) -> dict[str, Any]:
    path = (
        DEFAULT_OUT if records == 1_000_000 else DEFAULT_OUT.with_name(f"big-event-log-{records}.jsonl.tmp")
    )
    generated = None
    if not path.exists():
        log(f"P6: generating {path.name} ({records} records; cached for later runs)")
        began = time.monotonic()
        generate(path, records, seed=1)
        generated = time.monotonic() - began
    # The target's measure: the command as users run it, with its defaults (--jobs auto: one part per
    # usable CPU); beside it the one-CPU figure (--jobs 1, pinned), the fold's own cost.
    runs = [_p6_run(path, None, f"({i + 1}/{repeats})") for i in range(repeats)]
    one_cpu = [_p6_run(path, 1, f"--jobs 1, one CPU ({i + 1}/{repeats})") for i in range(repeats)]
    seconds, count = decode_only(path)
    return {
        "records": records,
        "log_bytes": path.stat().st_size,
        "generated_seconds": generated,
        "cpus": len(os.sched_getaffinity(0)),
        "wall_s": summary([r["wall_s"] for r in runs]),
        "cpu_s": summary([r["cpu_s"] for r in runs]),
        "peak_rss_mib": summary([r["peak_rss_mib"] for r in runs]),
        "runs": runs,
        "one_cpu": {
            "wall_s": summary([r["wall_s"] for r in one_cpu]),
            "cpu_s": summary([r["cpu_s"] for r in one_cpu]),
            "peak_rss_mib": summary([r["peak_rss_mib"] for r in one_cpu]),
            "runs": one_cpu,
        },
        "log_layer_s": seconds,
        "log_layer_us_per_record": seconds / count * 1e6,
        "output": runs[-1]["output"] if runs else "",
    }


def _p6_run(path: Path, jobs: int | None, what: str) -> dict[str, Any]:
    """One ``replay --verify`` (``jobs`` None: its defaults), with the RSS of each of its processes:
    the largest of any process in the first and in the second half of that process's own run."""
    log(f"P6: replay --verify {path.name} {what}")
    result = replay_verify(path, jobs)
    if result["exit"] != 0:
        raise RuntimeError(f"replay failed: {result['output']}")
    by_process = result.pop("rss_by_process")
    parent = result.pop("rss_samples")
    result.update(flatness(by_process))
    every = [kib for series in by_process.values() for _, kib in series]
    result["peak_rss_mib"] = max(every) / 1024 if every else float("nan")
    result["rss_samples_mib"] = [round(kib / 1024, 1) for _, kib in parent[:: max(1, len(parent) // 20)]]
    return result


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.quick: bool = args.quick
        self.only = set(args.only.split(",")) if args.only else set(ALL)
        self.sizes: list[int] = [int(n) for n in args.sizes.split(",")] if args.sizes else []
        self.results: dict[str, Any] = {"quick": self.quick, "errors": {}, "notes": list(NOTES)}
        self.work = Path(tempfile.mkdtemp(prefix="model-catalog-bench-"))
        self.profiles = self.work / "profiles"
        self.profiles.mkdir()
        self._image_venv: Path | None = None

    def want(self, *ids: str) -> bool:
        return bool(self.only & set(ids))

    def scales(self, default: list[int]) -> list[int]:
        """The model counts to measure: ``--sizes`` when given, else ``default``."""
        return self.sizes or default

    def guarded(self, key: str, fn: Any, *args: Any, store: bool = True, **kwargs: Any) -> Any:
        """Run one benchmark; a failure is recorded (and reported), the others still run. The load
        average before and after is kept with it (other work on the machine skews the figures)."""
        load_before = machine.load_average()
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:
            log(f"{key} failed: {exc!r}")
            self.results["errors"][key] = "".join(traceback.format_exception_only(exc)).strip()
            traceback.print_exc()
            return None
        finally:
            self.results.setdefault("load_average", {})[key] = [load_before, machine.load_average()]
        if store:
            self.results[key] = value
        return value

    def run(self) -> int:
        began = time.monotonic()
        self.results["machine"] = machine.describe()
        self.results["py_spy"] = profile.ensure_py_spy()
        quick = self.quick
        if self.want("P5"):
            sizes = self.scales([100, 1000] if quick else [100, 1000, 10000])
            # In a child: the 10,000-model state P5 builds stays in the core's caches (the warm render,
            # the parse memos), and this process drives the cluster benchmarks after it. Its collections
            # walking that state delayed P8's polls (first start 1.09 s after P5 in this process, 0.84 s
            # without); frozen instead, full collections of what came after ran often enough to bunch
            # P1's patches at 10,000 models into bursts.
            self.guarded("P5", in_child, p5, sizes, 5000 if quick else 20000, 3 if quick else 5)
        if self.want("P6"):
            self.guarded("P6", p6, 100_000 if quick else 1_000_000, 1 if quick else 3)
        if self.want("P1", "P2", "P3", "P4", "P7", "P8"):
            self.cluster()
        if self.want("IDLE"):
            log("IDLE: API server requests and RSS while nothing changes (an audited kube-apiserver)")
            windows = (
                {"single": 120.0, "leader": 60.0}
                if quick
                else {"single": idle.FULL_WINDOW_S, "leader": 120.0}
            )
            self.guarded("IDLE", idle.bench, 100, windows, self.work, self.image_venv())
        if self.want("SOAK"):
            log(f"SOAK: {self.args.soak_minutes:g} min of churn on the real peers")
            self.guarded("SOAK", soak.bench, self.args.soak_minutes, log)
        self.profile_worst()
        self.results["seconds"] = time.monotonic() - began
        self.results["machine"]["load_average_at_end"] = machine.load_average()
        self.write()
        shutil.rmtree(self.work, ignore_errors=True)
        return 0

    def image_venv(self) -> Path:
        """A venv built as the image's (bench.image_venv), once per run: P7 and IDLE measure the RSS of the
        controller run from it, as the image runs it."""
        if self._image_venv is None:
            log("building a venv as the image's (P7 and IDLE run the controller from it)")
            self._image_venv = build_image_venv(self.work / "image", optimize=(2,))
        return self._image_venv

    def cluster(self) -> None:
        quick = self.quick
        log("compiling bytecode for the image's optimisation level")
        self.results["compile_for_image_s"] = scenarios.compile_for_image()
        image_venv = self.image_venv() if self.want("P7") else None
        log("starting the kube-apiserver peer")
        peer, kube_starter = start_kube()
        litellm_starter = start_litellm() if self.want("P2", "P4") else None
        kube = Kube(Path(peer.kubeconfig))
        suffix = datetime.datetime.now().strftime("%H%M%S")
        world = scenarios.World(
            kube, Path(peer.kubeconfig), f"bench-{suffix}", f"bench-{suffix}-system", self.work
        )
        growth: dict[str, float] = {}
        self.results["model_creation_s"] = growth
        try:
            kube.prepare(world.namespace, world.appliance_namespace)
            growth["100"] = world.grow(100)
            scales = self.scales([100, 1000] if quick else [100, 1000, 10000])
            with FakeServer() as server:
                if self.want("P8"):
                    log("P8: start -> first catalog")
                    self.guarded(
                        "P8", scenarios.p8_start, world, server, 2 if quick else 5, 1 if quick else 3
                    )
                if self.want("P3"):
                    log("P3: idle writes")
                    self.guarded("P3", scenarios.p3_idle, world, server, 60.0 if quick else 300.0, 5.0)
                p1: dict[str, Any] = {}
                p1_stress: dict[str, Any] = {}
                p7: dict[str, Any] = {}
                self.results["P1"], self.results["P1_stress"], self.results["P7"] = p1, p1_stress, p7
                changes = 200 if quick else 500
                for n in scales:
                    growth[str(n)] = world.grow(n)
                    if self.want("P1"):
                        log(f"P1: {n} models")
                        last = n == scales[-1]
                        # 10 changes/s (an appliance's busiest hour), then 50/s (a stress test)
                        both = self.guarded(
                            f"P1@{n}",
                            scenarios.p1_latency,
                            world,
                            [(changes, 0.1), (changes, 0.02)],
                            profile=self.profiles / "p1.folded" if last else None,
                            store=False,
                        )
                        if both:
                            p1[str(n)], p1_stress[str(n)] = both
                    if self.want("P7"):
                        assert image_venv is not None
                        log(f"P7: {n} models")
                        server.fake.reset_counts()
                        p7[str(n)] = self.guarded(
                            f"P7@{n}",
                            scenarios.p7_memory,
                            world,
                            server,
                            10.0 if quick else 30.0,
                            image_venv,
                            store=False,
                        )
                    if n == 100 and self.want("P2") and litellm_starter is not None:
                        log("P2: waiting for the real LiteLLM")
                        self.guarded("P2", self.p2, world, litellm_starter)
                    if n == 100 and self.want("P4") and litellm_starter is not None:
                        log("P4: readiness flaps (real LiteLLM)")
                        self.guarded("P4", self.p4, world, litellm_starter)
        finally:
            kube.close()
            if litellm_starter is not None:
                litellm_starter.stop()
            kube_starter.stop()

    def p2(self, world: scenarios.World, starter: Any) -> dict[str, Any]:
        peer = wait_litellm(starter)
        scenarios.cleanup_litellm(peer.base_url, peer.master_key)
        try:
            log("P2: Kubernetes change -> LiteLLM row and ConfigMap (real peers)")
            return scenarios.p2_visible(world, peer.base_url, peer.master_key, 8 if self.quick else 30, 0.5)
        finally:
            scenarios.cleanup_litellm(peer.base_url, peer.master_key)

    def p4(self, world: scenarios.World, starter: Any) -> dict[str, Any]:
        peer = wait_litellm(starter)
        scenarios.cleanup_litellm(peer.base_url, peer.master_key)
        litellm = scenarios.RealLiteLLM(peer.base_url, peer.master_key)
        try:
            # quiet: longer than the rollout settle window, so a rollout still to come is counted
            return scenarios.p4_flaps(world, litellm, 1 if self.quick else 3, 12.0)
        finally:
            litellm.close()
            scenarios.cleanup_litellm(peer.base_url, peer.master_key)

    # --- the profile of the worst figure
    def ratios(self) -> dict[str, float]:
        """How far each timed figure is from its target (>1: missed by that factor)."""
        r = self.results
        out: dict[str, float] = {}
        p1 = r.get("P1") or {}
        for n, v in p1.items():
            if v:
                lat = report.p1_latency(v)
                out[f"P1@{n}"] = max(lat["p50"] / 0.020, lat["p99"] / 0.100)
        if r.get("P2"):
            out["P2"] = r["P2"]["both_s"]["p99"] / 1.0
        if r.get("P5"):
            sizes = r["P5"]["sizes"]
            measured = [sizes[n]["events_per_s"]["median"] for n in ("1000", "10000") if n in sizes]
            worst = min(measured or [s["events_per_s"]["median"] for s in sizes.values()])
            out["P5"] = report.P5_EVENTS_PER_S / worst
        if r.get("P6"):
            out["P6"] = r["P6"]["wall_s"]["median"] / 10.0 * (1_000_000 / r["P6"]["records"])
        if r.get("P8"):
            first, warm = report.p8_split(r["P8"]["runs"])
            out["P8"] = (
                max(statistics.median(x["catalog"] for x in first), *(x["catalog"] for x in warm)) / 1.0
            )
        return out

    def profile_worst(self) -> None:
        """py-spy on the figure furthest from its target; and on the replay (P6) when it misses too,
        since the core's own costs show best there."""
        ratios = self.ratios()
        self.results["target_ratios"] = ratios
        # P2 and P8 are waits on other processes (LiteLLM, the API server, imports), not one process's CPU
        cpu_bound = {k: v for k, v in ratios.items() if k.startswith(("P1", "P5", "P6"))}
        if not cpu_bound:
            return
        worst = max(cpu_bound, key=lambda k: cpu_bound[k])
        profiles: list[dict[str, Any]] = []
        self.results["profiles"] = profiles
        wanted = [worst] + (["P6"] if worst != "P6" and ratios.get("P6", 0) > 1 else [])
        for figure in wanted:
            folded = self.profiles / f"{figure.replace('@', '-')}.folded"
            command: list[str] | None = None
            if figure == "P6":
                records = self.results["P6"]["records"]
                path = (
                    DEFAULT_OUT
                    if records == 1_000_000
                    else DEFAULT_OUT.with_name(f"big-event-log-{records}.jsonl.tmp")
                )
                until = str(min(records, 300_000))
                command = [sys.executable, "-m", "app.cli", "replay", str(path), "--verify", "--until", until]
            elif figure == "P5":
                command = [sys.executable, "-m", "bench.core", "--sizes", "10000", "--repeat", "2"]
            elif figure.startswith("P1") and (self.profiles / "p1.folded").exists():
                # sampled during the stress phase (50 changes/s) at the largest size
                folded = self.profiles / "p1.folded"
            else:
                continue
            if command is not None:
                log(f"profiling {figure}: {' '.join(command[1:])}")
                profile.record(command, folded)
            if folded.exists():
                where = f"P1 at {figure.split('@')[1]} models, 50 changes/s" if "@" in figure else ""
                profiles.append(
                    {
                        "figure": figure,
                        "ratio": ratios[figure],
                        "command": " ".join(command[1:])
                        if command
                        else f"py-spy record --pid <worker> ({where})",
                        **profile.top_costs(folded),
                    }
                )

    def write(self) -> None:
        RESULTS.mkdir(parents=True, exist_ok=True)
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
        suffix = "-quick" if self.quick else ""
        if self.only != set(ALL):  # a partial run never replaces the last full run's results
            suffix += "-" + "-".join(sorted(self.only))
        if self.sizes:
            suffix += "-" + "-".join(str(n) for n in self.sizes)
        text = json.dumps(self.results, indent=2, default=_json_default, allow_nan=True) + "\n"
        markdown = report.markdown(self.results)
        for name in (f"results{suffix}", f"results{suffix}-{stamp}"):
            (RESULTS / f"{name}.json").write_text(text)
            (RESULTS / f"{name}.md").write_text(markdown)
        log(f"wrote {RESULTS}/results{suffix}.md and .json (and a copy dated {stamp})")
        print(markdown)


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--quick", action="store_true", help="a shorter run (fewer repeats, up to 1,000 models)"
    )
    parser.add_argument(
        "--only", default="", help=f"comma-separated ids, e.g. P5,P6 (of {', '.join(ALL + ON_REQUEST)})"
    )
    parser.add_argument(
        "--sizes",
        default="",
        help="comma-separated model counts for P1, P5 and P7, e.g. 100 (default: 100,1000,10000; "
        "100,1000 with --quick)",
    )
    parser.add_argument(
        "--soak-minutes",
        type=float,
        default=soak.DEFAULT_MINUTES,
        help=f"how long SOAK churns ({soak.DEFAULT_MINUTES:g})",
    )
    args = parser.parse_args(argv)
    unknown = set(filter(None, args.only.split(","))) - set(ALL + ON_REQUEST)
    if unknown:
        parser.error(f"unknown ids in --only: {', '.join(sorted(unknown))}")
    os.environ.setdefault("PYTHONHASHSEED", "0")
    return Bench(args).run()


if __name__ == "__main__":
    raise SystemExit(main())
