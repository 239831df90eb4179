"""Issue 32 items 1 and 2 on the real LiteLLM proxy, end to end: a loopback listener plays the attacker's
host, and real requests go through LiteLLM to every route the controller wrote. No canary — a provider
Secret's value, or one of LiteLLM's own credentials from its environment — ever reaches the listener.

Each test has a positive control that shows the canary *would* arrive (a route the controller is told to
allow): so the test cannot pass because the listener, LiteLLM or its environment is not what we think.
The peer's environment holds ``AMBIENT_CANARIES`` (``tests/fixtures/litellm_peer.py`` starts it so); a
peer given by ``LITELLM_BASE_URL`` without them makes these tests skip (fail with
MODEL_CATALOG_REQUIRE_PEERS=1), saying so.

Run on LiteLLM 1.108.7 and 1.84.0 (``LITELLM_VERSION=1.84.0`` with its own ROOT).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs
import httpx
import pytest

from catalog_core.commands import LiteralKey
from catalog_core.config import CatalogConfig
from catalog_core.plan import all_records
from catalog_core.registry import route_id
from catalog_core.values import Source
from tests.adapters.litellm.conftest import Peer, new_prefix
from tests.adapters.litellm.harness import Harness
from tests.fixtures.litellm_peer import AMBIENT_CANARIES, LiteLLMPeer
from tests.unavailable import skip_or_fail

pytestmark = [pytest.mark.anyio, pytest.mark.litellm]

_NO_DAMPING = {"litellm_settle_seconds": 0.0, "litellm_settle_cap_seconds": 0.0}
_COMPLETION = {
    "id": "chatcmpl-canary",
    "object": "chat.completion",
    "created": 1,
    "model": "canary",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


@attrs.define
class Listener:
    """The attacker's host: answers every POST as an OpenAI chat completion and keeps what it received."""

    url: str
    received: list[str]

    def seen(self, value: str) -> bool:
        return any(value in text for text in self.received)

    def auth(self) -> list[str]:
        """The credential headers of every request, as "name: value" (the name in lower case)."""
        out = []
        for text in self.received:
            for line in text.splitlines():
                name, _, value = line.partition(":")
                if name.lower() in ("authorization", "api-key", "x-api-key"):
                    out.append(f"{name.lower()}: {value.strip()}")
        return out


@pytest.fixture
def listener() -> Iterator[Listener]:
    received: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode(errors="replace")
            received.append(f"{self.requestline}\r\n{self.headers}\r\n{body}")
            answer = json.dumps(_COMPLETION).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, name="attacker-listener", daemon=True)
    thread.start()
    try:
        yield Listener(f"http://127.0.0.1:{server.server_address[1]}", received)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
async def real(litellm_peer: LiteLLMPeer) -> Any:
    handle = Peer("real", litellm_peer.base_url, litellm_peer.master_key, None, new_prefix())
    try:
        yield handle
    finally:
        await handle.cleanup()


