"""The executor's outcome mapping, case by case: on the fake and the real proxy where LiteLLM itself
produces the answer, on the fake alone where a fault has to be injected."""

from __future__ import annotations

import random
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from adapters.backoff import KeyedBackoff
from adapters.litellm.client import Answer, LiteLLMClient, LiteLLMTransportError
from adapters.litellm.executor import LiteLLMExecutor, Op, classify
from adapters.litellm.sync import LiteLLMShared, PeerHealth, PeerStatus
from adapters.vault import SecretVault
from catalog_core.commands import (
    CreateLiteLLMModel,
    DeleteLiteLLMModel,
    InlineKeyRef,
    LiteralKey,
    RecreateLiteLLMModel,
    SecretKey,
    UpdateLiteLLMModel,
    WriteCatalog,
)
from catalog_core.events import CommandCompleted, Outcome
from catalog_core.jsonval import Json
from catalog_core.reasons import Reason
from catalog_core.redact import inline_vault_key, secret_vault_key
from catalog_core.sources.litellm_row import whitelist_row
from tests.adapters.litellm.conftest import Peer
from tests.fakes.litellm import DELETE, NEW, PATCH, Fault

pytestmark = pytest.mark.anyio

PROVIDER_KEY = "sk-provider-key-9f8e7d6c5b4a"
NONE_KEY = LiteralKey("none")


def write(
    kind: type[CreateLiteLLMModel | UpdateLiteLLMModel | RecreateLiteLLMModel],
    peer: Peer,
    suffix: str = "m",
    *,
    params: dict[str, Any] | None = None,
    info: dict[str, Any] | None = None,
    api_key: Any = NONE_KEY,
) -> Any:
    name = peer.name(suffix)
    return kind(
        model_id=peer.id(suffix),
        model_name=name,
        litellm_params=Json.of({"model": f"openai/{name}", "api_base": "http://a/v1", **(params or {})}),
        model_info=Json.of({"id": peer.id(suffix), "ai_appliance_owner": "model-catalog", **(info or {})}),
        api_key=api_key,
    )


class _RecordedHealth(PeerHealth):
    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self._recorder = recorder

    def report(self, status: PeerStatus, detail: str = "", *, via: str) -> bool:
        assert not self._recorder.holding  # learnt from the answer, before the outcome's share of the lock
        self._recorder.calls.append(f"answered:{status.value}")
        return super().report(status, detail, via=via)


