"""Talking to the fault suite's API server as its admin (plain REST over httpx), and recording history.

``Admin`` applies, reads, patches and deletes objects without spawning kubectl (the suite does
thousands of requests). ``History`` watches the catalog ConfigMap and the consumer workloads from a
thread, so the rollout invariant can be judged on every change the API server saw, not on samples.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import attrs
import httpx

# (apiVersion, kind) -> (plural, namespaced)
KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "Service"): ("services", True),
    ("v1", "Pod"): ("pods", True),
    ("v1", "Event"): ("events", True),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("apps/v1", "Deployment"): ("deployments", True),
    ("apps/v1", "ReplicaSet"): ("replicasets", True),
    ("apps/v1", "StatefulSet"): ("statefulsets", True),
    ("apps/v1", "DaemonSet"): ("daemonsets", True),
    ("kubeai.org/v1", "Model"): ("models", True),
    ("appliance.magicstick.dev/v1alpha1", "ModelActivation"): ("modelactivations", True),
    ("kubeopencode.io/v1alpha1", "AgentTemplate"): ("agenttemplates", True),
    ("coordination.k8s.io/v1", "Lease"): ("leases", True),
    ("rbac.authorization.k8s.io/v1", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
    ("policy/v1beta1", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("policy/v1", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): ("customresourcedefinitions", False),
}

# Everything ``app.render.render`` may read, per namespace role.
RENDER_KINDS_NS = (
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Service"),
    ("v1", "Pod"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("kubeai.org/v1", "Model"),
    ("kubeopencode.io/v1alpha1", "AgentTemplate"),
)
RENDER_KINDS_APP_NS = (("appliance.magicstick.dev/v1alpha1", "ModelActivation"),)


class ApiError(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text[:300]}")
        self.status = status


def collection(api_version: str, kind: str, namespace: str = "") -> str:
    plural, namespaced = KINDS[(api_version, kind)]
    prefix = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespaced:
        return f"{prefix}/namespaces/{quote(namespace, safe='')}/{plural}"
    return f"{prefix}/{plural}"


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


class Admin:
    """The cluster admin (the peer's static token), for setting up worlds and reading them back."""

    def __init__(self, server: str, token: str, ca_file: str) -> None:
        self.server = server
        self.http = httpx.Client(
            base_url=server,
            headers={"Authorization": f"Bearer {token}"},
            verify=ssl.create_default_context(cafile=ca_file),
            timeout=30.0,
        )

    def close(self) -> None:
        self.http.close()

    def _check(self, answer: httpx.Response) -> dict[str, Any]:
        if answer.status_code >= 300:
            raise ApiError(answer.status_code, answer.text)
        return answer.json() if answer.content else {}

    def path(self, obj: dict[str, Any], sub: str = "") -> str:
        meta = obj["metadata"]
        base = collection(obj["apiVersion"], obj["kind"], meta.get("namespace", ""))
        return f"{base}/{quote(meta['name'], safe='')}" + (f"/{sub}" if sub else "")

    # --- writes
    def apply(self, obj: dict[str, Any], manager: str = "fault-suite") -> dict[str, Any]:
        """Server-side apply (create or update the fields this manager owns)."""
        answer = self.http.patch(
            self.path(obj),
            params={"fieldManager": manager, "force": "true"},
            content=json.dumps(obj),
            headers={"Content-Type": "application/apply-patch+yaml"},
        )
        return self._check(answer)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        return self._check(
            self.http.post(collection(obj["apiVersion"], obj["kind"], meta.get("namespace", "")), json=obj)
        )

    def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self._check(self.http.put(self.path(obj), json=obj))

    def merge_patch(
        self, api_version: str, kind: str, namespace: str, name: str, patch: dict[str, Any], sub: str = ""
    ) -> dict[str, Any]:
        obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": namespace}}
        answer = self.http.patch(
            self.path(obj, sub),
            content=json.dumps(patch),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        return self._check(answer)

    def patch_status(
        self, api_version: str, kind: str, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        return self.merge_patch(api_version, kind, namespace, name, {"status": status}, sub="status")

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> bool:
        obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": namespace}}
        answer = self.http.delete(self.path(obj))
        if answer.status_code == 404:
            return False
        self._check(answer)
        return True

    # --- reads
    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": namespace}}
        answer = self.http.get(self.path(obj))
        if answer.status_code == 404:
            return None
        return self._check(answer)

    def objects(
        self, api_version: str, kind: str, namespace: str = "", label_selector: str = ""
    ) -> list[dict[str, Any]]:
        params = {"labelSelector": label_selector} if label_selector else {}
        answer = self.http.get(collection(api_version, kind, namespace), params=params)
        if answer.status_code == 404:
            return []  # a CRD that is not installed
        items = self._check(answer).get("items") or []
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return list(items)

    def ready(self) -> bool:
        try:
            return self.http.get("/readyz", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def render_inputs(self, namespace: str, app_namespace: str) -> list[dict[str, Any]]:
        """Every object ``render`` reads, as the API server holds them now."""
        out: list[dict[str, Any]] = []
        for api_version, kind in RENDER_KINDS_NS:
            out += self.objects(api_version, kind, namespace)
        for api_version, kind in RENDER_KINDS_APP_NS:
            out += self.objects(api_version, kind, app_namespace)
        return out


@attrs.frozen
class Seen:
    """One state of a watched object, in the API server's order."""

    at: float
    kind: str
    name: str
    resource_version: str
    generation: int
    hash: str  # catalog: the hash annotation; workload: its pod-template annotation
    deleted: bool = False


class History:
    """Watches the catalog ConfigMap and the workloads of a namespace from a thread; keeps every state."""

    def __init__(self, admin: Admin, namespace: str, catalog: str) -> None:
        self.admin = admin
        self.namespace = namespace
        self.catalog = catalog
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=("v1", "ConfigMap"), daemon=True),
            threading.Thread(target=self._run, args=("apps/v1", "Deployment"), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(15)

    def _record(self, kind: str, obj: dict[str, Any], deleted: bool = False) -> None:
        meta = obj.get("metadata") or {}
        name = meta.get("name", "")
        if kind == "ConfigMap":
            if name != self.catalog:
                return
            value = (meta.get("annotations") or {}).get("ai-appliance.io/catalog-hash", "")
        else:
            template = ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
            value = (template.get("annotations") or {}).get("ai-appliance.io/catalog-hash", "")
        seen = Seen(
            time.monotonic(),
            kind,
            name,
            str(meta.get("resourceVersion", "")),
            int(meta.get("generation") or 0),
            value,
            deleted,
        )
        with self._lock:
            last = next((s for s in reversed(self.seen) if s.kind == kind and s.name == name), None)
            if last is not None and last.resource_version == seen.resource_version:
                return  # a relist repeats what was seen
            self.seen.append(seen)

    def _run(self, api_version: str, kind: str) -> None:
        """List, then watch on from the last resourceVersion seen; list again only after a 410 or
        an error (a relist can miss intermediate states, so it is the exception)."""
        path = collection(api_version, kind, self.namespace)
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    answer = self.admin.http.get(path, timeout=10.0)
                    if answer.status_code != 200:
                        time.sleep(0.3)
                        continue
                    listing = answer.json()
                    for item in listing.get("items") or []:
                        self._record(kind, item)
                    rv = listing["metadata"]["resourceVersion"]
                for event in self._watch(path, rv):
                    if event.get("type") == "ERROR":
                        rv = ""  # 410 Gone: list again
                        break
                    obj = event.get("object") or {}
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        self._record(kind, obj, event["type"] == "DELETED")
            except (httpx.HTTPError, ValueError, KeyError):
                time.sleep(0.3)

    def _watch(self, path: str, rv: str) -> Iterator[dict[str, Any]]:
        params = {"watch": "true", "resourceVersion": rv, "timeoutSeconds": "5"}
        with self.admin.http.stream("GET", path, params=params, timeout=15.0) as answer:
            if answer.status_code != 200:
                yield {"type": "ERROR", "object": {"code": answer.status_code}}
                return
            for line in answer.iter_lines():
                if self._stop.is_set():
                    return
                if line.strip():
                    yield json.loads(line)

    def of(self, kind: str, name: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.kind == kind and s.name == name]

    def catalog_hashes(self) -> set[str]:
        return {s.hash for s in self.of("ConfigMap", self.catalog) if s.hash}