def _ask(peer: Peer, model: str, *, written: bool = True) -> int:
    """One chat completion through LiteLLM; its HTTP status. A route LiteLLM has just taken from its
    database may need a moment: for one that was ``written``, "no such model" is asked again for 30 s."""
    headers = {"Authorization": f"Bearer {peer.master_key}"}
    body = {"model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 5}
    deadline = time.monotonic() + (30.0 if written else 0.0)
    with httpx.Client(base_url=peer.base_url, headers=headers, timeout=60.0) as http:
        while True:
            answer = http.post("/v1/chat/completions", json=body)
            missing = answer.status_code in (400, 404) and "model" in answer.text.lower()
            if not missing or time.monotonic() > deadline:
                return answer.status_code
            time.sleep(0.5)


def _reasons(h: Harness) -> dict[str, str]:
    return {r.as_json()["name"]: r.as_json()["reason"] for r in all_records(h.state)}


def _require_canary(listener: Listener, name: str, value: str) -> None:
    """The positive control's verdict: without it, a clean listener would prove nothing."""
    if not listener.seen(value):
        skip_or_fail(
            f"LiteLLM did not send its {name} to an allowed route: its environment has no canary "
            f"(start the peer with {name}={value}; credential headers seen: {listener.auth()})"
        )


async def test_a_provider_secret_never_reaches_an_api_base_it_does_not_name(real: Peer, listener: Listener):
    """Issue 32 item 1: an activation names the allow-listed OpenAI Secret and the attacker's apiBase."""
    canary = f"sk-provider-canary-{uuid.uuid4().hex}"
    h = Harness.build(real, config=CatalogConfig(**_NO_DAMPING))
    h.add_secret("ai-model-provider-openai", {"apiKey": canary})
    ref = {"name": "ai-model-provider-openai", "key": "apiKey"}
    exfil = h.add_activation(
        "exfil", model="openai/gpt-4o", apiBase=f"{listener.url}/v1", apiKeySecretRef=ref
    )
    exfil2 = h.add_external(
        "exfil2", model="openai/gpt-4o", apiBase=f"{listener.url}/v1", apiKeySecretRef=ref
    )
    await h.start()
    written = set(await h.rows())
    for name in (exfil, exfil2):
        _ask(real, name, written=route_id(Source.ACTIVATION, name) in written)
    assert not listener.seen(canary), listener.auth()  # before: "authorization: Bearer sk-provider-..."
    assert listener.received == []
    assert written == set()
    assert _reasons(h)[exfil] == _reasons(h)[exfil2] == "SecretApiBaseNotAllowed"

    # control: once the Secret names the listener, the same route is written and the key arrives there
    h.edit_secret(
        "ai-model-provider-openai", {"apiKey": canary}, resource_version="2", api_bases=listener.url
    )
    await h.converge()
    assert _reasons(h)[exfil] == "Published"
    assert _ask(real, exfil) == 200
    assert listener.seen(f"Bearer {canary}"), listener.auth()


async def test_litellms_own_credentials_never_reach_a_custom_api_base(real: Peer, listener: Listener):
    """Issue 32 item 2: items with no key and the attacker's apiBase. Before, the OpenAI-compatible one was
    written without api_key and LiteLLM sent OPENAI_API_KEY from its environment to the listener."""
    h = Harness.build(real, config=CatalogConfig(**_NO_DAMPING))
    base = f"{listener.url}/v1"
    plain = h.add_external("plain", model="openai/gpt-4o", apiBase=base)  # a local OpenAI-compatible server
    vllm = h.add_activation("vllm", model="hosted_vllm/qwen", apiBase=base)
    azure = h.add_external("azure", model="azure/gpt-4o", apiBase=listener.url, apiVersion="2024-06-01")
    guess = h.add_activation("guess", model="gpt-4o", apiBase=base)  # LiteLLM would pick the provider
    await h.start()
    written = {c.model_name: c.api_key for c in h.executed if hasattr(c, "api_key")}
    statuses = {name: _ask(real, name, written=name in written) for name in (plain, vllm, azure, guess)}
    for canary in AMBIENT_CANARIES.values():
        assert not listener.seen(canary), listener.auth()  # before: "authorization: Bearer sk-canary-..."
    assert (statuses[plain], statuses[vllm]) == (200, 200)  # the keyless server still works
    assert listener.auth() == ["authorization: Bearer none"] * 2
    assert written == {plain: LiteralKey("none"), vllm: LiteralKey("none")}
    reasons = _reasons(h)
    assert (reasons[plain], reasons[vllm]) == ("Published", "Published")
    assert (reasons[azure], reasons[guess]) == ("AmbientCredentialRejected", "AmbientCredentialRejected")


async def test_the_admin_may_let_litellms_own_credentials_go_to_a_named_api_base(
    real: Peer, listener: Listener
):
    """The positive control of item 2, and the documented Azure case: with the listener in
    CATALOG_AMBIENT_CREDENTIAL_API_BASES, keyless routes are written without a key and LiteLLM sends its
    own (this is what any keyless route to any host did before)."""
    config = CatalogConfig(ambient_credential_api_bases=(listener.url,), **_NO_DAMPING)
    h = Harness.build(real, config=config)
    plain = h.add_external("plain", model="openai/gpt-4o", apiBase=f"{listener.url}/v1")
    azure = h.add_external("azure", model="azure/gpt-4o", apiBase=listener.url, apiVersion="2024-06-01")
    await h.start()
    assert _reasons(h)[plain] == _reasons(h)[azure] == "Published"
    assert all(c.api_key is None for c in h.executed if hasattr(c, "api_key"))
    _ask(real, plain)
    _require_canary(listener, "OPENAI_API_KEY", AMBIENT_CANARIES["OPENAI_API_KEY"])
    _ask(real, azure)
    _require_canary(listener, "AZURE_API_KEY", AMBIENT_CANARIES["AZURE_API_KEY"])


async def test_a_revoked_secret_leaves_litellm_in_the_tick_that_sees_it(real: Peer, listener: Listener):
    """Issue 32 item 3 on the real proxy: the route carrying the key is deleted from LiteLLM, so no request
    can carry the key any more, although the item is also broken (its last good route is not kept)."""
    canary = f"sk-provider-canary-{uuid.uuid4().hex}"
    h = Harness.build(real, config=CatalogConfig(**_NO_DAMPING))
    h.add_secret("ai-model-provider-gw", {"apiKey": canary}, api_bases=listener.url)
    ref = {"name": "ai-model-provider-gw", "key": "apiKey"}
    name = h.add_external("gw", model="openai/gpt-4o", apiBase=f"{listener.url}/v1", apiKeySecretRef=ref)
    await h.start()
    rid = route_id(Source.EXTERNAL, name)
    assert rid in await h.rows()
    assert _ask(real, name) == 200 and listener.seen(canary)  # the key went where the Secret allowed
    h.add_external("gw", model="openai/gpt-4o", apiBase=f"{listener.url}/v1", apiKeySecretRef=ref, type="x")
    h.fold(h.listings())
    await h.converge()
    assert rid in await h.rows()  # a broken item keeps its last good route...
    h.edit_secret("ai-model-provider-gw", {"apiKey": canary}, resource_version="2")  # un-annotated
    await h.converge()
    assert rid not in await h.rows()
    listener.received.clear()
    assert _ask(real, name, written=False) >= 400
    assert not listener.seen(canary)
