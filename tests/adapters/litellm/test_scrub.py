"""No secret leaves the LiteLLM adapter through quoted text: scrubbed first, then collapsed and shortened.

Regressions (issue 12): LiteLLM's text was collapsed and cut to 300 characters *before* it was
scrubbed, so a key with a trailing newline leaked whole and a key straddling the cut leaked its prefix
(into logs, routes.json and Events); 5xx details reached the observer's log lines unscrubbed.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import anyio
import httpx
import pytest

from adapters.backoff import Backoff, KeyedBackoff
from adapters.litellm.client import LiteLLMClient, LiteLLMTransportError
from adapters.litellm.executor import LiteLLMExecutor
from adapters.litellm.observer import LiteLLMObserver
from adapters.litellm.scrub import MAX_TEXT, REDACTED, safe_text
from adapters.litellm.sync import LiteLLMShared
from adapters.vault import SecretVault
from catalog_core.commands import CreateLiteLLMModel, SecretKey
from catalog_core.events import CommandCompleted, Event, LiteLLMUnreachable, Outcome
from catalog_core.jsonval import Json
from catalog_core.redact import secret_vault_key
from tests.adapters.litellm.conftest import Peer
from tests.fakes.litellm import INFO, NEW, Fault

pytestmark = pytest.mark.anyio

KEY = "sk-provider-0123456789abcdefghij"
MASTER = "sk-master-9876543210zyxwvuts"
REF = SecretKey("ai", "openai", "apiKey", "uid-1", "7", "fp1:00")


def leaks(text: str, secret: str = KEY) -> bool:
    """Any 8-character prefix of the secret (the whole secret included) in ``text``."""
    return secret.strip()[:8] in text


def logged(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)


def executor(
    client: LiteLLMClient, vault: SecretVault, shared: LiteLLMShared | None = None
) -> LiteLLMExecutor:
    rng = random.Random(3)
    return LiteLLMExecutor(
        client,
        vault,
        shared,
        backoff=KeyedBackoff(base=0.5, cap=8.0, rng=rng),
        duplicate_backoff=KeyedBackoff(base=0.5, cap=2.0, rng=rng),
    )


def vault_with(value: str) -> SecretVault:
    vault = SecretVault()
    vault.update({secret_vault_key("ai", "openai", "apiKey"): value})
    return vault


def create(peer: Peer) -> CreateLiteLLMModel:
    return CreateLiteLLMModel(
        model_id=peer.id("m"),
        model_name=peer.name("m"),
        litellm_params=Json.of({"model": "openai/m", "api_base": "http://a/v1"}),
        model_info=Json.of({"id": peer.id("m"), "ai_appliance_owner": "model-catalog"}),
        api_key=REF,
    )


def error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "x", "param": "None", "code": "400"}}


async def run(ex: LiteLLMExecutor, command: CreateLiteLLMModel) -> CommandCompleted:
    [event] = await ex.execute(command)
    assert isinstance(event, CommandCompleted)
    return event


# --- the order itself


def test_a_key_with_a_trailing_newline_is_scrubbed_in_its_trimmed_form() -> None:
    text = f"rejected key {KEY} for model x\n\nsee logs"
    shown = safe_text(text, [KEY + "\n"])
    assert not leaks(shown) and shown == f"rejected key {REDACTED} for model x see logs"


def test_a_key_straddling_the_cut_leaks_no_prefix() -> None:
    text = "x" * (MAX_TEXT - 12) + " " + KEY + " tail"
    shown = safe_text(text, [KEY])
    assert not leaks(shown) and len(shown) == MAX_TEXT and shown.endswith("...")


def test_a_key_whose_inner_whitespace_the_collapse_rewrites_is_scrubbed() -> None:
    secret = "sk-part-one\n  part-two-xyz"
    shown = safe_text("echo: sk-part-one \t part-two-xyz!", [secret])
    assert shown == f"echo: {REDACTED}!"


# --- every path that quotes LiteLLM


async def test_a_provider_key_with_a_trailing_newline_never_reaches_the_outcome_or_the_log(
    fake_peer: Peer, caplog: pytest.LogCaptureFixture
) -> None:
    assert fake_peer.fake is not None
    fake_peer.fake.inject(Fault(status=400, payload=error(f"bad api_key {KEY}\nfor this deployment")))
    ex = executor(fake_peer.client(), vault_with(KEY + "\n"))
    with caplog.at_level(logging.DEBUG):
        done = await run(ex, create(fake_peer))
    assert done.outcome is Outcome.TERMINAL and REDACTED in done.detail
    assert not leaks(repr(done)) and not leaks(logged(caplog))
    assert "failed for good" in logged(caplog)  # the path that logs was taken


async def test_a_key_across_the_300_character_cut_leaks_no_prefix(
    fake_peer: Peer, caplog: pytest.LogCaptureFixture
) -> None:
    assert fake_peer.fake is not None
    # The message was cut at 297 characters: its key began at 286, so its first 11 were shown.
    fake_peer.fake.inject(Fault(status=400, payload=error("y" * 285 + " " + KEY + " rejected")))
    ex = executor(fake_peer.client(), vault_with(KEY))
    with caplog.at_level(logging.DEBUG):
        done = await run(ex, create(fake_peer))
    assert done.outcome is Outcome.TERMINAL and len(done.detail) <= MAX_TEXT
    assert not leaks(done.detail) and not leaks(logged(caplog))


async def test_a_5xx_body_quoting_the_keys_is_scrubbed_before_the_observer_logs_it(
    fake_peer: Peer, caplog: pytest.LogCaptureFixture
) -> None:
    assert fake_peer.fake is not None
    fake_peer.fake.inject(
        Fault(status=503, payload=error(f"upstream: key {KEY} master {MASTER}"), endpoints=frozenset({NEW}))
    )
    client = fake_peer.client(MASTER)
    observer = LiteLLMObserver(client, resync_seconds=60)
    ex = executor(client, vault_with(KEY), shared=observer.shared)
    with caplog.at_level(logging.DEBUG):
        done = await run(ex, create(fake_peer))
    assert done.outcome is Outcome.RETRY
    text = logged(caplog)
    assert "unreachable" in text  # the observer logged the write's answer
    for secret in (KEY, MASTER):
        assert not leaks(text, secret) and not leaks(done.detail, secret)


async def test_a_5xx_from_model_info_quoting_the_master_key_is_scrubbed_in_the_event_and_log(
    fake_peer: Peer, caplog: pytest.LogCaptureFixture
) -> None:
    assert fake_peer.fake is not None
    fake_peer.fake.inject(
        Fault(status=500, payload=error(f"db down; auth={MASTER}\n"), endpoints=frozenset({INFO}))
    )
    observer = LiteLLMObserver(fake_peer.client(MASTER), resync_seconds=60, backoff=Backoff(base=5, cap=5))
    send, receive = anyio.create_memory_object_stream[Event](10)
    with caplog.at_level(logging.DEBUG):
        await observer.poll_once(send)
    [event] = [receive.receive_nowait()]
    assert isinstance(event, LiteLLMUnreachable) and REDACTED in event.detail
    assert not leaks(event.detail, MASTER) and not leaks(logged(caplog), MASTER)
    assert "answers with errors" in logged(caplog)


async def test_an_httpx_error_quoting_the_master_key_is_scrubbed(fake_peer: Peer) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot reach proxy with Bearer {MASTER}\n(retry)", request=request)

    client = fake_peer.client(MASTER + "\n", transport=httpx.MockTransport(refuse))
    with pytest.raises(LiteLLMTransportError) as caught:
        await client.info()
    assert caught.value.kind == "connect" and REDACTED in caught.value.detail
    assert not leaks(caught.value.detail, MASTER) and not leaks(str(caught.value), MASTER)


async def test_an_unexpected_exception_quoting_a_key_is_logged_scrubbed(
    fake_peer: Peer, caplog: pytest.LogCaptureFixture
) -> None:
    def explode(request: httpx.Request) -> httpx.Response:
        raise RuntimeError(f"a bug that quotes the request: api_key={KEY}")

    ex = executor(fake_peer.client(transport=httpx.MockTransport(explode)), vault_with(KEY))
    with caplog.at_level(logging.DEBUG):
        done = await run(ex, create(fake_peer))
    assert done.outcome is Outcome.RETRY and done.detail == "internal error: RuntimeError"
    text = logged(caplog)
    assert "RuntimeError" in text and "Traceback" in text  # still says where it went wrong
    assert not leaks(text)
