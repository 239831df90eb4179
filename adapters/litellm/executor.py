"""The LiteLLM writer: carries out the core's LiteLLM commands and reports outcomes (an ``Executor``).

No decisions about *what* to write live here (that is the core's plan); this module only sends a
command and says what LiteLLM's answer means:

| answer                                         | outcome  | reason / side effect                        |
|------------------------------------------------|----------|---------------------------------------------|
| 2xx                                            | applied  | backoff forgotten                           |
| 401 / 403                                      | retry    | ``LiteLLMUnauthorized``: capped backoff;    |
|                                                |          | mended outside (the key, its role); its     |
|                                                |          | text is never kept (it quotes the key)      |
| update: 404 from LiteLLM, 400 "model not found"| gone     | the core re-plans a create                  |
| create: 500 (LiteLLM's duplicate-id answer)    | retry    | short backoff; the core reads LiteLLM again |
| delete: 400 "... not found ..."                | applied  | the row is gone: what we wanted             |
| 408 / 429 / 5xx, timeout, refused, reset       | retry    | capped exponential backoff with jitter;     |
|                                                |          | the core reads LiteLLM again to confirm it  |
| an answer past the client's ``AnswerBounds``   | retry    | the same, LiteLLM reported as erroring      |
| other 4xx (400 / 404 / 409 / 422 ...)          | terminal | ``LiteLLMRejected`` with a short detail     |
| the API key's value is not in the vault (yet)  | retry    | ``SecretNotFound``, names the Secret        |

Every retry waits a capped exponential backoff with jitter per key (the cap:
``CATALOG_WRITE_RETRY_MAX_SECONDS``, 300 s by default), forever; a new command for the key (its input
changed) starts again from the base.
``terminal`` is left for what only a change of the input can mend (LiteLLM refusing the route itself).

``RecreateLiteLLMModel`` is a delete then a create (LiteLLM's updates merge, so a field can only be
dropped by a fresh row); one that does not complete makes the core read LiteLLM again (the delete may
have applied). Which outcomes leave something for a re-read to find out is the core's rule
(``catalog_core.fold._left_unknown``): this module only reports outcomes.

Details never carry a secret: only LiteLLM's error message (pydantic's echoed ``input`` is never read)
and, as a last line of defence, every known secret value (the api key sent, the master key) is
replaced by ``[redacted]`` — before the text is collapsed and shortened (``scrub.safe_text``), and before
it reaches the observer's log lines, this module's log lines or an outcome.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Sequence
from enum import StrEnum
from typing import Any

import attrs

from adapters.backoff import KeyedBackoff
from adapters.litellm.client import TOO_LARGE, Answer, LiteLLMClient, LiteLLMTransportError
from adapters.litellm.scrub import safe_text, scrub
from adapters.litellm.sync import LiteLLMShared, PeerStatus, status_of_http
from adapters.vault import SecretVault
from catalog_core.commands import (
    ApiKeyRef,
    Command,
    CreateLiteLLMModel,
    DeleteLiteLLMModel,
    InlineKeyRef,
    LiteralKey,
    RecreateLiteLLMModel,
    SecretKey,
    UpdateLiteLLMModel,
)
from catalog_core.events import CommandCompleted, Event, Outcome
from catalog_core.reasons import LiteLLMWait, Reason
from catalog_core.urls import credential_parts
from catalog_core.values import is_env_reference

log = logging.getLogger("model_catalog.litellm")

_WRITES = (CreateLiteLLMModel, UpdateLiteLLMModel, RecreateLiteLLMModel, DeleteLiteLLMModel)
_WITH_KEY = (CreateLiteLLMModel, UpdateLiteLLMModel, RecreateLiteLLMModel)
_RETRYABLE_4XX = frozenset({408, 429})
RETRY_CAP_SECONDS = 300.0  # the default of CATALOG_WRITE_RETRY_MAX_SECONDS


class RetryReason(StrEnum):
    """Reasons on ``retry`` outcomes (informational: the core only reads reasons of terminal ones)."""

    UNREACHABLE = LiteLLMWait.UNREACHABLE.value
    SERVER_ERROR = LiteLLMWait.SERVER_ERROR.value
    DUPLICATE_ID = LiteLLMWait.DUPLICATE_ID.value
    SECRET_NOT_FOUND = Reason.SECRET_NOT_FOUND.value


class Op(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@attrs.frozen
class Mapped:
    """What one answer means, before backoff is applied."""

    outcome: Outcome
    reason: str = ""
    detail: str = ""
    peer: PeerStatus = PeerStatus.OK  # what the answer says about LiteLLM itself
    short_retry: bool = False  # use the short (duplicate-id) backoff


def classify(op: Op, answer: Answer | LiteLLMTransportError) -> Mapped:
    """The outcome table above, as a pure function of the operation and LiteLLM's answer. The detail
    quotes LiteLLM whole: the executor scrubs and shortens it (``safe_text``) before anyone sees it."""
    if isinstance(answer, LiteLLMTransportError):
        if answer.kind == TOO_LARGE:
            return Mapped(Outcome.RETRY, RetryReason.SERVER_ERROR, answer.detail, PeerStatus.ERROR)
        return Mapped(
            Outcome.RETRY,
            RetryReason.UNREACHABLE,
            f"{answer.kind}: {answer.detail}",
            PeerStatus.UNREACHABLE,
        )
    status, message = answer.status, answer.error_message() if not answer.ok else ""
    what = f"{op.value}: HTTP {status}: {message}"
    if answer.ok:
        return Mapped(Outcome.APPLIED)
    if status in (401, 403):
        # The key or its role is fixed in LiteLLM, not in our input: try again.
        return Mapped(Outcome.RETRY, Reason.LITELLM_UNAUTHORIZED, what, PeerStatus.UNAUTHORIZED)
    if op is Op.UPDATE and _model_not_found(answer):
        return Mapped(Outcome.GONE, "", what)
    if op is Op.DELETE and status == 400 and "not found" in message.lower():
        return Mapped(Outcome.APPLIED, "", what)
    if op is Op.CREATE and status == 500:
        # LiteLLM answers an existing id with an opaque 500: look again, the core will see the row.
        return Mapped(Outcome.RETRY, RetryReason.DUPLICATE_ID, what, short_retry=True)
    if status >= 500 or status in _RETRYABLE_4XX:
        peer = status_of_http(status) if status >= 500 else PeerStatus.OK
        return Mapped(Outcome.RETRY, RetryReason.SERVER_ERROR, what, peer)
    return Mapped(Outcome.TERMINAL, Reason.LITELLM_REJECTED, what)


def _model_not_found(answer: Answer) -> bool:
    """LiteLLM's own "no such model" (PATCH: 404 with an ``error`` object; old update: 400 "model not
    found"). A bare FastAPI 404 ``{"detail": "Not Found"}`` means the endpoint is missing: not gone."""
    body = answer.body
    has_error_object = isinstance(body, dict) and isinstance(body.get("error"), dict)
    if answer.status == 404:
        return has_error_object
    return answer.status == 400 and "model not found" in answer.error_message().lower()


