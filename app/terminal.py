"""Text from input, made safe to print on a terminal.

Names, messages and Secret names come from people who edit ConfigMaps and CRs. Printed raw, an escape
sequence (``\\x1b[2J``, a hyperlink, a title change) would act on the reader's terminal, and a
bidirectional override would make a line read differently than it is. Every human-readable output of
``render``, ``explain`` and ``replay`` goes through ``TerminalSafe``, which writes such characters as
``\\uXXXX`` (valid in JSON strings too, so the JSON outputs stay JSON). Tabs are kept. A line feed is
kept only as a write of its own (``print``'s end): our lines are printed one by one, so a line break
inside a write came from the data (a LiteLLM row's name, which nothing checks) and would forge a line.
"""

from __future__ import annotations

import re
import sys
from typing import IO, Any, cast

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def terminal_safe(text: str) -> str:
    """``text`` with control, bidi-override and lone-surrogate characters written as ``\\uXXXX``."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def one_line(text: str) -> str:
    """``terminal_safe`` text with its line breaks escaped too: for a message printed as one line."""
    return terminal_safe(text).replace("\n", "\\u000a")


class TerminalSafe:
    """A text stream that writes ``terminal_safe`` text to another one."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if text == "\n":
            return self._stream.write(text)
        return self._stream.write(one_line(text))

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def safe_streams(out: IO[str] | None, err: IO[str] | None) -> tuple[IO[str], IO[str]]:
    """``out`` and ``err`` (stdout and stderr when None), each writing only what ``print`` would end a
    line with: the streams of a command that prints what it read from a log."""
    return (
        cast(IO[str], TerminalSafe(out if out is not None else sys.stdout)),
        cast(IO[str], TerminalSafe(err if err is not None else sys.stderr)),
    )
