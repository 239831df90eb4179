"""A generated catalog file added by a release leaves the logs of earlier releases replaying as they ran.

The header records the catalog keys a run rendered (``catalog_keys``; a header written before it did holds
``CATALOG_KEYS_BEFORE_THEY_WERE_RECORDED``), and a replay renders exactly those. ``one_more_file.py`` is
this version with one more file declared, in a process of its own (the declarations are read at import).
"""

from __future__ import annotations

import json
import lzma
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from catalog_core.catalog_files import KEYS
from contracts import eventlog as wire
from tests.eventlog.one_more_file import EXTRA_KEY
from tests.eventlog.test_corpus import LOGS

ONE_MORE_FILE = Path(__file__).resolve().parent / "one_more_file.py"


def _one_more_file(*args: str) -> subprocess.CompletedProcess[str]:
    # the timeout only ends a hung run: a replay of the whole corpus takes seconds
    return subprocess.run(
        [sys.executable, str(ONE_MORE_FILE), *args], capture_output=True, text=True, check=False, timeout=600
    )


def _records(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def _written_keys(records: list[dict]) -> list[set[str]]:
    return [
        {key for key, _ in command["data"]}
        for record in records
        if record["k"] == "commands"
        for command in record["commands"]
        if command["t"] in ("catalog-write", "catalog-placeholder")
    ]


def test_every_earlier_log_replays_as_it_ran_with_a_release_that_declares_one_more_catalog_file(
    tmp_path: Path, example_log: Path
) -> None:
    plain = [example_log]
    for log in LOGS:
        plain.append(tmp_path / log.name.removesuffix(".xz"))
        plain[-1].write_bytes(lzma.decompress(log.read_bytes()))
    result = _one_more_file("replay", *map(str, plain))
    assert result.returncode == 0, f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    assert f"{len(plain)} of {len(plain)} logs replay as they ran" in result.stdout


def test_a_log_recorded_with_one_more_file_names_it_and_replays_as_it_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "newer.jsonl"
    recorded = _one_more_file("record", str(log))
    assert recorded.returncode == 0, recorded.stderr[-4000:]
    records = _records(log)
    assert records[0]["catalog_keys"] == sorted(KEYS | {EXTRA_KEY})
    writes = _written_keys(records)
    assert writes and all(keys == KEYS | {EXTRA_KEY} for keys in writes)
    assert all(
        r["state"]["config"]["catalog_keys"] == sorted(KEYS | {EXTRA_KEY})
        for r in records
        if r["k"] == "snapshot"
    )

    replayed = _one_more_file("replay", str(log))
    assert replayed.returncode == 0, f"{replayed.stdout[-4000:]}\n{replayed.stderr[-4000:]}"

    # This version does not declare the file, so it cannot render what that run wrote: refused, not
    # replayed differently.
    assert main(["replay", str(log), "--verify"]) == 2
    _out, err = capsys.readouterr()
    assert EXTRA_KEY in err and "not declared by this version" in err


def test_a_log_recorded_by_this_version_names_every_declared_key_and_replays_as_it_ran(
    example_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = _records(example_log)
    assert records[0]["catalog_keys"] == sorted(KEYS)
    assert wire.decode_header(records[0]).catalog_config().catalog_keys == KEYS
    writes = _written_keys(records)
    assert writes and all(keys == KEYS for keys in writes)
    assert main(["replay", str(example_log), "--verify"]) == 0
    out, _ = capsys.readouterr()
    assert " 0 commands " not in out and " 0 snapshots " not in out


def test_a_header_without_catalog_keys_renders_the_keys_every_run_rendered_before_they_were_recorded(
    example_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = _records(example_log)
    header = {k: v for k, v in records[0].items() if k != "catalog_keys"}
    assert (
        wire.decode_header(header).catalog_config().catalog_keys
        == wire.CATALOG_KEYS_BEFORE_THEY_WERE_RECORDED
    )
    # Its snapshots do not hold them either: they are read with the header's.
    for record in records:
        if record["k"] == "snapshot":
            del record["state"]["config"]["catalog_keys"]
    older = tmp_path / "older.jsonl"
    older.write_bytes(b"".join(wire.dumps(r) + b"\n" for r in [header, *records[1:]]))
    assert main(["replay", str(older), "--verify"]) == 0
    out, _ = capsys.readouterr()
    assert " 0 snapshots " not in out
