"""The metric names the alert rules and the Grafana dashboard query (deploy/monitoring/)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
RULES = MONITORING / "prometheusrule.yaml"
DASHBOARD = MONITORING / "dashboard.json"
_METRIC = re.compile(r"\bmodel_catalog_[a-z0-9_]*[a-z0-9]\b")


def rule_groups() -> dict[str, Any]:
    """The PrometheusRule's spec: a plain Prometheus rules file (what promtool reads)."""
    (doc,) = [d for d in yaml.safe_load_all(RULES.read_text()) if d]
    return dict(doc["spec"])


def rules() -> list[dict[str, Any]]:
    return [rule for group in rule_groups()["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def _targets(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield from panel.get("targets", [])
        yield from _targets(panel.get("panels", []))


def dashboard_exprs() -> list[str]:
    return [t["expr"] for t in _targets(dashboard()["panels"]) if "expr" in t]


def metric_names_used() -> set[str]:
    """Every ``model_catalog_*`` series name in a rule expression or a dashboard query."""
    exprs = [rule["expr"] for rule in rules()] + dashboard_exprs()
    return {name for expr in exprs for name in _METRIC.findall(expr)}