class Recorder(LiteLLMShared):
    """What the writer shares with the observer, recording what the executor told it (and checking the
    outcome is built under the lock, after the write was answered)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []
        self.holding = False
        self.health = _RecordedHealth(self)

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[None]:
        self.holding = True
        self.calls.append("enter")
        try:
            yield
        finally:
            self.calls.append("exit")
            self.holding = False

    def answered(self) -> Any:
        return self._writing()

    def present(self, model_id: str) -> None:
        assert not self.holding  # the request waited for nothing: the lock is for the outcome
        self.calls.append(f"present:{model_id}")
        super().present(model_id)

    def absent(self, model_id: str) -> None:
        self.calls.append(f"absent:{model_id}")
        super().absent(model_id)


def executor(
    client: LiteLLMClient, vault: SecretVault | None = None, hooks: LiteLLMShared | None = None
) -> LiteLLMExecutor:
    rng = random.Random(7)
    return LiteLLMExecutor(
        client,
        vault or SecretVault(),
        hooks,
        backoff=KeyedBackoff(base=0.5, cap=8.0, rng=rng),
        duplicate_backoff=KeyedBackoff(base=0.5, cap=2.0, rng=rng),
    )


async def run(ex: LiteLLMExecutor, command: Any) -> CommandCompleted:
    [event] = await ex.execute(command)
    assert isinstance(event, CommandCompleted)
    assert event.key == command.key and event.command_id == command.id
    return event


async def info_of(client: LiteLLMClient, model_id: str) -> dict[str, Any] | None:
    for row in (await client.info()).body["data"]:
        if row["model_info"]["id"] == model_id:
            return whitelist_row(row)
    return None


# --- answers LiteLLM gives by itself: fake and real


async def test_create_applied_then_duplicate_is_a_short_retry_that_says_the_row_exists(peer: Peer) -> None:
    hooks = Recorder()
    ex = executor(peer.client(), hooks=hooks)
    command = write(CreateLiteLLMModel, peer)
    done = await run(ex, command)
    assert (done.outcome, done.retry_after, done.reason, done.detail) == (Outcome.APPLIED, 0.0, "", "")
    rid = command.model_id
    assert hooks.calls == [f"present:{rid}", "answered:ok", "enter", "exit"]
    hooks.calls.clear()
    again = await run(ex, command)
    assert again.outcome is Outcome.RETRY and again.reason == "LiteLLMDuplicateId"
    assert 0 < again.retry_after <= 2.0
    assert again.detail.startswith("create: HTTP 500")
    # LiteLLM holds the id: the observer looks it up if a listing leaves it out (tests/.../test_hidden_rows);
    # the outcome's reason is what makes the core read LiteLLM again at once (tests/core/test_planned_reads)
    assert hooks.calls == [f"present:{rid}", "answered:ok", "enter", "exit"]
    assert rid in hooks.held


async def test_an_update_never_sends_a_null_which_a_newer_release_reads_as_clear(peer: Peer) -> None:
    """A null that got into a command (the core never puts one there) is left out of the request: 1.108.7
    clears a price sent as null (later releases any field), 1.84.0 keeps it; the row keeps it on both."""
    client = peer.client()
    created = write(CreateLiteLLMModel, peer, params={"input_cost_per_token": 1.5e-06, "tpm": 10})
    assert (await run(executor(client), created)).outcome is Outcome.APPLIED
    update = write(
        UpdateLiteLLMModel,
        peer,
        params={"input_cost_per_token": None, "tpm": None, "rpm": 5},
        info={"ai_appliance_scheduler": {"trusted": True, "contextWindow": None}},
    )
    assert (await run(executor(client), update)).outcome is Outcome.APPLIED
    [row] = (await client.info_of(peer.id("m"))).body["data"]
    params = row["litellm_params"]
    assert (params.get("input_cost_per_token"), params["tpm"], params["rpm"]) == (1.5e-06, 10, 5)
    assert row["model_info"]["ai_appliance_scheduler"] == {"trusted": True}


async def test_create_rejected_by_validation_is_terminal(peer: Peer) -> None:
    done = await run(executor(peer.client()), write(CreateLiteLLMModel, peer, params={"tpm": "lots"}))
    assert done.outcome is Outcome.TERMINAL and done.reason == Reason.LITELLM_REJECTED.value
    assert done.detail.startswith("create: HTTP 422: litellm_params.tpm: Input should be a valid integer")


async def test_update_applied_merges_and_an_unknown_id_is_gone(peer: Peer) -> None:
    client = peer.client()
    ex = executor(client)
    assert (await run(ex, write(CreateLiteLLMModel, peer, params={"tpm": 5}))).outcome is Outcome.APPLIED
    update = write(
        UpdateLiteLLMModel, peer, params={"api_base": "http://b/v1"}, info={"ai_appliance_spec_hash": "2"}
    )
    assert (await run(ex, update)).outcome is Outcome.APPLIED
    seen = await info_of(client, peer.id("m"))
    assert seen is not None
    assert seen["litellm_params"]["api_base"] == "http://b/v1" and seen["litellm_params"]["tpm"] == 5
    assert seen["model_info"]["ai_appliance_spec_hash"] == "2"
    gone = await run(ex, write(UpdateLiteLLMModel, peer, "missing"))
    assert gone.outcome is Outcome.GONE
    assert gone.detail == f"update: HTTP 404: Model {peer.id('missing')} not found on proxy."


async def test_delete_applied_and_an_unknown_id_is_applied_too(peer: Peer) -> None:
    client = peer.client()
    ex = executor(client)
    await run(ex, write(CreateLiteLLMModel, peer))
    assert (await run(ex, DeleteLiteLLMModel(peer.id("m")))).outcome is Outcome.APPLIED
    assert await info_of(client, peer.id("m")) is None
    again = await run(ex, DeleteLiteLLMModel(peer.id("m")))
    assert again.outcome is Outcome.APPLIED and "not found" in again.detail


async def test_recreate_replaces_the_row_and_works_when_it_is_missing(peer: Peer) -> None:
    client = peer.client()
    ex = executor(client)
    await run(ex, write(CreateLiteLLMModel, peer, params={"tpm": 5, "rpm": 6}, info={"features": ["Chat"]}))
    recreate = write(RecreateLiteLLMModel, peer, params={"rpm": 7})
    assert (await run(ex, recreate)).outcome is Outcome.APPLIED
    seen = await info_of(client, peer.id("m"))
    assert seen is not None and seen["litellm_params"] == {
        "model": f"openai/{peer.name('m')}",
        "api_base": "http://a/v1",
        "rpm": 7,
    }
    assert "features" not in seen["model_info"]
    missing = write(RecreateLiteLLMModel, peer, "fresh")
    assert (await run(ex, missing)).outcome is Outcome.APPLIED
    assert await info_of(client, peer.id("fresh")) is not None


async def test_a_wrong_master_key_is_retried_unauthorized_for_every_write(peer: Peer) -> None:
    """The key or its role is mended in LiteLLM, not in our input: every write is retried with backoff
    (issue 33, item 2), never left for good."""
    hooks = Recorder()
    ex = executor(peer.client(master_key="sk-not-the-master-key"), hooks=hooks)
    commands = [
        write(CreateLiteLLMModel, peer),
        write(UpdateLiteLLMModel, peer),
        write(RecreateLiteLLMModel, peer),
        DeleteLiteLLMModel(peer.id("m")),
    ]
    for command in commands:
        done = await run(ex, command)
        assert done.outcome is Outcome.RETRY and done.reason == Reason.LITELLM_UNAUTHORIZED.value
        assert 0 < done.retry_after <= 0.5  # the first retry of each key
        assert "sk-not-the-master-key" not in done.detail
    assert hooks.calls.count("answered:unauthorized") == 4


async def test_connection_refused_is_a_backed_off_retry_and_marks_litellm_unreachable() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    hooks = Recorder()
    client = LiteLLMClient(f"http://127.0.0.1:{port}", "sk-master-secret-1")
    ex = executor(client, hooks=hooks)
    command = write(CreateLiteLLMModel, Peer("x", "", "", None, "mct-x-"))
    delays = []
    for _ in range(6):
        done = await run(ex, command)
        assert done.outcome is Outcome.RETRY and done.reason == "LiteLLMUnreachable"
        assert done.detail.startswith("connect: POST /model/new")
        delays.append(done.retry_after)
    assert "answered:unreachable" in hooks.calls and not [c for c in hooks.calls if c.startswith("present")]
    assert delays[0] <= 0.5 and all(d <= 8.0 for d in delays) and delays[-1] >= 4.0  # exponential, capped
    await client.aclose()


# --- answers only a fault produces: the fake


@pytest.mark.parametrize(
    ("status", "peer_status"),
    [(502, "unreachable"), (503, "unreachable"), (504, "unreachable"), (500, "error")],
)
async def test_server_errors_on_update_and_delete_are_retried(
    fake_peer: Peer, status: int, peer_status: str
) -> None:
    assert fake_peer.fake is not None
    hooks = Recorder()
    ex = executor(fake_peer.client(), hooks=hooks)
    await run(ex, write(CreateLiteLLMModel, fake_peer))
    fake_peer.fake.fail(status, endpoints=frozenset({PATCH, DELETE}))
    for command in (write(UpdateLiteLLMModel, fake_peer), DeleteLiteLLMModel(fake_peer.id("m"))):
        done = await run(ex, command)
        assert done.outcome is Outcome.RETRY and done.reason == "LiteLLMServerError" and done.retry_after > 0
    assert f"answered:{peer_status}" in hooks.calls


async def test_a_5xx_on_create_other_than_500_is_a_plain_retry(fake_peer: Peer) -> None:
    assert fake_peer.fake is not None
    hooks = Recorder()
    fake_peer.fake.fail(503, endpoints=frozenset({NEW}))
    done = await run(executor(fake_peer.client(), hooks=hooks), write(CreateLiteLLMModel, fake_peer))
    assert done.outcome is Outcome.RETRY and done.reason == "LiteLLMServerError"
    assert "answered:unreachable" in hooks.calls and not hooks.held  # a plain retry: nothing is held


@pytest.mark.parametrize("status", [408, 429])
async def test_timeouts_and_rate_limits_are_retried(fake_peer: Peer, status: int) -> None:
    assert fake_peer.fake is not None
    fake_peer.fake.fail(status)
    done = await run(executor(fake_peer.client()), write(CreateLiteLLMModel, fake_peer))
    assert done.outcome is Outcome.RETRY and done.retry_after > 0


async def test_a_missing_patch_endpoint_is_not_mistaken_for_a_missing_row(fake_peer: Peer) -> None:
    """An older LiteLLM without PATCH answers FastAPI's bare 404: that is a rejection, not ``gone``."""
    assert fake_peer.fake is not None
    fake_peer.fake.inject(Fault(status=404, payload={"detail": "Not Found"}, endpoints=frozenset({PATCH})))
    done = await run(executor(fake_peer.client()), write(UpdateLiteLLMModel, fake_peer))
    assert done.outcome is Outcome.TERMINAL and done.reason == Reason.LITELLM_REJECTED.value
    assert done.detail == "update: HTTP 404: Not Found"


