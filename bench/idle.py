"""IDLE (issue 35): what the controller costs the API server while nothing changes, by verb, and its RSS,
next to the previous controller's figures.

The API server is a kube-peer of its own, started with an audit log that records every request once, as
it arrives (stage RequestReceived, level Metadata: verb, resource, User-Agent; no bodies). So each request
is attributed to its client by User-Agent, exactly: the controller's (``model-catalog/...``), the API
server's own (``kube-apiserver/...``, its internal controllers) and anything else (nothing, during a
window: the bench reads the controller's /metrics, not the API server). The figure comparable with the
issue's is the controller's plus the API server's own ("the API server's own included"); the API server's
own counter of requests (``apiserver_request_total``) over the same window is kept beside it as a check.

Configurations, one after the other on the same world (100 ready KubeAI Models, 6 external "trial" models
whose keys are in 3 labelled Secrets and 3 ``ai-model-provider-*`` Secrets read by name, an AgentTemplate,
a consumer Deployment; the fake LiteLLM):

- ``single``: one replica without leader election, as the previous controller ran (and as the issue
  measured this one): the comparison. Its watches' liveness signal is a 5 s probe watch of the Lease.
- ``leader``: one replica with leader election, as ``deploy/`` runs each replica: the Lease renewed every
  retry period (``LEASE_RETRY_PERIOD_SECONDS``, 4 s), whose renewals are the liveness signal.
- ``standby``: the same leader and a standby beside it (``deploy/``'s two replicas), both counted.

The previous controller is not in this repository: its figures are the issue's measurement on the same
kind of peer (kube-apiserver v1.20.2, 26 models, 120 s idle), quoted, not re-measured.

Watches last 5-10 minutes, so a window that starts right after the start-up listing holds each watch's
first renewal only once it is 5 minutes long or more; the full run's ``single`` window is 10 minutes
(every watch renewed once in it). A long run renews each watch every 7.5 minutes on average, a third more
often than that window shows: the "long run" figure adds that third to the renewals (and the relists
that follow them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from app.lease_timing import LEASE_RETRY_PERIOD_SECONDS
from bench.kube import Kube
from bench.peers import FakeServer
from bench.scenarios import (
    World,
    consumers,
    controller,
    rolled,
    rss_kib,
    wait_converged,
    wait_until,
    writes,
)
from bench.stats import summary
from catalog_core.sources.common import PROVIDER_SECRET_LABEL
from tests.e2e.harness import Controller
from tests.fixtures.shared import shared_dir

# The measurement of the previous controller (idle, 26 models, 120 s, on kube-apiserver v1.20.2,
# the API server's own requests included), quoted.
PREVIOUS: dict[str, Any] = {
    "source": "issue 35, measured side by side on the same kind of peer; quoted, not re-measured here",
    "requests_per_min": {"GET": 22, "LIST": 11, "WATCH": 9},
    "total_per_min": 42,
    "rss_mib": 25.0,
    "this_controller_before_per_min": {"WATCH": 156, "GET": 20, "LIST": 13},
    "this_controller_before_total_per_min": 188,
}
VERDICTS = "model_catalog_kube_watch_liveness_verdicts_total"
RSS_TARGET_MIB = 48.0  # at 100 models (issue 35; helper "memory" owns the target, this bench reports it)
TRIALS = 6
VERBS = {
    "get": "GET",
    "list": "LIST",
    "watch": "WATCH",
    "update": "PUT",
    "create": "POST",
    "patch": "PATCH",
    "delete": "DELETE",
}
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["ResponseStarted", "ResponseComplete", "Panic"]
rules:
  - level: Metadata
"""
FULL_WINDOW_S = 600.0  # the single replica's window in a full run: every watch renewed once in it
# A watch is renewed every 5-10 minutes: 7.5 on average in a long run, against 10 in a window of 10
# minutes that starts with the watches (each renewed once in it).
LONG_RUN_RENEWAL_FACTOR = 10.0 / 7.5


