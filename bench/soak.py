"""SOAK (issue 35): a controller under churn for ``--soak-minutes`` (30 by default) on the real peers, with a
LiteLLM restart and an API server restart in the middle. Not part of ``just test``.

The world is the fault suite's stage (``tests/faults/stage.py``: its namespaces, RBAC from ``deploy/``, the
baseline inputs and foreign LiteLLM rows, a ``model-catalog run`` process with the Lease timing as
deployed), on a kube-apiserver of its own that can be stopped and started again on its data
(``OwnKubePeer``) and on the real LiteLLM (``bench.peers.start_litellm``: the tests' ROOT, or
``MODEL_CATALOG_LITELLM_ROOT``). A churn thread makes 10 changes a second, round-robin across the sources:
a KubeAI Model's readiness, an entry of ``models.json`` added or removed, an external ModelActivation
created or deleted, a FreeToken runtime Deployment's readiness (its /health answers on loopback). At 40 %
of the run LiteLLM is stopped and started again (its process and database); at 50 % the API server is.

Every 5 s the controller's RSS, open file descriptors (``/proc/<pid>/fd``), event-loop tasks
(``model_catalog_tasks``) and metric series (samples on /metrics) are sampled. The first third is
warm-up; flat means the median of the last third is within 5 % of the median of the second third. At the
end the churn stops and every invariant of the fault suite is judged (``tests.faults.scenario.judge``:
convergence to render's output, foreign rows untouched, no duplicates, rollouts justified, alive
throughout, no secret anywhere).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench.peers import start_litellm, wait_litellm
from tests.faults.conftest import DEPLOYED_LEASE, FULL_PROFILE, Suite, install_crds
from tests.faults.kube import Admin, ApiError
from tests.faults.peers import OtlpSink, OwnKubePeer, RealLiteLLMRestarter
from tests.faults.results import Outcome
from tests.faults.runtimes import HealthEndpoint, ready_runtime, runtime_objects
from tests.faults.scenario import judge
from tests.faults.stage import EXTERNAL, PROVIDER_SECRET, Stage, activation

DEFAULT_MINUTES = 30.0
CHANGES_PER_S = 10.0
SAMPLE_EVERY_S = 5.0
FLAT_WITHIN = 0.05  # the last third's median within 5 % of the second third's
POOL = 6  # objects per source the churn cycles through
LITELLM_RESTART_AT = 0.4  # fractions of the run
APISERVER_RESTART_AT = 0.5
SAMPLED = ("rss_mib", "open_fds", "tasks", "metric_series")


class Churn:
    """Changes across the sources at a steady pace, in a thread; ``stop`` ends it."""

    def __init__(self, stage: Stage, runtimes: list[str]) -> None:
        self.stage = stage
        self.runtimes = runtimes
        self.counts: dict[str, int] = {}
        self.failed: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-churn", daemon=True)
        self._ready = {f"soak-k-{i}": True for i in range(POOL)}
        self._entries: set[int] = set()
        self._activations: set[int] = set()
        self._runtime_ready = dict.fromkeys(runtimes, True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        began = time.monotonic()
        kinds = (self._kubeai, self._models_json, self._activation, self._runtime)
        n = 0
        while not self._stop.is_set():
            change = kinds[n % len(kinds)]
            step = n // len(kinds)
            try:
                change(step)
                self.counts[change.__name__] = self.counts.get(change.__name__, 0) + 1
            except (ApiError, httpx.HTTPError, OSError) as exc:  # the API server may be what is restarting
                key = f"{change.__name__}: {type(exc).__name__}"
                self.failed[key] = self.failed.get(key, 0) + 1
            n += 1
            delay = began + n / CHANGES_PER_S - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)

    def _kubeai(self, step: int) -> None:
        name = f"soak-k-{step % POOL}"
        self._ready[name] = not self._ready[name]
        self.stage.set_ready(name, self._ready[name])

    def _models_json(self, step: int) -> None:
        i = step % POOL
        cm = self.stage.admin.get("v1", "ConfigMap", self.stage.ns, EXTERNAL)
        assert cm is not None
        models = [m for m in json.loads(cm["data"]["models.json"])["models"] if m["name"] != f"soak-x-{i}"]
        if i not in self._entries:
            models.append(
                {"name": f"soak-x-{i}", "model": f"openai/soak-x-{i}", "apiBase": "https://x.test/v1"}
            )
        cm["data"]["models.json"] = json.dumps({"models": models})
        self.stage.admin.replace(cm)
        self._entries ^= {i}

    def _activation(self, step: int) -> None:
        i = step % POOL
        name = f"soak-a-{i}"
        if i in self._activations:
            self.stage.admin.delete(
                "appliance.magicstick.dev/v1alpha1", "ModelActivation", self.stage.app_ns, name
            )
        else:
            external = {"model": f"openai/{name}", "apiKeySecretRef": {"name": PROVIDER_SECRET, "key": "k"}}
            self.stage.admin.apply(activation(self.stage.app_ns, name, external))
        self._activations ^= {i}

    def _runtime(self, step: int) -> None:
        name = self.runtimes[step % len(self.runtimes)]
        self._runtime_ready[name] = not self._runtime_ready[name]
        ready_runtime(self.stage, name, self._runtime_ready[name])


def series_of(text: str) -> set[str]:
    """The series on a /metrics page: each sample's name and labels."""
    return {line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")}


def sample(stage: Stage, seen: list[set[str]]) -> dict[str, float]:
    """One sample of the leader's figures; the series it exports are appended to ``seen``."""
    controller = stage.leader
    assert controller.process is not None
    pid = controller.process.pid
    with open(f"/proc/{pid}/status") as status:
        rss_kib = next(int(x.split()[1]) for x in status if x.startswith("VmRSS:"))
    text = controller.metrics()
    series = series_of(text)
    seen.append(series)
    return {
        "t": time.monotonic(),
        "rss_mib": rss_kib / 1024,
        "open_fds": float(len(os.listdir(f"/proc/{pid}/fd"))),
        "tasks": controller.metric("model_catalog_tasks", text),
        "metric_series": float(len(series)),
    }


def flatness(samples: list[dict[str, float]]) -> dict[str, dict[str, float | bool]]:
    """Per figure: the medians of the second and the last third of the run, their ratio, and whether it
    is within ``FLAT_WITHIN``."""
    third = len(samples) // 3
    middle, last = samples[third : 2 * third], samples[2 * third :]
    out: dict[str, dict[str, float | bool]] = {}
    for key in SAMPLED:
        a = statistics.median(s[key] for s in middle) if middle else float("nan")
        b = statistics.median(s[key] for s in last) if last else float("nan")
        change = (b - a) / a if a else float("nan")
        out[key] = {
            "second_third_median": a,
            "last_third_median": b,
            "change": change,
            "min": min(s[key] for s in samples),
            "max": max(s[key] for s in samples),
            "flat": abs(change) <= FLAT_WITHIN,
        }
    return out


def run(minutes: float, work: Path, log: Any) -> dict[str, Any]:
    peer = OwnKubePeer()
    otlp = OtlpSink()
    litellm_starter = start_litellm()
    endpoints: list[HealthEndpoint] = []
    stage: Stage | None = None
    try:
        started = peer.wait()
        if isinstance(started, str):
            raise RuntimeError(started)
        admin = Admin(peer.server, peer.token, peer.ca_file)
        install_crds(admin)
        suite = Suite(peer, admin, otlp, work, FULL_PROFILE)
        log("SOAK: waiting for the real LiteLLM")
        litellm = wait_litellm(litellm_starter)
        if litellm.root is None:
            raise RuntimeError("LITELLM_BASE_URL points at a LiteLLM the soak cannot restart")
        restarter = RealLiteLLMRestarter(litellm.root, litellm.base_url, litellm.start_env)
        runtimes = [f"soak-rt-{i}" for i in range(POOL)]
        endpoints = [HealthEndpoint("ok") for _ in runtimes]
        stage = Stage(suite, "soak", litellm=(litellm.base_url, litellm.master_key, None))
        resolve = ",".join(
            f"{name}-rt.{stage.ns}.svc.cluster.local:8080=127.0.0.1:{ep.port}"
            for name, ep in zip(runtimes, endpoints, strict=True)
        )
        # as deployed: the Lease's timing, INFO logs (30 minutes of DEBUG would be the largest file here)
        stage.extra_env.update({**DEPLOYED_LEASE, "LOG_LEVEL": "INFO", "CATALOG_PROBE_RESOLVE": resolve})
        stage.extra_secrets.append(litellm.master_key)
        stage.start()
        for i in range(POOL):
            stage.add_kubeai(f"soak-k-{i}")
        for name in runtimes:
            for obj in runtime_objects(stage, name):
                stage.admin.apply(obj)
            ready_runtime(stage, name)
        stage.healthy_runtimes = {f"{name}-rt" for name in runtimes}
        stage.launch(timeout=120)
        stage.watchdog.start()
        stage.wait_converged(180)
        outcome = Outcome(
            "soak",
            "soak",
            f"{minutes:g} min of churn ({CHANGES_PER_S:g} changes/s across KubeAI readiness, models.json, "
            "ModelActivations and FreeToken Deployment readiness), LiteLLM and the API server restarted "
            "in the middle",
            "soak",
            hold_s=minutes * 60.0,
            bound_s=FULL_PROFILE.kube_bound,
        )
        snapshot = stage.snapshot()
        samples: list[dict[str, float]] = []
        series: list[set[str]] = []  # per sample: what it exported
        events: dict[str, Any] = {}
        churn = Churn(stage, runtimes)
        began = time.monotonic()
        end = began + minutes * 60.0
        restarts = (
            ("litellm_restart", "LiteLLM", LITELLM_RESTART_AT, restarter.stop, restarter.start),
            ("apiserver_restart", "the API server", APISERVER_RESTART_AT, peer.stop, peer.start),
        )

        def restart_in_the_middle() -> None:
            """Each peer stopped and started again at its moment (the samples go on meanwhile)."""
            for key, what, at, stop, start in restarts:
                delay = began + at * minutes * 60.0 - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                log(f"SOAK: restarting {what}")
                try:
                    at_s = time.monotonic() - began
                    events[key] = {"at_s": round(at_s, 1), "stop_s": round(stop(), 1)}
                    events[key]["start_s"] = round(start(), 1)
                except RuntimeError as exc:
                    events[key] = {"at_s": round(at_s, 1), "error": str(exc)[:300]}

        restarting = threading.Thread(target=restart_in_the_middle, name="soak-restarts", daemon=True)
        churn.start()
        restarting.start()
        log(f"SOAK: churn for {minutes:g} min")
        try:
            while time.monotonic() < end:
                try:
                    samples.append({**sample(stage, series), "t": time.monotonic() - began})
                except (httpx.HTTPError, OSError) as exc:
                    events.setdefault("sample_errors", []).append(f"{type(exc).__name__}: {exc}"[:200])
                time.sleep(max(0.0, min(SAMPLE_EVERY_S, end - time.monotonic())))
            restarting.join()  # a restart still under way ends before the judging starts
        finally:
            churn.stop()
        churn_seconds = time.monotonic() - began
        log("SOAK: churn stopped; judging the invariants")
        judge(stage, outcome, snapshot, 0, alive=True)
        controller = stage.leader
        return {
            "minutes": minutes,
            "changes": churn.counts,
            "changes_per_s": sum(churn.counts.values()) / churn_seconds,
            "failed_changes": churn.failed,
            "events": events,
            "samples": samples,
            "flat": flatness(samples),
            # what changed in the series after warm-up (the start of the second third): names a growth
            "series_after_warm_up": {
                "added": sorted(series[-1] - series[len(series) // 3])[:50] if series else [],
                "gone": sorted(series[len(series) // 3] - series[-1])[:50] if series else [],
            },
            "flat_within": FLAT_WITHIN,
            "invariants": outcome.invariants,
            "final_change_s": outcome.measured.get("final_change_s"),
            "error": outcome.error,
            "watchdog_checks": stage.watchdog.checks,
            "liveness_verdicts": controller.metric("model_catalog_kube_watch_liveness_verdicts_total"),
        }
    finally:
        if stage is not None:
            stage.close()
        for endpoint in endpoints:
            endpoint.close()
        otlp.close()
        litellm_starter.stop()
        peer.destroy()


def bench(minutes: float, log: Any) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="model-catalog-bench-soak-"))
    return run(minutes, work, log)
