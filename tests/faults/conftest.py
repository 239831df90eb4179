"""The fault suite's session: its own API server (started in the background as soon as collection shows
a fault test, so the start overlaps other tests), the CRDs, an OTLP sink, the profile, the results.

Profiles: ``fast`` (the default, part of ``just test``: short holds, few kill rounds, the LiteLLM fake
served on loopback) and ``full`` (``MODEL_CATALOG_FAULTS=full``, run by ``just faults``: long holds,
many kill rounds, and the real LiteLLM peer stopped for 60 s). Tests marked ``faults_full`` run only in
the full profile.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from app.lease_timing import LEASE_DURATION_SECONDS, LEASE_RENEW_DEADLINE_SECONDS, LEASE_RETRY_PERIOD_SECONDS
from tests.faults import results
from tests.faults.kube import Admin, ApiError
from tests.faults.peers import OtlpSink, OwnKubePeer
from tests.fixtures.kube_peer import CRD_DIR, allow_for_the_build
from tests.unavailable import skip_or_fail

FULL = os.environ.get("MODEL_CATALOG_FAULTS") == "full"
_PEER = OwnKubePeer()
_STARTED = time.monotonic()


@attrs.frozen
class Profile:
    name: str
    hold: float  # how long a LiteLLM or network fault lasts
    slow_hold: float  # how long LiteLLM answers in 10 s (longer than one client timeout)
    kill_rounds: int  # SIGKILL-and-restart rounds
    litellm_bound: float  # convergence bound after a LiteLLM fault heals
    kube_bound: float  # convergence bound after an API-server fault heals
    steal_hold: float  # how long another holder keeps the Lease


FAST = Profile(
    "fast", hold=3.0, slow_hold=4.0, kill_rounds=6, litellm_bound=30.0, kube_bound=45.0, steal_hold=3.0
)
FULL_PROFILE = Profile(
    "full", hold=30.0, slow_hold=30.0, kill_rounds=40, litellm_bound=30.0, kube_bound=45.0, steal_hold=20.0
)
PROFILE = FULL_PROFILE if FULL else FAST
DEPLOYED_LEASE = {
    "CATALOG_LEASE_DURATION_SECONDS": f"{LEASE_DURATION_SECONDS:g}",
    "CATALOG_LEASE_RENEW_DEADLINE_SECONDS": f"{LEASE_RENEW_DEADLINE_SECONDS:g}",
    "CATALOG_LEASE_RETRY_PERIOD_SECONDS": f"{LEASE_RETRY_PERIOD_SECONDS:g}",
}


@attrs.define
class Suite:
    peer: OwnKubePeer
    admin: Admin
    otlp: OtlpSink
    workdir: Path
    profile: Profile


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = []
    for item in items:
        if item.get_closest_marker("faults_full") is not None and not FULL:
            item.add_marker(pytest.mark.skip(reason="full fault profile only (just faults)"))
            continue
        if item.get_closest_marker("faults") is not None:
            wanted.append(item)
    if wanted and not os.environ.get("MODEL_CATALOG_FAULTS_NO_PEER") and not config.option.collectonly:
        allow_for_the_build(wanted)  # the suite starts a kube-apiserver of its own
        _PEER.kick()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get(results.RESULTS_ENV)
    if path and results.RESULTS:
        results.write(Path(path), time.monotonic() - _STARTED, PROFILE.name)
    _PEER.destroy()


def install_crds(admin: Admin, timeout: float = 60.0) -> None:
    docs = [yaml.safe_load(p.read_text()) for p in sorted(CRD_DIR.glob("*.yaml"))]
    for doc in docs:
        admin.apply(doc)
    for doc in docs:
        wait_crd_served(admin, doc, timeout)


def wait_crd_served(admin: Admin, doc: dict[str, Any], timeout: float = 60.0) -> None:
    group, plural = doc["spec"]["group"], doc["spec"]["names"]["plural"]
    version = doc["spec"]["versions"][0]["name"]
    deadline = time.monotonic() + timeout
    while True:
        got = admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", doc["metadata"]["name"])
        conditions = {
            c["type"]: c["status"] for c in ((got or {}).get("status") or {}).get("conditions") or []
        }
        if conditions.get("Established") == "True":
            answer = admin.http.get(f"/apis/{group}/{version}/{plural}")
            if answer.status_code == 200:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {doc['metadata']['name']} not served within {timeout}s")
        time.sleep(0.1)


@pytest.fixture(scope="session")
def shared_stage(suite: Suite) -> Iterator[Any]:
    """One controller for the LiteLLM faults and the Kubernetes faults (through a cuttable proxy, with
    the LiteLLM fake on loopback): scenarios run one after another, each judged on its own."""
    from tests.faults.stage import Stage

    # The full profile runs the connection and Lease faults with the Lease's timing as deployed (the
    # renewals are the watches' liveness signal): the recoveries it reports are the production ones.
    stage = Stage(suite, "faults", via_proxy=True, env=DEPLOYED_LEASE if FULL else None).start()
    try:
        stage.launch()
        stage.watchdog.start()
        stage.wait_converged(60)
        yield stage
    finally:
        stage.close()


@pytest.fixture(scope="session")
def suite() -> Iterator[Suite]:
    peer = _PEER.wait()
    if isinstance(peer, str):
        skip_or_fail(peer)
        raise AssertionError("unreachable")
    admin = Admin(peer.server, peer.token, peer.ca_file)
    try:
        install_crds(admin)
    except (ApiError, TimeoutError) as exc:
        skip_or_fail(f"fault suite: CRDs not installed on its API server: {exc}")
    otlp = OtlpSink()
    workdir = Path(tempfile.mkdtemp(prefix="model-catalog-faults-"))
    yield Suite(peer, admin, otlp, workdir, PROFILE)
    try:
        leaks = suite_wide_leaks(admin, otlp, workdir)
    finally:
        otlp.close()
        admin.close()
    results.SUITE["suite-wide canary scan"] = "; ".join(leaks) if leaks else results.OK
    assert not leaks, leaks


def suite_wide_leaks(admin: Admin, otlp: OtlpSink, workdir: Path) -> list[str]:
    """At the end, once every controller has flushed its traces: every file every controller wrote,
    every exported trace, and every ConfigMap and Event on the suite's API server (deleted namespaces
    stay Terminating here: there is no namespace controller)."""
    from tests.faults.stage import canaries

    texts: dict[str, str] = {}
    for path in sorted(workdir.rglob("*")):
        if path.is_file() and path.suffix != ".kubeconfig":
            texts[str(path.relative_to(workdir))] = path.read_text(errors="replace")
    for i, body in enumerate(list(otlp.bodies)):
        texts[f"trace export #{i}"] = body.decode("utf-8", "replace")
    try:
        for kind in ("ConfigMap", "Event"):
            answer = admin.http.get(f"/api/v1/{kind.lower()}s")
            texts[f"every {kind}"] = answer.text
    except Exception as exc:  # the API server is ours: it answers, or the scan says it could not look
        texts["API server"] = f"not scanned: {type(exc).__name__}"
    return [
        f"{label} found in {where}"
        for label, value in canaries().items()
        for where, text in texts.items()
        if value in text
    ]
