"""Progress on long work (issue 16): ``replay`` and ``explain`` draw a bar on stderr when it is a
terminal (a real pseudo-terminal here) and write nothing of it otherwise."""

from __future__ import annotations

import fcntl
import json
import os
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "event-log.jsonl"
TICKS = 3000


@pytest.fixture(scope="module")
def long_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example log and then 3000 ticks that change nothing (a long, valid log)."""
    lines = EXAMPLE.read_text().splitlines()
    last = json.loads(lines[-1])
    now = last["event"]["now"]
    ticks = [
        json.dumps(
            {"seq": last["seq"] + i, "ts": last["ts"], "k": "event", "event": {"t": "ticked", "now": now}}
        )
        for i in range(1, TICKS + 1)
    ]
    path = tmp_path_factory.mktemp("progress") / "long.jsonl"
    path.write_text("\n".join(lines + ticks) + "\n")
    return path


@pytest.fixture(scope="module")
def example_counts() -> tuple[int, int, int]:
    """(events, last seq, commands) of the example log alone, as replay reports them: the long log adds
    TICKS events and nothing else (its counts are pinned once, in tests/eventlog/test_cli.py)."""
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "replay", str(EXAMPLE)],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = re.fullmatch(r"replayed (\d+) events \(seq 1\.\.(\d+)\): (\d+) commands\n", done.stderr)
    assert found is not None, done.stderr
    events, seq, commands = (int(g) for g in found.groups())
    return events, seq, commands


def _env() -> dict[str, str]:
    return {**os.environ, "TERM": "xterm", "COLUMNS": "160"}


def _on_a_terminal(*args: str) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal: (exit status, stdout, what the terminal got)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # a window, as a terminal has
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", *args],
        cwd=REPO,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    return proc.wait(60), out, seen.decode(errors="replace")


def test_replay_draws_a_bar_on_a_terminal(long_log: Path, example_counts: tuple[int, int, int]) -> None:
    code, out, terminal = _on_a_terminal("replay", str(long_log))
    assert code == 0
    assert "long.jsonl:" in terminal  # the bar: file, percent, bytes, rate, ETA, records
    assert "%|" in terminal and "B/s" in terminal and "<" in terminal
    assert "records, " in terminal and "records/s" in terminal
    assert f"replayed {example_counts[0] + TICKS} events" in terminal  # its own line, whole, after the bar
    assert "\r" not in out and "records/s" not in out  # stdout untouched


def test_explain_draws_a_bar_on_a_terminal(long_log: Path) -> None:
    code, out, terminal = _on_a_terminal("explain", str(long_log), "phi-4-mini")
    assert code == 0
    assert "%|" in terminal and "records/s" in terminal
    assert "final state" in out and "%|" not in out


@pytest.mark.parametrize("command", [["replay"], ["explain"]])
def test_nothing_of_it_when_stderr_is_not_a_terminal(
    long_log: Path, command: list[str], example_counts: tuple[int, int, int]
) -> None:
    args = [*command, str(long_log)] + (["phi-4-mini"] if command == ["explain"] else [])
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0
    assert "\r" not in done.stderr and "%|" not in done.stderr and "records/s" not in done.stderr
    if command == ["replay"]:
        events, seq, commands = example_counts
        expected = f"replayed {events + TICKS} events (seq 1..{seq + TICKS}): {commands} commands\n"
        assert done.stderr == expected
    else:
        assert done.stderr == ""
