"""No attacker-chosen string in a metric label, and bounded counter tables (issue 32, item 17).

Whoever may create pods with a consumer's labels chooses their names, and an Event's key carries a
hash of what it says: labels made of command keys gave one series per pod (5,000 failing evictions made
2,001 series, OpenTelemetry's cap plus its overflow) and one entry per pod in ``KubeStats``, forever.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from adapters.kube.api import OUTAGE_STATUSES, KubeApi, KubeError
from adapters.kube.settings import (
    ERRORS_TOTAL,
    FORBIDDEN_TOTAL,
    OVERFLOW_LABELS,
    KubeStats,
    secret_watch_name,
)
from adapters.kube.watch import declare_watch_series
from adapters.kube.writers import Outcomes, PodEvictor
from adapters.telemetry import Telemetry
from catalog_core.commands import EmitKubernetesEvent, EvictPod, ObjectRef
from catalog_core.events import Outcome, SourceKind
from tests.fixtures.kube_peer import create_namespace, new_api_client

SERIES = re.compile(r"^(model_catalog_\w+)\{([^}]*)\}", re.MULTILINE)


def series_of(text: str, name: str) -> list[str]:
    return [labels for metric, labels in SERIES.findall(text) if metric == name]


def test_five_thousand_failing_evictions_add_no_series_and_no_table_entries() -> None:
    stats = KubeStats()
    telemetry = Telemetry()
    try:
        telemetry.bind_kube(stats)
        outcomes = Outcomes(stats)
        before = len(stats.counters)
        pods = [f"attacker-{i:04d}-{uuid.uuid4().hex[:6]}" for i in range(5000)]
        for pod in pods:
            command = EvictPod("ai", pod, f"uid-{pod}", "h1")
            done = outcomes.failed(command, KubeError(500, "InternalError"), "create", f"pods/{pod} in ai")
            assert done.outcome is Outcome.RETRY
        for i in range(500):  # Events are keyed by a hash of their content: as many keys as messages
            ref = ObjectRef("v1", "ConfigMap", "ai", "ai-external-models", "u1")
            event = EmitKubernetesEvent(ref, "InvalidJSON", f"models.json: problem {i}")
            outcomes.failed(event, KubeError(403, "Forbidden"), "create", f"events/{event.id} in ai")
        text = telemetry.metrics_text().decode()
    finally:
        telemetry.shutdown()
    errors = series_of(text, "model_catalog_kube_errors_total")
    failing = [s for s in errors if 'status="500"' in s]
    assert len(failing) == 1 and 'kind="EvictPod"' in failing[0]
    declared = tuple(f'status="{status}"' for status in OUTAGE_STATUSES)
    assert all(any(d in s for d in declared) for s in errors if s not in failing)
    assert stats.total(ERRORS_TOTAL, kind="EvictPod") == 5000
    forbidden = [s for s in series_of(text, "model_catalog_kube_forbidden_total") if 'verb="create"' in s]
    hit = [s for s in forbidden if 'kind="EmitKubernetesEvent"' in s]
    assert len(hit) == 1 and hit[0].count('resource="events"') == 1
    assert stats.total(FORBIDDEN_TOTAL, kind="EmitKubernetesEvent") == 500
    assert len(stats.counters) == before + 1  # the one errors series; the 403 series was declared
    assert "attacker-" not in text


def test_the_counter_table_is_bounded_whatever_the_labels() -> None:
    """The backstop: a label value nobody foresaw cannot grow the table or the series without bound."""
    stats = KubeStats(max_series=50)
    heard: list[tuple[str, dict[str, str], int]] = []
    stats.subscribe(lambda metric, labels, amount: heard.append((metric, dict(labels), amount)))
    for i in range(1000):
        stats.inc(ERRORS_TOTAL, source="pods", status=str(i))
    assert len(stats.counters) == 51  # 50, and the overflow series
    assert stats.total(ERRORS_TOTAL) == 1000
    assert stats.counters[(ERRORS_TOTAL, tuple(OVERFLOW_LABELS.items()))] == 950
    assert {tuple(labels.items()) for _, labels, _ in heard[50:]} == {tuple(OVERFLOW_LABELS.items())}


def test_stale_watches_of_secrets_read_by_name_are_one_label() -> None:
    stats = KubeStats()
    telemetry = Telemetry()
    try:
        telemetry.bind_kube(stats)
        for i in range(40):
            stats.mark_stale(secret_watch_name(f"ai-model-provider-chosen-{i}"), 1000.0 + i)
        stats.mark_stale("kube/pods", 2000.0)
        text = telemetry.metrics_text().decode()
    finally:
        telemetry.shutdown()
    watches = sorted(re.findall(r'watch="([^"]*)"', text))
    assert watches == ["kube/pods", "kube/secrets/by-name"]
    assert "chosen" not in text


@pytest.mark.kube
@pytest.mark.anyio
async def test_forbidden_evictions_on_the_real_api_server_name_no_pod(
    kube_peer: Any, kube_client: Any
) -> None:
    """The real writer, refused by the real API server (a user without the eviction right)."""
    ns = await create_namespace(kube_client)
    as_nobody = await new_api_client(kube_peer, impersonate=f"nobody-{uuid.uuid4().hex[:6]}")
    stats = KubeStats()
    telemetry = Telemetry()
    try:
        telemetry.bind_kube(stats)
        evictor = PodEvictor(KubeApi(as_nobody), Outcomes(stats))
        before = len(stats.counters)  # every series a 403 can move exists already
        for i in range(20):
            (done,) = await evictor.execute(EvictPod(ns, f"chosen-by-attacker-{i}", "", "h1"))
            assert done.reason == "Forbidden"
        text = telemetry.metrics_text().decode()
    finally:
        telemetry.shutdown()
        await as_nobody.close()
    assert stats.total(FORBIDDEN_TOTAL, kind="EvictPod", verb="create", resource="pods") == 20
    assert len(stats.counters) == before
    assert "chosen-by-attacker" not in text


def test_an_outage_of_the_api_server_adds_no_error_series() -> None:
    """What a down or restarting API server answers (no HTTP answer, then 503) is declared for every source
    and writer at 0 from the start: the first outage adds no series (the soak's metric series stay flat)."""
    stats = KubeStats()
    declare_watch_series(stats, SourceKind.PODS, "pods", "ai")
    Outcomes(stats)
    before = set(stats.counters)
    for status in OUTAGE_STATUSES:
        stats.inc(ERRORS_TOTAL, source=SourceKind.PODS.value, status=str(status))
        outcomes_failed = Outcomes(stats).failed(
            EvictPod("ai", "p", "uid-p", "h1"), KubeError(status, "Unavailable"), "create", "pods/p in ai"
        )
        assert outcomes_failed.outcome is Outcome.RETRY
    assert set(stats.counters) == before
