"""The end-to-end benchmarks (P1-P4, P7, P8): the controller on the real kube-apiserver.

Each function takes a ``World`` (the API server, the namespaces, the models in them) and returns a
JSON-able dict of raw samples and summaries; bench.run repeats them and writes the report.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.kube import Kube, model_name
from bench.peers import FakeServer
from bench.stats import latency, summary
from catalog_core.config import CatalogConfig
from catalog_core.rules.render import bootstrap_data
from catalog_core.values import ID_PREFIX
from tests.e2e.harness import Controller, image_runtime_env
from tests.fakes.litellm import DELETE, INFO, NEW

CATALOG = "ai-model-catalog"
HASH_ANNOTATION = "ai-appliance.io/catalog-hash"
CONSUMER_LABELS = {"app": "bench-consumer", "ai-appliance.io/model-catalog-consumer": "true"}


def row_id(i: int) -> str:
    return f"{ID_PREFIX}kubeai-{model_name(i)}"


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process, KiB."""
    rss = hwm = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
        elif line.startswith("VmHWM:"):
            hwm = int(line.split()[1])
    return rss, hwm


def compile_for_image() -> float:
    """Bytecode for the image's optimisation level, which the image ships compiled (its filesystem is
    read-only): without it each controller start would compile every module again. Seconds it took."""
    level = image_runtime_env().get("PYTHONOPTIMIZE")
    began = time.monotonic()
    if level:
        roots = [
            *sysconfig.get_paths()["purelib"].split(os.pathsep),
            "catalog_core",
            "contracts",
            "adapters",
            "app",
        ]
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "-o", level, *dict.fromkeys(roots)],
            cwd=Path(__file__).resolve().parents[1],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return time.monotonic() - began


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except (httpx.HTTPError, OSError, KeyError, ValueError) as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


@dataclass
class World:
    kube: Kube
    kubeconfig: Path
    namespace: str
    appliance_namespace: str
    work: Path
    models: int = 0  # bench-00000 .. bench-<models-1>, all ready
    notes: list[str] = field(default_factory=list)

    def grow(self, total: int) -> float:
        """Create models up to ``total`` (ready); seconds it took."""
        if total <= self.models:
            return 0.0
        seconds = self.kube.create_models(self.namespace, range(self.models, total))
        self.models = total
        return seconds

    def all_ready(self, indexes: range | list[int]) -> None:
        self.kube.parallel(
            [functools.partial(self.kube.set_ready, self.namespace, model_name(i), True) for i in indexes]
        )

    def controller_env(self, litellm_url: str, master_key: str = "sk-test", **extra: str) -> dict[str, str]:
        # as the image runs it (python -OO, its allocator settings; see compile_for_image)
        env = {
            **image_runtime_env(),
            "KUBECONFIG": str(self.kubeconfig),
            "NAMESPACE": self.namespace,
            "APPLIANCE_NAMESPACE": self.appliance_namespace,
            "LITELLM_BASE_URL": litellm_url,
            "LITELLM_MASTER_KEY": master_key,
            "CATALOG_EVENT_LOG_PATH": "",  # off, as in deploy/
            "CATALOG_LEASE_NAMESPACE": self.namespace,
            "LOG_LEVEL": "INFO",
        }
        env.update(extra)
        return env

    def catalog_hash(self) -> str | None:
        cm = self.kube.configmap(self.namespace)
        return (cm["metadata"].get("annotations") or {}).get(HASH_ANNOTATION)

    def catalog_model_ids(self) -> set[str] | None:
        data = self.kube.configmap(self.namespace).get("data") or {}
        if "catalog.json" not in data:
            return None
        return {m["id"] for m in json.loads(data["catalog.json"])["models"]}

    def reset_catalog(self) -> None:
        """The placeholder of deploy/ again, so the next controller has to write the catalog."""
        config = CatalogConfig.from_env({"NAMESPACE": self.namespace})
        assert isinstance(config, CatalogConfig)
        self.kube.put_configmap_data(self.namespace, CATALOG, bootstrap_data(config))


@contextmanager
def controller(
    world: World, name: str, env: dict[str, str], command: Sequence[str] | None = None
) -> Iterator[Controller]:
    process = Controller(name, env, world.work, command).start()
    try:
        yield process
    finally:
        try:
            process.stop(30)
        except subprocess.TimeoutExpired:
            process.kill()


def converged(world: World, ctl: Controller, fake_rows: Callable[[], int], rows: int) -> bool:
    return fake_rows() == rows and ctl.metric("model_catalog_queue_depth") == 0


