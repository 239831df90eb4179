"""What embedding the catalog costs a synchronous host (issue 17): import time and resident memory.

    .venv/bin/python -m bench.embed_cost [--runs 7]      # `just embed-cost`; ~2 min, needs no LiteLLM

The host is a fresh venv holding only what ``requirements.lock`` pins plus this project (installed the
way the Containerfile installs it): a host that had none of our dependencies. Each figure is the median
of ``--runs`` fresh processes of a stand-in host that imports what the Magic Stick Operator's loop uses
(json, ssl, urllib.request, threading), then:

- ``bare``: nothing more;
- ``import``: ``import model_catalog`` (timed with ``perf_counter``);
- ``running``: a ``BlockingModelCatalog`` started against the real kube-apiserver peer (started here) and
  the LiteLLM fake in a process of its own, the LiteLLM master key read from its Secret as an operator
  reads it (timed: ``start()`` returning, and the first ``ready`` view after the host's first listing),
  fed a few passes, then measured, then closed.

RSS is ``VmRSS`` from ``/proc/self/status``. Writes ``bench/results/embed-cost.md`` and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "embed-cost.md"

HOST = r"""
import json, os, ssl, sys, threading, time, urllib.request

def rss_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

mode = sys.argv[1]
out = {"mode": mode}
if mode in ("import", "running"):
    began, began_cpu = time.perf_counter(), time.process_time()
    import model_catalog
    out["import_s"] = time.perf_counter() - began
    out["import_cpu_s"] = time.process_time() - began_cpu
    out["packages_imported"] = sorted({name.split(".")[0] for name in sys.modules})
if mode == "running":
    from model_catalog import BlockingModelCatalog, CatalogConfig, SourceKind
    config = CatalogConfig(namespace=os.environ["NAMESPACE"],
                           appliance_namespace=os.environ["APPLIANCE_NAMESPACE"],
                           litellm_base_url=os.environ["LITELLM_BASE_URL"])
    began, began_cpu = time.perf_counter(), time.process_time()
    catalog = BlockingModelCatalog(config, kubeconfig=os.environ["KUBECONFIG"],
                                   host_sources={SourceKind.MODEL_ACTIVATIONS})
    with catalog.start():
        out["start_s"] = time.perf_counter() - began
        catalog.listed(SourceKind.MODEL_ACTIVATIONS, [])  # a host source counts once the host listed it
        while not catalog.view().ready:
            assert time.perf_counter() - began < 60, "not ready"
            time.sleep(0.005)
        out["ready_s"] = time.perf_counter() - began
        out["ready_cpu_s"] = time.process_time() - began_cpu
        for _ in range(10):
            catalog.listed(SourceKind.MODEL_ACTIVATIONS, [])
            catalog.view()
            time.sleep(0.2)
        out["threads_running"] = threading.active_count()
        out["rss_kib"] = rss_kib()
    out["threads_after_close"] = threading.active_count()
    out["packages_running"] = sorted({name.split(".")[0] for name in sys.modules})
else:
    out["rss_kib"] = rss_kib()
print(json.dumps(out))
"""


# Each module's own RSS: what its execution added, less what the modules it imported added (so nothing is
# counted twice), read from /proc/self/statm around every module the import system executes.
BY_PACKAGE = r"""
import importlib.abc, json, ssl, sys, threading, urllib.request

def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4

stack, own = [], {}

class Timed(importlib.abc.InspectLoader):
    def __init__(self, inner):
        self.inner = inner
    def create_module(self, spec):
        return self.inner.create_module(spec)
    def get_source(self, name):
        return self.inner.get_source(name)
    def exec_module(self, module):
        stack.append(0)
        before = rss_kib()
        try:
            self.inner.exec_module(module)
        finally:
            total, children = rss_kib() - before, stack.pop()
            package = module.__name__.split(".")[0]
            own[package] = own.get(package, 0) + total - children
            if stack:
                stack[-1] += total

class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = Timed(spec.loader)
                return spec
        return None

