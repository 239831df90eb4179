"""deploy/monitoring/prometheusrule.yaml, checked and unit-tested by Prometheus' own promtool (issue 16).

The PrometheusRule's ``spec`` is a plain rules file; it is written out and given to ``promtool check
rules`` and to ``promtool test rules`` with ``rules.test.yaml``. Each alert must have a case where it
fires and one where it does not.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

from tests.monitoring.names import rule_groups, rules

TESTS = Path(__file__).with_name("rules.test.yaml")


def _promtool(promtool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def _written(tmp_path: Path) -> Path:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_groups(), sort_keys=False))
    (tmp_path / "rules.test.yaml").write_text(TESTS.read_text())
    return tmp_path


def test_promtool_check_rules_passes(promtool: Path, tmp_path: Path) -> None:
    done = _promtool(promtool, "check", "rules", "rules.yaml", cwd=_written(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules())} rules found" in done.stdout


def test_promtool_test_rules_passes(promtool: Path, tmp_path: Path) -> None:
    done = _promtool(promtool, "test", "rules", "rules.test.yaml", cwd=_written(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_promtool_fails_a_wrong_expectation(promtool: Path, tmp_path: Path) -> None:
    """The unit tests can fail: one expected label changed is reported."""
    work = _written(tmp_path)
    test = work / "rules.test.yaml"
    text = test.read_text()
    assert "reason: SecretNotAllowed}" in text
    test.write_text(text.replace("reason: SecretNotAllowed}", "reason: InvalidJSON}", 1))
    done = _promtool(promtool, "test", "rules", "rules.test.yaml", cwd=work)
    assert done.returncode != 0 and "FAILED" in done.stdout + done.stderr


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    cases = yaml.safe_load(TESTS.read_text())["tests"]
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in cases:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    alerts = {rule["alert"] for rule in rules() if "alert" in rule}
    assert len(alerts) == 8
    assert alerts <= firing, f"never seen firing: {sorted(alerts - firing)}"
    assert alerts <= quiet, f"never seen quiet: {sorted(alerts - quiet)}"


def test_every_alert_links_its_runbook_section() -> None:
    runbook = (Path(__file__).resolve().parents[2] / "docs" / "runbook.md").read_text()
    for rule in rules():
        url = rule["annotations"]["runbook_url"]
        anchor = url.rpartition("#")[2]
        assert anchor == rule["alert"].lower()
        assert f"\n## {rule['alert']}\n" in runbook, rule["alert"]
