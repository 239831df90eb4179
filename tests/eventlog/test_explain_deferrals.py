"""``explain`` says when a LiteLLM write was deferred and why, and when a flap back cancelled it
(issue 14)."""

from __future__ import annotations

import io
from pathlib import Path

from adapters.eventlog.recorder import Recorder, RecorderSettings
from app import explain
from catalog_core.config import CatalogConfig
from catalog_core.events import Event, ObjectUpserted, SourceKind, SourceListed, Ticked
from catalog_core.fold import initial_state, step
from catalog_core.simulate import SimulatedWorld
from catalog_core.state import CatalogState
from tests.core import builders as b

START = 1_767_225_600.0


class _Recorded:
    """The fold with its commands carried out by the simulated world, every step recorded."""

    def __init__(self, path: Path, config: CatalogConfig) -> None:
        self.now = START
        self.state: CatalogState = initial_state(config)
        self.world = SimulatedWorld()
        settings = RecorderSettings(path, max_files=1, ring_size=0)
        self.recorder = Recorder(settings, config, writer="inline", clock=lambda: self.now, run_id="t")

    def _step(self, event: Event) -> list[Event]:
        transition = step(self.state, event)
        self.recorder.record(event, transition)
        self.state = transition.state
        return [e for c in transition.commands for e in self.world.execute(c)]

    def at(self, now: float, *events: Event) -> None:
        self.now = now
        pending = list(events)
        for _ in range(20):
            for event in pending:
                self._step(event)
            pending = self._step(Ticked(now))
            if not pending:
                return


def _model(ready: bool) -> ObjectUpserted:
    return ObjectUpserted(SourceKind.KUBEAI_MODELS, b.kubeai_model("llama", ready=1 if ready else 0))


def test_explain_says_a_write_was_deferred_and_then_cancelled(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    run = _Recorded(path, CatalogConfig())
    listed = [SourceListed(kind, ()) for kind in SourceKind if kind is not SourceKind.KUBEAI_MODELS]
    run.at(
        START,
        *listed,
        SourceListed(SourceKind.KUBEAI_MODELS, (b.kubeai_model("llama"),)),
        run.world.rows_event(),
    )
    run.at(START + 0.01)  # the burst probe passed: created
    run.at(START + 30.0, _model(False))  # a still row: withdrawn once the probe passes
    run.at(START + 30.01)
    run.at(START + 30.5, _model(True))  # again within the settle window: deferred
    run.at(START + 31.0, _model(False))  # back to what LiteLLM holds: cancelled
    run.recorder.close()
    out = io.StringIO()
    assert explain.run(str(path), "llama", out=out, err=io.StringIO()) == 0
    text = out.getvalue()
    rid = "ai-appliance-kubeai-llama"
    assert f"LiteLLM {rid}: write deferred: it changed again within 2 s of its last change or write" in text
    assert "(due in 2.0 s)" in text
    assert f"LiteLLM {rid}: write deferred: it changed after being still; held 10 ms" in text
    assert f"LiteLLM {rid}: deferred write cancelled: the row is back to what LiteLLM holds" in text
    assert text.count("litellm-delete") == 1 and "litellm-create" in text  # created at start, deleted once
