"""Replay compatibility: every log of the corpus, recorded by an earlier version, verifies with this one.

``tests/eventlog/corpus/`` holds the example log (``examples/make_event_log.py``) as each commit that
changed the state schema or the event format wrote it, generated in that commit's own tree and compressed
with xz (``COMMIT-STATESCHEMA.jsonl.xz``; how to add one: tests/eventlog/corpus/README.md). A log replays
with the settings and planning gates its header records, or those of its state schema when it predates
them (``contracts/eventlog.py``: ``ABSENT_BEFORE_IT_EXISTED``, ``GATES_BEFORE_THEY_WERE_RECORDED``), so a
new rule that would plan it differently must be a gate (``catalog_core/gates.py``). It renders the catalog
keys its header records (``CATALOG_KEYS_BEFORE_THEY_WERE_RECORDED`` before headers did), so a catalog file
declared since leaves it as it ran (``test_catalog_keys.py``).
"""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from app.cli import main
from catalog_core.gates import ALL_GATES
from contracts import eventlog as wire

CORPUS = Path(__file__).resolve().parent / "corpus"
LOGS = sorted(CORPUS.glob("*.jsonl.xz"))


def _schema_of(log: Path) -> str:
    return log.name.removesuffix(".jsonl.xz").split("-")[1]


def test_the_corpus_is_there() -> None:
    assert len(LOGS) >= 10, f"the corpus lost logs: {[p.name for p in LOGS]}"


@pytest.mark.parametrize("log", LOGS, ids=[p.name.removesuffix(".jsonl.xz") for p in LOGS])
def test_every_log_of_an_earlier_version_verifies(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / log.name.removesuffix(".xz")
    plain.write_bytes(lzma.decompress(log.read_bytes()))
    header = wire.decode_header(wire.parse_line(plain.read_bytes().split(b"\n", 1)[0]))
    assert header.state_schema == _schema_of(log), "the file's name says which state schema wrote it"
    code = main(["replay", str(plain), "--verify"])
    out, err = capsys.readouterr()
    assert code == 0, f"{log.name} no longer replays as it ran:\n{out[-3000:]}\n{err[-3000:]}"
    assert " 0 commands " not in out, out
    if wire.snapshots_readable(header.state_schema):
        assert "only commands are compared" not in err
        assert " 0 snapshots " not in out, out


def test_every_older_shape_this_version_reads_or_gates_has_a_log_in_the_corpus() -> None:
    """A state shape whose snapshots are read, or whose gates are inferred, is one the corpus proves."""
    schemas = {_schema_of(p) for p in LOGS}
    claimed = set(wire.READABLE_OLDER_STATE_SCHEMAS) | set(wire.GATES_BEFORE_THEY_WERE_RECORDED)
    missing = sorted(claimed - schemas)
    assert not missing, f"no corpus log of state schema {missing}: add one (tests/eventlog/corpus/README.md)"


def test_a_log_naming_a_gate_this_version_does_not_know_is_refused(
    example_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newer version's gate is a decision this one cannot make: refused (exit 2), not replayed
    differently."""
    lines = example_log.read_bytes().split(b"\n")
    header = wire.parse_line(lines[0])
    assert header["gates"] == sorted(g.value for g in ALL_GATES)
    header["gates"] = [*header["gates"], "a-rule-of-tomorrow"]
    newer = tmp_path / "newer.jsonl"
    newer.write_bytes(b"\n".join([wire.dumps(header), *lines[1:]]))
    code = main(["replay", str(newer), "--verify"])
    _out, err = capsys.readouterr()
    assert code == 2
    assert "a-rule-of-tomorrow" in err and "not known to this version" in err
