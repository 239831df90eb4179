"""P1's account of its tail: the LiteLLM re-reads of a phase, and which slowest changes waited on one."""

from __future__ import annotations

import math

from bench import report
from bench.scenarios import _reads_during


def test_a_change_whose_span_overlaps_a_parse_or_a_fold_waited_on_a_read() -> None:
    busy = {
        "P": [(5.0, 5.08), (40.0, 40.07), (200.0, 200.09)],  # the last one after the phase
        "O": [(5.1, 5.2), (40.1, 40.17), (200.1, 200.2)],
    }
    # 200 changes over the phase: two slow ones, one of them while the first read's rows were folded
    spans = [(float(i) / 4, float(i) / 4 + 0.015) for i in range(200)]
    spans[20] = (5.15, 5.3)  # inside the first fold
    spans[150] = (37.5, 37.62)  # slow, but no read then
    reads = _reads_during(busy, spans, start=0.0, end=50.0)
    assert reads["count"] == 2
    assert reads["every_s"] == 25.0
    assert reads["slowest"] == 2  # the slowest 1%
    assert reads["slowest_waited_on_a_read"] == 1
    assert math.isclose(reads["parse_s"]["max"], 0.08)
    assert math.isclose(reads["fold_s"]["max"], 0.1)


def test_the_report_says_how_many_of_the_slowest_waited() -> None:
    busy = {"P": [(1.0, 1.05)], "O": [(1.06, 1.1)]}
    note = report._reads_note(_reads_during(busy, [(1.07, 1.2), (3.0, 3.01)], start=0.0, end=10.0))
    assert "LiteLLM re-reads while driven: 1 (one every 10.0 s)" in note
    assert "parsing the answer p50 50.0 ms" in note
    assert "of the 1 slowest changes, 1 waited on one" in note


def test_no_read_in_the_phase_adds_nothing() -> None:
    assert report._reads_note(_reads_during({"P": [], "O": []}, [(0.0, 0.01)], start=0.0, end=1.0)) == ""
    assert report._reads_note(None) == ""
