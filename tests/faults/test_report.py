"""The README's fault tables are generated from the committed results (``just faults`` writes both)."""

from __future__ import annotations

import json
import os

import pytest

from tests.faults import report, results
from tests.faults.results import Outcome


def test_the_readme_table_is_generated_from_the_committed_results() -> None:
    if os.environ.get(results.RESULTS_ENV):
        pytest.skip("this run writes new results; `just faults` regenerates the table after it")
    assert report.RESULTS.exists(), "run `just faults` to produce tests/faults/results/faults.json"
    assert report.main(["--check"]) == 0, (
        "README.md's fault table is stale: run `python -m tests.faults.report`"
    )


def test_the_renderer_reports_what_broke() -> None:
    kept = Outcome("a", "fault", "LiteLLM | stopped", "full", user_sees="catalog kept", bound_s=30.0)
    kept.check("converged", True)
    kept.recovery_s = 1.25
    broken = Outcome("b", "fault", "catalog too big", "full", bound_s=30.0)
    broken.check("converged", "not converged within 30s")
    bad = Outcome("input:x", "bad-input", "invalid JSON", "full", measured={"expected": "InvalidJSON"})
    bad.measured["observed"] = "error/InvalidJSON"
    bad.check("record", True)
    doc = {
        "profile": "full",
        "generated": "now",
        "machine": "test",
        "suite_seconds": 60.0,
        "results": [json.loads(json.dumps(o.as_json())) for o in (kept, broken, bad)],
    }
    table = report.render(doc)
    assert "| LiteLLM \\| stopped | catalog kept | 1.2 s | 30.0 s | kept |" in table
    assert "**not survived**: converged" in table
    assert "| invalid JSON | InvalidJSON | error/InvalidJSON | kept |" in table
    readme = "# x\n\n" + report.BEGIN + "\nold\n" + report.END + "\ntail\n"
    assert report.update(readme, table) == "# x\n\n" + table + "\ntail\n"