class AuditedPeer:
    """A kube-peer of its own (new ROOT, free ports) whose API server writes an audit log."""

    def __init__(self) -> None:
        # Up to three tries, each on fresh ports: a port found free can be taken before the peer binds it.
        errors = []
        for _ in range(3):
            self.root = Path(tempfile.mkdtemp(prefix="model-catalog-bench-idle-peer-"))
            self.audit = self.root / "audit.log"
            started = self._start()
            if started is None:
                return
            errors.append(started)
            self.stop()
        raise RuntimeError(f"the audited kube-peer did not start: {errors[-1]}")

    def _start(self) -> str | None:
        """None once started, else why not."""
        from tests.fixtures.kube_peer import _free_port

        (self.root / "audit-policy.yaml").write_text(AUDIT_POLICY)
        flags = (
            f"--audit-policy-file={self.root / 'audit-policy.yaml'} --audit-log-path={self.audit} "
            "--audit-log-format=json --audit-log-maxsize=1024 --audit-log-maxbackup=1"
        )
        env = {
            **os.environ,
            "ROOT": str(self.root),
            "PORT": str(_free_port()),
            "ETCD_PORT": str(_free_port()),
            "ETCD_PEER_PORT": str(_free_port()),
            "EXTRA_APISERVER_FLAGS": flags,
        }
        env.pop("KUBECONFIG", None)
        done = subprocess.run(
            [str(shared_dir() / "kube-peer" / "start")],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        line = next((x for x in done.stdout.splitlines() if x.startswith("KUBECONFIG=")), "")
        if done.returncode == 0 and line:
            self.kubeconfig = Path(line.partition("=")[2])
            return None
        lines = [x for x in done.stderr.splitlines() if x.strip()]
        return ([x for x in lines if "ERROR" in x] or lines[-1:] or ["no output"])[-1][:300]

    def stop(self) -> None:
        subprocess.run(
            [str(shared_dir() / "kube-peer" / "stop")],
            env={**os.environ, "ROOT": str(self.root)},
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)

    def offset(self) -> int:
        return self.audit.stat().st_size if self.audit.exists() else 0

    def requests(self, start: int, end: int) -> list[dict[str, Any]]:
        """The audit events written between two offsets of the log."""
        with self.audit.open("rb") as log:
            log.seek(start)
            chunk = log.read(end - start)
        return [json.loads(line) for line in chunk.splitlines() if line.strip()]


def client_of(user_agent: str) -> str:
    if user_agent.startswith("model-catalog/"):
        return "model-catalog"
    if user_agent.startswith("kube-apiserver/"):
        return "kube-apiserver"
    return "other"


def tally(events: list[dict[str, Any]], minutes: float) -> dict[str, Any]:
    """Requests per minute by client and verb, and the controller's by verb and resource."""
    by_client: dict[str, Counter[str]] = {}
    ours_by_resource: Counter[str] = Counter()
    for event in events:
        who = client_of(str(event.get("userAgent") or ""))
        verb = VERBS.get(str(event.get("verb")), str(event.get("verb")).upper())
        by_client.setdefault(who, Counter())[verb] += 1
        if who == "model-catalog":
            resource = (event.get("objectRef") or {}).get("resource") or event.get("requestURI", "?")
            ours_by_resource[f"{verb} {resource}"] += 1
    return {
        "minutes": minutes,
        "counts": {who: dict(c) for who, c in by_client.items()},
        "per_min": {who: {v: n / minutes for v, n in c.items()} for who, c in by_client.items()},
        "ours_by_resource": dict(ours_by_resource),
    }


def apiserver_total(kube: Kube) -> float:
    """The API server's own count of every request it served (``apiserver_request_total``)."""
    answer = kube.http.get("/metrics")
    answer.raise_for_status()
    total = 0.0
    for line in answer.text.splitlines():
        if line.startswith("apiserver_request_total{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def trials(world: World) -> None:
    """Six external models in models.json whose keys are in Secrets: three labelled (one label-selected
    watch serves them), three ``ai-model-provider-*`` read by name (a watch each)."""
    ns = world.namespace
    items = []
    for i in range(TRIALS):
        labelled = i % 2 == 0
        name = f"bench-provider-{i}" if labelled else f"ai-model-provider-trial-{i}"
        secret: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": ns},
            "stringData": {"k": f"sk-bench-trial-{i}"},
        }
        if labelled:
            secret["metadata"]["labels"] = {PROVIDER_SECRET_LABEL: "true"}
        world.kube.kubectl("apply", "-f", "-", input_text=json.dumps(secret))
        key = {"name": name, "key": "k"}
        items.append({"name": f"trial-{i}", "model": f"openai/trial-{i}", "apiKeySecretRef": key})
    cm = world.kube.configmap(ns, "ai-external-models")
    cm["data"] = {"models.json": json.dumps({"models": items})}
    answer = world.kube.http.put(f"/api/v1/namespaces/{ns}/configmaps/ai-external-models", json=cm)
    answer.raise_for_status()


def measure(peer: AuditedPeer, kube: Kube, processes: list[Controller], seconds: float) -> dict[str, Any]:
    """The requests of every client and the processes' RSS over ``seconds`` in which nothing changes."""
    out: dict[str, Any] = {}
    verdicts = {c.name: c.metric(VERDICTS) for c in processes}
    counted = apiserver_total(kube)
    start = peer.offset()  # after that read: the window holds the clients' requests, not the bench's
    began = time.monotonic()
    samples: dict[str, list[float]] = {c.name: [] for c in processes}
    until = began + seconds
    while time.monotonic() < until:
        for c in processes:
            assert c.process is not None
            if c.process.poll() is not None:
                raise RuntimeError(f"{c.name} exited during the idle window: {c.tail()}")
            samples[c.name].append(rss_kib(c.process.pid)[0] / 1024)
        time.sleep(1.0)
    minutes = (time.monotonic() - began) / 60.0
    # The log backend writes each event before the request goes on (--audit-log-mode=blocking, the
    # default): the offsets bound the window exactly.
    end = peer.offset()
    events = peer.requests(start, end)
    out.update(tally(events, minutes))
    # as the API server counts them (a watch once it ends, so not quite the same requests)
    out["apiserver_request_total_per_min"] = (apiserver_total(kube) - counted) / minutes
    out["audited_per_min"] = len(events) / minutes
    out["rss_mib"] = {name: summary(values) for name, values in samples.items()}
    # a verdict restarts every watch: at idle there should be none (a loaded machine can delay a renewal)
    out["liveness_verdicts"] = {c.name: c.metric(VERDICTS) - verdicts[c.name] for c in processes}
    out["seconds"] = minutes * 60.0
    return out


def settled(world: World, ctl: Controller, fake_rows: Any, rows: int) -> None:
    """Converged, and done writing: every row written, the consumer rolled onto the catalog, and no write
    for longer than the rollout settle window (the AgentTemplate's patch and the rollout wait for it)."""
    wait_converged(world, ctl, fake_rows, rows, 300)
    wait_until(lambda: rolled(world), 120, "the consumer rolled onto the catalog")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        before = writes(ctl)
        time.sleep(6.0)
        if writes(ctl) == before:
            return
    raise TimeoutError(f"{ctl.name} kept writing for 2 minutes after it converged")


def run(
    world: World, peer: AuditedPeer, server: FakeServer, windows: dict[str, float], image_venv: Path
) -> dict[str, Any]:
    """``image_venv``: the controllers run from it, as the image runs them (bench.image_venv): the dev
    venv's tools add ~4 MiB of RSS the image never has."""
    command = [str(image_venv / "bin" / "model-catalog"), "run"]
    consumers(world)
    trials(world)
    fake = server.fake
    rows = world.models + TRIALS
    result: dict[str, Any] = {
        "models": world.models,
        "trials": TRIALS,
        "previous": PREVIOUS,
        "rss_target_mib": RSS_TARGET_MIB,
        "lease_retry_period_s": LEASE_RETRY_PERIOD_SECONDS,
        "configs": {},
    }
    base = world.controller_env(server.url, CATALOG_LITELLM_RESYNC_SECONDS="30")

    # the comparison: one replica, no Lease (as the previous controller ran)
    single_env = {**base, "CATALOG_LEADER_ELECTION": "false"}
    with controller(world, "idle-single", single_env, command) as single:
        single.wait_ready(120)
        settled(world, single, lambda: len(fake.ids()), rows)
        out = measure(peer, world.kube, [single], windows["single"])
        out["watch_requests_metric"] = single.metric("model_catalog_kube_watch_requests_total")
        result["configs"]["single"] = out
    fake.reset_counts()

    # as deploy/ runs it: the Lease, then a standby beside the leader
    env = {**base, "CATALOG_LEASE_NAME": "idle-bench"}
    with controller(world, "idle-leader", {**env, "POD_NAME": "idle-leader"}, command) as leader:
        leader.wait_ready(120)
        settled(world, leader, lambda: len(fake.ids()), rows)
        result["configs"]["leader"] = measure(peer, world.kube, [leader], windows["leader"])
        with controller(world, "idle-standby", {**env, "POD_NAME": "idle-standby"}, command) as standby:
            standby.wait_ready(120)
            time.sleep(5.0)  # past its start-up reads (the Secrets it is told to watch come after ready)
            out = measure(peer, world.kube, [leader, standby], windows["leader"])
            out["standby_leading"] = standby.leading()
            result["configs"]["standby"] = out
    single_window = result["configs"]["single"]
    result["long_run"] = long_run(single_window) if single_window["seconds"] >= FULL_WINDOW_S - 1 else None
    return result


def long_run(window: dict[str, Any]) -> dict[str, float]:
    """The single replica's requests per minute over a long run, from a 10-minute window that starts with
    the watches (each renewed once in it): its renewals (every WATCH but the liveness probe's, and the
    LISTs that follow a renewal answered 410) a third more frequent."""
    out = dict(window["per_min"].get("model-catalog", {}))
    probe = window["ours_by_resource"].get("WATCH leases", 0) / window["minutes"]
    if "WATCH" in out:
        out["WATCH"] = probe + (out["WATCH"] - probe) * LONG_RUN_RENEWAL_FACTOR
    if "LIST" in out:
        out["LIST"] = out["LIST"] * LONG_RUN_RENEWAL_FACTOR
    return out


def bench(models: int, windows: dict[str, float], work: Path, image_venv: Path) -> dict[str, Any]:
    """Start the audited peer, build the world, measure every configuration (the controllers run from
    ``image_venv``); stop the peer."""
    peer = AuditedPeer()
    kube = Kube(peer.kubeconfig)
    try:
        suffix = time.strftime("%H%M%S")
        world = World(kube, peer.kubeconfig, f"idle-{suffix}", f"idle-{suffix}-system", work)
        kube.prepare(world.namespace, world.appliance_namespace)
        world.grow(models)
        with FakeServer() as server:
            return run(world, peer, server, windows, image_venv)
    finally:
        kube.close()
        peer.stop()