async def test_recreate_whose_create_fails_leaves_the_row_absent(fake_peer: Peer) -> None:
    assert fake_peer.fake is not None
    hooks = Recorder()
    ex = executor(fake_peer.client(), hooks=hooks)
    await run(ex, write(CreateLiteLLMModel, fake_peer))
    fake_peer.fake.fail(503, endpoints=frozenset({NEW}))
    hooks.calls.clear()
    command = write(RecreateLiteLLMModel, fake_peer)
    done = await run(ex, command)
    # a recreate that did not complete: the core reads LiteLLM again (tests/core/test_planned_reads)
    assert done.outcome is Outcome.RETRY
    assert fake_peer.fake.ids() == []  # the delete went through
    assert command.model_id not in hooks.held
    assert f"absent:{command.model_id}" in hooks.calls and f"present:{command.model_id}" not in hooks.calls


async def test_details_never_carry_the_api_key_or_the_master_key(fake_peer: Peer) -> None:
    assert fake_peer.fake is not None
    master = "sk-test"
    vault = SecretVault()
    ref = SecretKey("ai", "openai", "apiKey", "uid-1", "7", "fp1:00")
    vault.update({secret_vault_key("ai", "openai", "apiKey"): PROVIDER_KEY})
    echo = {
        "error": {"message": f"bad key {PROVIDER_KEY} (master {master}) rejected", "type": "x", "code": "400"}
    }
    fake_peer.fake.inject(Fault(status=400, payload=echo))
    ex = executor(fake_peer.client(), vault)
    for command in (
        write(CreateLiteLLMModel, fake_peer, api_key=ref),
        write(UpdateLiteLLMModel, fake_peer, api_key=ref),
        write(RecreateLiteLLMModel, fake_peer, api_key=ref),
    ):
        done = await run(ex, command)
        assert done.outcome is Outcome.TERMINAL
        assert PROVIDER_KEY not in repr(done) and master not in repr(done)
        assert "[redacted]" in done.detail
    assert PROVIDER_KEY not in repr(ex) and master not in repr(ex) and master not in repr(fake_peer.client())


