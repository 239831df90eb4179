"""Issue 12 item 7: render, replay and explain must not print terminal escape sequences raw."""

from __future__ import annotations

import io
import json

import pytest

from app.terminal import TerminalSafe, terminal_safe
from tests.app.test_render import render

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