def describe_key(ref: ApiKeyRef) -> str:
    """A key reference for humans: names the Secret, never a value."""
    if isinstance(ref, SecretKey):
        return f"Secret {ref.namespace}/{ref.name} key {ref.key}"
    if isinstance(ref, InlineKeyRef):
        return f"inline key {ref.fingerprint}"
    return "literal key"


class LiteLLMExecutor:
    """Executes ``Create/Update/Recreate/DeleteLiteLLMModel``. Never raises: failures become outcomes."""

    def __init__(
        self,
        client: LiteLLMClient,
        vault: SecretVault,
        shared: LiteLLMShared | None = None,
        *,
        backoff: KeyedBackoff | None = None,
        duplicate_backoff: KeyedBackoff | None = None,
        retry_cap: float = RETRY_CAP_SECONDS,
    ) -> None:
        self._client = client
        self._vault = vault
        # Shared with the observer (``observer.shared``); a writer without one (a tool, a test of the
        # mapping alone) has its own, which nothing else takes.
        self._shared = shared or LiteLLMShared()
        self._backoff = backoff or KeyedBackoff(base=0.5, cap=retry_cap)
        self._duplicate_backoff = duplicate_backoff or KeyedBackoff(base=0.5, cap=5.0)

    def __repr__(self) -> str:
        return f"LiteLLMExecutor({self._client!r})"

    def handles(self, command: Command) -> bool:
        return isinstance(command, _WRITES)

    async def execute(self, command: Command) -> Sequence[Event]:
        if not isinstance(command, _WRITES):
            return [
                CommandCompleted(command.key, command.id, Outcome.TERMINAL, detail="not a LiteLLM command")
            ]
        try:
            return [await self._execute(command)]
        except Exception as exc:  # a bug of ours must not kill the writer: retry later, say what it was
            # The traceback quotes the exception's message, which may quote a request or an answer.
            trace = "".join(traceback.format_exception(exc)).rstrip()
            log.error(
                "LiteLLM write %s failed unexpectedly\n%s", command.key, scrub(trace, self._secrets(command))
            )
            delay = self._backoff.next(command.key, command.id)
            return [
                CommandCompleted(
                    command.key,
                    command.id,
                    Outcome.RETRY,
                    retry_after=delay,
                    reason=RetryReason.SERVER_ERROR,
                    detail=f"internal error: {type(exc).__name__}",
                )
            ]

    async def _execute(
        self, command: CreateLiteLLMModel | UpdateLiteLLMModel | RecreateLiteLLMModel | DeleteLiteLLMModel
    ) -> CommandCompleted:
        secrets = self._secrets(command)
        if isinstance(command, DeleteLiteLLMModel):
            rid = command.model_id
            mapped = await self._send(Op.DELETE, rid, self._client.delete(rid), secrets)
            async with self._shared.answered():
                return self._complete(command, mapped)

        api_key: str | None = None
        if command.api_key is not None:
            api_key = self._vault.resolve(command.api_key)
            if api_key is None:
                what = describe_key(command.api_key)
                return self._complete(
                    command,
                    Mapped(
                        Outcome.RETRY,
                        RetryReason.SECRET_NOT_FOUND,
                        f"the value of {what} is not known yet (Secret not read or key missing)",
                    ),
                )
        body = _body(command, api_key)
        refused = _refusal(body, api_key, self._client.secrets_to_scrub())
        if refused is not None:
            return self._complete(command, refused)

        rid = command.model_id
        if isinstance(command, UpdateLiteLLMModel):
            mapped = await self._send(Op.UPDATE, rid, self._client.patch_update(rid, body), secrets)
        elif isinstance(command, CreateLiteLLMModel):
            mapped = await self._send(Op.CREATE, rid, self._client.new(body), secrets)
        else:
            mapped = await self._send(Op.DELETE, rid, self._client.delete(rid), secrets)
            if mapped.outcome is Outcome.APPLIED:
                # The old row is gone; if the create fails, the core reads LiteLLM again to see it gone.
                mapped = await self._send(Op.CREATE, rid, self._client.new(body), secrets)
        # The outcome is built under a share of the lock, taken once the write was answered: after the
        # event of any poll in progress then (see sync.py). The request itself waited for nothing.
        async with self._shared.answered():
            return self._complete(command, mapped)

    def _secrets(self, command: Command) -> list[str]:
        """Every secret value a text about ``command`` might quote: the master key, its api key and the
        credential parts of its api_base (user:password@, query, fragment)."""
        secrets = list(self._client.secrets_to_scrub())
        key = command.api_key if isinstance(command, _WITH_KEY) else None
        if key is not None and not isinstance(key, LiteralKey):
            value = self._vault.resolve(key)
            if value is not None:
                secrets.append(value)
        if isinstance(command, _WITH_KEY):
            api_base = command.litellm_params.value().get("api_base")
            if isinstance(api_base, str):
                secrets.extend(credential_parts(api_base))
        return secrets

    async def _send(self, op: Op, model_id: str, call: Awaitable[Answer], secrets: Sequence[str]) -> Mapped:
        """Send, classify, and make the detail safe (scrubbed, then shortened) before it goes anywhere.
        The observer learns whether LiteLLM now holds the row: a listing that leaves out a row it holds
        (one hidden as unhealthy) then makes it look the row up instead of reading it as missing. Whether
        LiteLLM is read again after this answer is the core's to plan, from the outcome."""
        try:
            answer: Answer | LiteLLMTransportError = await call
        except LiteLLMTransportError as exc:
            answer = exc
        mapped = classify(op, answer)
        mapped = attrs.evolve(mapped, detail=safe_text(mapped.detail, secrets))
        if mapped.outcome is Outcome.APPLIED:
            (self._shared.absent if op is Op.DELETE else self._shared.present)(model_id)
        elif mapped.reason == RetryReason.DUPLICATE_ID:
            self._shared.present(model_id)
        detail = mapped.detail if mapped.peer is not PeerStatus.OK else ""
        self._shared.health.report(mapped.peer, detail, via="write")
        return mapped

    def _complete(
        self,
        command: CreateLiteLLMModel | UpdateLiteLLMModel | RecreateLiteLLMModel | DeleteLiteLLMModel,
        mapped: Mapped,
    ) -> CommandCompleted:
        """The outcome event. ``mapped.detail`` is already safe (``_send``) or our own words."""
        key = command.key
        delay = 0.0
        if mapped.outcome is Outcome.RETRY:
            backoff = self._duplicate_backoff if mapped.short_retry else self._backoff
            delay = backoff.next(key, command.id)
        else:
            self._backoff.forget(key)
            self._duplicate_backoff.forget(key)
        if mapped.outcome is Outcome.TERMINAL and mapped.reason != Reason.LITELLM_UNAUTHORIZED:
            # (an unauthorized master key is logged once per transition by the observer's PeerHealth)
            log.warning("LiteLLM write %s failed for good: %s", key, mapped.detail)
        return CommandCompleted(
            key=key,
            command_id=command.id,
            outcome=mapped.outcome,
            retry_after=delay,
            reason=str(mapped.reason),
            detail=mapped.detail,
        )


