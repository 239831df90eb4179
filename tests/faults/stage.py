"""A stage of the fault suite: its own namespaces, RBAC from ``deploy/``, a baseline world, a LiteLLM
(the fake served on loopback, or the real peer), a ``model-catalog run`` process — and the invariants
every scenario must keep (issue 8):

1. **convergence** — the ConfigMap, the LiteLLM rows we own and the AgentTemplate equal what
   ``app.render.render`` computes from the final objects (read back from the API server) and the
   final ``/model/info``; render's plan against the live rows is empty; consumers carry the hash;
2. **foreign rows** — rows we do not own are byte-identical to what they were before the scenario;
3. **no duplicates** — ids are unique, and no model name has two rows of ours;
4. **rollouts** — every consumer rollout (a generation bump) sets a new hash, and every hash set is
   one the catalog ConfigMap carried: no rollout without a catalog hash change;
5. **alive** — the process never exited unasked, /healthz answered 200 throughout, and a final change
   still propagates;
6. **no leak** — the canary value planted in a provider Secret (and the master keys) appear in no log
   line, event-log record, ConfigMap, Kubernetes Event, metrics text or exported trace.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import httpx
import yaml

from app.render import render
from catalog_core.config import CatalogConfig
from tests.e2e.harness import DEPLOY, FAST_CONTROLLER_ENV, SA, Controller
from tests.faults.kube import Admin, ApiError, History, b64
from tests.faults.peers import OtlpSink, ProxyThread, ServedFake

OWNED = "model-catalog"
CATALOG = "ai-model-catalog"
EXTERNAL = "ai-external-models"
PROVIDER_SECRET = "ai-model-provider-acme"
MASTER_SECRET = "litellm-master-key"
CONSUMER = "consumer-app"

# Values that must never leave the places they belong in (the Secret, LiteLLM's database).
CANARY = f"sk-fault-canary-{uuid.uuid4().hex}"
MASTER_CANARY = f"sk-master-canary-{uuid.uuid4().hex}"
FAKE_MASTER_KEY = f"sk-fake-master-{uuid.uuid4().hex}"


def canaries(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """What to search for, by label (base64 too: a Secret object in a log would show that form)."""
    out = {
        "provider canary": CANARY,
        "provider canary (base64)": b64(CANARY),
        "master-key Secret canary": MASTER_CANARY,
        "fake master key": FAKE_MASTER_KEY,
    }
    for i, value in enumerate(extra):
        out[f"extra secret {i}"] = value
    return out


def wait_until(
    predicate: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = ""
) -> tuple[Any, float]:
    """Poll until ``predicate`` is truthy; (its value, seconds waited). Raises AssertionError on timeout
    with the last value (or exception) seen."""
    began = time.monotonic()
    last: Any = None
    while True:
        try:
            last = predicate()
        except (httpx.HTTPError, ApiError, OSError, ValueError, KeyError) as exc:
            last = exc
        if last and not isinstance(last, Exception):
            return last, time.monotonic() - began
        if time.monotonic() - began > timeout:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}: last {last!r}")
        time.sleep(interval)


# --- objects


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def secret(ns: str, name: str, data: dict[str, str], provider: bool = False) -> dict[str, Any]:
    labels = {"appliance.magicstick.dev/model-provider-secret": "true"} if provider else {}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "data": {k: b64(v) for k, v in data.items()},
    }


def external_configmap(ns: str, models: Any) -> dict[str, Any]:
    text = models if isinstance(models, str) else json.dumps({"models": models})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": EXTERNAL, "namespace": ns},
        "data": {"models.json": text},
    }


def kubeai_model(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    """A Model that cannot scale from zero (``minReplicas: 1``, the appliance operator's default), unless
    ``spec`` says otherwise: it is published only while ready."""
    spec.setdefault("minReplicas", 1)
    annotations = spec.pop("annotations", None)
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": meta,
        "spec": {"features": ["TextGeneration"], "engine": "VLLM", "url": f"hf://x/{name}", **spec},
    }


def activation(app_ns: str, name: str, external: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"type": "external", **spec}
    if external is not None:
        body["external"] = external
    return {
        "apiVersion": "appliance.magicstick.dev/v1alpha1",
        "kind": "ModelActivation",
        "metadata": {"name": name, "namespace": app_ns},
        "spec": body,
    }


def deployment(
    ns: str, name: str, labels: dict[str, str], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }


def agent_template(ns: str, name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "kubeopencode.io/v1alpha1",
        "kind": "AgentTemplate",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec if spec is not None else {"config": {"provider": {"litellm": {"models": {}}}}},
    }


def deploy_documents(ns: str, app_ns: str) -> list[dict[str, Any]]:
    """The RBAC, ServiceAccount and bootstrap ConfigMaps of ``deploy/``, moved to our namespaces."""
    docs: list[dict[str, Any]] = []
    files = [
        DEPLOY / part / name
        for part in yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
        for name in yaml.safe_load((DEPLOY / part / "kustomization.yaml").read_text())["resources"]
    ]
    for path in files:
        if path.name in ("deployment.yaml", "poddisruptionbudget.yaml", "networkpolicy.yaml"):
            continue  # no kubelet (nor a CNI) here: the controller runs as a test process
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            text = json.dumps(doc)
            text = text.replace('"namespace": "ai-system"', f'"namespace": "{app_ns}"')
            text = text.replace('"namespace": "ai"', f'"namespace": "{ns}"')
            docs.append(json.loads(text))
    return docs


# --- LiteLLM, whichever it is


class LiteLLM:
    """The admin view of the LiteLLM a stage uses (the fake on loopback, or the real peer)."""

    def __init__(self, base_url: str, master_key: str, served: ServedFake | None) -> None:
        self.base_url = base_url
        self.master_key = master_key
        self.served = served
        self.http = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {master_key}"}, timeout=15.0
        )

    def data(self) -> list[dict[str, Any]]:
        """``/model/info``'s rows as LiteLLM lists them (duplicates included)."""
        answer = self.http.get("/model/info")
        if answer.status_code == 500 and "not loaded" in answer.text:
            return []
        answer.raise_for_status()
        return list(answer.json()["data"])

    def rows(self) -> dict[str, dict[str, Any]]:
        return {r["model_info"]["id"]: r for r in self.data()}

    def add(self, model_name: str, params: dict[str, Any], info: dict[str, Any]) -> None:
        body = {"model_name": model_name, "litellm_params": params, "model_info": info}
        self.http.post("/model/new", json=body).raise_for_status()

    def delete(self, model_id: str) -> None:
        self.http.post("/model/delete", json={"id": model_id})

    def stored(self, model_id: str) -> dict[str, Any] | None:
        """The fake's stored row (api_key included); None for the real peer."""
        if self.served is None:
            return None
        return self.served.call(self.served.fake.stored, model_id)

    def writes(self) -> int:
        if self.served is None:
            return -1
        return self.served.call(self.served.fake.writes)

    def close(self) -> None:
        self.http.close()


FOREIGN_ROWS: tuple[tuple[str, dict[str, Any], dict[str, Any]], ...] = (
    # a Private Mesh fallback sharing the name of one of our models (merged into its catalog entry)
    (
        "kube-good",
        {"model": "openai/mesh-bridge-kube-good", "api_base": "http://mesh-bridge:8080/v1", "order": 1},
        {"id": "mesh-kube-good-peer-b", "ai_appliance_owner": "private-mesh"},
    ),
    # a row made by hand with the same model name as one of ours
    ("ext-good", {"model": "openai/hand-made-unique"}, {"id": "hand-made-ext-good"}),
    # a Mesh export-only row (hidden from the catalog, never deleted)
    (
        "share/kube-good",
        {"model": "openai/mesh-share-kube-good", "api_base": "http://mesh-share:8080/v1"},
        {"id": "mesh-share-kube-good", "ai_appliance_owner": "private-mesh"},
    ),
    # someone else's row squatting an id of our family
    (
        "squatter",
        {"model": "openai/squatter-unique"},
        {"id": "ai-appliance-external-squatter", "ai_appliance_owner": "someone-else"},
    ),
)


def _canonical(row: Any) -> str:
    return json.dumps(row, sort_keys=True, separators=(",", ":"))


@attrs.define
class Snapshot:
    """What must not change: the foreign rows, as listed and (for the fake) as stored."""

    listed: dict[str, str]
    stored: dict[str, str]


@attrs.define
class Watchdog:
    """Polls /healthz and the process while a scenario runs (paused while the suite kills it)."""

    stage: Stage
    failures: list[str] = attrs.field(factory=list)
    checks: int = 0
    paused: bool = False
    _stop: threading.Event = attrs.field(factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _paused(self) -> bool:
        return self.paused

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            if self.paused:
                continue
            for controller in self.stage.running():
                assert controller.process is not None
                if controller.process.poll() is not None:
                    self.failures.append(f"{controller.name} exited {controller.process.returncode}")
                    continue
                try:
                    status = controller.get("/healthz").status_code
                except httpx.HTTPError as exc:
                    if self._paused():  # paused (and killed) while this request was under way
                        continue
                    self.failures.append(f"{controller.name} /healthz: {type(exc).__name__}")
                    continue
                self.checks += 1
                if status != 200 and not self._paused():
                    self.failures.append(f"{controller.name} /healthz: HTTP {status}")


class Stage:
    """One controller's world. ``start()`` sets it up; ``close()`` stops everything it started."""

    def __init__(
        self,
        suite: Any,
        name: str,
        *,
        litellm: str | tuple[str, str, Any] = "fake",
        via_proxy: bool = False,
        env: Mapping[str, str] | None = None,
        baseline: bool = True,
    ) -> None:
        self.suite = suite
        self.name = name
        self.admin: Admin = suite.admin
        tag = uuid.uuid4().hex[:5]
        self.ns = f"f-{name}-{tag}"
        self.app_ns = f"f-{name}-{tag}-sys"
        self.workdir: Path = suite.workdir / self.ns
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.served: ServedFake | None = None
        if litellm == "fake":
            self.served = ServedFake(FAKE_MASTER_KEY)
            self.litellm = LiteLLM(self.served.url, FAKE_MASTER_KEY, self.served)
        else:
            assert isinstance(litellm, tuple)
            base_url, key, _ = litellm
            self.litellm = LiteLLM(base_url, key, None)
        self.proxy: ProxyThread | None = ProxyThread("127.0.0.1", suite.peer.port) if via_proxy else None
        self.extra_env = dict(env or {})
        self.with_baseline = baseline
        self.controllers: list[Controller] = []
        self.metrics_texts: list[str] = []
        self.healthy_runtimes: set[str] = set()
        self.history: History | None = None
        self.watchdog = Watchdog(self)
        self.changes = 0
        self.extra_secrets: list[str] = []
        self.first_snapshot = Snapshot({}, {})

    # --- set-up
    @property
    def env(self) -> dict[str, str]:
        sink: OtlpSink = self.suite.otlp
        env = {
            "KUBECONFIG": str(self.workdir / "sa.kubeconfig"),
            "NAMESPACE": self.ns,
            "APPLIANCE_NAMESPACE": self.app_ns,
            "LITELLM_BASE_URL": self.litellm.base_url,
            "LITELLM_MASTER_KEY": self.litellm.master_key,
            **FAST_CONTROLLER_ENV,
            "CATALOG_CRD_RECHECK_SECONDS": "1",
            "CATALOG_SHUTDOWN_GRACE_SECONDS": "3",
            "OTEL_EXPORTER_OTLP_ENDPOINT": sink.url,
            "OTEL_BSP_SCHEDULE_DELAY": "500",
            "LOG_LEVEL": "DEBUG",
        }
        env.update(self.extra_env)
        return env

    @property
    def config(self) -> CatalogConfig:
        config = CatalogConfig.from_env(self.env)
        assert isinstance(config, CatalogConfig)
        return config

    def start(self) -> Stage:
        for ns in (self.ns, self.app_ns):
            self.admin.create(namespace(ns))
        for doc in deploy_documents(self.ns, self.app_ns):
            self.admin.apply(doc)
        self._kubeconfig()
        if self.with_baseline:
            self.baseline()
        self.first_snapshot = self.snapshot()
        self.history = History(self.admin, self.ns, CATALOG)
        return self

    def _kubeconfig(self) -> None:
        """A kubeconfig for the controller's ServiceAccount (TokenRequest), through the proxy if any."""
        answer = self.admin.http.post(
            f"/api/v1/namespaces/{self.ns}/serviceaccounts/{SA}/token",
            json={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 7200},
            },
        )
        token = self.admin._check(answer)["status"]["token"]
        server = f"https://127.0.0.1:{self.proxy.port}" if self.proxy is not None else self.suite.peer.server
        ca = b64(Path(self.suite.peer.ca_file).read_text())
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "peer", "cluster": {"server": server, "certificate-authority-data": ca}}],
            "users": [{"name": SA, "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": "peer", "user": SA, "namespace": self.ns}}],
            "current-context": "sa",
        }
        (self.workdir / "sa.kubeconfig").write_text(yaml.safe_dump(config))

    def baseline(self) -> None:
        ns, app = self.ns, self.app_ns
        self.admin.apply(secret(ns, PROVIDER_SECRET, {"k": CANARY}, provider=True))
        self.admin.apply(secret(ns, MASTER_SECRET, {"k": MASTER_CANARY}))
        self.admin.apply(
            external_configmap(
                ns,
                [
                    {
                        "name": "ext-good",
                        "model": "openai/ext-good",
                        "apiKeySecretRef": {"name": PROVIDER_SECRET, "key": "k"},
                        "contextWindow": 32768,
                    },
                    {
                        "name": "ext-plain",
                        "model": "openai/ext-plain",
                        "apiBase": "https://api.example.com/v1",
                    },
                ],
            )
        )
        self.add_kubeai("kube-good", args=["--max-model-len=8192"])
        self.admin.apply(
            activation(
                app,
                "act-good",
                {"model": "openai/act-good", "apiKeySecretRef": {"name": PROVIDER_SECRET, "key": "k"}},
            )
        )
        self.consumer()
        self.admin.apply(agent_template(ns, "litellm-default"))
        existing = self.litellm.rows()
        for model_name, params, info in FOREIGN_ROWS:
            if info["id"] not in existing:
                self.litellm.add(model_name, params, info)

    def consumer(self) -> None:
        """A consumer Deployment with its ReplicaSet and pod (no controller-manager here: we play it)."""
        ns, labels = self.ns, {"app": CONSUMER, "ai-appliance.io/model-catalog-consumer": "true"}
        created = self.admin.apply(deployment(ns, CONSUMER, labels))
        rs = deployment(ns, f"{CONSUMER}-5d8f", labels)
        rs["kind"] = "ReplicaSet"
        rs["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": CONSUMER,
                "uid": created["metadata"]["uid"],
                "controller": True,
            }
        ]
        rs_uid = self.admin.apply(rs)["metadata"]["uid"]
        self.admin.apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{CONSUMER}-5d8f-x1",
                    "namespace": ns,
                    "labels": labels,
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "ReplicaSet",
                            "name": f"{CONSUMER}-5d8f",
                            "uid": rs_uid,
                            "controller": True,
                        }
                    ],
                },
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            }
        )

    def add_kubeai(self, name: str, ready: bool = True, **spec: Any) -> None:
        self.admin.apply(kubeai_model(self.ns, name, **spec))
        if ready:
            self.set_ready(name, True)

    def set_ready(self, name: str, ready: bool) -> None:
        self.admin.patch_status(
            "kubeai.org/v1", "Model", self.ns, name, {"replicas": {"all": 1, "ready": 1 if ready else 0}}
        )

    def change(self, prefix: str = "chg") -> str:
        """A change of input: a new ready KubeAI model. Its name."""
        self.changes += 1
        name = f"{prefix}-{self.changes}"
        self.add_kubeai(name)
        return name

    # --- the controller
    def controller(self, name: str | None = None, **env: str) -> Controller:
        controller = Controller(name or f"{self.name}-a", {**self.env, **env}, self.workdir)
        self.controllers.append(controller)
        return controller

    def running(self) -> list[Controller]:
        return [c for c in self.controllers if c.process is not None and c.process.returncode is None]

    def launch(self, name: str | None = None, timeout: float = 60.0, **env: str) -> Controller:
        controller = self.controller(name, **env).start()
        controller.wait_ready(timeout)
        return controller

    @property
    def leader(self) -> Controller:
        live = self.running()
        assert live, "no controller is running"
        leading = [c for c in live if _leading(c)]
        return leading[0] if leading else live[0]

    def metrics_snapshot(self) -> None:
        for controller in self.running():
            with contextlib.suppress(httpx.HTTPError):
                self.metrics_texts.append(controller.metrics())

    # --- reading the world back
    def catalog_data(self) -> dict[str, str]:
        cm = self.admin.get("v1", "ConfigMap", self.ns, CATALOG)
        return dict((cm or {}).get("data") or {})

    def catalog_hash(self) -> str:
        cm = self.admin.get("v1", "ConfigMap", self.ns, CATALOG) or {}
        return str(
            ((cm.get("metadata") or {}).get("annotations") or {}).get("ai-appliance.io/catalog-hash", "")
        )

    def catalog_models(self) -> list[str]:
        data = self.catalog_data()
        if "catalog.json" not in data:
            return []
        return [m["id"] for m in json.loads(data["catalog.json"])["models"]]

    def record(self, source: str, name: str) -> dict[str, Any] | None:
        data = self.catalog_data()
        for record in json.loads(data.get("routes.json", "[]")):
            if record["source"] == source and record["name"] == name:
                return dict(record)
        return None

    def owned_rows(self) -> dict[str, dict[str, Any]]:
        return {
            rid: row
            for rid, row in self.litellm.rows().items()
            if row["model_info"].get("ai_appliance_owner") == OWNED
        }

    def snapshot(self) -> Snapshot:
        listed = {
            rid: _canonical(row)
            for rid, row in self.litellm.rows().items()
            if row["model_info"].get("ai_appliance_owner") != OWNED
        }
        stored = {rid: _canonical(self.litellm.stored(rid)) for rid in listed} if self.served else {}
        return Snapshot(listed, stored)

    def expected(self) -> dict[str, Any]:
        """What the core publishes for the objects and rows that exist now (``model-catalog render``)."""
        objects = self.admin.render_inputs(self.ns, self.app_ns)
        rows = self.litellm.data()
        return render(
            objects, self.config, model_info=rows, healthy=tuple(sorted(self.healthy_runtimes))
        ).output

    def divergence(self) -> list[str]:
        """How the live world differs from ``expected()``; empty when converged."""
        out: list[str] = []
        expected = self.expected()
        live = self.catalog_data()
        for key in sorted(set(live) | set(expected["catalog"])):
            if key == "routes.json" and _routes(live.get(key)) == _routes(expected["catalog"].get(key)):
                continue  # equal but for what a real health probe answered (render cannot probe)
            if live.get(key) != expected["catalog"].get(key):
                out.append(f"catalog data {key!r} differs" + _routes_diff(live, expected["catalog"], key))
        if expected.get("plan"):
            out.append(
                "LiteLLM plan not empty: " + ", ".join(f"{p['op']} {p['id']}" for p in expected["plan"])
            )
        owned = self.owned_rows()
        wanted = {b["model_info"]["id"]: b for b in expected["litellm"]}
        if set(owned) != set(wanted):
            out.append(f"owned LiteLLM ids {sorted(owned)} != desired {sorted(wanted)}")
        for rid in sorted(set(owned) & set(wanted)):
            row, body = owned[rid], wanted[rid]
            params = {k: v for k, v in body["litellm_params"].items() if k != "api_key"}
            if row["model_name"] != body["model_name"]:
                out.append(f"{rid}: model_name {row['model_name']!r} != {body['model_name']!r}")
            if any(row["litellm_params"].get(k) != v for k, v in params.items()):
                out.append(f"{rid}: litellm_params differ")
            if any(row["model_info"].get(k) != v for k, v in body["model_info"].items()):
                out.append(f"{rid}: model_info differs")
        if expected["agentTemplate"]:
            template = self.admin.get("kubeopencode.io/v1alpha1", "AgentTemplate", self.ns, "litellm-default")
            if template is not None:
                models = _dig(template, "spec", "config", "provider", "litellm", "models")
                want = _dig(expected["agentTemplate"], "spec", "config", "provider", "litellm", "models")
                if models != want:
                    out.append("AgentTemplate litellm-default models differ")
        current = self.catalog_hash()
        consumer = self.admin.get("apps/v1", "Deployment", self.ns, CONSUMER)
        if consumer is not None:
            rolled = _dig(consumer, "spec", "template", "metadata", "annotations") or {}
            if rolled.get("ai-appliance.io/catalog-hash") != current:
                out.append("consumer not rolled onto the current catalog hash")
        return out

    def wait_converged(self, timeout: float) -> float:
        """Seconds until the world converged; AssertionError naming what differs after ``timeout``."""
        began = time.monotonic()
        last: list[str] = ["not checked"]
        while time.monotonic() - began < timeout:
            try:
                last = self.divergence()
            except (httpx.HTTPError, ApiError, OSError, ValueError, KeyError) as exc:
                last = [f"{type(exc).__name__}: {exc}"]
            if not last:
                return time.monotonic() - began
            time.sleep(0.25)
        raise AssertionError(f"{self.name}: not converged within {timeout:.0f}s: {last[:6]}")

    def propagates(self, timeout: float) -> float:
        """A final change (a new ready KubeAI model) reaches LiteLLM and the catalog; seconds taken."""
        name = self.change("final")
        _, seconds = wait_until(
            lambda: f"ai-appliance-kubeai-{name}" in self.owned_rows() and name in self.catalog_models(),
            timeout,
            what=f"the final change {name} to be published",
        )
        return seconds

    # --- invariants (each returns problems; empty = kept)
    def foreign_rows_kept(self, before: Snapshot) -> list[str]:
        after = self.snapshot()
        out = []
        for rid, text in before.listed.items():
            if after.listed.get(rid) != text:
                out.append(
                    f"foreign row {rid} changed (listed)"
                    if rid in after.listed
                    else f"foreign row {rid} gone"
                )
        for rid, text in before.stored.items():
            if after.stored.get(rid) != text:
                out.append(f"foreign row {rid} changed (stored)")
        return out

    def no_duplicates(self) -> list[str]:
        data = self.litellm.data()
        ids = [r["model_info"]["id"] for r in data]
        out = [f"id {i} listed {ids.count(i)} times" for i in sorted(set(ids)) if ids.count(i) > 1]
        names = [r["model_name"] for r in data if r["model_info"].get("ai_appliance_owner") == OWNED]
        out += [f"{n!r} has {names.count(n)} rows of ours" for n in sorted(set(names)) if names.count(n) > 1]
        return out

    def logged_catalog_hashes(self) -> set[str]:
        hashes: set[str] = set()
        for controller in self.controllers:
            try:
                for line in controller.log_path.read_text(errors="replace").splitlines():
                    if '"catalog_hash"' in line:
                        with contextlib.suppress(ValueError, KeyError, TypeError):
                            hashes.add(json.loads(line)["catalog_hash"])
            except OSError:
                pass
        return hashes

    def rollouts_justified(self) -> list[str]:
        """Every consumer generation bump sets a new hash; every hash set was a catalog hash."""
        assert self.history is not None
        time.sleep(0.5)  # let the watch thread catch up with the last change
        catalog = self.history.catalog_hashes() | self.logged_catalog_hashes() | {self.catalog_hash()}
        out = []
        states = [s for s in self.history.of("Deployment", CONSUMER) if not s.deleted]
        for before, after in itertools.pairwise(states):
            if after.generation != before.generation and after.hash == before.hash:
                out.append(f"{CONSUMER} rolled (generation {after.generation}) without a hash change")
        for s in states:
            if s.hash and s.hash not in catalog:
                out.append(f"{CONSUMER} rolled onto {s.hash}, never a catalog hash")
        rollouts = sum(1 for b, a in itertools.pairwise(states) if a.hash != b.hash)
        written = [s.hash for s in self.history.of("ConfigMap", CATALOG) if not s.deleted]
        changes = sum(1 for b, a in itertools.pairwise(written) if a != b)
        if rollouts > changes:
            out.append(f"{rollouts} rollouts for {changes} catalog hash changes")
        return out

    def leaks(self, extra: tuple[str, ...] = ()) -> list[str]:
        """Every place a secret value must not be: logs, event logs, metrics, traces, ConfigMaps, Events."""
        self.metrics_snapshot()
        texts: dict[str, str] = {}
        for path in sorted(self.workdir.glob("*")):
            if path.is_file() and path.suffix != ".kubeconfig":
                texts[path.name] = path.read_text(errors="replace")
        for i, text in enumerate(self.metrics_texts):
            texts[f"metrics#{i}"] = text
        for i, body in enumerate(list(self.suite.otlp.bodies)):
            texts[f"trace export #{i}"] = body.decode("utf-8", "replace")
        for ns in (self.ns, self.app_ns):
            for kind in ("ConfigMap", "Event"):
                texts[f"{kind}s in {ns}"] = json.dumps(self.admin.objects("v1", kind, ns))
        out = []
        for label, value in canaries(extra + tuple(self.extra_secrets)).items():
            for where, text in texts.items():
                if value in text:
                    out.append(f"{label} found in {where}")
        return out

    def canary_reaches_litellm(self) -> bool:
        """The positive control: the canary does reach LiteLLM (so the leak scan is not vacuous)."""
        stored = self.litellm.stored("ai-appliance-external-ext-good")
        return stored is None or stored["litellm_params"].get("api_key") == CANARY

    # --- teardown
    def stop_controllers(self) -> None:
        for controller in self.controllers:
            if controller.process is not None and controller.process.poll() is None:
                controller.stop(30)

    def close(self) -> None:
        self.watchdog.stop()
        for controller in self.controllers:
            if controller.process is None:
                continue
            try:  # gracefully: the last spans are exported and the event log flushed (both are scanned)
                controller.stop(15)
            except subprocess.TimeoutExpired:
                controller.kill()
        if self.history is not None:
            self.history.stop()
        if self.proxy is not None:
            self.proxy.close()
        if self.served is not None:
            self.served.close()
        else:  # a shared real proxy: take away what this stage put there
            foreign = {info["id"] for _, _, info in FOREIGN_ROWS}
            try:
                for rid, row in self.litellm.rows().items():
                    if rid in foreign or row["model_info"].get("ai_appliance_owner") == OWNED:
                        self.litellm.delete(rid)
            except httpx.HTTPError:
                pass
        self.litellm.close()
        for ns in (self.ns, self.app_ns):
            with contextlib.suppress(ApiError, httpx.HTTPError):
                self.admin.delete("v1", "Namespace", "", ns)

    def keep_artifacts(self, target: Path) -> None:
        shutil.copytree(self.workdir, target / self.ns, dirs_exist_ok=True)


_PROBE_REASONS = ("HealthCheckFailed", "HealthCheckPending")


def _routes(text: str | None) -> list[dict[str, Any]] | None:
    """routes.json records, the probe's own answer taken out of health-check messages."""
    try:
        records = json.loads(text or "[]")
    except ValueError:
        return None
    for record in records:
        if record.get("reason") in _PROBE_REASONS:
            record["message"] = str(record.get("message", "")).rsplit(": ", 1)[0]
    return list(records)


def _routes_diff(live: Mapping[str, str], want: Mapping[str, str], key: str) -> str:
    """For routes.json: which records differ (live - expected, expected - live)."""
    if key != "routes.json":
        return ""
    try:
        a = {json.dumps(r, sort_keys=True) for r in json.loads(live.get(key, "[]"))}
        b = {json.dumps(r, sort_keys=True) for r in json.loads(want.get(key, "[]"))}
    except ValueError:
        return ""
    return f": live only {sorted(a - b)[:3]}, expected only {sorted(b - a)[:3]}"


def _leading(controller: Controller) -> bool:
    try:
        return controller.leading()
    except httpx.HTTPError:
        return False


def _dig(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj
