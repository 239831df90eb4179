"""The re-read of LiteLLM after writes is in the event log: a command the core planned, recorded with the
step that planned it, and a replay plans it again exactly there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from adapters.eventlog.recorder import Recorder, RecorderSettings
from app.cli import main
from catalog_core.commands import ObserveLiteLLM, ReadReason, UpdateLiteLLMModel
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from contracts.kinds import sources_of
from tests.core import builders as b
from tests.simulation import SimulatedShell

START = 1_767_225_600.0
AFTER_WRITES = ReadReason.AFTER_WRITES
MODELS = [f"m{i}" for i in range(8)]
# Writes go out as soon as planned (the write damping has its own tests): a burst is one tick's writes.
UNDAMPED = CatalogConfig(
    litellm_settle_seconds=0.0, litellm_settle_cap_seconds=0.0, litellm_burst_probe_seconds=0.0
)


def _record(path: Path) -> SimulatedShell:
    """A start, then every model's limit changed at once; each command carried out and its answer fed
    back one at a time, a tick after each (as the loop does), until nothing is left to do."""
    shell = SimulatedShell(UNDAMPED, now=START)
    settings = RecorderSettings(path, max_bytes=1 << 30, max_files=1, snapshot_every=25, ring_size=0)
    shell.recorder = Recorder(
        settings, UNDAMPED, writer="inline", state=shell.state, clock=lambda: shell.now, run_id="reads"
    )

    def models(limit: int) -> list[dict[str, Any]]:
        return [b.kubeai_model(m, args=[f"--max-model-len={limit}"]) for m in MODELS]

    for source in SourceKind:
        if source is not SourceKind.SECRETS:
            listed = [o for o in models(4096) if source in sources_of(o, UNDAMPED)]
            shell.listed(source, listed)
    shell.rows_observed()
    shell.settle()
    for obj in models(8192):
        shell.upsert(SourceKind.KUBEAI_MODELS, obj)
    pending = list(shell.tick())
    while pending:
        command = pending.pop(0)
        for event in shell.executor(command):
            shell.feed(event)
        shell.advance(0.01)
        pending += shell.tick()
    shell.recorder.close()
    return shell


def _planned(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Every recorded command, with the seq of the event whose step planned it."""
    out = []
    for line in path.read_bytes().splitlines():
        record = orjson.loads(line)
        if record["k"] == "commands":
            out.extend((record["answers"], command) for command in record["commands"])
    return out


def test_the_log_of_a_run_with_writes_holds_one_planned_read_per_burst_and_replays_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "events.jsonl"
    shell = _record(path)
    planned = _planned(path)
    tags = [command["t"] for _, command in planned]
    updates = [i for i, t in enumerate(tags) if t == "litellm-update"]
    assert len(updates) == len(MODELS)
    # the burst of writes is followed by one read, planned after the last write's answer
    after_burst = tags[updates[-1] + 1 :]
    assert after_burst.count("observe-litellm") == 1
    seq, read = planned[updates[-1] + 1 + after_burst.index("observe-litellm")]
    assert read == {"t": "observe-litellm", "reason": "after-writes", "id": ObserveLiteLLM(AFTER_WRITES).id}
    assert seq > planned[updates[-1]][0]  # planned by a later step than the writes, from the state
    # the writes and the read reached the simulated LiteLLM as the log says
    assert sum(isinstance(c, UpdateLiteLLMModel) for c in shell.world.writes) == len(MODELS)
    assert main(["replay", str(path), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "replay identically" in out and "snapshots" in out
    assert main(["replay", str(path)]) == 0
    replayed = capsys.readouterr().out.splitlines()
    assert f"{seq} observe-litellm GET /model/info (after-writes)" in replayed
