"""JSON logs, one object per line. Only explicit fields are printed (never request bodies or Secrets)."""

from __future__ import annotations

import datetime as dt
import logging
import sys
from typing import Any, TextIO

import orjson

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info and record.exc_info[0] is not None:
            # The exception's type and message only: tracebacks can carry local values.
            out["error"] = f"{record.exc_info[0].__name__}: {record.exc_info[1]}"[:500]
        return orjson.dumps(out, default=str).decode()


def setup(level: str = "INFO", stream: TextIO | None = None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "kubernetes_asyncio", "aiohttp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