def _refusal(body: dict[str, Any], api_key: str | None, master: Sequence[str]) -> Mapped | None:
    """Defense in depth behind the core's rules (behaviour §1.5): a row LiteLLM would resolve from its own
    environment, or one that would carry its master key, is never sent, whatever produced it."""
    if api_key is not None and api_key.strip() in {m.strip() for m in master if m}:
        return Mapped(
            Outcome.TERMINAL, Reason.SECRET_NOT_ALLOWED, "refused: the api key is LiteLLM's master key"
        )
    found = _env_reference(body, "")
    if found is not None:
        return Mapped(
            Outcome.TERMINAL,
            Reason.ENV_REFERENCE_REJECTED,
            f"refused: {found} starts with os.environ/, which LiteLLM would read from its own environment",
        )
    return None


def _env_reference(value: Any, path: str) -> str | None:
    if isinstance(value, str):
        return path or "a value" if is_env_reference(value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        where = f"{path}.{key}" if path else str(key)
        if isinstance(key, str) and is_env_reference(key):
            return where
        found = _env_reference(item, where)
        if found is not None:
            return found
    return None


def _body(
    command: CreateLiteLLMModel | UpdateLiteLLMModel | RecreateLiteLLMModel, api_key: str | None
) -> dict[str, Any]:
    """The request body. No key is ever sent as null: an update merges what it is given, and newer
    LiteLLM releases read an explicit null as "clear this field" (1.108.7 for prices and credentials,
    later ones for any). The core never means that (a field it drops takes a fresh row), so a null that
    got into a command by accident is left out rather than sent."""
    params = _without_nulls(command.litellm_params.value())
    if api_key is not None:
        params["api_key"] = api_key
    info = _without_nulls(command.model_info.value())
    info["id"] = command.model_id
    return {"model_name": command.model_name, "litellm_params": params, "model_info": info}


def _without_nulls(value: Any) -> Any:
    """``value`` with every key whose value is null left out, at any depth."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value
