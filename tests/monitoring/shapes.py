"""The series a live ``/metrics`` has, as Prometheus stores them, against the alert rules and their tests.

The OpenTelemetry exporter used to create a counter's series at its first increment: ``increase()`` over a
series born at 1 stays 0, so an alert on the first failure never fired, while the promtool tests, whose
series all started at 0, said it did. These checks tie the tests to what a scrape really holds:

- every series an alert reads exists from the start, a counter at 0 (``inputs_at_start``);
- every input series of ``rules.test.yaml`` is a live series as Prometheus stores it
  (``input_series_not_live``): the exporter's own labels (``otel_scope_name``), the PodMonitor's target
  labels ``namespace`` and ``pod`` (its others, ``job``, ``instance``, ``container`` and ``endpoint``, are
  aggregated away by every rule), a label of ours that a target label shadows renamed ``exported_<name>``
  (``honorLabels`` is off), empty labels dropped; and a counter starts at 0, as after a start or restart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs
import yaml

from tests.monitoring.names import rules

TESTS = Path(__file__).with_name("rules.test.yaml")
TARGET_LABELS = ("namespace", "pod")

_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_SELECTOR = re.compile(r"\b(model_catalog_\w+)(\{[^}]*\})?")
_MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')


@attrs.frozen
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


@attrs.frozen
class Exposition:
    samples: tuple[Sample, ...]
    types: Mapping[str, str]  # metric family -> counter, gauge, histogram, ...
    helps: Mapping[str, str]

    def family(self, name: str) -> str:
        """The family a sample belongs to (``x_total`` of a counter ``x``, ``x_bucket`` of a histogram)."""
        for suffix in ("_total", "_bucket", "_count", "_sum", "_created"):
            if name.endswith(suffix) and name.removesuffix(suffix) in self.types:
                return name.removesuffix(suffix)
        return name

    def type_of(self, name: str) -> str:
        return self.types.get(self.family(name), "untyped")


def parse(text: str) -> Exposition:
    samples: list[Sample] = []
    types: dict[str, str] = {}
    helps: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
        elif line.startswith("# HELP "):
            _, _, name, *rest = line.split(" ", 3)
            helps[name] = rest[0] if rest else ""
        elif line and not line.startswith("#"):
            match = _SAMPLE.match(line)
            assert match is not None, f"not a sample line: {line!r}"
            labels = dict(_LABEL.findall(match.group(2) or ""))
            samples.append(Sample(match.group(1), labels, float(match.group(3))))
    return Exposition(tuple(samples), types, helps)


def stored(labels: Mapping[str, str]) -> dict[str, str]:
    """A live sample's labels as Prometheus stores them, without the target labels: shadowed ones renamed
    ``exported_<name>``, empty ones dropped."""
    out: dict[str, str] = {}
    for name, value in labels.items():
        if value == "":
            continue
        out[f"exported_{name}" if name in TARGET_LABELS else name] = value
    return out


@attrs.frozen
class Selector:
    alert: str
    metric: str
    equal: Mapping[str, str]  # the selector's ``=`` matchers (the others only narrow what exists)


def selectors() -> list[Selector]:
    out = []
    for rule in rules():
        for metric, braces in _SELECTOR.findall(rule["expr"]):
            equal = {k: v for k, op, v in _MATCHER.findall(braces or "") if op == "="}
            out.append(Selector(rule.get("alert", rule.get("record", "")), metric, equal))
    return out


# Counters that count normal work as well as trouble, and their value once a replica is ready: each
# source's first list is a relist too (the alert is on their rate).
ONCE_READY = {"model_catalog_kube_watch_relists_total": 1.0}


def inputs_at_start(text: str, *, ready: bool = False) -> list[str]:
    """What is wrong with ``text`` (a scrape taken at start, before anything failed) as the alerts'
    input: each selector of each rule must match a series, and every counter it matches must be 0 (with
    ``ready``, a scrape of a replica that has listed its sources: ``ONCE_READY`` at most)."""
    expo = parse(text)
    problems = []
    for sel in selectors():
        matched = [
            s
            for s in expo.samples
            if s.name == sel.metric and all(s.labels.get(k) == v for k, v in sel.equal.items())
        ]
        if not matched:
            problems.append(f"{sel.alert}: no series {sel.metric}{dict(sel.equal)} at start")
            continue
        if expo.type_of(sel.metric) == "counter":
            allowed = ONCE_READY.get(sel.metric, 0.0) if ready else 0.0
            born = [s for s in matched if not 0 <= s.value <= allowed]
            if born:
                problems.append(f"{sel.alert}: counter {sel.metric} is not 0 at start: {born[:3]}")
    return problems


@attrs.frozen
class InputSeries:
    case: str
    name: str
    labels: Mapping[str, str]
    first: str  # the first value of its ``values``


def input_series(tests: str | None = None) -> list[InputSeries]:
    """The input series of ``rules.test.yaml`` (or of the text ``tests``)."""
    out = []
    for case in yaml.safe_load(TESTS.read_text() if tests is None else tests)["tests"]:
        for series in case.get("input_series", []):
            match = _SAMPLE.match(f"{series['series']} 0")
            assert match is not None, series
            labels = dict(_LABEL.findall(match.group(2) or ""))
            first = str(series["values"]).split()[0].split("+")[0].split("-")[0].split("x")[0]
            out.append(InputSeries(case["name"], match.group(1), labels, first))
    return out


def input_series_not_live(text: str, *, values: bool = True, tests: str | None = None) -> list[str]:
    """The input series of ``rules.test.yaml`` that no live series of ``text`` stores as: same name, same
    label names (and, with ``values``, the same values), the target labels ``namespace`` and ``pod``
    besides; and counters that do not start at 0."""
    expo = parse(text)
    live: dict[str, list[dict[str, str]]] = {}
    for sample in expo.samples:
        live.setdefault(sample.name, []).append(stored(sample.labels))
    problems = []
    for series in input_series(tests):
        where = f"{series.case!r}: {series.name}{dict(series.labels)}"
        if set(TARGET_LABELS) - set(series.labels):
            problems.append(f"{where}: lacks a target label of {TARGET_LABELS}")
        ours = {k: v for k, v in series.labels.items() if k not in TARGET_LABELS}
        candidates = live.get(series.name, [])
        found = ours in candidates if values else any(set(ours) == set(c) for c in candidates)
        if not found:
            shapes = sorted({tuple(sorted(c)) for c in candidates})
            problems.append(f"{where}: no live series stores as this (live label names: {shapes})")
        if expo.type_of(series.name) == "counter" and series.first not in ("0", "_"):
            problems.append(f"{where}: a counter starts at 0, not {series.first}")
    return problems


def metric_names(samples: Iterable[Sample]) -> set[str]:
    return {s.name for s in samples}


def help_problems(text: str) -> list[str]:
    """Every metric family has a HELP that says something (not empty, not its own name)."""
    expo = parse(text)
    problems = []
    for family in sorted({expo.family(s.name) for s in expo.samples}):
        text_ = expo.helps.get(family, "").strip()
        if not text_ or text_ in (family, family.removeprefix("model_catalog_")):
            problems.append(f"{family}: HELP is {text_!r}")
    return problems
