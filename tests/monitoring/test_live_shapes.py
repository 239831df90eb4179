"""The alert rules and their promtool tests against the series a live ``/metrics`` has (issue 33, item 3).

A replica's ``/metrics`` is scraped over HTTP right after it starts (the service of ``model-catalog run``,
its state as the loop hands it over after its first step): every series an alert reads is there, each
counter at 0, and every input series of ``rules.test.yaml`` is one of them as Prometheus stores it. The
same checks run on a controller process against the real peers in ``tests/e2e/test_metrics_at_start.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from app.service import Service
from app.settings import ServiceSettings, load
from catalog_core.events import SourceKind, SourceUnavailable, Unavailability
from catalog_core.fold import step
from tests.monitoring import shapes


def _scrape(service: Service) -> str:
    async def scrape() -> str:
        async with anyio.create_task_group() as tg:
            port = await tg.start(service.http.run)
            async with httpx.AsyncClient() as client:
                answer = await client.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
            tg.cancel_scope.cancel()
        assert answer.status_code == 200
        return answer.text

    return anyio.run(scrape)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    env = {
        "LITELLM_MASTER_KEY": "sk-x",
        "CATALOG_HTTP_HOST": "127.0.0.1",
        "CATALOG_HTTP_PORT": "0",
        "CATALOG_EVENT_LOG_PATH": str(tmp_path / "events.jsonl"),
    }
    settings = load(env)
    assert isinstance(settings, ServiceSettings)
    service = Service(settings, api_client=object())
    service.telemetry.state_changed(service.loop.state)  # what the loop does after its first step
    try:
        yield service
    finally:
        service.telemetry.shutdown()


def test_every_alert_input_exists_at_start_and_every_counter_is_zero(service: Service) -> None:
    """Issue 33 (3): counters were created at their first increment, so ``increase()`` never saw it."""
    text = _scrape(service)
    assert shapes.inputs_at_start(text) == []
    expo = shapes.parse(text)
    # the counters the failure alerts read, for every label set they can take
    terminal = {
        s.labels["kind"]
        for s in expo.samples
        if s.name == "model_catalog_commands_total" and s.labels["outcome"] == "terminal"
    }
    assert {"CreateLiteLLMModel", "WriteCatalog", "PatchAgentTemplate", "RollWorkload"} <= terminal
    refused = {
        (s.labels.get("kind") or s.labels["source"], s.labels["verb"])
        for s in expo.samples
        if s.name == "model_catalog_kube_forbidden_total"
    }
    assert {("PatchAgentTemplate", "patch"), ("WriteCatalog", "update"), ("model-activations", "list")} <= (
        refused
    )
    relists = "model_catalog_kube_watch_relists_total"
    relisted = {s.labels["source"] for s in expo.samples if s.name == relists}
    assert relisted == {kind.value for kind in SourceKind}


def test_every_input_series_of_the_rule_tests_is_a_live_series(service: Service) -> None:
    text = _scrape(service)
    assert shapes.input_series_not_live(text) == []


def test_the_shape_check_finds_a_series_that_no_scrape_has(service: Service) -> None:
    """The check can fail: a label a live series does not have, or a counter that starts above 0."""
    text = _scrape(service)
    tests = shapes.TESTS.read_text()
    assert 'source="pods",otel_scope_name' in tests
    assert "values: '0+6x40'" in tests
    pods = 'source="pods",otel_scope_name'
    wrong = tests.replace(pods, 'source="pods",key="evict/ai/x",otel_scope_name', 1)
    wrong = wrong.replace("values: '0+6x40'", "values: '1+6x40'", 1)
    problems = shapes.input_series_not_live(text, tests=wrong)
    assert any("no live series stores as this" in p and "evict/ai/x" in p for p in problems)
    assert any("a counter starts at 0, not 1" in p for p in problems)


def test_a_broken_models_json_and_a_missing_kubeai_crd_are_counted_as_rejected(service: Service) -> None:
    """``ModelCatalogItemsRejected`` ignored an unreadable models.json (its record is the document's own,
    not an item's) and nothing reported a local activation that needs a KubeAI that is not installed."""
    from tests.core import builders as b
    from tests.core.harness import Cluster

    cluster = Cluster()
    cluster.start(
        b.external_configmap([{"name": "gpt", "model": "openai/gpt-4o", "apiKey": "sk-1"}]),
        b.activation("llama", kind="local", engine="vllm"),
    )
    cluster.apply(b.external_configmap(None, raw_text="{not json"))
    state = step(
        cluster.state, SourceUnavailable(SourceKind.KUBEAI_MODELS, Unavailability.NOT_INSTALLED, "absent")
    ).state
    cluster.state = state
    cluster.run()
    service.telemetry.state_changed(cluster.state)
    expo = shapes.parse(_scrape(service))
    rejected = {s.labels["reason"]: s.value for s in expo.samples if s.name == "model_catalog_rejected_items"}
    assert rejected["InvalidJSON"] == 1.0
    assert rejected["KubeAINotInstalled"] == 1.0
    assert rejected["SecretNotAllowed"] == 0.0  # every reason is there, zeros included
    assert cluster.model_ids() == ["gpt"]  # the last good models stay published


PROCESS = (
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
)


def test_process_metrics_build_info_a_dropped_records_counter_and_a_real_help_each(service: Service) -> None:
    """Issue 33 (7): no process_* metrics, no build info, a running count exposed as a gauge, and a
    counter whose HELP was its own name."""
    expo = shapes.parse(_scrape(service))
    names = {s.name for s in expo.samples}
    assert set(PROCESS) <= names
    (build,) = [s for s in expo.samples if s.name == "model_catalog_build_info"]
    assert build.value == 1.0 and build.labels["version"] and build.labels["python_version"]
    assert "model_catalog_event_log_dropped_records" not in names  # the old gauge
    assert expo.type_of("model_catalog_event_log_dropped_records_total") == "counter"
    assert [s.value for s in expo.samples if s.name == "model_catalog_event_log_dropped_records_total"] == [0]
    assert shapes.help_problems(_scrape(service)) == []
    assert "model_catalog_kube_watch_requests_total" in expo.helps
