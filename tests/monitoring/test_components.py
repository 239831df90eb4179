"""The optional components (issue 16) as kustomize builds them: deploy/monitoring (PodMonitor,
PrometheusRule, the Grafana dashboard) and deploy/status-reader (the read-only Role of `status`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.monitoring.names import DASHBOARD, dashboard, dashboard_exprs
from tests.unavailable import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
OPERATED = REPO / "examples" / "overlays" / "operated"


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    if shutil.which("kubectl") is None:
        skip_or_fail("kubectl (its built-in kustomize) is not installed")
    out = subprocess.run(
        ["kubectl", "kustomize", str(OPERATED)], capture_output=True, text=True, timeout=60, check=True
    )
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def test_the_status_reader_role_grants_get_on_two_named_objects_only(built: list[dict[str, Any]]) -> None:
    role = one(built, "Role", "ai-model-catalog-status-reader")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["ai-model-catalog"],
            "verbs": ["get"],
        },
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["ai-model-catalog-controller"],
            "verbs": ["get"],
        },
    ]
    binding = one(built, "RoleBinding", "ai-model-catalog-status-reader")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "ai-model-catalog-status", "namespace": "ai"}
    ]


def test_the_pod_monitor_scrapes_the_controller_pods_port(built: list[dict[str, Any]]) -> None:
    monitor = one(built, "PodMonitor", "ai-model-catalog-controller")
    deployment = one(built, "Deployment", "ai-model-catalog-controller")
    template = deployment["spec"]["template"]
    labels = template["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ports = {p["name"]: p["containerPort"] for p in template["spec"]["containers"][0]["ports"]}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] in ports and endpoint["path"] == "/metrics"


def test_the_dashboard_ships_as_a_grafana_sidecar_configmap(built: list[dict[str, Any]]) -> None:
    configmap = one(built, "ConfigMap", "ai-model-catalog-dashboard")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["model-catalog-dashboard.json"]) == json.loads(DASHBOARD.read_text())
    assert one(built, "PrometheusRule", "ai-model-catalog")["spec"]["groups"]


def test_the_dashboard_shows_what_the_issue_asks_for() -> None:
    doc = dashboard()
    titles = {p["title"] for p in doc["panels"]}
    assert {
        "Event rate by source",
        "Command outcomes",
        "LiteLLM write latency",
        "Event to request latency",
        "Items by state",
        "Leader",
        "Catalog size against the 1 MiB ConfigMap limit",
    } <= titles
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    for panel in doc["panels"]:
        assert panel["targets"], panel["title"]
        assert all('namespace="$namespace"' in t["expr"] for t in panel["targets"]), panel["title"]
    assert any("histogram_quantile(0.95" in e for e in dashboard_exprs())


def test_each_alert_links_the_runbook_at_the_overlays_setting(built: list[dict[str, Any]]) -> None:
    """Issue 33 (7): the runbook URL pointed to a repository that does not exist, out of an offline
    appliance's reach; it is the overlay's setting now."""
    (settings,) = yaml.safe_load_all((OPERATED / "monitoring-settings.yaml").read_text())
    base = settings["data"]["runbookURL"]
    assert not any(d["metadata"]["name"] == "ai-model-catalog-monitoring" for d in built)  # local-config
    rule = one(built, "PrometheusRule", "ai-model-catalog")
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert alerts
    for alert in alerts:
        assert alert["annotations"]["runbook_url"] == f"{base}#{alert['alert'].lower()}"


def test_the_monitoring_component_without_its_setting_stops_and_names_it(tmp_path: Path) -> None:
    if shutil.which("kubectl") is None:
        skip_or_fail("kubectl (its built-in kustomize) is not installed")
    deploy = os.path.relpath(REPO / "deploy", tmp_path)  # kustomize takes no absolute base
    (tmp_path / "kustomization.yaml").write_text(
        f"resources: [{deploy}]\ncomponents: [{deploy}/monitoring]\n"
    )
    out = subprocess.run(
        ["kubectl", "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode != 0
    assert "ai-model-catalog-monitoring" in out.stderr and "runbookURL" in out.stderr
