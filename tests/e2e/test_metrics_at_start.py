"""What a live ``/metrics`` holds at start, on the real kube-apiserver and LiteLLM (issue 33, item 3).

A ``model-catalog run`` process in namespaces of its own, authenticated as the controller's
ServiceAccount bound by ``deploy/``'s Roles, standing by behind a Lease another replica holds (so it
writes nothing): once it is ready it is scraped, and

- every series an alert of ``deploy/monitoring/prometheusrule.yaml`` reads is there, each counter at 0
  (the first failure moves ``increase()``), but for the first list of each source, a relist too;
- every input series of ``tests/monitoring/rules.test.yaml`` has the label names of a scraped series as
  Prometheus stores it (the values are namespace-dependent here; ``tests/monitoring/test_live_shapes.py``
  compares them too);
- every metric family has a real HELP;
- the runbook's ``model-catalog get`` reads its endpoints, run as ``kubectl exec`` runs it: a process
  with the container's environment (the image's, no curl anywhere), asking the server in its pod;
- 1,100 idle connections to its port under the default limit of 1,024 open files neither end the
  process nor keep the probes out (issue 32, item 10).
"""

from __future__ import annotations

import datetime as dt
import json
import resource
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.harness import (
    FAST_CONTROLLER_ENV,
    REPO,
    Controller,
    deploy_base,
    image_runtime_env,
    kubectl,
    service_account_kubeconfig,
)
from tests.monitoring import shapes

pytestmark = [pytest.mark.kube, pytest.mark.litellm, pytest.mark.slow]

LEASE = "ai-model-catalog-controller"


@pytest.fixture(scope="module")
def standby(
    kube_peer: Any, litellm_peer: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Controller]:
    admin = Path(kube_peer.kubeconfig)
    work = tmp_path_factory.mktemp("metrics-at-start")
    ns = f"mcm-{uuid.uuid4().hex[:6]}"
    app_ns = f"{ns}-system"
    for name in (ns, app_ns):
        kubectl(admin, "create", "namespace", name)
    for crd in sorted((REPO / "contracts" / "crds").glob("*.yaml")):
        kubectl(admin, "apply", "-f", str(crd))
    manifests, _ = deploy_base(admin, ns, app_ns)
    kubectl(admin, "apply", "-f", "-", input_text=manifests)
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": LEASE, "namespace": ns},
        "spec": {"holderIdentity": "the-other-replica", "leaseDurationSeconds": 3600, "renewTime": now},
    }
    kubectl(admin, "apply", "-f", "-", input_text=yaml.safe_dump(lease))
    env = {
        "KUBECONFIG": str(service_account_kubeconfig(admin, ns, work / "controller.kubeconfig")),
        "NAMESPACE": ns,
        "APPLIANCE_NAMESPACE": app_ns,
        "LITELLM_BASE_URL": litellm_peer.base_url,
        "LITELLM_MASTER_KEY": litellm_peer.master_key,
        **FAST_CONTROLLER_ENV,
        # the other replica's Lease stays valid for this one for the whole test: it never leads
        "CATALOG_LEASE_DURATION_SECONDS": "3600",
        "CATALOG_LEASE_RENEW_DEADLINE_SECONDS": "60",
        "CATALOG_LEASE_RETRY_PERIOD_SECONDS": "1",
    }
    controller = Controller("standby", env, work).start()
    try:
        controller.wait_ready(90)
        yield controller
    finally:
        controller.stop()
        for name in (ns, app_ns):
            kubectl(admin, "delete", "namespace", name, "--wait=false", check=False)


def test_a_live_scrape_at_start_holds_every_alert_input_at_zero(standby: Controller) -> None:
    text = standby.metrics()
    assert not standby.leading()
    assert shapes.inputs_at_start(text, ready=True) == []
    assert shapes.input_series_not_live(text, values=False) == []
    assert shapes.help_problems(text) == []


def _exec(controller: Controller, *argv: str) -> subprocess.CompletedProcess[bytes]:
    """``kubectl exec <pod> -- model-catalog ARGV``: the container's environment, the image's settings."""
    env = {**controller.env, **image_runtime_env()}
    argv_ = [sys.executable, "-m", "app.cli", *argv]
    return subprocess.run(argv_, cwd=REPO, env=env, capture_output=True, timeout=60, check=False)


def test_the_runbooks_commands_read_the_running_controller(standby: Controller) -> None:
    readyz = _exec(standby, "get", "/readyz")
    assert (readyz.returncode, readyz.stdout) == (0, b"ok (standby)\n"), readyz.stderr
    metrics = _exec(standby, "get", "/metrics")
    assert metrics.returncode == 0 and shapes.parse(metrics.stdout.decode()).samples
    ring = _exec(standby, "get", "/debug/eventlog")
    assert ring.returncode == 0, ring.stderr
    records = [json.loads(line) for line in ring.stdout.splitlines()]
    assert records and records[0]["k"] == "header"
    missing = _exec(standby, "get", "/nothing-here")
    assert missing.returncode == 1 and b"HTTP 404" in missing.stderr


def test_1100_idle_connections_under_1024_open_files_leave_the_controller_running(
    standby: Controller,
) -> None:
    assert standby.process is not None
    pid = standby.process.pid
    limit = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (1024, limit[1]))  # a container's default
    held: list[socket.socket] = []
    try:
        for _ in range(1100):
            try:
                held.append(socket.create_connection(("127.0.0.1", standby.port), timeout=10))
            except OSError:
                break  # the kernel's backlog is full
        with socket.create_connection(
            ("127.0.0.1", standby.port), timeout=10, source_address=("127.0.0.2", 0)
        ) as probe:  # another client (the kubelet) is still served
            probe.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = b""
            while chunk := probe.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b"ok (standby)\n"), answer
        assert standby.process.poll() is None
    finally:
        for sock in held:
            sock.close()
        resource.prlimit(pid, resource.RLIMIT_NOFILE, limit)
    assert standby.ready()
    assert standby.process.poll() is None
