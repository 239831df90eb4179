"""Issue 12 item 7: render, replay and explain must not print terminal escape sequences raw."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from adapters.eventlog.recorder import Recorder, RecorderSettings
from app import explain, replay
from app.terminal import TerminalSafe, one_line, terminal_safe
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from tests.app.test_render import render
from tests.core import builders as b
from tests.simulation import SimulatedShell

CSI = "\x1b["
C1_CSI = "\x9b"  # a single-character CSI that some UTF-8 terminals obey
RLO = "\u202e"  # right-to-left override: a line that reads differently than it is


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        (f"{CSI}2Jgone", "\\u001b[2Jgone"),
        (f"a{C1_CSI}31m", "a\\u009b31m"),
        (f"ok{RLO}txt.exe", "ok\\u202etxt.exe"),
        ("lone \ud800", "lone \\ud800"),
        ("bell\x07", "bell\\u0007"),
        ("line\nnext\tcol", "line\nnext\tcol"),  # our own lines and columns stay
        ("模型-ü", "模型-ü"),
    ],
)
def test_terminal_safe_escapes_what_a_terminal_would_obey(raw, safe):
    assert terminal_safe(raw) == safe


def test_escaped_text_in_a_json_string_is_still_the_same_json_value():
    value = f"x{CSI}2J{C1_CSI}{RLO}y"
    text = terminal_safe(json.dumps({"v": value}, ensure_ascii=False))
    assert json.loads(text) == {"v": value}
    assert not any(c in text for c in ("\x1b", C1_CSI, RLO))


def test_the_stream_wrapper_escapes_every_write():
    out = io.StringIO()
    print(f"model {CSI}31mred", file=TerminalSafe(out))  # type: ignore[arg-type]
    assert out.getvalue() == "model \\u001b[31mred\n"


def test_render_prints_no_escape_sequence_from_the_input(tmp_path):
    model = {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {
            "name": "llama",
            "namespace": "ai",
            "annotations": {
                "ai-appliance.io/engine": f"vllm{C1_CSI}2J{RLO}",
                "ai-appliance.io/context-window": f"{CSI}2J",
            },
        },
        "spec": {"features": ["TextGeneration"]},
        "status": {"replicas": {"ready": 1}},
    }
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps([model]))
    out = render("-f", str(path))
    assert out.returncode == 0, out.stderr
    for text in (out.stdout, out.stderr):
        assert not any(c in text for c in ("\x1b", C1_CSI, RLO)), text
    parsed = json.loads(out.stdout)  # still JSON, the value intact once parsed
    assert any(m["id"] == "llama" for m in json.loads(parsed["catalog"]["catalog.json"])["models"])


def test_the_stream_wrapper_ends_lines_only_where_print_does():
    """Our lines are printed one by one: a line break inside a write came from the data."""
    out = io.StringIO()
    stream = TerminalSafe(out)  # type: ignore[arg-type]
    print("row evil\nFAKE published", file=stream)
    print("x\n", "FAKE", file=stream)  # print writes each argument on its own
    stream.write("seq 1: x\r\ny\n")
    assert out.getvalue() == ("row evil\\u000aFAKE published\nx\\u000a FAKE\nseq 1: x\\u000d\\u000ay\\u000a")


HOSTILE = "evil\x1b[2J\nFAKE published\u202e"


def _hostile_log(path: Path) -> Path:
    """A recorded run in which LiteLLM holds a row someone else made, named with an escape and a line
    break (LiteLLM does not check names), and an apiBase carries credentials."""
    config = CatalogConfig()
    shell = SimulatedShell(config, now=1000.0)
    settings = RecorderSettings(path, max_bytes=1 << 24, max_files=1, snapshot_every=40, ring_size=0)
    recorder = Recorder(settings, config, writer="inline", clock=lambda: shell.now, run_id="hostile")
    shell.recorder = recorder
    shell.world.rows["hand\nFAKE id"] = b.row(HOSTILE, "hand\nFAKE id", api_base="http://h.example/v1")
    models = [{"name": "q", "model": "openai/q", "apiBase": "https://me:pw-log-1@h.example/v1?k=sk-log-2"}]
    for source in SourceKind:
        if source is not SourceKind.SECRETS:
            shell.listed(
                source, [b.external_configmap(models)] if source is SourceKind.EXTERNAL_MODELS else []
            )
    shell.rows_observed()
    shell.settle()
    recorder.close()
    return path


@pytest.mark.parametrize("model", [HOSTILE, "q", "nobody"])
def test_explain_prints_no_line_break_or_escape_from_the_data(tmp_path, model):
    log = _hostile_log(tmp_path / "log.jsonl")
    out, err = io.StringIO(), io.StringIO()
    explain.run(str(log), model, out=out, err=err)
    text = out.getvalue() + err.getvalue()
    assert text.strip()
    assert not any(line.startswith("FAKE") for line in text.splitlines()), text
    assert not any(c in text for c in ("\x1b", RLO)), text
    assert "pw-log-1" not in text and "sk-log-2" not in text


def test_replay_shows_no_credentials_of_an_api_base(tmp_path):
    log = _hostile_log(tmp_path / "log.jsonl")
    out, err = io.StringIO(), io.StringIO()
    assert replay.run(str(log), out=out, err=err) == 0
    text = out.getvalue()
    assert "litellm-create ai-appliance-external-q" in text
    assert "api_base=https://<redacted>@h.example/v1?<redacted>" in text
    assert "pw-log-1" not in text and "sk-log-2" not in text


def test_one_line_escapes_line_breaks_as_well():
    assert one_line(f"bad\nline{CSI}2J\r") == "bad\\u000aline\\u001b[2J\\u000d"
