"""The leader's health report (issue 33, item 4): the core's conditions and the watches that are not
streaming, each with the time this replica first saw it, encoded as the Lease annotation status reads."""

from __future__ import annotations

import orjson

from app.health import HealthReport
from catalog_core.events import LiteLLMUnreachable
from contracts.controller_status import ANNOTATION, MAX_MESSAGE, ReportedCondition, decode
from tests.core.harness import Cluster


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0  # 2027-01-15T08:00:00Z

    def __call__(self) -> float:
        return self.now


def test_conditions_keep_the_time_they_were_first_seen_until_they_clear() -> None:
    c = Cluster()
    c.start()
    stale: dict[str, float] = {}
    clock = Clock()
    report = HealthReport(lambda: c.state, stale, clock)
    assert report.annotations() == {ANNOTATION: '{"conditions":[]}'}  # healthy: an empty report, not none

    c.feed(LiteLLMUnreachable("unreachable", "connect: refused"))
    stale["kube/pods"] = clock.now - 30  # the watch's own since
    first = report.current()
    assert first == (
        ReportedCondition(
            "LiteLLMUnreachable", "litellm", "unreachable: connect: refused", "2027-01-15T08:00:00Z"
        ),
        ReportedCondition("WatchStale", "kube/pods", "not streaming; reconnecting", "2027-01-15T07:59:30Z"),
    )
    clock.now += 60
    assert report.current() == first  # still the same conditions: the same since

    c.rows_changed()  # LiteLLM answers again
    del stale["kube/pods"]
    assert report.current() == ()
    c.feed(LiteLLMUnreachable("unreachable", "connect: refused"))
    clock.now += 5
    (again,) = report.current()
    assert again.since == "2027-01-15T08:01:05Z"  # a new incident, a new since


def test_the_annotation_stays_small_whatever_a_detail_holds() -> None:
    c = Cluster()
    c.start()
    c.feed(LiteLLMUnreachable("error", "x" * 10_000))
    stale = {f"kube/watch-{i}": 1.0 for i in range(100)}
    text = HealthReport(lambda: c.state, stale, Clock()).annotations()[ANNOTATION]
    conditions = decode({ANNOTATION: text})
    assert conditions is not None and len(conditions) == 32
    assert len(conditions[0].message) == MAX_MESSAGE and conditions[0].message.endswith("...")
    assert len(text) < 32 * (MAX_MESSAGE + 150)
    assert orjson.loads(text)["conditions"][0]["type"] == "LiteLLMUnreachable"
