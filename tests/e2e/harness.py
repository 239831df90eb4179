"""Run ``model-catalog run`` as a separate process against the real peers, the way a cluster runs it.

Shared by the end-to-end test, the fault suite and the benchmarks: a controller
process authenticated with a ServiceAccount token bound by the Roles in
``deploy/``, a LiteLLM admin client, a switchable local /health server, and
polling helpers.
"""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SA = "ai-model-catalog-controller"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(
    predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.1, what: str = ""
) -> Any:
    """Poll ``predicate`` until it returns something truthy; that value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as exc:  # a transient read error while things converge
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}: last {last!r}")


def kubectl(kubeconfig: Path, *args: str, input_text: str | None = None, check: bool = True) -> str:
    out = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args],
        input=input_text,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if check and out.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout + out.stderr


def served_api_versions(kubeconfig: Path) -> set[str]:
    return set(kubectl(kubeconfig, "api-versions").split())


def deploy_base(
    kubeconfig: Path, ns: str = "ai", app_ns: str = "ai-system", kustomization: Path = DEPLOY
) -> tuple[str, list[str]]:
    """``deploy/`` as kustomize renders it, moved to ``ns`` / ``app_ns``, minus the objects of API versions
    this API server does not serve (the test peer is v1.20: policy/v1 PodDisruptionBudgets arrived in
    1.21); (YAML, skipped objects)."""
    served = served_api_versions(kubeconfig)
    docs, skipped = [], []
    for doc in yaml.safe_load_all(kubectl(kubeconfig, "kustomize", str(kustomization))):
        if not doc:
            continue
        if doc["apiVersion"] not in served:
            skipped.append(f"{doc['apiVersion']}/{doc['kind']}")
            continue
        text = json.dumps(doc)
        text = text.replace('"namespace": "ai-system"', f'"namespace": "{app_ns}"')
        text = text.replace('"namespace": "ai"', f'"namespace": "{ns}"')
        docs.append(json.loads(text))
    return yaml.safe_dump_all(docs), skipped


def service_account_kubeconfig(
    admin_kubeconfig: Path, namespace: str, target: Path, account: str = SA
) -> Path:
    """A kubeconfig that authenticates as a ServiceAccount, the controller's by default (TokenRequest)."""
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 7200},
    }
    raw = kubectl(
        admin_kubeconfig,
        "create",
        "--raw",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        "-f",
        "-",
        input_text=json.dumps(request),
    )
    token = json.loads(raw[raw.index("{") :])["status"]["token"]
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    ca = cluster.get("certificate-authority-data")
    if ca is None and cluster.get("certificate-authority"):
        ca = base64.b64encode(Path(cluster["certificate-authority"]).read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "peer", "cluster": {"server": cluster["server"], "certificate-authority-data": ca}}
        ],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "peer", "user": account, "namespace": namespace}}],
        "current-context": "sa",
    }
    target.write_text(yaml.safe_dump(config))
    return target


class LoopbackHTTPServer:
    """A threaded HTTP server on 127.0.0.1 (a free port) answering with ``handler``'s class."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = int(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class QuietHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        return


class HealthServer(LoopbackHTTPServer):
    """A runtime's /health on loopback: 200 while ``healthy``, else 503."""

    def __init__(self) -> None:
        self.healthy = True
        self.hits = 0
        owner = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                owner.hits += 1
                status = 200 if owner.healthy and self.path == "/health" else 503
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"no")

        super().__init__(Handler)


# Timings that make a test controller react in seconds rather than in a cluster's minutes.
def image_runtime_env() -> dict[str, str]:
    """The environment the image runs the controller with: the ENV of the Containerfile's last stage,
    PATH aside (``-OO``, the allocator settings), so a test or a benchmark runs it as deployed."""
    text = (REPO / "Containerfile").read_text().replace("\\\n", " ")
    final = text.rsplit("\nFROM ", 1)[1]
    env: dict[str, str] = {}
    for line in final.splitlines():
        if line.startswith("ENV "):
            for pair in line.split()[1:]:
                key, _, value = pair.partition("=")
                env[key] = value
    env.pop("PATH", None)
    return env


FAST_CONTROLLER_ENV = {
    "CATALOG_LITELLM_RESYNC_SECONDS": "2",
    "CATALOG_RUNTIME_HEALTH_SECONDS": "1",
    "CATALOG_LEASE_DURATION_SECONDS": "4",
    "CATALOG_LEASE_RENEW_DEADLINE_SECONDS": "3",
    "CATALOG_LEASE_RETRY_PERIOD_SECONDS": "0.5",
    "CATALOG_MIN_WRITE_INTERVAL_SECONDS": "0.2",
    # write damping (issue 14) on, at a test's scale: the same rules, proven at full size in tests/core
    "CATALOG_LITELLM_SETTLE_SECONDS": "0.5",
    "CATALOG_LITELLM_SETTLE_CAP_SECONDS": "2",
    "CATALOG_ROLLOUT_SETTLE_SECONDS": "1",
}


