"""Streaming an event log from disk: one line at a time, never the whole file.

Every problem is a :class:`LogReadError` naming the file and the line. A log of
another format version is read through the migrations of
:mod:`contracts.eventlog` when they exist, and refused otherwise.

Lines are read with a bound (``max_line_bytes``, 64 MiB by default): a line
longer than that is refused as a ``LogReadError`` rather than read whole, so a
damaged or foreign file (one 300 MB line took 907 MB to replay) costs at most
the bound. The largest lines the recorder writes are snapshots, which a catalog
keeps far below it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

import orjson

from adapters.eventlog import DEFAULT_MAX_LINE_BYTES
from contracts import eventlog as wire

__all__ = ["DEFAULT_MAX_LINE_BYTES", "LogFile", "LogLine", "LogReadError"]

# Each record is one readline: with the default 8 KiB buffer a million of them took 0.61 s, with 1 MiB
# 0.28 s (bench P6 reads a million lines per verify).
_READ_BUFFER_BYTES = 1 << 20


class LogReadError(Exception):
    """An unreadable log, or a log this version refuses to read (``path:line: reason``)."""

    def __init__(self, path: Path | str, line: int, message: str) -> None:
        super().__init__(message)
        self.path = str(path)
        self.line = line
        self.message = message

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"

    def __reduce__(self) -> tuple[type[LogReadError], tuple[str, int, str]]:
        # raised in a worker of a verify in parts (app.replay_parts), re-raised whole in the parent
        return LogReadError, (self.path, self.line, self.message)


class LogLine(NamedTuple):
    number: int  # 1-based
    offset: int  # byte offset of the line in the file
    raw: dict[str, Any]  # the record, migrated to the current version and its envelope checked


class LogFile:
    """One log file: its header (read and checked on open) and its records as a stream."""

    def __init__(self, path: Path | str, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be >= 1")
        self.path = Path(path)
        self.max_line_bytes = max_line_bytes
        first = self._first_line()
        raw = self._load(first, 1)
        if raw.get("k") != "header":
            raise LogReadError(self.path, 1, "the first record is not a header: not a complete event log")
        try:
            if raw.get("format") != wire.FORMAT:
                raise wire.LogFormatError(f"not a model-catalog event log (format {raw.get('format')!r})")
            version = raw.get("version")
            if type(version) is not int:
                raise wire.LogFormatError("header record: version must be an integer")
            chain = wire.migration_chain(version)
            if chain is None:
                raise wire.LogFormatError(wire.refusal(version, str(raw.get("service_version", "?"))))
            self.migrations = chain
            self.source_version = version
            self.header = wire.decode_header(self._migrate(raw))
        except wire.LogFormatError as exc:
            raise LogReadError(self.path, 1, str(exc)) from None

    def _first_line(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                line = next(self._lines(f, 1), b"")
        except OSError as exc:
            raise LogReadError(self.path, 0, f"cannot read: {exc.strerror or exc}") from None
        if not line:
            raise LogReadError(self.path, 0, "empty file: not an event log")
        return line

    def _lines(self, f: IO[bytes], number: int) -> Iterator[bytes]:
        """The lines of ``f`` from its position (line ``number``) on; raises ``LogReadError`` at the
        first line longer than ``max_line_bytes``, having read no more than that of it."""
        limit = self.max_line_bytes
        readline = f.readline
        while line := readline(limit + 1):
            if len(line) > limit:
                raise self._too_long(number)
            yield line
            number += 1

    def _too_long(self, number: int) -> LogReadError:
        return LogReadError(
            self.path,
            number,
            f"a line longer than {self.max_line_bytes} bytes: not a record of this log, or one larger than "
            "--max-line-bytes allows",
        )

    def _load(self, line: bytes, number: int) -> dict[str, Any]:
        try:
            return wire.load(line)
        except wire.LogFormatError as exc:
            cut = "" if line.endswith(b"\n") else "; the record is cut short (the writer stopped mid-line?)"
            raise LogReadError(self.path, number, f"{exc}{cut}") from None

    def _migrate(self, raw: dict[str, Any]) -> dict[str, Any]:
        for migration in self.migrations:
            try:
                raw = migration(raw)
            except Exception as exc:  # a migration meets a record it cannot upgrade
                raise wire.LogFormatError(
                    f"cannot upgrade this record from format version {self.source_version}: {exc!r}"
                ) from None
        return raw

    def records(self, offset: int = 0, number: int = 1) -> Iterator[LogLine]:
        """The records from byte ``offset`` (which starts line ``number``) to the end."""
        # Performance (bench P6: a verify reads a million lines): the line bound and the envelope of a
        # well-formed record (its kind's keys, a non-negative int seq, a str ts) are checked inline, and a
        # LogLine is made by tuple.__new__, without its generated __new__ (together ~0.4 us of ~2.5 us per
        # record); anything else goes the careful way, which says why.
        loads, check, migrations = orjson.loads, wire.check_envelope, self.migrations
        keys_of, limit, new_line = wire.ENVELOPE_KEYS, self.max_line_bytes, tuple.__new__
        try:
            with open(self.path, "rb", buffering=_READ_BUFFER_BYTES) as f:
                f.seek(offset)
                readline = f.readline
                while line := readline(limit + 1):
                    if len(line) > limit:
                        raise self._too_long(number)
                    try:
                        raw = loads(line)
                        if migrations:
                            raw = self._migrate(raw)
                        if (
                            raw.keys() != keys_of.get(raw.get("k"))
                            or type(seq := raw["seq"]) is not int
                            or seq < 0
                            or type(raw["ts"]) is not str
                        ):
                            check(raw)
                    except (orjson.JSONDecodeError, wire.LogFormatError, AttributeError, TypeError):
                        raw = self._load(line, number)  # raises with the reason, unless it is JSON
                        try:
                            raw = check(self._migrate(raw))
                        except wire.LogFormatError as exc:
                            raise LogReadError(self.path, number, str(exc)) from None
                    yield new_line(LogLine, (number, offset, raw))
                    offset += len(line)
                    number += 1
        except OSError as exc:
            raise LogReadError(self.path, number, f"cannot read: {exc.strerror or exc}") from None

    def snapshot_after(self, offset: int) -> int | None:
        """The byte offset of the first snapshot record that starts after byte ``offset`` (None: none, or
        a line on the way longer than the bound). Reads from ``offset`` on, parsing only snapshot lines."""
        marker = b'"snapshot"'
        try:
            with open(self.path, "rb", buffering=_READ_BUFFER_BYTES) as f:
                f.seek(offset)
                if offset > 0:
                    offset += len(f.readline(self.max_line_bytes + 1))  # the rest of the line it falls in
                for line in self._lines(f, 0):
                    if marker in line[:128] and wire.load(line).get("k") == "snapshot":
                        return offset
                    offset += len(line)
        except (OSError, LogReadError, wire.LogFormatError):
            return None  # the sequential read reports it, with its line
        return None

    def line_number_at(self, offset: int) -> int:
        """The 1-based number of the line that starts at byte ``offset``."""
        newlines = 0
        buffer = bytearray(1 << 22)
        try:
            with open(self.path, "rb", buffering=0) as f:
                left = offset
                while left > 0:
                    read = f.readinto(memoryview(buffer)[: min(left, len(buffer))])
                    if not read:
                        break
                    newlines += buffer.count(b"\n", 0, read)
                    left -= read
        except OSError as exc:
            raise LogReadError(self.path, 0, f"cannot read: {exc.strerror or exc}") from None
        return newlines + 1

    def latest_snapshot(self, until: int | None) -> LogLine | None:
        """The last snapshot record with ``seq <= until`` (any, when ``until`` is None), by a cheap scan."""
        found: LogLine | None = None
        # The recorder writes seq, ts and k first (and a key-sorted copy has after and k first too),
        # so a snapshot shows in a line's first bytes: only those lines are parsed.
        marker = b'"snapshot"'
        offset, number = 0, 1
        try:
            with open(self.path, "rb", buffering=_READ_BUFFER_BYTES) as f:
                for line in self._lines(f, number):
                    if marker in line[:128]:
                        raw = self._load(line, number)
                        if raw.get("k") == "snapshot":
                            seq = raw.get("seq")
                            if type(seq) is int and until is not None and seq > until:
                                break
                            found = LogLine(number, offset, raw)
                    offset += len(line)
                    number += 1
        except OSError as exc:
            raise LogReadError(self.path, number, f"cannot read: {exc.strerror or exc}") from None
        if found is not None:
            try:
                found = LogLine(found.number, found.offset, wire.check_envelope(self._migrate(found.raw)))
            except wire.LogFormatError as exc:
                raise LogReadError(self.path, found.number, str(exc)) from None
        return found
