"""An in-process fake of LiteLLM's admin API that answers like LiteLLM in DB mode, as one release does
(``release``: ``LITELLM_1_108`` by default, or ``LITELLM_1_84``, the appliance's; see ``Release`` for
where they differ).

Every behaviour here was measured on the real proxy and is pinned by
``tests/adapters/litellm/test_contract.py``, which runs the same assertions against the fake and the real
proxy of each release:

- ``GET /model/info``: ``{"data": [{model_name, litellm_params, model_info}]}``; but a proxy that started
  with no models at all answers 500 ``{"detail": {"error": "LLM Model List not loaded in..."}}`` until
  the first model is added (``{"data": []}`` after that, even when all are deleted); ``api_key`` is never
  returned; ``litellm_params`` gains booleans (``use_in_pass_through``...), ``model_info`` gains
  LiteLLM's keys (``db_model``, ``key``, ``litellm_provider``, cost fields, ``max_tokens: null``...).
  Keys a row does not set itself (``max_input_tokens``, ``max_output_tokens``, ``mode``...) are filled
  from LiteLLM's model map, keyed by ``litellm_params.model``: the built-in entries of known models,
  overwritten by whatever a row with the same ``model`` registered (last write wins, and it stays after
  that row is deleted). Rows register when LiteLLM builds its router (the rows in the database at start,
  or the first row added to a proxy that had none) and, on 1.108.7 but not 1.84.0, whenever one is
  added or updated. ``?litellm_model_id=ID``: that row alone, or 400 "Model id = ID not
  found on litellm proxy". With ``healthy_only_listing`` (``model_list_healthy_only``, 1.108.7) the
  listing leaves out the rows of a model name whose rows are all ``unhealthy``; the lookup by id does not.
- ``POST /model/new``: an existing id -> 500 (opaque message); top-level ``model_name`` or
  ``litellm_params`` missing -> 500; ``litellm_params.model`` missing, a non-integer tpm/rpm/order,
  a non-string name -> 422; no ``model_info.id`` -> a random UUID id. The echo is "encrypted".
- ``POST /model/update`` (old): 400 without model_info, 400 "model not found" for an unknown id;
  merges ``litellm_params`` (null keeps), drops ``order`` unless given, ignores ``model_info``.
- ``PATCH /model/{id}/update``: merges ``litellm_params`` and ``model_info`` one level deep (absent keeps
  the old value, and so does null except for the fields a release clears on an explicit null, e.g.
  prices on 1.108.7; a nested object is replaced whole), the path id wins; unknown -> 404.
- ``POST /model/delete``: unknown id -> 400 "... not found in db"; no id -> 422.
- A wrong or missing master key -> 401 on every endpoint; a wrong one's text quotes its last four
  characters and its SHA-256.

Use it in-process with ``httpx.MockTransport(fake.handle)``, or on a loopback port with
``async with fake.serving() as url``. ``requests`` counts calls per endpoint; ``inject`` adds faults.
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import json
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import anyio
import attrs
import httpx
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

INFO = "GET /model/info"
NEW = "POST /model/new"
UPDATE = "POST /model/update"
PATCH = "PATCH /model/{id}/update"
DELETE = "POST /model/delete"
READINESS = "GET /health/readiness"
OTHER = "other"
WRITE_ENDPOINTS = (NEW, UPDATE, PATCH, DELETE)

_PARAM_BOOLEANS = {
    "allow_client_keepalive_override": False,
    "use_in_pass_through": False,
    "use_litellm_proxy": False,
    "use_xai_oauth": False,
    "merge_reasoning_content_in_choices": False,
}
# A sample of the keys LiteLLM adds to model_info (the real answer has ~190, mostly null).
_INFO_DEFAULTS: dict[str, Any] = {
    "db_model": True,
    "member_auto_router": False,
    "blocked": False,
    "access_via_team_ids": [],
    "direct_access": True,
    "pricing_overrides": [],
    "max_tokens": None,
    "max_input_tokens": None,
    "max_output_tokens": None,
    "input_cost_per_token": None,
    "output_cost_per_token": None,
    "cache_read_input_token_cost": None,
    "input_cost_per_character": None,
    "output_vector_size": None,
    "mode": None,
    "supports_system_messages": None,
    "supports_response_schema": None,
    "supports_vision": None,
    "supports_function_calling": None,
    "supports_tool_choice": None,
    "supports_prompt_caching": None,
    "tpm": None,
    "rpm": None,
}
# LiteLLM's model map entries for a few known models (values as the real proxy reports them).
_GPT_4O = {
    "max_tokens": 16384,
    "max_input_tokens": 128000,
    "max_output_tokens": 16384,
    "input_cost_per_token": 2.5e-06,
    "output_cost_per_token": 1e-05,
    "mode": "chat",
    "supports_vision": True,
    "supports_function_calling": True,
    "supports_tool_choice": True,
    "supports_system_messages": True,
}
_EMBEDDING_3_SMALL = {
    "max_tokens": 8191,
    "max_input_tokens": 8191,
    "input_cost_per_token": 2e-08,
    "output_cost_per_token": 0.0,
    "output_vector_size": 1536,
    "mode": "embedding",
}
KNOWN_MODELS: dict[str, dict[str, Any]] = {
    "openai/gpt-4o": _GPT_4O,
    "gpt-4o": _GPT_4O,
    "openai/text-embedding-3-small": _EMBEDDING_3_SMALL,
    "text-embedding-3-small": _EMBEDDING_3_SMALL,
}
# model_info keys a row registers into the shared model map (measured: both limits leak across rows).
_REGISTERED_KEYS = ("max_input_tokens", "max_output_tokens", "max_tokens", "mode")
_INT_PARAMS = ("tpm", "rpm", "order", "max_parallel_requests", "max_retries")
# Prices LiteLLM 1.108.7 clears when an update sends them as an explicit null (its mirrored pricing params).
_PRICES = frozenset(
    {
        "input_cost_per_token",
        "output_cost_per_token",
        "input_cost_per_character",
        "output_cost_per_character",
        "input_cost_per_second",
        "output_cost_per_second",
        "cache_read_input_token_cost",
        "cache_creation_input_token_cost",
    }
)


@attrs.frozen
class Release:
    """Where LiteLLM releases answer a controller differently (each measured on the real proxy)."""

    name: str
    # A row added while it runs registers its limits under its ``litellm_params.model``, which fills them
    # in for the other rows of that model. (Every release registers the rows its router is built with:
    # those in the database at start, or the first row added to a proxy that had none.)
    shares_registered_limits: bool
    # The 401 text for a wrong master key quotes its last four characters and its SHA-256.
    quotes_refused_key: bool
    # Fields an explicit null in PATCH /model/{id}/update clears (null keeps every other field).
    null_clears: frozenset[str]
    # ``general_settings.model_list_healthy_only`` exists (rows of an unhealthy name hidden from listings).
    has_healthy_only_listing: bool


LITELLM_1_108 = Release(
    "1.108.7",
    shares_registered_limits=True,
    quotes_refused_key=False,
    null_clears=_PRICES,
    has_healthy_only_listing=True,
)
LITELLM_1_84 = Release(
    "1.84.0",
    shares_registered_limits=False,
    quotes_refused_key=True,
    null_clears=frozenset(),
    has_healthy_only_listing=False,
)
RELEASES = {r.name: r for r in (LITELLM_1_84, LITELLM_1_108)}


@attrs.define
class Fault:
    """A fault the fake applies to matching requests.

    ``status``: answer this HTTP status instead; ``refuse``: no answer at all (in-process: a
    ``ConnectError``; on a port: the connection is closed); ``delay``: seconds to wait before answering
    (long enough, it trips the client's read timeout); ``apply_first``: carry the request out, then
    fail the answer (a lost response); ``payload``: the JSON body of a ``status`` answer (default: a
    LiteLLM-shaped error). ``endpoints``: which (see ``INFO``, ``NEW``...; None = all);
    ``times``: how many requests it hits (None = until removed); ``seconds``: for how long; ``hold``: an
    ``anyio.Event`` the request waits for before it is answered (in-process fakes: a test decides the
    order of concurrent requests instead of guessing it from delays).
    """

    status: int | None = None
    refuse: bool = False
    delay: float = 0.0
    apply_first: bool = False
    payload: Any = None
    endpoints: frozenset[str] | None = None
    times: int | None = None
    seconds: float | None = None
    hold: Any = None
    started: float = attrs.field(factory=time.monotonic)
    hits: int = 0

    def matches(self, endpoint: str) -> bool:
        if self.endpoints is not None and endpoint not in self.endpoints:
            return False
        if self.times is not None and self.hits >= self.times:
            return False
        return self.seconds is None or time.monotonic() - self.started < self.seconds


class RefusedError(Exception):
    """Raised inside the fake when a fault says "no answer"."""


@attrs.define
class _Row:
    model_name: str
    params: dict[str, Any]  # as stored, api_key included
    info: dict[str, Any]


def _error(
    status: int, message: str, type_: str = "auth_error", param: str | None = "None"
) -> tuple[int, Any]:
    return status, {"error": {"message": message, "type": type_, "param": param, "code": str(status)}}


def _refused_key(key: str) -> tuple[int, Any]:
    """LiteLLM 1.84.0's answer to a key it does not know: its last four characters and its SHA-256."""
    digest = hashlib.sha256(key.encode()).hexdigest()
    return _error(
        401,
        f"Authentication Error, Invalid proxy server token passed. Received API Key = sk-...{key[-4:]}, "
        f"Key Hash (Token) ={digest}. Unable to find token in cache or `LiteLLM_VerificationTokenTable`",
        "token_not_found_in_db",
        "key",
    )


def _detail(status: int, *items: tuple[str, tuple[str | int, ...], str]) -> tuple[int, Any]:
    return status, {"detail": [{"type": t, "loc": list(loc), "msg": msg} for t, loc, msg in items]}


def _opaque(value: Any) -> Any:
    """What LiteLLM echoes for a string param: its encrypted form (never compare echoes)."""
    if not isinstance(value, str):
        return value
    digest = hashlib.sha256(f"{value}/{uuid.uuid4()}".encode()).digest() * 2
    return base64.urlsafe_b64encode(digest[: max(24, len(value) + 16)]).decode().rstrip("=")


class FakeLiteLLM:
    """LiteLLM's model-management endpoints over an in-memory table."""

    def __init__(
        self,
        master_key: str = "sk-test",
        *,
        release: Release = LITELLM_1_108,
        healthy_only_listing: bool = False,
    ) -> None:
        """``healthy_only_listing``: ``model_list_healthy_only`` is on (a release that has it)."""
        if healthy_only_listing and not release.has_healthy_only_listing:
            raise ValueError(f"LiteLLM {release.name} has no model_list_healthy_only")
        self._master_key = master_key
        self.release = release
        self.healthy_only_listing = healthy_only_listing
        self.unhealthy: set[str] = set()  # ids that failed LiteLLM's background health check
        self._rows: dict[str, _Row] = {}
        self._loaded = False  # LiteLLM's model list exists once any model was added since start
        self._model_map: dict[str, dict[str, Any]] = copy.deepcopy(KNOWN_MODELS)
        self.requests: Counter[str] = Counter()
        self.answers: list[tuple[str, int]] = []  # (endpoint, status) of every answered request
        self.faults: list[Fault] = []

    def __repr__(self) -> str:
        return f"FakeLiteLLM({len(self._rows)} rows)"

    # --- inspection and set-up for tests
    def writes(self) -> int:
        return sum(self.requests[e] for e in WRITE_ENDPOINTS)

    def reset_counts(self) -> None:
        self.requests.clear()
        self.answers.clear()

    def ids(self) -> list[str]:
        return list(self._rows)

    def stored(self, model_id: str) -> dict[str, Any] | None:
        """The row as stored, api_key included (the real proxy never shows it; tests of the fake may)."""
        row = self._rows.get(model_id)
        if row is None:
            return None
        return copy.deepcopy(
            {"model_name": row.model_name, "litellm_params": row.params, "model_info": row.info}
        )

    def seed(self, model_name: str, litellm_params: Mapping[str, Any], model_info: Mapping[str, Any]) -> str:
        """Put a row in place without a request (e.g. a Mesh row or one made by hand)."""
        info = dict(model_info)
        model_id = str(info.get("id") or uuid.uuid4())
        info["id"] = model_id
        self._rows[model_id] = _Row(model_name, dict(litellm_params), info)
        self._register(self._rows[model_id], building=not self._loaded)
        self._loaded = True
        return model_id

    def restart(self) -> None:
        """What a restart keeps: the rows (they are in the database). The model map starts from the
        built-in entries and the rows register again, in order; no model list without rows."""
        self._model_map = copy.deepcopy(KNOWN_MODELS)
        for row in self._rows.values():
            self._register(row, building=True)
        self._loaded = bool(self._rows)

    def hidden_names(self) -> set[str]:
        """Model names the listing leaves out: every row of the name unhealthy (healthy-only listing)."""
        if not self.healthy_only_listing or not self.unhealthy:
            return set()
        healthy: dict[str, bool] = {}
        for model_id, row in self._rows.items():
            healthy[row.model_name] = healthy.get(row.model_name, False) or model_id not in self.unhealthy
        return {name for name, any_healthy in healthy.items() if not any_healthy}

    def remove(self, model_id: str) -> None:
        """Delete a row behind the controller's back."""
        self._rows.pop(model_id, None)

    def edit(
        self, model_id: str, *, params: Mapping[str, Any] | None = None, info: Mapping[str, Any] | None = None
    ) -> None:
        """Edit a row behind the controller's back (shallow merge)."""
        row = self._rows[model_id]
        row.params.update(params or {})
        row.info.update(info or {})

    # --- faults
    def inject(self, fault: Fault) -> Fault:
        self.faults.append(fault)
        return fault

    def fail(
        self, status: int = 503, *, times: int | None = None, endpoints: frozenset[str] | None = None
    ) -> Fault:
        return self.inject(Fault(status=status, times=times, endpoints=endpoints))

    def refuse(self, *, times: int | None = None, endpoints: frozenset[str] | None = None) -> Fault:
        return self.inject(Fault(refuse=True, times=times, endpoints=endpoints))

    def clear_faults(self) -> None:
        self.faults.clear()

    def _fault(self, endpoint: str) -> Fault | None:
        for fault in self.faults:
            if fault.matches(endpoint):
                fault.hits += 1
                return fault
        return None

    # --- the HTTP surface
    async def handle(self, request: httpx.Request) -> httpx.Response:
        """An ``httpx.MockTransport`` handler."""
        body = await request.aread()
        try:
            status, payload = await self.answer(
                request.method, request.url.raw_path.decode(), request.headers, body
            )
        except RefusedError:
            raise httpx.ConnectError("[Errno 111] Connection refused (fake)", request=request) from None
        return httpx.Response(status, json=payload)

    async def answer(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, Any]:
        """(status, JSON payload) for one request; raises ``RefusedError`` for a refusing fault."""
        split = urlsplit(target)
        path, query = unquote(split.path), parse_qs(split.query)
        endpoint = _endpoint(method, path)
        self.requests[endpoint] += 1
        fault = self._fault(endpoint)
        if fault is not None and fault.delay:
            await anyio.sleep(fault.delay)
        if fault is not None and fault.hold is not None:
            await fault.hold.wait()
        if fault is not None and fault.refuse and not fault.apply_first:
            raise RefusedError
        if fault is not None and fault.status is not None and not fault.apply_first:
            result = self._injected(fault)
        else:
            result = self._dispatch(endpoint, path, query, headers, body)
            if fault is not None and fault.apply_first:
                if fault.refuse:
                    raise RefusedError
                if fault.status is not None:
                    result = self._injected(fault)
        self.answers.append((endpoint, result[0]))
        return result

    def _injected(self, fault: Fault) -> tuple[int, Any]:
        status = fault.status or 500
        if fault.payload is not None:
            return status, copy.deepcopy(fault.payload)
        if status == 401:
            return _error(
                401, "Authentication Error, Invalid API key provided.", "token_not_found_in_db", "key"
            )
        return _error(status, f"injected fault: HTTP {status}", "fault")

    def _dispatch(
        self,
        endpoint: str,
        path: str,
        query: Mapping[str, list[str]],
        headers: Mapping[str, str],
        body: bytes,
    ) -> tuple[int, Any]:
        if endpoint == READINESS:
            return 200, {"status": "healthy", "db": "connected"}
        if endpoint == OTHER:
            return 404, {"detail": "Not Found"}
        auth = headers.get("authorization", "")
        if not auth:
            return _error(401, "Authentication Error, No api key passed in.")
        if auth != f"Bearer {self._master_key}":
            if self.release.quotes_refused_key:
                return _refused_key(auth.removeprefix("Bearer "))
            return _error(
                401, "Authentication Error, Invalid API key provided.", "token_not_found_in_db", "key"
            )
        if endpoint == INFO:
            if not self._loaded:
                return 500, {"detail": {"error": _NOT_LOADED}}
            wanted = query.get("litellm_model_id")
            if wanted:
                row = self._rows.get(wanted[0])
                if row is None:
                    return 400, {"detail": {"error": f"Model id = {wanted[0]} not found on litellm proxy"}}
                return 200, {"data": [self._public(row)]}
            hidden = self.hidden_names()
            return 200, {"data": [self._public(r) for r in self._rows.values() if r.model_name not in hidden]}
        try:
            doc = json.loads(body or b"null")
        except ValueError:
            return _detail(422, ("json_invalid", ("body", 0), "JSON decode error"))
        if endpoint == NEW:
            return self._new(doc)
        if endpoint == UPDATE:
            return self._update(doc)
        if endpoint == PATCH:
            return self._patch(path.split("/")[2], doc)
        return self._delete(doc)

    # --- endpoints
    def _new(self, doc: Any) -> tuple[int, Any]:
        if not isinstance(doc, dict) or "model_name" not in doc or "litellm_params" not in doc:
            return 500, copy.deepcopy(_UNHANDLED)
        invalid = _validate(doc, require_model=True)
        if invalid is not None:
            return invalid
        info = dict(doc.get("model_info") or {})
        model_id = str(info.get("id") or uuid.uuid4())
        if model_id in self._rows:
            return _error(
                500, "{'error': 'Failed to add model to db. Check your server logs for more details.'}"
            )
        info["id"] = model_id
        params = {k: v for k, v in _ints(doc["litellm_params"]).items() if v is not None}
        row = _Row(doc["model_name"], params, {k: v for k, v in info.items() if v is not None})
        self._rows[model_id] = row
        self._register(row, building=not self._loaded)
        self._loaded = True
        return 200, self._echo(model_id, row)

    def _update(self, doc: Any) -> tuple[int, Any]:
        if not isinstance(doc, dict):
            return _detail(422, ("model_attributes_type", ("body",), "Input should be a valid dictionary"))
        invalid = _validate(doc, require_model=False)
        if invalid is not None:
            return invalid
        info = doc.get("model_info")
        if not isinstance(info, dict):
            return _error(400, "Authentication Error, model_info not provided")
        model_id = info.get("id")
        row = self._rows.get(model_id) if isinstance(model_id, str) else None
        if row is None:
            return _error(400, "Authentication Error, model not found")
        patch = _ints(doc.get("litellm_params") or {})
        params = {k: v for k, v in row.params.items() if k != "order" or patch.get("order") is not None}
        params.update({k: v for k, v in patch.items() if v is not None})
        name = doc.get("model_name")
        row = _Row(name if isinstance(name, str) else row.model_name, params, row.info)
        self._move_to_end(str(model_id), row)
        return 200, self._echo(str(model_id), row)

    def _patch(self, model_id: str, doc: Any) -> tuple[int, Any]:
        if not isinstance(doc, dict):
            return _detail(422, ("model_attributes_type", ("body",), "Input should be a valid dictionary"))
        invalid = _validate(doc, require_model=False)
        if invalid is not None:
            return invalid
        row = self._rows.get(model_id)
        if row is None:
            return _error(404, f"Model {model_id} not found on proxy.", "not_found_error", None)
        params = dict(row.params)
        sent_params = _ints(doc.get("litellm_params") or {})
        params.update({k: v for k, v in sent_params.items() if v is not None})
        info = dict(row.info)
        sent_info = dict(doc.get("model_info") or {})
        info.update({k: v for k, v in sent_info.items() if v is not None})
        for key in self.release.null_clears:  # an explicit null in litellm_params clears these
            if key in sent_params and sent_params[key] is None:
                params.pop(key, None)
        info["id"] = model_id
        name = doc.get("model_name")
        row = _Row(name if isinstance(name, str) else row.model_name, params, info)
        self._move_to_end(model_id, row)
        self._register(row)
        return 200, self._echo(model_id, row)

    def _delete(self, doc: Any) -> tuple[int, Any]:
        if not isinstance(doc, dict) or "id" not in doc:
            return _detail(422, ("missing", ("body", "id"), "Field required"))
        model_id = doc["id"]
        if not isinstance(model_id, str):
            return _detail(422, ("string_type", ("body", "id"), "Input should be a valid string"))
        if self._rows.pop(model_id, None) is None:
            return _error(400, f"{{'error': 'Model with id={model_id} not found in db'}}")
        return 200, {"message": f"Model: {model_id} deleted successfully"}

    # --- helpers
    def _move_to_end(self, model_id: str, row: _Row) -> None:
        self._rows.pop(model_id, None)
        self._rows[model_id] = row  # LiteLLM lists a row it just updated last

    def _register(self, row: _Row, *, building: bool = False) -> None:
        """``building``: the row is one the router is built with (at start, or the first of an empty
        proxy), which every release registers."""
        model = row.params.get("model")
        if not isinstance(model, str) or not (building or self.release.shares_registered_limits):
            return
        entry = self._model_map.setdefault(model, {})
        for key in _REGISTERED_KEYS:
            if row.info.get(key) is not None:
                entry[key] = row.info[key]

    def _public(self, row: _Row) -> dict[str, Any]:
        model = row.params.get("model")
        provider = model.split("/", 1)[0] if isinstance(model, str) and "/" in model else None
        mapped = self._model_map.get(model, {}) if isinstance(model, str) else {}
        info: dict[str, Any] = {**_INFO_DEFAULTS, **mapped, "key": model, "litellm_provider": provider}
        info.update({k: v for k, v in row.info.items() if v is not None})
        params = {**_PARAM_BOOLEANS, **{k: v for k, v in row.params.items() if k != "api_key"}}
        return {
            "model_name": row.model_name,
            "litellm_params": _tree_copy(params),
            "model_info": _tree_copy(info),
        }

    def _echo(self, model_id: str, row: _Row) -> dict[str, Any]:
        params = {**{k: _opaque(v) for k, v in row.params.items()}, **_PARAM_BOOLEANS}
        return {
            "model_id": model_id,
            "model_name": row.model_name,
            "litellm_params": params,
            "model_info": {**copy.deepcopy(row.info), "db_model": False, "member_auto_router": False},
            "blocked": False,
        }

    # --- on a loopback port
    @staticmethod
    def encode(payload: Any) -> bytes:
        """An answer's body (the standard library's encoder: NaN and big integers pass as they are)."""
        return json.dumps(payload).encode()

    @asynccontextmanager
    async def serving(self, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
        """Serve on ``host:port`` (0: a free port) while the block runs; yields the base URL."""
        listener = await anyio.create_tcp_listener(local_host=host, local_port=port)
        bound = listener.extra(SocketAttribute.local_port)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(listener.serve, self._connection)
                try:
                    yield f"http://{host}:{bound}"
                finally:
                    tg.cancel_scope.cancel()
        finally:
            await listener.aclose()

    async def _connection(self, stream: SocketStream) -> None:
        """A minimal HTTP/1.1 server loop (keep-alive, Content-Length bodies), enough for httpx."""
        reader = BufferedByteReceiveStream(stream)
        async with stream:
            while True:
                try:
                    head = await reader.receive_until(b"\r\n\r\n", 65536)
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                    return
                except anyio.DelimiterNotFound:
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = [*lines[0].split(" ", 2), "", ""][:3]
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                try:
                    body = await reader.receive_exactly(length) if length else b""
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                    return  # the client went away mid-body (e.g. killed): not a reason to stop serving
                try:
                    status, payload = await self.answer(method, target, headers, body)
                except RefusedError:
                    return  # close without an answer
                data = self.encode(payload)
                close = headers.get("connection", "").lower() == "close"
                # LiteLLM (uvicorn) drops the connection after an unhandled error, without saying so.
                dropped = _is_unhandled_error(payload)
                reply = (
                    f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\n"
                    f"content-type: application/json\r\ncontent-length: {len(data)}\r\n"
                    f"connection: {'close' if close else 'keep-alive'}\r\n\r\n"
                ).encode() + data
                try:
                    await stream.send(reply)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return
                if close or dropped:
                    return


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


_UNHANDLED = {"error": {"message": "Internal server error", "type": "internal_server_error"}}
_NOT_LOADED = (
    "LLM Model List not loaded in. Make sure you passed models in your config.yaml or on the LiteLLM "
    "Admin UI. - https://docs.litellm.ai/docs/proxy/configs"
)


def _tree_copy(value: Any) -> Any:
    """A copy of a JSON tree (dicts and lists copied, leaves shared: they are immutable), so an answer
    never shares a container with the fake's state. ``copy.deepcopy`` made /model/info cost ~150 ms at
    10,000 rows, during which the fake (one event loop) answered no write: P1's tail at 10,000 models."""
    if type(value) is dict:
        return {k: v if type(v) in _LEAVES else _tree_copy(v) for k, v in value.items()}
    if type(value) is list:
        return [v if type(v) in _LEAVES else _tree_copy(v) for v in value]
    return value if type(value) in _LEAVES else copy.deepcopy(value)


_LEAVES = frozenset((str, int, float, bool, type(None)))


def _is_unhandled_error(payload: Any) -> bool:
    return bool(payload == _UNHANDLED)


def _endpoint(method: str, path: str) -> str:
    parts = path.strip("/").split("/")
    if method == "GET" and path == "/model/info":
        return INFO
    if method == "GET" and path == "/health/readiness":
        return READINESS
    if method == "POST" and path in ("/model/new", "/model/update", "/model/delete"):
        return {"/model/new": NEW, "/model/update": UPDATE, "/model/delete": DELETE}[path]
    if method == "PATCH" and len(parts) == 3 and parts[0] == "model" and parts[2] == "update" and parts[1]:
        return PATCH
    return OTHER


def _ints(params: Mapping[str, Any]) -> dict[str, Any]:
    """pydantic's lax ints: a string of digits becomes an int."""
    out = dict(params)
    for key in _INT_PARAMS:
        value = out.get(key)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


def _validate(doc: Mapping[str, Any], *, require_model: bool) -> tuple[int, Any] | None:
    """The 422s pydantic gives for the request models (only the fields we send are modelled)."""
    name = doc.get("model_name")
    if name is not None and not isinstance(name, str):
        return _detail(422, ("string_type", ("body", "model_name"), "Input should be a valid string"))
    params = doc.get("litellm_params")
    if params is None and not require_model:
        params = {}
    if not isinstance(params, dict):
        return _detail(
            422,
            (
                "model_type",
                ("body", "litellm_params"),
                "Input should be a valid dictionary or instance of LiteLLM_Params",
            ),
        )
    if require_model and not isinstance(params.get("model"), str):
        return _detail(422, ("missing", ("body", "litellm_params", "model"), "Field required"))
    for key, value in _ints(params).items():
        if (
            key in _INT_PARAMS
            and value is not None
            and (isinstance(value, bool) or not isinstance(value, int))
        ):
            return _detail(
                422,
                (
                    "int_parsing",
                    ("body", "litellm_params", key),
                    "Input should be a valid integer, unable to parse string as an integer",
                ),
            )
    info = doc.get("model_info")
    if info is not None and not isinstance(info, dict):
        return _detail(422, ("model_type", ("body", "model_info"), "Input should be a valid dictionary"))
    return None


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.fakes.litellm --port 4010``: serve the fake for an out-of-process controller."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4000)
    parser.add_argument("--master-key", default="sk-test")
    parser.add_argument("--release", choices=sorted(RELEASES), default=LITELLM_1_108.name)
    args = parser.parse_args(argv)
    fake = FakeLiteLLM(args.master_key, release=RELEASES[args.release])

    async def serve() -> None:
        async with fake.serving(args.host, args.port) as url:
            print(f"fake LiteLLM on {url}", flush=True)
            await anyio.sleep_forever()

    anyio.run(serve)


if __name__ == "__main__":
    main()
