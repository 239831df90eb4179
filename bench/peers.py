"""Peers for the benchmarks: the real kube-apiserver and LiteLLM (started like the test fixtures start them,
so a reused LiteLLM ROOT and its lock are shared with test sessions), and the fast LiteLLM fake served on
a loopback port from a thread of this process, so its request log can be read directly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from contextlib import ExitStack
from typing import Any

import anyio.from_thread
import orjson

from tests.fakes.litellm import DELETE, NEW, PATCH, UPDATE, WRITE_ENDPOINTS, FakeLiteLLM
from tests.fixtures import kube_peer, litellm_peer


def start_kube() -> tuple[kube_peer.KubePeer, kube_peer._Starter]:
    """The fixture's starter (a new ROOT on free ports, or ``KUBECONFIG`` when set); stop it when done."""
    starter = kube_peer._Starter()
    peer = starter.wait()
    if isinstance(peer, str):
        raise RuntimeError(peer)
    return peer, starter


def start_litellm() -> litellm_peer._Starter:
    """Start the real LiteLLM (the tests' LATEST peer) in the background (about 1.5 min with a reused
    ROOT); ``wait`` later."""
    starter = litellm_peer._Starter(litellm_peer.LATEST, litellm_peer.PEER_CONFIG)
    if litellm_peer._configured(litellm_peer.LATEST) is None:
        starter.start()
    return starter


def wait_litellm(starter: litellm_peer._Starter, timeout: float = 600.0) -> litellm_peer.LiteLLMPeer:
    configured = litellm_peer._configured(litellm_peer.LATEST)
    if configured is not None:
        return configured
    peer = starter.wait(timeout)
    if isinstance(peer, str):
        raise RuntimeError(peer)
    return peer


class RecordingFake(FakeLiteLLM):
    """The fake, also keeping (monotonic time received, endpoint, row id) of every write request.

    Its answers are encoded with orjson: at 10,000 rows the standard library took ~0.1 s per
    /model/info, during which the fake's one event loop read no write, and P1 measures when a write is
    received (the benches inject no NaN or huge integer, which orjson would refuse or change)."""

    @staticmethod
    def encode(payload: Any) -> bytes:
        return orjson.dumps(payload)

    def __init__(self, master_key: str = "sk-test") -> None:
        super().__init__(master_key)
        self.log: list[tuple[float, str, str]] = []
        self.on_write: Any = None  # called with each (time, endpoint, id) as it arrives
        # Each row's /model/info entry, made once per row version (and its model's entry in the model
        # map): building 10,000 of them took the fake ~60 ms per poll, during which it read no write (P1
        # at 10,000 models). Answers are encoded at once and never changed, so sharing entries is safe.
        self._public_memo: dict[int, tuple[Any, Any, dict[str, Any]]] = {}

    def _public(self, row: Any) -> dict[str, Any]:
        model = row.params.get("model")
        mapped = self._model_map.get(model) if isinstance(model, str) else None
        hit = self._public_memo.get(id(row))
        if hit is not None and hit[0] is row and hit[1] == mapped:
            return hit[2]
        public = super()._public(row)
        if len(self._public_memo) > 2 * len(self._rows) + 1000:  # forget rows replaced or removed
            live = {id(r) for r in self._rows.values()}
            self._public_memo = {k: v for k, v in self._public_memo.items() if k in live}
        self._public_memo[id(row)] = (row, dict(mapped) if mapped is not None else None, public)
        return public

    async def answer(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, Any]:
        received = time.monotonic()
        result = await super().answer(method, target, headers, body)
        endpoint = self.answers[-1][0] if self.answers else ""
        if endpoint in WRITE_ENDPOINTS:
            entry = (received, endpoint, _row_id(endpoint, target, body))
            self.log.append(entry)
            if self.on_write is not None:
                self.on_write(entry)
        return result

    def writes_by_id(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, _, rid in self.log:
            counts[rid] = counts.get(rid, 0) + 1
        return counts


def _row_id(endpoint: str, target: str, body: bytes) -> str:
    try:
        if endpoint == PATCH:
            return target.split("?", maxsplit=1)[0].strip("/").split("/")[1]
        doc = json.loads(body or b"null")
        if endpoint == DELETE:
            return str(doc.get("id"))
        if endpoint in (NEW, UPDATE):
            return str((doc.get("model_info") or {}).get("id"))
    except (ValueError, AttributeError, IndexError):
        pass
    return "?"


class FakeServer:
    """``RecordingFake`` on a loopback port, served by an event loop in a thread of this process."""

    def __init__(self) -> None:
        self.fake = RecordingFake()
        self._stack = ExitStack()
        portal = self._stack.enter_context(anyio.from_thread.start_blocking_portal())
        self.url: str = self._stack.enter_context(portal.wrap_async_context_manager(self.fake.serving()))

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
