"""A progress bar on stderr for ``replay`` and ``explain`` on a large log — only when stderr is a terminal.

tqdm draws it: bytes read of the file (with rate and ETA) and records folded (with their rate). On a pipe
or a file nothing is drawn, so scripts and logs see exactly the command's own lines. Lines the command
writes to stderr while the bar is up clear it first (tqdm's external write mode), so they stay whole.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any, cast

from tqdm import tqdm

from app.terminal import one_line

_EVERY = 256  # records between two updates: the bar costs nothing measurable in the replay loop


class LogProgress:
    """``at(offset)`` once per record read; a no-op unless ``stream`` is a terminal."""

    def __init__(self, path: str, stream: IO[str]) -> None:
        self.enabled = _is_terminal(stream)
        self.records = 0
        self._last = 0
        self._started = time.monotonic()
        self._bar: tqdm[Any] | None = None
        self._stream = stream
        if self.enabled:
            try:
                total: int | None = Path(path).stat().st_size
            except OSError:
                total = None
            self._bar = tqdm(
                total=total,
                desc=one_line(Path(path).name),
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                file=stream,
                leave=False,
                dynamic_ncols=True,
            )

    def at(self, offset: int) -> None:
        self.records += 1
        if self._bar is not None and self.records % _EVERY == 0:
            self._advance(offset)

    def _advance(self, offset: int) -> None:
        assert self._bar is not None
        self._bar.update(max(0, offset - self._last))
        self._last = max(self._last, offset)
        rate = self.records / max(time.monotonic() - self._started, 1e-6)
        first = self.records == _EVERY  # drawn at once, so even a short run shows its counts
        self._bar.set_postfix_str(f"{self.records} records, {rate:,.0f} records/s", refresh=first)

    def stream(self, inner: IO[str]) -> IO[str]:
        """``inner`` (stderr) such that each write clears the bar first."""
        if self._bar is None:
            return inner
        return cast(IO[str], _ClearingStream(inner, self._stream))

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.close()


class _ClearingStream:
    """Whole lines only, each written with the bar cleared (a part line would be drawn over)."""

    def __init__(self, inner: IO[str], bar_stream: IO[str]) -> None:
        self._inner = inner
        self._bar_stream = bar_stream
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            whole, _, self._pending = self._pending.rpartition("\n")
            with tqdm.external_write_mode(file=self._bar_stream):
                self._inner.write(whole + "\n")
                self._inner.flush()
        return len(text)

    def flush(self) -> None:
        return

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _is_terminal(stream: IO[str]) -> bool:
    if os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