async def test_details_never_carry_the_credentials_of_the_api_base(fake_peer: Peer) -> None:
    """Issue 12: an apiBase's user:password@, query and fragment are credentials too; LiteLLM's answer may
    quote the URL it was sent (into routes.json, Events, logs and the event log)."""
    assert fake_peer.fake is not None
    api_base = "https://me:pw-url-1@api.example.com/v1?api-key=sk-url-2&v=1#tok-url-3"
    echo = {"error": {"message": f"cannot reach {api_base} (key sk-url-2)", "type": "x", "code": "400"}}
    fake_peer.fake.inject(Fault(status=400, payload=echo))
    done = await run(
        executor(fake_peer.client()), write(CreateLiteLLMModel, fake_peer, params={"api_base": api_base})
    )
    assert done.outcome is Outcome.TERMINAL
    for secret in ("pw-url-1", "sk-url-2", "tok-url-3"):
        assert secret not in done.detail, done.detail
    assert "api.example.com" in done.detail  # the rest of the text still says what went wrong


async def test_the_resolved_key_is_sent_and_a_missing_one_names_its_secret(fake_peer: Peer) -> None:
    assert fake_peer.fake is not None
    vault = SecretVault()
    ex = executor(fake_peer.client(), vault)
    inline = InlineKeyRef("fp1:0123456789abcdef")
    missing = await run(ex, write(CreateLiteLLMModel, fake_peer, api_key=inline))
    assert missing.outcome is Outcome.RETRY and missing.reason == Reason.SECRET_NOT_FOUND.value
    assert "inline key fp1:0123456789abcdef" in missing.detail
    assert fake_peer.fake.writes() == 0
    vault.update({inline_vault_key("fp1:0123456789abcdef"): PROVIDER_KEY})
    assert (await run(ex, write(CreateLiteLLMModel, fake_peer, api_key=inline))).outcome is Outcome.APPLIED
    stored = fake_peer.fake.stored(fake_peer.id("m"))
    assert stored is not None and stored["litellm_params"]["api_key"] == PROVIDER_KEY
    no_key = await run(ex, write(CreateLiteLLMModel, fake_peer, "plain", api_key=None))
    assert no_key.outcome is Outcome.APPLIED
    stored = fake_peer.fake.stored(fake_peer.id("plain"))
    assert stored is not None and "api_key" not in stored["litellm_params"]


