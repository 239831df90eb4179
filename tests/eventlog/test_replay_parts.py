"""``replay --verify --jobs N`` (app.replay_parts) answers exactly as the verify in one process does.

The example log has snapshots at lines 45, 93 and 143; with the size floor lifted it is cut at the last
two (the first comes before an eighth of its bytes). Every case
runs both ways and compares exit code, stdout and stderr: a log that verifies, a difference in a later
part's commands, a snapshot at a cut that differs from the replay, and an unreadable line in a later part
(reported with its line number in the whole file).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest

from app import cli, replay, replay_parts, replayer


@pytest.fixture(autouse=True)
def _small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replay_parts, "MIN_BYTES_PER_PART", 1)


def _run(path: Path, **options: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = replay.run(str(path), verify=True, out=out, err=err, **options)
    return code, out.getvalue(), err.getvalue()


def _both(path: Path, jobs: int) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    one = _run(path)
    parts = _run(path, jobs=jobs)
    return one, parts


def _without_parts_note(err: str) -> str:
    return "".join(line for line in err.splitlines(keepends=True) if "parts at once" not in line)


def _records(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def test_the_parts_are_the_snapshots_and_the_answer_is_the_same(example_log: Path) -> None:
    whole = replayer.Replayer(example_log)
    lines = example_log.read_bytes().splitlines(keepends=True)
    starts = [sum(len(x) for x in lines[:n]) for n in range(len(lines))]
    snapshots = [starts[44], starts[90], starts[139]]  # the snapshot records, at lines 45, 91 and 140
    assert [i for i, r in enumerate(_records(example_log)) if r["k"] == "snapshot"] == [44, 90, 139]
    # a part begins at the first snapshot after each 1/N of the file's bytes; one snapshot cuts once
    assert replay_parts.cuts(whole, 8) == snapshots  # the first is past the first eighth
    assert len(replay_parts.cuts(whole, 2)) == 1 and set(replay_parts.cuts(whole, 2)) <= set(snapshots)
    for jobs in (2, 3, 8):
        one, parts = _both(example_log, jobs)
        assert one[0] == parts[0] == replayer.EXIT_OK
        assert parts[1] == one[1]
        assert "verifying in" in parts[2] and _without_parts_note(parts[2]) == one[2]


def test_a_difference_in_a_later_part_is_reported_as_in_one_process(
    example_log: Path, tmp_path: Path
) -> None:
    records = _records(example_log)
    late = max(i for i, r in enumerate(records) if r["k"] == "commands" and i > 95)
    records[late]["commands"][0]["id"] = "0" * 16
    mutated = _write(tmp_path / "late.jsonl", records)
    one, parts = _both(mutated, 3)
    assert "parts at once" in parts[2]
    assert one[0] == parts[0] == replayer.EXIT_DIVERGED
    assert parts[1] == one[1]
    assert one[1].startswith(f"diverged at seq {records[late]['seq']}: ")


def test_a_snapshot_at_a_cut_that_differs_is_reported_by_the_part_that_ends_there(
    example_log: Path, tmp_path: Path
) -> None:
    records = _records(example_log)
    cut = [i for i, r in enumerate(records) if r["k"] == "snapshot"][1]  # a cut with parts on both sides
    records[cut]["state"]["now"] += 1.0  # the next part starts from this state; the part before compares it
    mutated = _write(tmp_path / "snapshot.jsonl", records)
    assert sum(1 for line in mutated.read_bytes().splitlines() if b'"snapshot"' in line[:128]) == 3
    one, parts = _both(mutated, 8)  # cut at every snapshot (each is past the first eighth)
    assert "verifying in 4 parts at once" in parts[2]
    assert one[0] == parts[0] == replayer.EXIT_DIVERGED
    assert parts[1] == one[1]
    assert f"the snapshot (line {cut + 1}) differs from the replayed state in: now" in one[1]


def test_an_unreadable_line_in_a_later_part_names_its_line_in_the_file(
    example_log: Path, tmp_path: Path
) -> None:
    lines = example_log.read_bytes().splitlines(keepends=True)
    lines[120] = b'{"seq": "not json\n'
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"".join(lines))
    one, parts = _both(damaged, 8)
    assert "verifying in 4 parts at once" in parts[2]
    assert one[0] == parts[0] == replayer.EXIT_UNREADABLE
    assert f"{damaged}:121: " in one[2]
    assert _without_parts_note(parts[2]) == one[2]


def test_what_cannot_be_cut_is_verified_in_one_process(
    example_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay_parts, "MIN_BYTES_PER_PART", 1 << 40)  # the floor: smaller than one part
    code, out, err = _run(example_log, jobs=4)
    assert code == replayer.EXIT_OK and "parts at once" not in err
    assert out == _run(example_log)[1]
    monkeypatch.setattr(replay_parts, "MIN_BYTES_PER_PART", 1)
    code, _, err = _run(example_log, jobs=4, until=100)  # --until: one process, as it stops mid-way
    assert code == replayer.EXIT_OK and "parts at once" not in err


def test_with_other_threads_alive_the_parts_are_spawned_not_forked(
    example_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []
    real = replay_parts.multiprocessing.get_context

    def context(method: str) -> Any:
        started.append(method)
        return real(method)

    monkeypatch.setattr(replay_parts.threading, "active_count", lambda: 2)
    monkeypatch.setattr(replay_parts.multiprocessing, "get_context", context)
    one, parts = _both(example_log, 2)
    assert started == ["spawn"]
    assert parts[:2] == one[:2]


def test_jobs_auto_is_one_part_per_usable_cpu_within_the_cap(
    example_log: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert cli._jobs("auto") == 3
    monkeypatch.setattr(cli.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert cli._jobs("auto") == cli.AUTO_JOBS_CAP
    monkeypatch.delattr(cli.os, "sched_getaffinity", raising=False)  # not Linux: every CPU counts
    monkeypatch.setattr(cli.os, "cpu_count", lambda: 2)
    assert cli._jobs("auto") == 2
    code = cli.main(["replay", str(example_log), "--verify", "--jobs", "auto"])
    out, err = capsys.readouterr()
    assert code == replayer.EXIT_OK, err
    assert "replay identically" in out and "verifying in 2 parts at once" in err
    with pytest.raises(SystemExit):
        cli.main(["replay", str(example_log), "--verify", "--jobs", "all"])
    assert "'all' is not a positive integer" in capsys.readouterr().err


def test_verify_without_jobs_runs_one_part_per_usable_cpu_and_jobs_1_keeps_one_process(
    example_log: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command as users run it (no --jobs) uses every CPU it may run on; --jobs 1 verifies in one
    process."""
    monkeypatch.setattr(cli.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    code = cli.main(["replay", str(example_log), "--verify"])
    default_out, err = capsys.readouterr()
    assert code == replay.EXIT_OK, err
    assert "verifying in 4 parts at once" in err  # the three snapshots cut it: four parts for eight CPUs
    code = cli.main(["replay", str(example_log), "--verify", "--jobs", "1"])
    one_out, err = capsys.readouterr()
    assert code == replay.EXIT_OK, err
    assert "parts at once" not in err and one_out == default_out
