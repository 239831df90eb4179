"""The benchmarks' side of the Kubernetes API: bulk creation and status patches of KubeAI Models, fast.

A plain ``httpx`` client with the admin kubeconfig's token (the benchmarks measure the controller, not
RBAC): many requests in parallel from a thread pool, each timestamped with ``time.monotonic()`` (the
system-wide CLOCK_MONOTONIC, so a controller in another process can be compared with it).
"""

from __future__ import annotations

import base64
import functools
import json
import ssl
import subprocess
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[1]
MODELS = "/apis/kubeai.org/v1/namespaces/{ns}/models"
MERGE = {"Content-Type": "application/merge-patch+json"}


def model_name(i: int) -> str:
    return f"bench-{i:05d}"


def model_doc(i: int, namespace: str, ctx: int = 8192) -> dict[str, Any]:
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {
            "name": model_name(i),
            "namespace": namespace,
            "annotations": {"ai-appliance.io/max-output-tokens": "1024"},
        },
        "spec": {
            "features": ["TextGeneration"] if i % 7 else ["TextEmbedding"],
            # one replica kept running: published only while ready, so readiness changes are what P1 and
            # P4 measure (a Model that scales from zero is published whatever its readiness)
            "minReplicas": 1,
            "engine": "VLLM",
            "url": f"hf://bench/model-{i}",
            "resourceProfile": "nvidia-gpu-l4:1",
            "args": [f"--max-model-len={ctx}", "--max-num-seqs=8"],
        },
    }


class Kube:
    """An admin client for one API server (from its kubeconfig)."""

    def __init__(self, kubeconfig: Path, *, threads: int = 16) -> None:
        self.kubeconfig = kubeconfig
        doc = yaml.safe_load(kubeconfig.read_text())
        cluster = doc["clusters"][0]["cluster"]
        user = doc["users"][0]["user"]
        context = ssl.create_default_context()
        if "certificate-authority-data" in cluster:
            context.load_verify_locations(
                cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
            )
        elif "certificate-authority" in cluster:
            context.load_verify_locations(cafile=cluster["certificate-authority"])
        self.server = cluster["server"]
        self.threads = threads
        self.http = httpx.Client(
            base_url=self.server,
            verify=context,
            headers={"Authorization": f"Bearer {user['token']}"},
            timeout=30.0,
            limits=httpx.Limits(max_connections=threads, max_keepalive_connections=threads),
        )

    def close(self) -> None:
        self.http.close()

    # --- set-up
    def kubectl(self, *args: str, input_text: str | None = None) -> str:
        out = subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", *args],
            input=input_text,
            capture_output=True,
            text=True,
            check=False,
            timeout=180,
        )
        if out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def prepare(self, namespace: str, appliance_namespace: str) -> None:
        """The two namespaces, the CRDs the controller watches, the placeholder ConfigMaps of deploy/."""
        for ns in (namespace, appliance_namespace):
            answer = self.http.post("/api/v1/namespaces", json={"metadata": {"name": ns}})
            if answer.status_code not in (201, 409):
                answer.raise_for_status()
        for crd in sorted((REPO / "contracts" / "crds").glob("*.yaml")):
            self.kubectl("apply", "-f", str(crd))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        for name in ("configmap-ai-model-catalog.yaml", "configmap-ai-external-models.yaml"):
            doc = yaml.safe_load((REPO / "deploy" / "bootstrap" / name).read_text())
            doc["metadata"]["namespace"] = namespace
            self.kubectl("apply", "-f", "-", input_text=json.dumps(doc))

    def parallel(self, jobs: Iterable[Callable[[], Any]]) -> list[Any]:
        with ThreadPoolExecutor(self.threads) as pool:
            return [f.result() for f in [pool.submit(job) for job in jobs]]

    def open_connections(self, namespace: str) -> None:
        """Open one kept-alive connection per thread, so the next ``threads`` requests sent at once go out
        at once: each thread holds a one-second watch of nothing, so none can reuse another's connection."""
        path = f"/api/v1/namespaces/{namespace}/configmaps"
        params = {"watch": "true", "timeoutSeconds": "1", "fieldSelector": "metadata.name=no-such-object"}
        self.parallel([functools.partial(self.http.get, path, params=params)] * self.threads)

    def create_models(self, namespace: str, indexes: Iterable[int], ready: bool = True) -> float:
        """Create Models (and set their status); the seconds it took."""
        began = time.monotonic()

        def create(i: int) -> None:
            # A fresh peer refused one of 100 simultaneous TLS handshakes once (an "unexpected message"
            # alert, 8 s after it started): a connection that never carried the request is tried again,
            # and a create already done answers 409.
            for attempt in range(3):
                try:
                    answer = self.http.post(MODELS.format(ns=namespace), json=model_doc(i, namespace))
                    break
                except httpx.ConnectError:
                    if attempt == 2:
                        raise
                    time.sleep(0.5 * (attempt + 1))
            if answer.status_code not in (201, 409):
                answer.raise_for_status()
            self.set_ready(namespace, model_name(i), ready)

        self.parallel([functools.partial(create, i) for i in indexes])
        return time.monotonic() - began

    def set_ready(self, namespace: str, name: str, ready: bool) -> tuple[float, float]:
        """Patch a Model's status (ready 1 or 0); (monotonic time sent, time answered)."""
        body = {"status": {"replicas": {"all": 1, "ready": 1 if ready else 0}}}
        for attempt in range(3):
            sent = time.monotonic()
            try:
                answer = self.http.patch(
                    f"{MODELS.format(ns=namespace)}/{name}/status", content=json.dumps(body), headers=MERGE
                )
                break
            except (httpx.RemoteProtocolError, httpx.ConnectError):
                # The API server closed a kept-alive connection as the patch went out (a P4 run ended on
                # it): the patch sets a value, so sending it again is harmless.
                if attempt == 2:
                    raise
        answer.raise_for_status()
        return sent, time.monotonic()

    def count_models(self, namespace: str) -> int:
        answer = self.http.get(MODELS.format(ns=namespace), params={"limit": 1})
        answer.raise_for_status()
        meta = answer.json()["metadata"]
        return int(meta.get("remainingItemCount", 0)) + len(answer.json()["items"])

    def get(self, path: str) -> dict[str, Any]:
        answer = self.http.get(path)
        answer.raise_for_status()
        return dict(answer.json())

    def configmap(self, namespace: str, name: str = "ai-model-catalog") -> dict[str, Any]:
        return self.get(f"/api/v1/namespaces/{namespace}/configmaps/{name}")

    def put_configmap_data(self, namespace: str, name: str, data: dict[str, str]) -> None:
        """Replace a ConfigMap's data and drop its catalog-hash annotation (back to the placeholder)."""
        current = self.configmap(namespace, name)
        current["data"] = data
        annotations = current["metadata"].get("annotations") or {}
        annotations.pop("ai-appliance.io/catalog-hash", None)
        current["metadata"]["annotations"] = annotations
        answer = self.http.put(f"/api/v1/namespaces/{namespace}/configmaps/{name}", json=current)
        answer.raise_for_status()
