"""``model-catalog get PATH``: one of the controller's own HTTP endpoints, read from inside its container.

The image is slim (no curl, no wget), so the runbook's commands are ours:
``kubectl exec deploy/ai-model-catalog-controller -- model-catalog get /readyz``. It asks the server of
``model-catalog run`` in the same container: ``CATALOG_HTTP_HOST`` (loopback when it binds every
address) on ``CATALOG_HTTP_PORT`` (8080), with ``Authorization: Bearer $CATALOG_DEBUG_TOKEN`` when that is
set (``/debug/eventlog`` answers loopback clients, or that token). Only the standard library: it starts
in a fraction of the controller's time and memory.

A 2xx body goes to stdout as it arrives (``/debug/eventlog > ring.jsonl``); any other answer's body to
stderr, one line, and exit 1 (``/readyz`` says why it is not ready); no answer at all is exit 2.
"""

from __future__ import annotations

import http.client
import os
import sys
from collections.abc import Mapping
from typing import BinaryIO, TextIO

from app.terminal import one_line

ENDPOINTS = ("/healthz", "/readyz", "/metrics", "/debug/eventlog")
UNSPECIFIED = ("", "0.0.0.0", "::", "[::]")
DEFAULT_PORT = 8080
EXIT_ANSWERED_NOT_OK = 1
EXIT_NO_ANSWER = 2
_CHUNK = 1 << 16
_ERROR_BODY_LIMIT = 4096


def address(env: Mapping[str, str], port: int | None = None) -> tuple[str, int]:
    """Where ``model-catalog run`` in this container listens, as a client reaches it."""
    host = env.get("CATALOG_HTTP_HOST", "").strip()
    if host in UNSPECIFIED:
        host = "127.0.0.1"
    if port is None:
        text = env.get("CATALOG_HTTP_PORT", "").strip()
        port = int(text) if text.isascii() and text.isdigit() and 0 < int(text) < 65536 else DEFAULT_PORT
    return host.strip("[]"), port


def get(
    path: str,
    env: Mapping[str, str],
    *,
    port: int | None = None,
    timeout: float = 30.0,
    out: BinaryIO | None = None,
    err: TextIO | None = None,
) -> int:
    out = out if out is not None else sys.stdout.buffer
    err = err if err is not None else sys.stderr
    host, port = address(env, port)
    headers = {"User-Agent": "model-catalog-get"}
    token = env.get("CATALOG_DEBUG_TOKEN", "")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", path, headers=headers)
        answer = connection.getresponse()
        if 200 <= answer.status < 300:
            while chunk := answer.read(_CHUNK):
                out.write(chunk)
            out.flush()
            return 0
        body = answer.read(_ERROR_BODY_LIMIT).decode("utf-8", "replace").strip()
        print(f"model-catalog: GET {path}: HTTP {answer.status}: {one_line(body)}", file=err)
        return EXIT_ANSWERED_NOT_OK
    except (OSError, http.client.HTTPException) as exc:
        where = f"{host}:{port}"
        print(
            f"model-catalog: no answer from model-catalog run on {where} ({type(exc).__name__}: "
            f"{one_line(str(exc))}); is the controller running in this container?",
            file=err,
        )
        return EXIT_NO_ANSWER
    finally:
        connection.close()


def valid_path(text: str) -> str:
    """A path of this server: starts with /, printable ASCII, no spaces."""
    if not text.startswith("/") or not text.isascii() or not text.isprintable() or " " in text:
        raise ValueError(f"{text!r} is not a path such as {', '.join(ENDPOINTS)}")
    return text


def main(path: str, port: int | None, timeout: float) -> int:
    return get(path, os.environ, port=port, timeout=timeout)
