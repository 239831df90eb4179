"""``model-catalog replay`` and ``explain`` on the example log: exit codes, output, refusals."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from adapters.eventlog.recorder import service_version
from app.cli import main
from contracts import eventlog as wire


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _records(path: Path) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return [orjson.loads(line) for line in f]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


REGENERATE = (
    ".venv/bin/python",
    "examples/make_event_log.py",
)  # from the repository's root, after `just setup`
STALE = f"examples/event-log.jsonl is stale: regenerate it with {' '.join(REGENERATE)}"


def test_the_example_replays_identically(example_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "replay", str(example_log), "--verify")
    assert code == 0, f"{out}\n{STALE} (if the fold's behaviour changed on purpose)"
    assert out.startswith(f"verified {example_log}: 119 events (seq 1..145), 44 commands and 3 snapshots")
    # The README shows this very line (run from the repository's root).
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    assert out.replace(str(example_log), "examples/event-log.jsonl").strip() in readme, (
        "README's replay is stale"
    )


def test_verify_reports_commands_the_recording_lacks(
    example_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--verify passes over the steps that emit nothing where nothing was recorded without comparing them
    (issue 15, P6); a step that emits commands where the log recorded none is still compared, and fails."""
    records = _records(example_log)
    dropped = next(i for i, r in enumerate(records) if r["k"] == "commands")
    answered = records[dropped]["answers"]
    kept = records[:dropped]
    for record in records[dropped + 1 :]:  # renumbered, so the log stays gapless
        record["seq"] -= 1
        if record["k"] == "commands":
            record["answers"] -= 1
        kept.append(record)
    mutated = _write(tmp_path / "mutated.jsonl", kept)
    code, out, _ = _cli(capsys, "replay", str(mutated), "--verify")
    assert code == 1
    assert out.startswith(
        f"diverged at seq {answered}: the recording has no commands for event seq {answered}"
    )


def test_replay_prints_one_line_per_command(example_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "replay", str(example_log))
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 44
    assert "55 litellm-create ai-appliance-kubeai-qwen2.5-coder-7b model_name=qwen2.5-coder-7b" in out
    assert "kubernetes-event Warning on ConfigMap ai/ai-external-models: InvalidJSON" in out
    assert "58 observe-litellm GET /model/info (after-writes)" in out  # the re-read the core planned
    assert any(line.startswith("124 litellm-delete ai-appliance-freetoken-phi-4-mini") for line in lines)
    assert "replayed 119 events (seq 1..145): 44 commands" in err