def wait_converged(
    world: World, ctl: Controller, fake_rows: Callable[[], int], rows: int, timeout: float
) -> float:
    """Seconds until ``rows`` rows exist and nothing is queued, twice in a row 0.5 s apart."""
    began = time.monotonic()

    def stable() -> bool:
        if ctl.process is not None and ctl.process.poll() is not None:
            raise RuntimeError(f"{ctl.name} exited: {ctl.tail()}")
        if not converged(world, ctl, fake_rows, rows):
            return False
        time.sleep(0.5)
        return converged(world, ctl, fake_rows, rows)

    wait_until(stable, timeout, f"{ctl.name} to converge on {rows} rows", interval=0.2)
    return time.monotonic() - began


def writes(ctl: Controller) -> dict[str, float]:
    """Commands carried out, by kind, except the reads (probes, the Secret watch)."""
    out: dict[str, float] = {}
    for line in ctl.metrics().splitlines():
        if not line.startswith("model_catalog_commands_total{"):
            continue
        labels, _, value = line.rpartition(" ")
        kind = labels.split('kind="', 1)[1].split('"', 1)[0]
        if kind in ("ProbeRuntime", "WatchSecrets"):
            continue
        out[kind] = out.get(kind, 0.0) + float(value)
    return out


# --- P1 ------------------------------------------------------------------------------------------


def _spawn(module: str, *args: str, log: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=open(log, "w"),
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )


def _stop(process: subprocess.Popen[str]) -> None:
    if process.stdin is not None:
        process.stdin.close()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def p1_latency(
    world: World, phases: list[tuple[int, float]], profile: Path | None = None
) -> list[dict[str, Any]]:
    """API write -> LiteLLM request received, and watch event received -> LiteLLM request received
    (``event_to_request_s``, P1 itself), for readiness flips of different models (round
    robin, so one model changes at most every ``models * interval`` s, past the 1 s per-key
    cooldown). ``phases``: (changes, seconds between changes), run one after the other on the same
    controller: the embeddable library in its own process, the fake LiteLLM in another. ``profile``:
    py-spy the controller during the last phase."""
    n = world.models
    fake = _spawn("bench.fake_server", log=world.work / f"p1-fake-{n}.log")
    assert fake.stdout is not None
    url = fake.stdout.readline().split()[1]
    worker = _spawn(
        "bench.latency_worker",
        "--kubeconfig",
        str(world.kubeconfig),
        "--namespace",
        world.namespace,
        "--appliance-namespace",
        world.appliance_namespace,
        "--litellm-url",
        url,
        "--expect",
        str(n),
        log=world.work / f"p1-worker-{n}.log",
    )
    ready = threading.Event()
    seen: dict[str, list[tuple[float, str]]] = {}
    received: dict[str, list[float]] = {}
    folded: dict[str, list[float]] = {}
    queued: dict[str, list[float]] = {}
    rss: list[int] = []
    damping: list[str] = []
    # the loop's two long steps of a LiteLLM re-read: the answer's parse, the observation's fold
    busy: dict[str, list[tuple[float, float]]] = {"P": [], "O": []}
    converged: list[float] = []  # seconds from the worker's catalog start to every row written
    lock = threading.Lock()

    def read(process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            parts = line.split()
            with lock:
                if parts[:1] == ["READY"]:
                    ready.set()
                elif parts[:1] == ["CONVERGED"]:
                    converged.append(float(parts[1]))
                elif parts[:1] == ["W"]:
                    seen.setdefault(parts[3], []).append((float(parts[1]), parts[2].replace("_", " ")))
                elif parts[:1] == ["R"]:
                    received.setdefault(parts[2], []).append(float(parts[1]))
                elif parts[:1] == ["E"]:
                    folded.setdefault(parts[2], []).append(float(parts[1]))
                elif parts[:1] == ["Q"]:
                    queued.setdefault(parts[2], []).append(float(parts[1]))
                elif parts[:1] in (["P"], ["O"]):
                    busy[parts[0]].append((float(parts[1]), float(parts[2])))
                elif parts[:1] == ["RSS"]:
                    rss.append(int(parts[1]))
                elif parts[:1] == ["DAMPING"]:
                    damping.append(" ".join(parts[1:]))

    readers = [threading.Thread(target=read, args=(p,), daemon=True) for p in (fake, worker)]
    for reader in readers:
        reader.start()
    began = time.monotonic()
    state = dict.fromkeys(range(n), True)
    runs: list[tuple[list[tuple[str, float, float, str]], list[float | None], float, float]] = []
    try:
        if not ready.wait(900):
            raise TimeoutError(f"the P1 worker did not converge on {n} models")
        startup = time.monotonic() - began
        k = 0
        for number, (changes, interval) in enumerate(phases):
            spy = None
            if profile is not None and number == len(phases) - 1:
                spy = _py_spy(worker.pid, profile, changes * interval + 2)
            expected: list[tuple[str, float, float, str]] = []
            start = time.monotonic()
            for step in range(changes):
                i = k % n
                k += 1
                state[i] = not state[i]
                sent, acked = world.kube.set_ready(world.namespace, model_name(i), state[i])
                expected.append((row_id(i), sent, acked, NEW if state[i] else DELETE))
                pause = start + (step + 1) * interval - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
            drive = time.monotonic() - start

            def matched(expected: list[tuple[str, float, float, str]] = expected) -> list[float | None]:
                out: list[float | None] = []
                with lock:
                    for rid, sent, _, endpoint in expected:
                        hit = next((t for t, e in seen.get(rid, []) if t >= sent and e == endpoint), None)
                        out.append(None if hit is None else hit - sent)
                return out

            with contextlib.suppress(TimeoutError):
                wait_until(lambda: all(x is not None for x in matched()), 120, "every LiteLLM request")
            runs.append((expected, matched(), start, drive))
            if spy is not None:
                spy.wait(60)
            time.sleep(2.0)  # past the per-key cooldown before the next phase
        world.all_ready([i for i, r in state.items() if not r])
    finally:
        _stop(worker)
        _stop(fake)
        for reader in readers:
            reader.join(5)
    results = []
    for (expected, totals, start, drive), (changes, interval) in zip(runs, phases, strict=True):
        stages: dict[str, list[float]] = {"watch": [], "plan": [], "execute": [], "api": [], "stream": []}
        from_event: list[float] = []
        spans: list[tuple[float, float]] = []  # watch event received -> LiteLLM request, per change
        for (rid, sent, _, _), total in zip(expected, totals, strict=True):
            name = rid.removeprefix(f"{ID_PREFIX}kubeai-")
            t_recv = next((t for t in received.get(name, []) if t >= sent), None)
            t_fold = next((t for t in folded.get(name, []) if t >= sent), None)
            t_queue = next((t for t in queued.get(rid, []) if t >= sent), None)
            if total is None or t_fold is None or t_queue is None:
                continue
            stages["watch"].append(t_fold - sent)
            stages["plan"].append(t_queue - t_fold)
            stages["execute"].append(sent + total - t_queue)
            if t_recv is not None and t_recv <= t_fold:
                stages["api"].append(t_recv - sent)
                stages["stream"].append(t_fold - t_recv)
                from_event.append(sent + total - t_recv)
                spans.append((t_recv, sent + total))
        values = [x for x in totals if x is not None]
        results.append(
            {
                "models": n,
                "changes": changes,
                "interval_s": interval,
                "drive_seconds": drive,
                "startup_s": startup,
                "converged_s": converged[0] if converged else None,
                "missing": sum(1 for x in totals if x is None),
                "latency_s": latency(values),
                # P1 as the issue defines it: from the watch event reaching the controller
                "event_to_request_s": latency(from_event),
                "api_write_round_trip_s": latency([acked - sent for _, sent, acked, _ in expected]),
                "stages_s": {key: latency(v) for key, v in stages.items()},
                "worker_rss_mib": rss[0] / 1024 if rss else None,
                # the worker's write-damping counters after all phases (why writes waited, if they did)
                "worker_damping": damping[0] if damping else None,
                "litellm_reads": _reads_during(busy, spans, start, start + drive),
            }
        )
    return results


def _reads_during(
    busy: dict[str, list[tuple[float, float]]], spans: list[tuple[float, float]], start: float, end: float
) -> dict[str, Any]:
    """The LiteLLM re-reads of a phase (the core plans one after writes; the observer paces them) and how
    many of P1's slowest 1% waited on one: their span (event received -> request) overlaps a parse of
    /model/info or the fold of its rows, the loop's two long atomic steps of a re-read."""
    parses = [(a, b) for a, b in busy["P"] if start <= a <= end]
    folds = [(a, b) for a, b in busy["O"] if start <= a <= end]
    slowest = sorted(spans, key=lambda s: s[1] - s[0], reverse=True)[: max(1, len(spans) // 100)]
    both = parses + folds
    waited = sum(1 for a, b in slowest if any(x < b and y > a for x, y in both))
    return {
        "count": len(folds),
        "every_s": (end - start) / len(folds) if folds else None,
        "parse_s": latency([b - a for a, b in parses]),
        "fold_s": latency([b - a for a, b in folds]),
        "slowest": len(slowest),
        "slowest_waited_on_a_read": waited,
    }


def _py_spy(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    py_spy = Path(sys.executable).parent / "py-spy"
    return subprocess.Popen(
        [
            str(py_spy),
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(int(seconds) + 1),
            "--rate",
            "250",
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


# --- P3, P4, P7, P8: the controller process with the fake on a port --------------------------------


def consumers(world: World, pod_catalog: str | None = None) -> None:
    """An AgentTemplate and a consumer Deployment -> ReplicaSet -> Pod, so P3 can count their writes.

    ``pod_catalog``: the catalog hash the pod says it started on (its annotation), so a controller that
    starts later owes it a rollout whatever catalog an earlier scenario left in the ConfigMap."""
    ns = world.namespace
    template = {
        "apiVersion": "kubeopencode.io/v1alpha1",
        "kind": "AgentTemplate",
        "metadata": {"name": "litellm-default", "namespace": ns},
        "spec": {"config": {"provider": {"litellm": {"models": {"old": {"name": "old"}}}}}},
    }
    world.kube.kubectl("apply", "-f", "-", input_text=json.dumps(template))
    workload = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "bench-consumer", "namespace": ns, "labels": CONSUMER_LABELS},
        "spec": {
            "selector": {"matchLabels": CONSUMER_LABELS},
            "template": {
                "metadata": {"labels": CONSUMER_LABELS},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    world.kube.kubectl("apply", "-f", "-", input_text=json.dumps(workload))
    uid = world.kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/bench-consumer")["metadata"]["uid"]
    rs = json.loads(json.dumps(workload))
    rs["kind"] = "ReplicaSet"
    rs["metadata"]["name"] = "bench-consumer-1"
    rs["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "bench-consumer",
            "uid": uid,
            "controller": True,
        }
    ]
    world.kube.kubectl("apply", "-f", "-", input_text=json.dumps(rs))
    rs_uid = world.kube.get(f"/apis/apps/v1/namespaces/{ns}/replicasets/bench-consumer-1")["metadata"]["uid"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "bench-consumer-1-a",
            "namespace": ns,
            "labels": CONSUMER_LABELS,
            "annotations": {HASH_ANNOTATION: pod_catalog} if pod_catalog else {},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "bench-consumer-1",
                    "uid": rs_uid,
                    "controller": True,
                }
            ],
        },
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    world.kube.kubectl("apply", "-f", "-", input_text=json.dumps(pod))


def resource_versions(world: World) -> dict[str, str]:
    ns = world.namespace
    paths = {
        "configmap": f"/api/v1/namespaces/{ns}/configmaps/{CATALOG}",
        "agenttemplate": f"/apis/kubeopencode.io/v1alpha1/namespaces/{ns}/agenttemplates/litellm-default",
        "deployment": f"/apis/apps/v1/namespaces/{ns}/deployments/bench-consumer",
    }
    return {k: world.kube.get(p)["metadata"]["resourceVersion"] for k, p in paths.items()}


def rolled(world: World) -> bool:
    ns = world.namespace
    dep = world.kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/bench-consumer")
    annotations = dep["spec"]["template"]["metadata"].get("annotations") or {}
    current = world.catalog_hash()
    return current is not None and annotations.get(HASH_ANNOTATION) == current


def p8_start(world: World, server: FakeServer, runs: int, first_starts: int = 3) -> dict[str, Any]:
    """Process start -> /healthz answers, -> /readyz ready, -> the first catalog written. The first
    ``first_starts`` runs start against an empty LiteLLM (every row to create: a fresh proxy on an empty
    database before each); the ``runs`` after them are restarts (rows in place). Each sample's "first" is
    1.0 for a first start."""
    samples: list[dict[str, float]] = []
    for run in range(first_starts + runs):
        first = run < first_starts
        if first:
            for model_id in server.fake.ids():
                server.fake.remove(model_id)
            server.fake.restart()  # no rows: no model list yet, as a new proxy
        world.reset_catalog()
        env = world.controller_env(server.url)
        began = time.monotonic()
        marks: dict[str, float] = {}
        with controller(world, f"p8-{run}", env) as ctl:

            def step() -> bool:
                now = time.monotonic() - began
                if "healthz" not in marks:
                    try:
                        if ctl.get("/healthz").status_code == 200:
                            marks["healthz"] = now
                    except httpx.HTTPError:
                        pass
                if "readyz" not in marks and "healthz" in marks and ctl.ready():
                    marks["readyz"] = now
                if "catalog" not in marks and world.catalog_hash() not in (None, "bootstrap"):
                    marks["catalog"] = now
                return len(marks) == 3

            wait_until(step, 120, "the first catalog", interval=0.02)
            marks["rows"] = float(len(server.fake.ids()))
            marks["first"] = 1.0 if first else 0.0
        samples.append(marks)
    imports = import_time()
    return {"runs": samples, "imports": imports}


def import_time(repeats: int = 5) -> dict[str, Any]:
    """Wall time of ``import app.cli, app.service`` in a fresh interpreter, minus an empty interpreter (as
    the image runs Python: -OO)."""
    env = {**os.environ, **image_runtime_env()}

    def timed(code: str) -> float:
        began = time.monotonic()
        subprocess.run(
            [sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1], env=env
        )
        return time.monotonic() - began

    bare = [timed("pass") for _ in range(repeats)]
    full = [timed("import app.cli, app.service") for _ in range(repeats)]
    raw = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import app.cli, app.service"],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
        env=env,
    ).stderr
    top: dict[str, int] = {}
    for line in raw.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[1].isdigit() and not parts[2].startswith((" ", ".")):
            name = parts[2].strip()
            if "." not in name:  # top-level packages, cumulative
                top[name] = top.get(name, 0) + int(parts[1])
    heaviest = sorted(top.items(), key=lambda kv: -kv[1])[:5]
    rss = subprocess.run(
        [
            sys.executable,
            "-c",
            "import app.cli, app.service\n"
            "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS')][0])",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
        env=env,
    ).stdout

    def rss_after(code: str) -> float:
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                f"{code}\nprint(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])",
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parents[1],
            env=env,
        ).stdout
        return int(out.strip()) / 1024

    baseline = rss_after("pass")
    packages = {
        "kubernetes_asyncio (client, config)": "import kubernetes_asyncio.client, kubernetes_asyncio.config",
        "opentelemetry SDK + Prometheus exporter": (
            "import opentelemetry.sdk.metrics, opentelemetry.sdk.trace, opentelemetry.exporter.prometheus"
        ),
        "opentelemetry OTLP/HTTP exporter": "import opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "aiohttp": "import aiohttp",
        "httpx": "import httpx",
        "app.library (core, adapters; no kubernetes_asyncio)": "import app.library",
    }
    # httpx imports click, rich and pygments when they are installed (its command line): the dev venv has
    # them (for the dev tools), the image does not, so what they add is reported apart.
    without = "import sys\nfor m in ('click', 'rich', 'pygments'): sys.modules[m] = None\n"
    controller = "import app.cli, app.service"
    dev_only = rss_after(controller) - rss_after(without + controller)
    return {
        "rss_dev_venv_only_mib": dev_only,
        "rss_bare_interpreter_mib": baseline,
        "rss_added_by_mib": {name: rss_after(code) - baseline for name, code in packages.items()},
        "bare_interpreter_s": summary(bare),
        "with_imports_s": summary(full),
        "heaviest_packages_ms": {k: v / 1000 for k, v in heaviest},
        "rss_after_imports_mib": int(rss.strip()) / 1024,
    }


def p3_idle(world: World, server: FakeServer, seconds: float, resync: float) -> dict[str, Any]:
    """Writes while nothing changes (``seconds``), LiteLLM resyncs every ``resync`` s; RSS sampled."""
    # The pod started on an older catalog: the controller's start rolls the consumer once, which P3 waits
    # for before it counts. Unstamped, a pod created while P8's catalog was already current (a full run)
    # started on the current catalog, and a consumer is rolled only when the catalog it started with
    # differs (docs/behaviour.md §9.2): the wait for a rollout timed out.
    consumers(world, pod_catalog="bench-p3-an-older-catalog")
    fake = server.fake
    env = world.controller_env(server.url, CATALOG_LITELLM_RESYNC_SECONDS=str(resync))
    with controller(world, "p3", env) as ctl:
        ctl.wait_ready(120)
        wait_converged(world, ctl, lambda: len(fake.ids()), world.models, 300)
        wait_until(lambda: rolled(world), 60, "the consumer rolled onto the catalog")
        wait_until(
            lambda: (
                "old"
                not in json.dumps(
                    world.kube.get(
                        f"/apis/kubeopencode.io/v1alpha1/namespaces/{world.namespace}/agenttemplates/litellm-default"
                    )["spec"]
                )
            ),
            60,
            "the AgentTemplate patched",
        )
        time.sleep(3)
        before_rv = resource_versions(world)
        before_writes = writes(ctl)
        before_fake = fake.writes()
        before_info = fake.requests[INFO]
        relists_before = ctl.metric("model_catalog_kube_watch_relists_total")
        assert ctl.process is not None
        samples: list[int] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            samples.append(rss_kib(ctl.process.pid)[0])
            time.sleep(1.0)
        after_rv = resource_versions(world)
        after_writes = writes(ctl)
        by_kind = {
            k: after_writes.get(k, 0.0) - before_writes.get(k, 0.0)
            for k in set(before_writes) | set(after_writes)
            if after_writes.get(k, 0.0) != before_writes.get(k, 0.0)
        }
        litellm_writes = fake.writes() - before_fake
        result: dict[str, Any] = {
            "seconds": seconds,
            "models": world.models,
            "litellm_writes_at_fake": litellm_writes,
            "controller_writes_by_kind": by_kind,
            "resource_versions_changed": sorted(k for k in before_rv if before_rv[k] != after_rv[k]),
            "litellm_resyncs": fake.requests[INFO] - before_info,
            "kube_relists": ctl.metric("model_catalog_kube_watch_relists_total") - relists_before,
            "rss_mib": summary([s / 1024 for s in samples]),
        }
        kinds = ("WriteCatalog", "PatchAgentTemplate", "RollWorkload", "EvictPod")
        result["total_writes"] = litellm_writes + sum(by_kind.get(k, 0.0) for k in kinds)
    return result


class RealLiteLLM:
    """The real LiteLLM peer as P4 sees it: its rows, read through the admin API."""

    def __init__(self, base_url: str, master_key: str) -> None:
        self.url, self.master_key = base_url, master_key
        self._admin = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {master_key}"}, timeout=15
        )

    def ids(self) -> set[str]:
        answer = self._admin.get("/model/info")
        if answer.status_code == 500 and "not loaded" in answer.text:
            return set()
        answer.raise_for_status()
        return {r["model_info"]["id"] for r in answer.json()["data"]}

    def close(self) -> None:
        self._admin.close()


def litellm_requests(ctl: Controller) -> dict[str, int]:
    """LiteLLM write requests the controller made, by row id: its event log's command outcomes (every
    outcome is a request made; the log is not rotated during P4)."""
    counts: dict[str, int] = {}
    for path in sorted(ctl.event_log.parent.glob(ctl.event_log.name + "*")):
        with path.open("rb") as f:
            for line in f:
                if b'"command-completed"' not in line or b'"litellm/' not in line:
                    continue
                event = json.loads(line).get("event") or {}
                key = str(event.get("key", ""))
                if event.get("t") == "command-completed" and key.startswith("litellm/"):
                    rid = key.removeprefix("litellm/")
                    counts[rid] = counts.get(rid, 0) + 1
    return counts


def p4_flaps(world: World, litellm: RealLiteLLM, repeats: int, quiet: float) -> dict[str, Any]:
    """1,000 readiness patches over 100 models as fast as the API server takes them (in rounds, so each
    model's patches stay in order), then quiet, on the real LiteLLM. Half the models end as they began;
    the other half end unready. LiteLLM writes counted per row from the controller's event log; ConfigMap
    writes, rollouts and AgentTemplate patches from its command counters."""
    n = 100
    assert world.models >= n
    consumers(world)
    # the event log on (unlike deploy/): it says which row each LiteLLM write went to
    env = world.controller_env(
        litellm.url,
        litellm.master_key,
        CATALOG_EVENT_LOG_PATH=str(world.work / "p4-events.jsonl"),
        CATALOG_EVENT_LOG_MAX_BYTES=str(1 << 30),
    )
    runs: list[dict[str, Any]] = []
    flapper = Kube(world.kubeconfig, threads=n)
    ours = {row_id(i) for i in range(world.models)}
    with controller(world, "p4", env) as ctl:
        ctl.wait_ready(300)
        for _run in range(repeats):
            world.all_ready(range(n))
            wait_until(lambda: ours <= litellm.ids(), 600, "every row in LiteLLM", interval=1.0)
            wait_until(lambda: ctl.metric("model_catalog_queue_depth") == 0, 120, "an empty queue")
            wait_until(lambda: rolled(world), 120, "the consumer on the current catalog", interval=0.5)
            time.sleep(12)  # every key and the catalog still for longer than the cap
            # group A (even): 10 flaps, ends ready (unchanged); group B (odd): 9 or 11, ends unready
            plan: dict[int, list[bool]] = {}
            for i in range(n):
                count = 10 if i % 2 == 0 else (9 if i % 4 == 1 else 11)
                plan[i] = [k % 2 == 1 for k in range(count)]  # 0, 1, 0, 1, ...
            assert sum(len(v) for v in plan.values()) == 1000
            requests_before = litellm_requests(ctl)
            before = writes(ctl)
            rv_before = world.kube.configmap(world.namespace)["metadata"]["resourceVersion"]
            # One thread per model: its patches stay in order, the models' patches interleave. They start
            # together on connections already open: started as they were created, the first thread's patch
            # led the others by 25-100 ms (the others were still opening their TLS connections), a lone
            # change the controller writes once its probe passes (docs/behaviour.md), not the many models
            # flapping at once P4 is about. Started together on new connections, the handshakes spread them
            # just as much (16-220 ms).
            flapper.open_connections(world.namespace)
            start = threading.Barrier(len(plan))
            began = time.monotonic()
            flapper.parallel(
                [
                    functools.partial(_flap, flapper, world.namespace, model_name(i), values, start)
                    for i, values in plan.items()
                ]
            )
            flap_seconds = time.monotonic() - began
            changed = {row_id(i) for i in range(n) if i % 2 == 1}
            want = ours - changed
            wait_until(lambda: litellm.ids() & ours == want, 120, "LiteLLM final rows", interval=0.5)
            quiet_since, seen = [time.monotonic()], [dict(writes(ctl))]

            def quiet_for() -> bool:
                now_writes = writes(ctl)
                if now_writes != seen[0] or ctl.metric("model_catalog_queue_depth") != 0:
                    quiet_since[0], seen[0] = time.monotonic(), now_writes
                return time.monotonic() - quiet_since[0] >= quiet

            wait_until(quiet_for, 180, "quiet", interval=0.5)
            ids = world.catalog_model_ids()
            after = writes(ctl)
            requests_after = litellm_requests(ctl)
            per_row = {
                rid: requests_after[rid] - requests_before.get(rid, 0)
                for rid in requests_after
                if requests_after[rid] != requests_before.get(rid, 0)
            }

            def delta(*kinds: str) -> float:
                return sum(after.get(k, 0.0) - before.get(k, 0.0) for k in kinds)

            runs.append(
                {
                    "flap_seconds": flap_seconds,
                    "patches": 1000,
                    "models_changed": len(changed),
                    "litellm_writes": sum(per_row.values()),
                    "litellm_writes_changed_models": sum(v for k, v in per_row.items() if k in changed),
                    "litellm_writes_unchanged_models": sum(v for k, v in per_row.items() if k not in changed),
                    "max_writes_one_model": max(per_row.values(), default=0),
                    "litellm_writes_counted_by_controller": delta(
                        "CreateLiteLLMModel",
                        "UpdateLiteLLMModel",
                        "RecreateLiteLLMModel",
                        "DeleteLiteLLMModel",
                    ),
                    "configmap_writes": delta("WriteCatalog"),
                    "rollouts": delta("RollWorkload", "EvictPod"),
                    "consumers": 1,
                    "agent_template_patches": delta("PatchAgentTemplate"),
                    "writes_deferred": ctl.metric("model_catalog_writes_deferred_total"),
                    "writes_cancelled": ctl.metric("model_catalog_writes_cancelled_total"),
                    "configmap_rv_changed": world.kube.configmap(world.namespace)["metadata"][
                        "resourceVersion"
                    ]
                    != rv_before,
                    "final_rows_correct": litellm.ids() & ours == want,
                    "final_catalog_correct": ids is not None
                    and not ids & {model_name(i) for i in range(n) if i % 2 == 1}
                    and {model_name(i) for i in range(0, n, 2)} <= ids,
                    "consumer_on_final_catalog": rolled(world),
                }
            )
        world.all_ready(range(n))
        wait_until(lambda: ours <= litellm.ids(), 600, "every row back", interval=1.0)
    flapper.close()
    return {"runs": runs}


def _flap(kube: Kube, namespace: str, name: str, values: list[bool], start: threading.Barrier) -> None:
    start.wait(60)
    for value in values:
        kube.set_ready(namespace, name, value)


def p7_memory(world: World, server: FakeServer, seconds: float, image_venv: Path) -> dict[str, Any]:
    """Resident memory of ``model-catalog run`` once converged on ``world.models`` models, as the image
    runs it: its console script from a venv built like the image's (``bench.image_venv``), with the
    image's environment."""
    fake = server.fake
    env = world.controller_env(server.url)
    began = time.monotonic()
    command = [str(image_venv / "bin" / "model-catalog"), "run"]
    with controller(world, f"p7-{world.models}", env, command) as ctl:
        ctl.wait_ready(600)
        converge = wait_converged(world, ctl, lambda: len(fake.ids()), world.models, 1200)
        converge_total = time.monotonic() - began
        time.sleep(3)
        assert ctl.process is not None
        samples: list[int] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            samples.append(rss_kib(ctl.process.pid)[0])
            time.sleep(0.5)
        hwm = rss_kib(ctl.process.pid)[1]
        catalog_written = world.catalog_hash() not in (None, "bootstrap")
        rejected = _catalog_rejections(ctl)
    return {
        "models": world.models,
        "rss_mib": summary([s / 1024 for s in samples]),
        "peak_rss_mib": hwm / 1024,
        "converge_s": converge_total,
        "converge_after_ready_s": converge,
        "catalog_written": catalog_written,
        "catalog_write_outcomes": rejected,
    }


def _catalog_rejections(ctl: Controller) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in ctl.metrics().splitlines():
        if line.startswith("model_catalog_commands_total{") and 'kind="WriteCatalog"' in line:
            labels, _, value = line.rpartition(" ")
            outcome = labels.split('outcome="', 1)[1].split('"', 1)[0]
            out[outcome] = out.get(outcome, 0.0) + float(value)
    return out


# --- P2: real peers ------------------------------------------------------------------------------


def p2_visible(world: World, base_url: str, master_key: str, changes: int, gap: float) -> dict[str, Any]:
    """Readiness flip -> the LiteLLM row (created or deleted) and the ConfigMap entry both visible, on
    the real LiteLLM; changes one at a time, polled every 20 ms."""
    env = world.controller_env(base_url, master_key)
    admin = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {master_key}"}, timeout=15)
    n = min(world.models, 100)

    def rows() -> set[str]:
        answer = admin.get("/model/info")
        if answer.status_code == 500 and "not loaded" in answer.text:
            return set()
        answer.raise_for_status()
        return {r["model_info"]["id"] for r in answer.json()["data"]}

    def row_visible(rid: str) -> bool:
        answer = admin.get("/model/info", params={"litellm_model_id": rid})
        if answer.status_code != 200:
            return False
        return any(r["model_info"]["id"] == rid for r in answer.json().get("data", []))

    samples: list[dict[str, float]] = []
    with controller(world, "p2", env) as ctl:
        ctl.wait_ready(300)
        ours = {row_id(i) for i in range(world.models)}
        wait_until(lambda: ours <= rows(), 600, "every row in the real LiteLLM", interval=1.0)
        wait_until(lambda: ctl.metric("model_catalog_queue_depth") == 0, 120, "an empty queue")
        # Half the changes withdraw a model (row deleted), half publish one (row created): the latter
        # are models made unready beforehand, each model changed once (no per-key cooldown involved).
        spare = list(range(n - (changes + 1) // 2, n))
        state = dict.fromkeys(range(n), True)
        for i in spare:
            state[i] = False
            world.kube.set_ready(world.namespace, model_name(i), False)
        gone = {row_id(i) for i in spare}
        wait_until(lambda: not (gone & rows()), 120, "the spare models withdrawn", interval=0.5)
        wait_until(lambda: ctl.metric("model_catalog_queue_depth") == 0, 120, "an empty queue")
        time.sleep(2.5)
        for k in range(changes):
            i = spare[k // 2] if k % 2 else (k // 2 * 37) % (n - len(spare))
            state[i] = not state[i]
            rid, name = row_id(i), model_name(i)
            sent, _ = world.kube.set_ready(world.namespace, name, state[i])
            marks: dict[str, float] = {}

            def seen(i: int = i, rid: str = rid, name: str = name) -> bool:
                now = time.monotonic() - sent
                if "row" not in marks and row_visible(rid) == state[i]:
                    marks["row"] = now
                ids = world.catalog_model_ids() or set()
                if "configmap" not in marks and (name in ids) == state[i]:
                    marks["configmap"] = time.monotonic() - sent
                return len(marks) == 2

            wait_until(seen, 30, f"change {k} visible", interval=0.02)
            marks["both"] = max(marks["row"], marks["configmap"])
            samples.append(marks)
            time.sleep(gap)
        world.all_ready([i for i, r in state.items() if not r])
        wait_until(lambda: ours <= rows(), 120, "every row back", interval=0.5)
    admin.close()
    creates = [s for k, s in enumerate(samples) if k % 2]
    deletes = [s for k, s in enumerate(samples) if not k % 2]
    return {
        "models": world.models,
        "changes": changes,
        "row_s": latency([s["row"] for s in samples]),
        "configmap_s": latency([s["configmap"] for s in samples]),
        "both_s": latency([s["both"] for s in samples]),
        "both_create_s": latency([s["both"] for s in creates]),
        "both_delete_s": latency([s["both"] for s in deletes]),
    }


def cleanup_litellm(base_url: str, master_key: str) -> int:
    """Delete the rows the benchmarks made in the real LiteLLM (model names bench-*)."""
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {master_key}"}, timeout=30) as h:
        answer = h.get("/model/info")
        if answer.status_code != 200:
            return 0
        ids = [
            r["model_info"]["id"]
            for r in answer.json()["data"]
            if str(r.get("model_name", "")).startswith("bench-")
        ]
        for rid in ids:
            h.post("/model/delete", json={"id": rid})
        return len(ids)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