class LiteLLMAdmin:
    """Read and change LiteLLM directly (as the Private Mesh or a person would)."""

    def __init__(self, base_url: str, master_key: str) -> None:
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {master_key}"}, timeout=15.0
        )

    def rows(self) -> dict[str, dict[str, Any]]:
        answer = self.http.get("/model/info")
        if answer.status_code == 500 and "not loaded" in answer.text:
            return {}  # LiteLLM answers an empty model table with 500
        answer.raise_for_status()
        return {r["model_info"]["id"]: r for r in answer.json()["data"]}

    def add(self, model_name: str, litellm_params: dict[str, Any], model_info: dict[str, Any]) -> None:
        body = {"model_name": model_name, "litellm_params": litellm_params, "model_info": model_info}
        self.http.post("/model/new", json=body).raise_for_status()

    def delete(self, model_id: str) -> None:
        self.http.post("/model/delete", json={"id": model_id})

    def delete_where(self, keep: Callable[[dict[str, Any]], bool]) -> None:
        for rid, row in self.rows().items():
            if not keep(row):
                self.delete(rid)


class Controller:
    """One ``model-catalog run`` process."""

    def __init__(
        self, name: str, env: dict[str, str], workdir: Path, command: Sequence[str] | None = None
    ) -> None:
        """``command``: what starts it (default: this interpreter's ``-m app.cli run``)."""
        self.name = name
        self.command = list(command) if command is not None else [sys.executable, "-m", "app.cli", "run"]
        self.port = free_port()
        self.log_path = workdir / f"{name}.log"
        self.event_log = workdir / f"{name}-events.jsonl"
        full = {
            k: v for k, v in os.environ.items() if not k.startswith(("LITELLM_", "KUBECONFIG", "CATALOG_"))
        }
        full.update(
            {
                "POD_NAME": name,
                "CATALOG_HTTP_HOST": "127.0.0.1",
                "CATALOG_HTTP_PORT": str(self.port),
                "CATALOG_EVENT_LOG_PATH": str(self.event_log),
                "PYTHONUNBUFFERED": "1",
            }
        )
        full.update(env)
        self.env = full
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Controller:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(self.command, cwd=REPO, env=self.env, stdout=log, stderr=log)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, timeout=5.0)

    def ready(self) -> bool:
        try:
            return self.get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, timeout: float = 60.0) -> None:
        def check() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"{self.name} exited {self.process.returncode}: {self.tail()}")
            return self.ready()

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            time.sleep(0.1)
        raise AssertionError(f"{self.name} not ready after {timeout}s: {self.tail()}")

    def metrics(self) -> str:
        return self.get("/metrics").text

    def metric(self, name: str, text: str | None = None, **labels: str) -> float:
        """The sum of the samples of ``name`` whose labels include ``labels`` (in ``text``, else scraped)."""
        total = 0.0
        for line in (self.metrics() if text is None else text).splitlines():
            if not line.startswith(name):
                continue
            match = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$", line)
            if match is None or match.group(1) != name:
                continue
            found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
            if all(found.get(k) == v for k, v in labels.items()):
                total += float(match.group(3))
        return total

    def histogram(self, name: str, **labels: str) -> list[tuple[float, float]]:
        """Cumulative (le, count) pairs of a histogram, summed over series matching ``labels``."""
        buckets: dict[float, float] = {}
        for line in self.metrics().splitlines():
            match = re.match(rf"^{name}_bucket\{{([^}}]*)\}}\s+(\S+)$", line)
            if match is None:
                continue
            found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
            if not all(found.get(k) == v for k, v in labels.items()):
                continue
            le = float("inf") if found["le"] == "+Inf" else float(found["le"])
            buckets[le] = buckets.get(le, 0.0) + float(match.group(2))
        return sorted(buckets.items())

    def leading(self) -> bool:
        return self.metric("model_catalog_leader") == 1.0

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait for the graceful exit; its exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def log_lines(self) -> Iterator[dict[str, Any]]:
        for line in self.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                yield json.loads(line)


def quantile(buckets: list[tuple[float, float]], q: float) -> float:
    """The upper bound of the bucket holding quantile ``q`` of a cumulative histogram."""
    total = buckets[-1][1] if buckets else 0.0
    if total == 0:
        return float("nan")
    for le, count in buckets:
        if count >= q * total:
            return le
    return float("inf")


class CuttableProxy:
    """A TCP forwarder on 127.0.0.1 to ``upstream`` (host, port) that a test can cut: ``cut()`` closes
    every open connection and refuses new ones until ``restore()`` — an API server outage as the
    controller sees it (TLS passes through untouched)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.refusing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self.lock:
                self.open.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with self.lock:
                    self.open.discard(sock)
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def cut(self) -> None:
        self.refusing = True
        with self.lock:
            victims = list(self.open)
        for sock in victims:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def restore(self) -> None:
        self.refusing = False

    def close(self) -> None:
        self.cut()
        self.listener.close()


def kubeconfig_through(kubeconfig: Path, port: int, target: Path) -> Path:
    """``kubeconfig`` with its server moved to 127.0.0.1:``port`` (a CuttableProxy in front of it)."""
    doc = yaml.safe_load(kubeconfig.read_text())
    for cluster in doc["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    target.write_text(yaml.safe_dump(doc))
    return target
