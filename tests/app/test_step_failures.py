"""Issue 12, item 3: an exception raised by one step must not stop the loop (or crash-loop the replicas).

The loop skips the event, keeps the state before it, logs the event's identity (never its content),
counts it, puts a Warning Event on the object, and keeps folding; the replay of its log skips alike.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.eventlog.recorder import Recorder, RecorderSettings
from adapters.telemetry import Telemetry
from app import replay, replayer
from app.logs import JsonFormatter
from app.loop import STEP_FAILED, CatalogLoop
from catalog_core import fold
from catalog_core.config import CatalogConfig
from catalog_core.events import Event, ObjectUpserted, SourceKind
from catalog_core.fold import Transition
from catalog_core.redact import redact_for_source
from catalog_core.simulate import SimulatedWorld
from catalog_core.sources.kubeai import KubeAIModel
from catalog_core.state import CatalogState
from tests.app.test_queue_and_loop import SimulatedExecutor, _settle, _start_loop
from tests.core import builders as b

pytestmark = pytest.mark.anyio

CANARY = "sk-canary-step-failure"
# The JSON text holds the six characters \ud800: json.loads makes it a lone surrogate.
SURROGATE_NAME = '"bad\\ud800"'


@pytest.fixture
def anyio_backend():
    return "asyncio"


class ListRecorder:
    def __init__(self) -> None:
        self.steps: list[tuple[Event, Transition]] = []

    def record(self, event: Event, transition: Transition) -> None:
        self.steps.append((event, transition))


def _upsert(source: SourceKind, obj: dict[str, Any]) -> ObjectUpserted:
    return ObjectUpserted(source, redact_for_source(source.value, obj).obj)


def _models_json(text: str) -> dict[str, Any]:
    return b.external_configmap(None, raw_text=text)


def _loop_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "model_catalog.loop" and r.levelno == logging.ERROR]


@pytest.fixture
def poison(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """KubeAI Model names whose parsing raises (with a secret-looking message that must not leak)."""
    names: set[str] = set()
    real = KubeAIModel.from_k8s  # what every KubeAI object is parsed with (watch events and listings)

    def from_k8s(obj: Any) -> Any:
        if obj["metadata"]["name"] in names:
            raise KeyError(CANARY)
        return real(obj)

    monkeypatch.setattr(KubeAIModel, "from_k8s", staticmethod(from_k8s))
    yield names


async def test_a_lone_surrogate_in_models_json_does_not_stop_the_loop(caplog: pytest.LogCaptureFixture):
    """Before issue 12 this raised UnicodeEncodeError out of the loop (plan._catalog's size check): the
    process exited, and exited again after every restart. The loop runs on, and takes the fix."""
    world = SimulatedWorld()
    loop = CatalogLoop(CatalogConfig(), [SimulatedExecutor(world)])
    good = '{"models": [{"name": "ok", "model": "a/b"}]}'
    bad = '{"models": [{"name": ' + SURROGATE_NAME + ', "model": "a/b"}, {"name": "ok", "model": "a/b"}]}'
    fixed = '{"models": [{"name": "ok", "model": "a/b"}, {"name": "fixed", "model": "a/b"}]}'
    assert "\\ud800" in bad
    async with anyio.create_task_group() as tg:
        await tg.start(loop.run)
        await _start_loop(loop, world, [_models_json(good), b.kubeai_model("llama")])
        await _settle(loop)
        assert {"ai-appliance-external-ok", "ai-appliance-kubeai-llama"} <= set(world.rows)
        await loop.send(_upsert(SourceKind.EXTERNAL_MODELS, _models_json(bad)))
        await _settle(loop)
        await loop.send(_upsert(SourceKind.KUBEAI_MODELS, b.kubeai_model("qwen")))
        await loop.send(_upsert(SourceKind.EXTERNAL_MODELS, _models_json(fixed)))
        await _settle(loop)
        tg.cancel_scope.cancel()
    # Either the name was rejected per item (no step failed) or the failing tick was skipped; either way
    # the loop ran on, never published the bad name, and planned the later events.
    assert {"ai-appliance-external-fixed", "ai-appliance-kubeai-qwen"} <= set(world.rows)
    assert "ai-appliance-external-bad" not in world.rows
    assert world.catalog is not None
    ids = [m["id"] for m in json.loads(world.catalog["data"]["catalog.json"])["models"]]
    assert {"fixed", "ok", "qwen", "llama"} <= set(ids)
    assert len(_loop_lines(caplog)) == loop.step_failures


async def test_an_event_whose_step_raises_is_skipped_and_the_loop_runs_on(
    poison: set[str], caplog: pytest.LogCaptureFixture
):
    poison.add("poison")
    world = SimulatedWorld()
    telemetry = Telemetry()
    recorder = ListRecorder()
    loop = CatalogLoop(CatalogConfig(), [SimulatedExecutor(world)], telemetry=telemetry, recorder=recorder)
    async with anyio.create_task_group() as tg:
        await tg.start(loop.run)
        await _start_loop(loop, world, [b.kubeai_model("llama")])
        await _settle(loop)
        await loop.send(_upsert(SourceKind.KUBEAI_MODELS, b.kubeai_model("poison")))
        await loop.send(_upsert(SourceKind.KUBEAI_MODELS, b.kubeai_model("qwen")))  # the same burst
        await _settle(loop)
        await loop.send(_upsert(SourceKind.KUBEAI_MODELS, b.kubeai_model("phi")))  # a later burst
        await _settle(loop)
        tg.cancel_scope.cancel()

    assert loop.step_failures == 1
    # The last good state: the failing step was recorded as a step that changed nothing.
    index = next(i for i, (e, _) in enumerate(recorder.steps) if "poison" in repr(e))
    _, transition = recorder.steps[index]
    assert transition.commands == ()
    assert transition.state is recorder.steps[index - 1][1].state
    assert "poison" not in loop.state.stored(SourceKind.KUBEAI_MODELS)
    # Events after it, in its burst and later, were folded and planned.
    assert {"ai-appliance-kubeai-llama", "ai-appliance-kubeai-qwen", "ai-appliance-kubeai-phi"} <= set(
        world.rows
    )
    assert "ai-appliance-kubeai-poison" not in world.rows

    (line,) = _loop_lines(caplog)
    logged = json.loads(JsonFormatter().format(line))
    assert {k: logged.get(k) for k in ("event", "source", "namespace", "object", "uid")} == {
        "event": "ObjectUpserted",
        "source": "kubeai-models",
        "namespace": "ai",
        "object": "poison",
        "uid": "uid-ai-poison",
    }
    assert logged["error"] == "KeyError"
    assert "catalog_core/ingest.py" in logged["where"]  # where it raised: file, line, function
    assert CANARY not in json.dumps(logged)  # the exception's message may quote input: never logged

    metrics = telemetry.metrics_text().decode()
    counted = [m for m in metrics.splitlines() if m.startswith("model_catalog_step_failures_total{")]
    (sample,) = [m for m in counted if not m.endswith(" 0.0")]  # every other series exists, at 0
    assert 'type="ObjectUpserted"' in sample and 'source="kubeai-models"' in sample
    assert sample.endswith(" 1.0")

    (warning,) = [e for e in world.events if e.reason == STEP_FAILED]
    assert (warning.involved.kind, warning.involved.name, warning.involved.uid) == (
        "Model",
        "poison",
        "uid-ai-poison",
    )
    assert warning.event_type == "Warning"
    assert CANARY not in warning.message


async def test_a_standby_logs_and_counts_a_failed_step_but_writes_no_event(poison: set[str]):
    poison.add("poison")
    world = SimulatedWorld()
    loop = CatalogLoop(CatalogConfig(), [SimulatedExecutor(world)], leading=False)
    async with anyio.create_task_group() as tg:
        await tg.start(loop.run)
        await _start_loop(loop, world, [b.kubeai_model("poison")])  # inside a listing this time
        await _settle(loop)
        tg.cancel_scope.cancel()
    assert loop.step_failures == 1
    assert world.events == [] and world.writes == []
    # The listing was skipped whole (the state before it kept): the source is not listed yet.
    assert not loop.state.source(SourceKind.KUBEAI_MODELS).known


async def test_a_tick_that_raises_is_retried_with_backoff_not_in_a_busy_loop(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    world = SimulatedWorld()
    loop = CatalogLoop(CatalogConfig(), [SimulatedExecutor(world)])
    real_tick = fold.tick
    attempts: list[float] = []
    broken = True

    def tick(state: CatalogState, now: float, *, busy: float = 0.0) -> Any:
        if broken:
            attempts.append(now)
            raise ZeroDivisionError
        return real_tick(state, now, busy=busy)

    monkeypatch.setattr(fold, "tick", tick)
    # Something is always due: a loop that ticks again at once after a failure would spin here.
    monkeypatch.setattr("app.loop.next_deadline", lambda state: 0.0)
    async with anyio.create_task_group() as tg:
        await tg.start(loop.run)
        await _start_loop(loop, world, [b.kubeai_model("llama")])
        await anyio.sleep(0.1)
        assert attempts  # every burst of the start ticked, and failed
        before = len(attempts)
        await anyio.sleep(0.5)
        assert len(attempts) - before <= 1  # then at most one retry per backoff (on main: ~3,600 here)
        assert world.rows == {}
        broken = False
        await loop.send(_upsert(SourceKind.KUBEAI_MODELS, b.kubeai_model("qwen")))
        await _settle(loop)
        tg.cancel_scope.cancel()
    assert {"ai-appliance-kubeai-llama", "ai-appliance-kubeai-qwen"} <= set(world.rows)
    lines = [json.loads(JsonFormatter().format(r)) for r in _loop_lines(caplog)]
    assert {(line["event"], line["error"]) for line in lines} == {("Ticked", "ZeroDivisionError")}
    # What the failing ticks planned from: the events folded since the last good tick.
    last = lines[-1]
    listings = len(SourceKind) - 1  # every source but Secrets (the core asks for those)
    assert last["events_since_last_good_tick"] == listings + 1  # and LiteLLM's rows
    assert {"event": "SourceListed", "source": "kubeai-models"} in last["first_events_since_last_good_tick"]
    # One Warning Event on the catalog ConfigMap for the many failed ticks (not one per tick).
    (warning,) = [e for e in world.events if e.reason == STEP_FAILED]
    assert (warning.involved.kind, warning.involved.name) == ("ConfigMap", "ai-model-catalog")


async def test_the_replay_of_a_log_with_a_failed_step_skips_it_as_the_live_run_did(
    poison: set[str], tmp_path: Path
):
    poison.add("poison")
    world = SimulatedWorld()
    path = tmp_path / "events.jsonl"
    config = CatalogConfig()
    recorder = Recorder(RecorderSettings(path), config, writer="inline", run_id="step-failure")
    loop = CatalogLoop(config, [SimulatedExecutor(world)], recorder=recorder)
    async with anyio.create_task_group() as tg:
        await tg.start(loop.run)
        await _start_loop(loop, world, [b.kubeai_model("llama")])
        await _settle(loop)
        await loop.send(_upsert(SourceKind.KUBEAI_MODELS, b.kubeai_model("poison")))
        await loop.send(_upsert(SourceKind.KUBEAI_MODELS, b.kubeai_model("qwen")))
        await _settle(loop)
        tg.cancel_scope.cancel()
    recorder.close()
    assert loop.step_failures == 1
    out, err = io.StringIO(), io.StringIO()
    assert replay.run(str(path), verify=True, out=out, err=err) == replayer.EXIT_OK, out.getvalue()
    notes = err.getvalue()
    pattern = r"line \d+: the step of event seq \d+ \(kubeai-models: upserted Model poison\) raised KeyError"
    assert re.search(pattern, notes), notes
    assert "KeyError" in notes and CANARY not in notes
    assert "note: 1 events were skipped: their step raised" in notes
    assert "replay identically" in out.getvalue()