def test_replay_json_is_byte_for_byte_what_was_recorded(
    example_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(capsys, "replay", str(example_log), "--json")
    assert code == 0
    replayed = [orjson.loads(line) for line in out.splitlines()]
    recorded = [
        {"answers": r["answers"], "command": c}
        for r in _records(example_log)
        if r["k"] == "commands"
        for c in r["commands"]
    ]
    assert [orjson.dumps(r) for r in replayed] == [orjson.dumps(r) for r in recorded]


def test_until_and_from_snapshot(example_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshots = [r["seq"] for r in _records(example_log) if r["k"] == "snapshot"]
    assert len(snapshots) == 3
    code, out, _ = _cli(capsys, "replay", str(example_log), "--until", "60")
    assert code == 0 and all(int(line.split()[0]) <= 60 for line in out.splitlines())
    code, tail, err = _cli(capsys, "replay", str(example_log), "--from-snapshot", "--until", "120")
    assert code == 0
    latest = max(seq for seq in snapshots if seq <= 120)
    assert f"replaying from the snapshot at seq {latest}" in err
    full = _cli(capsys, "replay", str(example_log))[1].splitlines()
    expected = [line for line in full if latest < int(line.split()[0]) <= 120]
    assert tail.splitlines() == expected
    code, _, err = _cli(capsys, "replay", str(example_log), "--from-snapshot", "--until", "20")
    assert code == 2 and "no snapshot at or before seq 20" in err
    code, out, _ = _cli(capsys, "replay", str(example_log), "--from-snapshot", "--verify")
    assert code == 0 and "replay identically" in out


def test_explain_tells_the_story_of_a_withdrawn_runtime(
    example_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(capsys, "explain", str(example_log), "phi-4-mini")
    assert code == 0
    story = out.splitlines()
    assert story[0].startswith("phi-4-mini in ")
    published = next(i for i, line in enumerate(story) if "-> published Published" in line)
    failed = next(i for i, line in enumerate(story) if "-> withheld HealthCheckFailed" in line)
    deleted = next(
        i for i, line in enumerate(story) if "litellm-delete ai-appliance-freetoken-phi-4-mini" in line
    )
    assert published < failed < deleted
    assert sum("probe of phi-4-mini-freetoken: unhealthy (HTTP 503" in line for line in story[:failed]) == 2
    assert "catalog entry removed" in out
    assert "final state (after seq 145): not published" in out
    assert "why: HealthCheckFailed: its runtime failed two health probes in a row" in out


def test_explain_shows_the_mesh_fallback_and_the_starting_model(
    example_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(capsys, "explain", str(example_log), "llama-3.1-8b")
    assert code == 0
    assert (
        "LiteLLM row private-mesh-llama-3.1-8b-peer-a appeared: llama-3.1-8b owner private-mesh, order 1"
        in out
    )
    assert "routes: order 0 local model-catalog, order 1 mesh private-mesh aliases=mesh/llama-3.1-8b" in out
    code, out, _ = _cli(capsys, "explain", str(example_log), "qwen2.5-coder-7b")
    assert "withheld NotReady (status.replicas.ready is not a positive number) -> withheld Pending" in out
    assert "kubeai-models: upserted Model qwen2.5-coder-7b" in out
    code, out, _ = _cli(capsys, "explain", str(example_log), "gpt-4o")
    assert "ConfigMap ai-external-models: InvalidJSON (models.json: Expecting ',' delimiter" in out
    assert "ConfigMap ai-external-models is readable again" in out


def test_explain_json_and_unknown_models(example_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "explain", str(example_log), "phi-4-mini", "--json")
    assert code == 0
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert lines[-1]["final"]["published"] is False
    assert any(c["t"] == "litellm-delete" for line in lines[:-1] for c in line["commands"])
    code, out, err = _cli(capsys, "explain", str(example_log), "no-such-model")
    assert code == 1 and out == ""
    assert "no-such-model never appears" in err and "phi-4-mini" in err


@pytest.mark.parametrize("command", ["replay", "explain"])
@pytest.mark.parametrize("variable", ["CATALOG_LITELLM_BURST_ROWS", "OPENCODE_DEFAULT_CONTEXT_TOKENS"])
def test_a_header_setting_of_5000_digits_is_one_line_exit_2(
    example_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, variable: str
) -> None:
    """A header's configuration is read like the environment: int() refuses strings past 4,300 digits
    with an exception of its own, which was a traceback."""
    records = _records(example_log)
    records[0]["config"][variable] = "9" * 5000
    path = _write(tmp_path / "huge.jsonl", records)
    code, out, err = _cli(capsys, command, str(path), *(["phi-4-mini"] if command == "explain" else []))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(f"model-catalog: {path}:1: header: invalid configuration: {variable}: ")
    assert "at most 18 digits" in line and len(line) < 400


def test_a_log_of_an_unknown_version_is_refused(
    example_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = _records(example_log)
    records[0]["version"] = wire.FORMAT_VERSION + 1
    code, out, err = _cli(capsys, "replay", str(_write(tmp_path / "newer.jsonl", records)), "--verify")
    assert code == 2 and out == ""
    newer = wire.FORMAT_VERSION + 1
    assert f"format version {newer} was written by a newer model-catalog" in err and ":1:" in err
    records[0]["version"] = 0
    code, _, err = _cli(capsys, "replay", str(_write(tmp_path / "older.jsonl", records)))
    assert code == 2
    assert "format version 0 (written by model-catalog" in err
    assert "no migration from version 0 to 1 is defined" in err
    records[0]["format"] = "something-else"
    code, _, err = _cli(capsys, "explain", str(_write(tmp_path / "other.jsonl", records)), "x")
    assert code == 2 and "not a model-catalog event log" in err


def test_an_older_version_with_a_migration_is_replayed(
    example_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A version 0 that named the commands record's reference "event" instead of "answers".
    records = _records(example_log)
    records[0]["version"] = 0
    for record in records:
        if record["k"] == "commands":
            record["event"] = record.pop("answers")
    old = _write(tmp_path / "v0.jsonl", records)
    code, _, err = _cli(capsys, "replay", str(old), "--verify")
    assert code == 2 and "no migration from version 0" in err

    def v0_to_v1(raw: dict[str, Any]) -> dict[str, Any]:
        if raw.get("k") == "header":
            return {**raw, "version": 1}
        if raw.get("k") == "commands":
            raw = dict(raw)
            raw["answers"] = raw.pop("event")
        return raw

    monkeypatch.setitem(wire.MIGRATIONS, 0, v0_to_v1)
    code, out, err = _cli(capsys, "replay", str(old), "--verify")
    assert code == 0, err
    assert "replay identically" in out


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda lines: lines.__setitem__(40, lines[40][:55] + b"\n"), r":41: not JSON \("),
        (lambda lines: lines.__setitem__(-1, lines[-1][:-9]), r":146: not JSON .* the record is cut short"),
        (
            lambda lines: lines.__setitem__(31, lines[31].replace(b'"k":"event"', b'"k":"evnt"')),
            r":32: unknown record kind 'evnt'",
        ),
        (
            lambda lines: lines.__setitem__(30, lines[30].replace(b'"t":"command-completed"', b'"t":"done"')),
            r":31: event record: unknown type tag 'done'",
        ),
        (
            lambda lines: lines.__setitem__(19, lines[19].replace(b'"now":', b'"now":"soon","was":')),
            r":20: event record: expected a number, got str @ \$.event.now",
        ),
        # the reader's inline envelope check hands each of these to check_envelope, which says why
        (
            lambda lines: lines.__setitem__(31, lines[31].replace(b'"k":"event"', b'"k":["event"]')),
            r":32: unknown record kind \['event'\]",
        ),
        (
            lambda lines: lines.__setitem__(31, re.sub(rb'"seq":(\d+)', rb'"seq":"\1"', lines[31])),
            r":32: seq must be a non-negative integer",
        ),
        (lambda lines: lines.__setitem__(31, b"[1, 2]\n"), r":32: a record must be a JSON object"),
        (lambda lines: lines.__delitem__(50), r":51: seq 51 after seq 49: records 50..50 are missing"),
        (lambda lines: lines.insert(10, b"\n"), r":11: not JSON"),
        (lambda lines: lines.__delitem__(0), r":1: the first record is not a header"),
    ],
)
def test_a_damaged_log_is_reported_with_file_line_and_reason(
    example_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: Any, message: str
) -> None:
    lines = example_log.read_bytes().splitlines(keepends=True)
    damage(lines)
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(b"".join(lines))
    for command in (["replay", str(path), "--verify"], ["explain", str(path), "phi-4-mini"]):
        code, _, err = _cli(capsys, *command)
        assert code == 2
        assert err.startswith(f"model-catalog: {path}:")
        assert err.strip().splitlines()[-1].startswith("model-catalog:")
        assert re.search(message, err), err


def _longest(path: Path) -> tuple[int, int]:
    """(line number, length with its newline) of the longest line."""
    lines = path.read_bytes().splitlines(keepends=True)
    index = max(range(len(lines)), key=lambda i: len(lines[i]))
    return index + 1, len(lines[index])


@pytest.mark.parametrize(
    ("command", "extra"), [("replay", []), ("replay", ["--from-snapshot"]), ("explain", ["phi-4-mini"])]
)
def test_an_over_long_line_is_refused_with_file_line_and_exit_2(
    example_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, extra: list[str]
) -> None:
    """Regression (issue 12): lines were read whole; one 300 MB line took 907 MB to replay."""
    _, longest = _longest(example_log)
    lines = example_log.read_bytes().splitlines(keepends=True)
    lines.insert(30, b'{"seq":' + b"9" * (3 * longest) + b"}\n")
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"".join(lines))
    limit = str(2 * longest)
    code, out, err = _cli(capsys, command, str(path), *extra, "--max-line-bytes", limit)
    assert code == 2, out + err
    assert err == (
        f"model-catalog: {path}:31: a line longer than {limit} bytes: not a record of this log, "
        "or one larger than --max-line-bytes allows\n"
    )


def test_the_line_bound_counts_the_newline_and_defaults_far_above_real_records(
    example_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    number, longest = _longest(example_log)  # a snapshot
    code, out, _ = _cli(capsys, "replay", str(example_log), "--verify", "--max-line-bytes", str(longest))
    assert code == 0, out
    code, _, err = _cli(
        capsys, "explain", str(example_log), "phi-4-mini", "--max-line-bytes", str(longest - 1)
    )
    assert code == 2 and err.startswith(f"model-catalog: {example_log}:{number}: a line longer than")
    first = len(example_log.read_bytes().split(b"\n", 1)[0]) + 1
    code, _, err = _cli(capsys, "replay", str(example_log), "--max-line-bytes", str(first - 1))
    assert code == 2 and err.startswith(f"model-catalog: {example_log}:1: a line longer than")
    assert _cli(capsys, "replay", str(example_log))[0] == 0  # the default bound


def test_the_line_bound_must_be_a_positive_integer(
    example_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["replay", str(example_log), "--max-line-bytes", "0"])
    assert exited.value.code == 2 and "not a positive integer" in capsys.readouterr().err


def test_a_missing_file_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "replay", str(tmp_path / "nope.jsonl"))
    assert code == 2 and "cannot read: No such file or directory" in err


def test_the_installed_command_runs(example_log: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "replay", str(example_log), "--verify"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "replay identically" in done.stdout


def _generator(example_log: Path) -> Any:
    spec = importlib.util.spec_from_file_location("make_event_log", example_log.parent / "make_event_log.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_log_is_what_its_generator_writes(example_log: Path, tmp_path: Path) -> None:
    fresh = tmp_path / "event-log.jsonl"
    _generator(example_log).generate(fresh)
    committed, regenerated = _records(example_log), _records(fresh)
    # Only the service version may differ (regenerate the example when it does).
    assert regenerated[0]["service_version"] == service_version()
    committed[0]["service_version"] = regenerated[0]["service_version"]
    assert committed == regenerated, STALE
    assert fresh.stat().st_size < 600_000


def test_a_log_written_before_gates_the_burst_probe_and_scale_from_zero_replays_command_by_command(
    example_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run recorded before headers and snapshots held the planning gates (state schema
    49af2580675a676d), without the burst probe and before KubeAI Models scaling from zero were published:
    its header has neither ``gates`` nor CATALOG_LITELLM_BURST_PROBE_SECONDS nor a CATALOG_KUBEAI_*
    setting, its Model events no minReplicas, maxReplicas, autoscalingDisabled or status.replicas.all
    (trimmed away then), its snapshots no ``gates``, no probe setting and no ``probing`` flag. It replays
    with the gates of its schema (no ``scale-from-zero``: every Model published only while ready), probe
    off; its snapshots are not read (their external models spell their LiteLLM parameters as fields of
    their own, today's hold them in ``params``), so only its commands are compared."""
    from catalog_core.config import CatalogConfig
    from catalog_core.gates import ALL_GATES, Gate

    fresh = tmp_path / "fresh.jsonl"
    then = CatalogConfig(
        litellm_burst_probe_seconds=0.0,
        gates=ALL_GATES - {Gate.SCALE_FROM_ZERO, Gate.PLANNED_LITELLM_READS},
    )
    _generator(example_log).generate(fresh, then)

    def as_trimmed_then(obj: dict[str, Any]) -> None:
        for key in ("minReplicas", "maxReplicas", "autoscalingDisabled"):
            obj.get("spec", {}).pop(key, None)
        obj.get("status", {}).get("replicas", {}).pop("all", None)

    older = []
    for record in _records(fresh):
        if record["k"] == "header":
            del record["config"]["CATALOG_LITELLM_BURST_PROBE_SECONDS"]
            del record["config"]["CATALOG_KUBEAI_SCALE_FROM_ZERO"]
            del record["config"]["CATALOG_KUBEAI_START_DEADLINE_SECONDS"]
            del record["gates"]
            record["state_schema"] = "49af2580675a676d"
        elif record["k"] == "event" and record["event"].get("source") == "kubeai-models":
            for obj in record["event"].get("objects", [record["event"].get("object", {})]):
                as_trimmed_then(obj)
        elif record["k"] == "snapshot":
            del record["state"]["config"]["litellm_burst_probe_seconds"]
            del record["state"]["config"]["gates"]
            for churn in record["state"]["damping"]["keys"].values():
                del churn["probing"]
            del record["state"]["litellm"]["unobserved_since"]
            del record["state"]["litellm"]["unconfirmed"]
        older.append(record)
    snapshots = sum(r["k"] == "snapshot" for r in older)
    assert snapshots >= 2
    path = _write(tmp_path / "older.jsonl", older)
    code, out, err = _cli(capsys, "replay", str(path), "--verify")
    assert code == 0, err
    assert "only commands are compared" in err and "and 0 snapshots" in out
    # the run of that day published gemma-3-4b only while a replica was ready: so does its replay
    code, story, _ = _cli(capsys, "explain", str(path), "gemma-3-4b")
    assert code == 0
    assert "published Published -> withheld NotReady" in story
    assert "litellm-delete ai-appliance-kubeai-gemma-3-4b" in story
    assert "final state (after seq" in story and "): not published" in story
    # Nor is a shape that is not known at all, with gates recorded.
    older[0]["state_schema"] = "0000000000000000"
    older[0]["gates"] = _records(fresh)[0]["gates"]  # a schema not known to have planned with any gate
    code, out, err = _cli(capsys, "replay", str(_write(path, older)), "--verify")
    assert code == 0 and "only commands are compared" in err and "and 0 snapshots" in out


def test_a_log_written_before_failed_writes_were_reported_replays_and_its_snapshots_verify(
    example_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run recorded by the version before write failures were reported (state schema
    5e0f2e83a97dd0d4: no ``Control.failing``, no ``Pending.failures``, no ``Retry.command``, two reason codes
    fewer). Its snapshots read as nothing failing, nothing to report, no Event to send again (as that code
    decided), and are compared, not skipped."""
    fresh = tmp_path / "fresh.jsonl"
    _generator(example_log).generate(fresh)
    older = []
    for record in _records(fresh):
        if record["k"] == "header":
            record["state_schema"] = "5e0f2e83a97dd0d4"
        elif record["k"] == "snapshot":
            state = record["state"]
            assert state["control"].pop("failing") == {}
            assert state["pending"].pop("failures") == []
            for retry in state["control"]["retries"].values():
                assert retry.pop("command") is None
        older.append(record)
    snapshots = sum(r["k"] == "snapshot" for r in older)
    assert snapshots >= 2
    path = _write(tmp_path / "older.jsonl", older)
    code, out, err = _cli(capsys, "replay", str(path), "--verify")
    assert code == 0, err
    assert f"{snapshots} snapshots replay identically" in out
    assert "only commands are compared" not in err


def test_the_regenerate_command_runs_as_written(example_log: Path, tmp_path: Path) -> None:
    """STALE's command, from the repository's root with no PYTHONPATH (ARCHITECTURE.md names the same), writes
    the example from this checkout's code (OUT given, so the committed file is left alone)."""
    root = Path(__file__).parents[2]
    assert f"`{' '.join(REGENERATE)}`" in " ".join((root / "ARCHITECTURE.md").read_text().split())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = tmp_path / "event-log.jsonl"
    done = subprocess.run(
        [str(root / REGENERATE[0]), *REGENERATE[1:], str(out)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _records(out)[1:] == _records(example_log)[1:], STALE
