"""Request counts of the LiteLLM adapter driven by the real core: start, steady state, one change.

    .venv/bin/python -m tests.adapters.litellm.measure                      # the in-process fake
    .venv/bin/python -m tests.adapters.litellm.measure --real http://127.0.0.1:4000 --master-key sk-test

Counts are taken at the client (every HTTP request the adapter sends, by method and path), so they
are the same kind of number for the fake and the real proxy. Rows are named ``mct-<random>-...`` and
deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from typing import Any

import anyio
import httpx

from tests.adapters.litellm.conftest import FAKE_URL, MASTER_KEY, Peer, new_prefix
from tests.adapters.litellm.harness import Harness
from tests.fakes.litellm import FakeLiteLLM

WRITES = ("POST /model/new", "POST /model/update", "PATCH /model/{id}/update", "POST /model/delete")


class Counting(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.counts: Counter[str] = Counter()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "PATCH":
            path = "/model/{id}/update"
        self.counts[f"{request.method} {path}"] += 1
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def take(self) -> dict[str, Any]:
        out = dict(sorted(self.counts.items()))
        out["writes"] = sum(self.counts[w] for w in WRITES)
        self.counts.clear()
        return out


async def measure(real: str | None, master_key: str, models: int) -> dict[str, Any]:
    if real is None:
        fake = FakeLiteLLM(MASTER_KEY)
        peer = Peer("fake", FAKE_URL, MASTER_KEY, fake, new_prefix())
        counting = Counting(httpx.MockTransport(fake.handle))
    else:
        peer = Peer("real", real, master_key, None, new_prefix())
        counting = Counting(httpx.AsyncHTTPTransport())
    h = Harness.build(peer, transport=counting)
    out: dict[str, Any] = {"peer": peer.kind, "models": models}
    try:
        for i in range(models):
            h.add_kubeai(f"m{i}", context_window=8192, max_output_tokens=1024)
        h.add_external(
            "ext", model="openai/mct-upstream", apiBase="https://api.example.com/v1", apiKey="sk-x-123"
        )
        started = time.perf_counter()
        await h.start()
        out["start"] = {**counting.take(), "seconds": round(time.perf_counter() - started, 3)}
        for _ in range(5):
            await h.resync()
        out["steady_state_5_resyncs"] = counting.take()
        h.add_kubeai("m0", context_window=8192, max_output_tokens=2048)
        await h.resync()
        out["one_changed_model_then_resync"] = counting.take()
        await h.resync()
        out["next_resync"] = counting.take()
    finally:
        await peer.cleanup()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--real", metavar="BASE_URL", help="a real LiteLLM proxy (default: the in-process fake)"
    )
    parser.add_argument("--master-key", default=MASTER_KEY)
    parser.add_argument("--models", type=int, default=10)
    args = parser.parse_args()
    result = anyio.run(measure, args.real, args.master_key, args.models)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
