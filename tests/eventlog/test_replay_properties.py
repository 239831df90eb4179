"""The replay contract, over generated runs: record, replay, get the same commands; snapshots are exact."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app import replay, replayer
from app.replayer import Replayer, SnapshotSeen
from tests.eventlog import strategies as gen
from tests.eventlog.harness import record_run, steps
from tests.eventlog.same import differences, same


def _records(path: Path) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return [orjson.loads(line) for line in f]


@settings(max_examples=60)
@given(scn=gen.scenario(), every=st.integers(min_value=1, max_value=12))
def test_replaying_a_recorded_run_gives_its_commands_exactly(
    scn: dict[str, Any], every: int, tmp_path_factory: Any
) -> None:
    run = record_run(scn, tmp_path_factory.mktemp("run"), snapshot_every=every)
    assert run.recorder.stats.records_dropped == 0
    assert run.recorder.stats.secrets_stripped == 0
    replayed = list(steps(run.path))
    assert len(replayed) == len(run.history)
    for item, (event, transition) in zip(replayed, run.history, strict=True):
        assert differences(item.event, event) == []
        assert differences(item.commands, transition.commands) == []
        recorded = item.recorded if item.recorded else []
        assert [c["id"] for c in recorded] == [c.id for c in transition.commands]
    assert differences(replayed[-1].after, run.final) == []
    out = io.StringIO()
    assert replay.run(str(run.path), verify=True, out=out, err=io.StringIO()) == replayer.EXIT_OK, (
        out.getvalue()
    )


@settings(max_examples=40)
@given(
    scn=gen.scenario(),
    every=st.integers(min_value=1, max_value=6),
    cut=st.floats(min_value=0.0, max_value=1.0),
)
def test_snapshot_plus_tail_is_the_full_replay(
    scn: dict[str, Any], every: int, cut: float, tmp_path_factory: Any
) -> None:
    run = record_run(scn, tmp_path_factory.mktemp("snap"), snapshot_every=every)
    records = _records(run.path)
    snapshots = [r["seq"] for r in records if r["k"] == "snapshot"]
    assume(snapshots)
    until = records[int(cut * (len(records) - 1))]["seq"]
    assume(snapshots[0] <= until)
    start = max(s for s in snapshots if s <= until)
    full = list(steps(run.path))
    tail = list(steps(run.path, until=until, from_snapshot=True))
    expected = [s for s in full if start < s.seq <= until]
    assert [s.seq for s in tail] == [s.seq for s in expected]
    for mine, theirs in zip(tail, expected, strict=True):
        assert differences(mine.commands, theirs.commands) == []
        assert same(mine.after, theirs.after)
    # The state where the tail ends is the full replay's state there (the snapshot's, if no step follows).
    rerun = Replayer(run.path, until=until, from_snapshot=True)
    for _ in rerun:
        pass
    before = [s for s in full if s.seq <= until]
    assert differences(rerun.state, before[-1].after) == []
    # And every snapshot on the way holds exactly the state the full replay has reached there.
    for item in Replayer(run.path):
        if isinstance(item, SnapshotSeen):
            assert replayer.compare_state(item) is None


def _string_leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, str):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() if k != "t" for p in _string_leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _string_leaves(v, (*path, i))]
    return []


def _set(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = new


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


@settings(max_examples=60)
@given(scn=gen.scenario(), data=st.data())
def test_a_mutated_recorded_command_fails_verify_at_exactly_its_seq(
    scn: dict[str, Any], data: st.DataObject, tmp_path_factory: Any
) -> None:
    directory = tmp_path_factory.mktemp("mutated")
    run = record_run(scn, directory)
    lines = run.path.read_bytes().splitlines(keepends=True)
    candidates = [i for i, line in enumerate(lines) if orjson.loads(line)["k"] == "commands"]
    assume(candidates)
    index = data.draw(st.sampled_from(candidates))
    record = orjson.loads(lines[index])
    commands = record["commands"]
    kind = data.draw(st.sampled_from(["edit", "id", "drop", "duplicate", "swap"]))
    if kind == "swap" and (len(commands) < 2 or commands[0] == commands[1]):
        kind = "edit"
    position = data.draw(st.integers(0, len(commands) - 1))
    if kind == "edit":
        leaves = _string_leaves(commands[position])
        leaf = data.draw(st.sampled_from(leaves))
        _set(commands[position], leaf, _get(commands[position], leaf) + "~")
    elif kind == "id":
        commands[position]["id"] = "0" * 16
    elif kind == "drop":
        del commands[position]
    elif kind == "duplicate":
        commands.insert(position, commands[position])
    else:
        commands[0], commands[1] = commands[1], commands[0]
    lines[index] = orjson.dumps(record) + b"\n"
    mutated = directory / "mutated.jsonl"
    mutated.write_bytes(b"".join(lines))
    out = io.StringIO()
    assert replay.run(str(mutated), verify=True, out=out, err=io.StringIO()) == replayer.EXIT_DIVERGED
    text = out.getvalue()
    assert text.startswith(f"diverged at seq {record['seq']}: "), text
    assert "  recorded: " in text
    assert "  replayed: " in text