sys.meta_path.insert(0, Finder())
before = rss_kib()
import model_catalog
print(json.dumps({"total_kib": rss_kib() - before, "own_kib": own}))
"""


def rss_by_package(python: Path, env: dict[str, str]) -> dict[str, Any]:
    """What ``import model_catalog`` adds to the host's RSS, by top-level package (each module's own
    share), in KiB."""
    done = subprocess.run(
        [str(python), "-c", BY_PACKAGE], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def _run(cmd: list[str], **kwargs: Any) -> None:
    subprocess.run(cmd, check=True, **kwargs)


def make_host_venv(where: Path) -> Path:
    """A venv with the locked runtime dependencies and this project, as the Containerfile builds it."""
    source = where / "source"
    for name in ("model_catalog", "app", "adapters", "contracts", "catalog_core"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    venv = where / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    pip = [str(venv / "bin" / "pip"), "-q", "--disable-pip-version-check"]
    _run([*pip, "install", "--require-hashes", "--no-deps", "-r", str(REPO / "requirements.lock")])
    _run([*pip, "install", "--no-index", "--no-build-isolation", "--no-deps", str(source)])
    return venv / "bin" / "python"


def measure(python: Path, mode: str, runs: int, env: dict[str, str]) -> list[dict[str, Any]]:
    answers = []
    for _ in range(runs):
        done = subprocess.run(
            [str(python), "-c", HOST, mode], env=env, capture_output=True, text=True, timeout=180, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{mode}: {done.stderr[-2000:]}")
        answers.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return answers


def import_time_by_package(python: Path, env: dict[str, str]) -> list[tuple[str, float]]:
    """``-X importtime`` of ``import model_catalog``: each module's own time, summed by top-level package
    (so nothing is counted twice), in seconds, largest first."""
    done = subprocess.run(
        [str(python), "-X", "importtime", "-c", "import model_catalog"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    totals: dict[str, float] = {}
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        package = name.strip().split(".")[0]
        totals[package] = totals.get(package, 0.0) + int(own) / 1e6
    return sorted(totals.items(), key=lambda item: -item[1])


def prepare_cluster(kubeconfig: str) -> tuple[str, str]:
    """The namespaces, the CRDs, and LiteLLM's master key Secret (the fake's key) in LiteLLM's namespace."""
    import anyio
    from kubernetes_asyncio import client

    from tests.fixtures.kube_peer import create_namespace, install_crds, new_api_client

    class Peer:
        def __init__(self) -> None:
            self.kubeconfig = Path(kubeconfig)

    async def prepare() -> tuple[str, str]:
        api = await new_api_client(Peer())  # type: ignore[arg-type]
        try:
            await install_crds(api)
            namespace, appliance_namespace = await create_namespace(api), await create_namespace(api, "mcsys")
            secret = {
                "metadata": {"name": "litellm-masterkey-secret"},
                "stringData": {"LITELLM_MASTER_KEY": "sk-test"},
            }
            await client.CoreV1Api(api).create_namespaced_secret(namespace, secret)  # type: ignore[arg-type]
            return namespace, appliance_namespace
        finally:
            await api.close()

    return anyio.run(prepare)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    from bench.peers import start_kube

    began = time.monotonic()
    load_before = os.getloadavg()[0]
    peer, starter = start_kube()
    fake = subprocess.Popen(
        [sys.executable, "-m", "bench.fake_server"],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = fake.stdout.readline().split()[1]  # type: ignore[union-attr]
        namespace, appliance_namespace = prepare_cluster(str(peer.kubeconfig))
        with tempfile.TemporaryDirectory(prefix="embed-cost-") as tmp:
            python = make_host_venv(Path(tmp))
            env = {
                "PATH": "/usr/bin:/bin",
                "KUBECONFIG": str(peer.kubeconfig),
                "NAMESPACE": namespace,
                "APPLIANCE_NAMESPACE": appliance_namespace,
                "LITELLM_BASE_URL": url,
            }
            results = {mode: measure(python, mode, args.runs, env) for mode in ("bare", "import", "running")}
            by_package = import_time_by_package(python, env)
            rss_packages = rss_by_package(python, env)
    finally:
        fake.stdin.close()  # type: ignore[union-attr]
        fake.wait(10)
        starter.stop()
    load = (load_before, os.getloadavg()[0])
    report = render(results, by_package, args.runs, time.monotonic() - began, load, rss_packages=rss_packages)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(report)
    print(report)


def render(
    results: dict[str, list[dict[str, Any]]],
    by_package: list[tuple[str, float]],
    runs: int,
    seconds: float,
    load: tuple[float, float],
    *,
    rss_packages: dict[str, Any],
) -> str:
    def median(mode: str, key: str) -> float:
        return float(statistics.median(r[key] for r in results[mode]))

    bare = median("bare", "rss_kib")
    imported = median("import", "rss_kib")
    running = median("running", "rss_kib")
    import_s = median("import", "import_s")
    spread = sorted(r["import_s"] for r in results["import"])
    start_s, ready_s = median("running", "start_s"), median("running", "ready_s")
    import_cpu_s, ready_cpu_s = median("import", "import_cpu_s"), median("running", "ready_cpu_s")
    ready_spread = sorted(r["ready_s"] for r in results["running"])
    threads = median("running", "threads_running")
    after = max(r["threads_after_close"] for r in results["running"])
    imported_packages = results["import"][0]["packages_imported"]
    running_packages = results["running"][0]["packages_running"]
    mib = 1024.0
    return "\n".join(
        [
            "# The cost of embedding model-catalog in a synchronous host",
            "",
            f"`python -m bench.embed_cost --runs {runs}` on {platform.system()} {platform.machine()}, "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} ({seconds:.0f} s). Medians of {runs} "
            "fresh processes in a venv holding only requirements.lock and this project. Load average "
            f"{load[0]:.1f} at the start, {load[1]:.1f} at the end: times grow with it, RSS does not.",
            "",
            "| host | RSS | added to the bare host | time (wall) | CPU time |",
            "|---|---|---|---|---|",
            f"| bare (json, ssl, urllib.request, threading) | {bare / mib:.1f} MiB | — | — | — |",
            f"| + `import model_catalog` | {imported / mib:.1f} MiB | +{(imported - bare) / mib:.1f} MiB | "
            f"import {import_s * 1000:.0f} ms (min {spread[0] * 1000:.0f}, max {spread[-1] * 1000:.0f}) | "
            f"{import_cpu_s * 1000:.0f} ms |",
            f"| + a running `BlockingModelCatalog` (ready, empty cluster) | {running / mib:.1f} MiB | "
            f"+{(running - bare) / mib:.1f} MiB | `start()` {start_s * 1000:.0f} ms (master key read "
            f"included), first `ready` view {ready_s * 1000:.0f} ms (min {ready_spread[0] * 1000:.0f}, "
            f"max {ready_spread[-1] * 1000:.0f}) | to ready {ready_cpu_s * 1000:.0f} ms |",
            "",
            f"Threads while running: {threads:.0f} (the host's main thread, the catalog's loop thread and "
            f"that loop's resolver and worker threads); after close(): {after}.",
            "",
            "Where the import time goes (one `-X importtime` run, each module's own time summed by top-level "
            "package): "
            + ", ".join(f"{name} {own * 1000:.0f} ms" for name, own in by_package[:8])
            + f"; total {sum(own for _, own in by_package) * 1000:.0f} ms.",
            "",
            "What `import model_catalog` adds to the RSS, by top-level package (each module's own share: "
            "what its execution added less what the modules it imported added; one run, "
            f"{rss_packages['total_kib'] / mib:.1f} MiB in all): "
            + ", ".join(
                f"{name} {kib / mib:.2f} MiB"
                for name, kib in sorted(rss_packages["own_kib"].items(), key=lambda item: -item[1])
                if kib >= 100
            )
            + "; the rest below 0.1 MiB each.",
            "",
            "Imported only once the catalog runs (not by the import): "
            + (", ".join(sorted(set(running_packages) - set(imported_packages))) or "nothing")
            + ". Imported only when configured, so absent here: the event log's recorder and its wire "
            "format (cattrs; `CATALOG_EVENT_LOG_PATH`), OpenTelemetry's metrics SDK and the Prometheus "
            "exporter (`model-catalog run`, or a host that asks for telemetry), the trace SDK and the "
            "OTLP exporter (only when traces are exported), and kubernetes-asyncio with the aiohttp it "
            "runs on (only for a kubeconfig user that authenticates through a program or a provider, "
            "`exec` or `auth-provider`, or a host that passes its own `ApiClient`; even then its "
            "generated API and model classes are loaded only as used, app/lazy_kubernetes.py).",
            "",
        ]
    )


if __name__ == "__main__":
    main()
