"""The service's wiring of the Kubernetes adapters, found by the fault suite (tests/faults):

- their counters reach /metrics (docs/rbac.md promises ``kube_forbidden_total``; the fault suite reads
  ``kube_watch_gone_total`` to prove a 410 relist happened);
- the watch timeout, which bounds how long a half-open connection leaves a source blind, is short by
  default and configurable.
"""

from __future__ import annotations

import pathlib
import re

import attrs
import pytest

from adapters.kube.settings import FORBIDDEN_TOTAL, GONE_TOTAL, RELISTS_TOTAL, Liveness
from adapters.telemetry import Telemetry
from app.service import Service
from app.settings import ServiceSettings, load
from catalog_core.commands import PatchAgentTemplate
from catalog_core.config import CatalogConfig, ConfigError
from catalog_core.fold import initial_state
from catalog_core.jsonval import Json
from catalog_core.reasons import Reason
from catalog_core.state import WriteFailure


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the series ``name`` whose labels include ``labels`` (None when there is none)."""
    for line in text.splitlines():
        match = re.match(r"^([a-zA-Z_:][\w:]*)\{([^}]*)\}\s+(\S+)$", line)
        if match is None or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(3))
    return None


def test_kube_adapter_counters_are_exported_with_their_labels() -> None:
    telemetry = Telemetry()
    try:
        telemetry.kube_stat(GONE_TOTAL, {"source": "kubeai-models"})
        telemetry.kube_stat(GONE_TOTAL, {"source": "kubeai-models"})
        telemetry.kube_stat(
            FORBIDDEN_TOTAL,
            {"source": "secrets", "verb": "list", "resource": "secrets", "namespace": "ai"},
        )
        text = telemetry.metrics_text().decode()
    finally:
        telemetry.shutdown()
    assert sample(text, "model_catalog_kube_watch_gone_total", source="kubeai-models") == 2.0
    forbidden = sample(
        text, "model_catalog_kube_forbidden_total", source="secrets", verb="list", namespace="ai"
    )
    assert forbidden == 1.0


def test_failing_writes_are_exported_by_kind_every_kind_from_the_start() -> None:
    """``model_catalog_failing_writes``: the input of ModelCatalogWritesFailing. Every write kind is a
    series at 0 before anything failed; a write that failed twice in a row counts, once is a blip."""
    telemetry = Telemetry()
    try:
        telemetry.bind_state()
        text = telemetry.metrics_text().decode()
        assert sample(text, "model_catalog_failing_writes", kind="WriteCatalog") == 0.0
        assert sample(text, "model_catalog_failing_writes", kind="EmitKubernetesEvent") == 0.0
        assert sample(text, "model_catalog_failing_writes", kind="ProbeRuntime") is None  # a read
        state = initial_state(CatalogConfig())
        patch = PatchAgentTemplate("ai", "t", "1", Json.of({}))
        failing = state.control.failing.set(
            patch.key, WriteFailure(patch.id, "PatchAgentTemplate", Reason.FORBIDDEN, "403", 1.0, 2)
        ).set(
            "catalog/ai/ai-model-catalog", WriteFailure("x", "WriteCatalog", Reason.FORBIDDEN, "403", 1.0, 1)
        )
        telemetry.state_changed(attrs.evolve(state, control=attrs.evolve(state.control, failing=failing)))
        text = telemetry.metrics_text().decode()
    finally:
        telemetry.shutdown()
    assert sample(text, "model_catalog_failing_writes", kind="PatchAgentTemplate") == 1.0
    assert sample(text, "model_catalog_failing_writes", kind="WriteCatalog") == 0.0


def test_the_service_exports_what_its_kube_adapters_count() -> None:
    settings = load({"LITELLM_MASTER_KEY": "sk-x", "CATALOG_HTTP_PORT": "0"})
    assert isinstance(settings, ServiceSettings)
    service = Service(settings, api_client=object())
    try:
        service.catalog.kube.stats.inc(RELISTS_TOTAL, source="external-models")
        text = service.telemetry.metrics_text().decode()
    finally:
        service.telemetry.shutdown()
    assert sample(text, "model_catalog_kube_watch_relists_total", source="external-models") == 1.0


def test_watches_are_long_and_the_lease_watch_is_their_liveness_signal() -> None:
    """Issue 35: a 5 s timeout per watch cost the API server ~160 requests a minute at idle. Watches now
    last 5-10 minutes; what notices a half-open connection within 10 s is one watch of the Lease (its
    renewals under leader election, else a 5 s probe watch of it) and TCP keepalive."""
    elected = load({"LITELLM_MASTER_KEY": "sk-x"})
    single = load({"LITELLM_MASTER_KEY": "sk-x", "CATALOG_LEADER_ELECTION": "false", "NAMESPACE": "n1"})
    tuned = load({"LITELLM_MASTER_KEY": "sk-x", "CATALOG_WATCH_TIMEOUT_SECONDS": "30"})
    assert isinstance(elected, ServiceSettings) and isinstance(single, ServiceSettings)
    assert isinstance(tuned, ServiceSettings)
    services = [Service(s, api_client=object()) for s in (elected, single, tuned)]
    try:
        first, second, third = (s.catalog.kube.settings for s in services)
        assert first.watch_timeout_seconds == 300 and first.watch_timeout_jitter == 1.0
        assert third.watch_timeout_seconds == 30
        # the leader renews every 4 s (15 updates a minute): a renewal 3 s late is the verdict, so a
        # connection that dies just after a renewal is given up 7 s later, within the 10 s recovery bound
        assert first.liveness == Liveness("ai", "ai-model-catalog-controller", renewed_every=4.0)
        assert first.liveness.stale_after == 7.0
        # nobody renews the Lease: a probe watch of it that must end after 5 s (+ 1.5 s grace)
        assert second.liveness == Liveness("n1", "ai-model-catalog-controller", renewed_every=None)
        assert second.liveness.probe_seconds + second.timeout_grace_seconds <= 8
        # a vanished peer ends a connection within 11 s of its last byte
        assert first.keepalive_idle_seconds + first.keepalive_interval_seconds * first.keepalive_probes <= 11
        assert services[0].catalog.kube.liveness is not None
    finally:
        for service in services:
            service.telemetry.shutdown()
    bad = load({"LITELLM_MASTER_KEY": "sk-x", "CATALOG_WATCH_TIMEOUT_SECONDS": "1"})
    assert isinstance(bad, ConfigError) and bad.variable == "CATALOG_WATCH_TIMEOUT_SECONDS"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CATALOG_LITELLM_RESYNC_SECONDS", "1" * 5000),  # float() reads it as inf
        ("CATALOG_SHUTDOWN_GRACE_SECONDS", "nan"),
        ("CATALOG_HTTP_PORT", "1" * 5000),  # int() refuses it with an exception of its own
        ("CATALOG_LITELLM_BURST_ROWS", "1" * 5000),
        ("CATALOG_EVENT_LOG_RING", "1" * 5000),
    ],
)
def test_a_setting_of_5000_digits_or_not_finite_is_refused_briefly(variable: str, value: str) -> None:
    error = load({"LITELLM_MASTER_KEY": "sk-x", variable: value})
    assert isinstance(error, ConfigError) and error.variable == variable
    assert len(str(error)) < 300


def test_a_stale_watch_makes_readyz_say_which_and_since_when_and_is_a_metric() -> None:
    """Issue 18: while a watch is presumed dead or reconnecting, /readyz said all was well."""
    import time

    import anyio

    from catalog_core.events import LiteLLMRowsObserved, SourceKind, SourceListed
    from catalog_core.fold import step

    settings = load({"LITELLM_MASTER_KEY": "sk-x", "CATALOG_HTTP_PORT": "0"})
    assert isinstance(settings, ServiceSettings)
    service = Service(settings, api_client=object())
    try:
        state = service.loop.state
        for kind in SourceKind:  # every source listed once and LiteLLM observed: ready
            state = step(state, SourceListed(kind, (), ())).state
        service.loop.state = step(state, LiteLLMRowsObserved(())).state
        assert anyio.run(service._readyz, None)[0] == 200  # type: ignore[arg-type]
        service.catalog.kube.stats.mark_stale("kube/pods", time.time() - 4.0)
        status, _, body = anyio.run(service._readyz, None)  # type: ignore[arg-type]
        text = service.telemetry.metrics_text().decode()
        service.catalog.kube.stats.mark_fresh("kube/pods")
        after = service.telemetry.metrics_text().decode()
        assert anyio.run(service._readyz, None)[0] == 200  # type: ignore[arg-type]
    finally:
        service.telemetry.shutdown()
    assert status == 503
    assert b"stale (reconnecting): kube/pods since" in body
    stale = sample(text, "model_catalog_source_stale_seconds", watch="kube/pods")
    assert stale is not None and stale >= 4.0
    assert sample(after, "model_catalog_source_stale_seconds", watch="kube/pods") == 0.0  # streams again


def test_run_without_a_usable_cluster_configuration_says_so_in_one_line(tmp_path: pathlib.Path) -> None:
    import os
    import subprocess
    import sys

    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
    }
    env.update(LITELLM_MASTER_KEY="sk-never-printed", KUBECONFIG=str(tmp_path / "missing"))
    for kubeconfig in (str(tmp_path / "missing"), ""):
        env["KUBECONFIG"] = kubeconfig
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", "run", "--leader-election", "false"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert "model-catalog: cannot load the cluster configuration: " in done.stderr
        assert "Traceback" not in done.stderr and "sk-never-printed" not in done.stderr + done.stdout


def test_metrics_count_the_tasks_running_in_the_event_loop() -> None:
    """The soak (``just bench --only SOAK``) watches this gauge for tasks left behind."""
    import anyio

    settings = load({"LITELLM_MASTER_KEY": "sk-x", "CATALOG_HTTP_PORT": "0"})
    assert isinstance(settings, ServiceSettings)
    service = Service(settings, api_client=object())

    async def counted(extra: int) -> float | None:
        async with anyio.create_task_group() as tg:
            for _ in range(extra):
                tg.start_soon(anyio.sleep, 0.2)
            await anyio.sleep(0)
            text = service.telemetry.metrics_text().decode()
            tg.cancel_scope.cancel()
        return sample(text, "model_catalog_tasks")

    try:
        alone, with_three = anyio.run(counted, 0), anyio.run(counted, 3)
    finally:
        service.telemetry.shutdown()
    assert alone is not None and alone >= 1.0
    assert with_three == alone + 3