async def test_backoff_is_per_key_and_forgotten_after_success(fake_peer: Peer) -> None:
    assert fake_peer.fake is not None
    ex = executor(fake_peer.client())
    flaky = fake_peer.fake.fail(503)
    a, b = write(CreateLiteLLMModel, fake_peer, "a"), write(CreateLiteLLMModel, fake_peer, "b")
    delays_a = [(await run(ex, a)).retry_after for _ in range(4)]
    first_b = (await run(ex, b)).retry_after
    assert delays_a[-1] > delays_a[0] and first_b <= 0.5  # b has its own backoff
    fake_peer.fake.faults.remove(flaky)
    assert (await run(ex, a)).outcome is Outcome.APPLIED
    fake_peer.fake.fail(503)
    assert (await run(ex, write(UpdateLiteLLMModel, fake_peer, "a"))).retry_after <= 0.5  # started over


async def test_execute_never_raises(fake_peer: Peer) -> None:
    def explode(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("a bug in a transport")

    ex = executor(fake_peer.client(transport=httpx.MockTransport(explode)))
    done = await run(ex, write(CreateLiteLLMModel, fake_peer))
    assert done.outcome is Outcome.RETRY and done.detail == "internal error: RuntimeError"
    catalog = WriteCatalog("ai", "ai-model-catalog", (), "h", "f")
    assert not ex.handles(catalog)
    [other] = await ex.execute(catalog)
    assert isinstance(other, CommandCompleted) and other.outcome is Outcome.TERMINAL


def test_handles_exactly_the_litellm_commands() -> None:
    ex = LiteLLMExecutor(LiteLLMClient("http://x", "k"), SecretVault())
    peer = Peer("x", "", "", None, "p-")
    assert all(
        ex.handles(c)
        for c in (
            write(CreateLiteLLMModel, peer),
            write(UpdateLiteLLMModel, peer),
            write(RecreateLiteLLMModel, peer),
            DeleteLiteLLMModel("x"),
        )
    )


# --- the table itself, as a pure function


def answer(status: int, body: Any) -> Answer:
    return Answer(status, body, "")


def litellm_error(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "auth_error", "param": "None", "code": str(status)}}


@pytest.mark.parametrize(
    ("op", "given", "outcome", "reason"),
    [
        (Op.CREATE, answer(200, {}), Outcome.APPLIED, ""),
        (Op.UPDATE, answer(200, {}), Outcome.APPLIED, ""),
        (Op.DELETE, answer(200, {}), Outcome.APPLIED, ""),
        (
            Op.CREATE,
            answer(401, litellm_error(401, "Authentication Error")),
            Outcome.RETRY,
            "LiteLLMUnauthorized",
        ),
        (Op.DELETE, answer(403, litellm_error(403, "forbidden")), Outcome.RETRY, "LiteLLMUnauthorized"),
        (Op.UPDATE, answer(404, litellm_error(404, "Model x not found on proxy.")), Outcome.GONE, ""),
        (
            Op.UPDATE,
            answer(400, litellm_error(400, "Authentication Error, model not found")),
            Outcome.GONE,
            "",
        ),
        (Op.UPDATE, answer(404, {"detail": "Not Found"}), Outcome.TERMINAL, "LiteLLMRejected"),
        (
            Op.CREATE,
            answer(500, litellm_error(500, "Failed to add model to db")),
            Outcome.RETRY,
            "LiteLLMDuplicateId",
        ),
        (Op.CREATE, answer(400, litellm_error(400, "bad")), Outcome.TERMINAL, "LiteLLMRejected"),
        (
            Op.CREATE,
            answer(422, {"detail": [{"loc": ["body", "x"], "msg": "bad"}]}),
            Outcome.TERMINAL,
            "LiteLLMRejected",
        ),
        (Op.DELETE, answer(400, litellm_error(400, "Model with id=x not found in db")), Outcome.APPLIED, ""),
        (Op.DELETE, answer(400, litellm_error(400, "something else")), Outcome.TERMINAL, "LiteLLMRejected"),
        (Op.UPDATE, answer(500, litellm_error(500, "db down")), Outcome.RETRY, "LiteLLMServerError"),
        (Op.DELETE, answer(503, None), Outcome.RETRY, "LiteLLMServerError"),
        (
            Op.CREATE,
            LiteLLMTransportError("timeout", "POST /model/new: ReadTimeout"),
            Outcome.RETRY,
            "LiteLLMUnreachable",
        ),
        (Op.UPDATE, LiteLLMTransportError("connect", "refused"), Outcome.RETRY, "LiteLLMUnreachable"),
    ],
)
def test_outcome_table(op: Op, given: Answer | LiteLLMTransportError, outcome: Outcome, reason: str) -> None:
    mapped = classify(op, given)
    assert mapped.outcome is outcome
    assert str(mapped.reason) == reason
