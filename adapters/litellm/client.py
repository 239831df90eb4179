"""A small client for LiteLLM's admin API (behaviour §2.1): one connection pool, explicit timeouts.

It only sends and parses; what an answer *means* for a command is the executor's business. The master
key lives in an ``httpx.Auth`` that never shows it: not in a repr, a log line or an exception message.
Answers keep LiteLLM's text whole: whoever quotes it passes it through ``scrub.safe_text`` (scrub,
then shorten — never the other way round) — except an answer refusing the master key (401, 403), which
is never kept at all: LiteLLM 1.84.0 quotes the key's last characters and its SHA-256 in it.

Every answer is read with a bound (``AnswerBounds``): at 10,000 rows ``/model/info`` is ~35 MB, and an
answer of 40 MiB of small JSON values took 665 MiB to parse, so a larger one is refused before it is
parsed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Mapping
from types import TracebackType
from typing import Any
from urllib.parse import quote

import anyio.lowlevel
import attrs
import httpx
import orjson

from adapters.identity import USER_AGENT
from adapters.litellm.bounds import AnswerBounds
from adapters.litellm.scrub import safe_text
from adapters.tls import client_tls_context

# Connect and pool waits are short (an unreachable proxy should be noticed quickly); LiteLLM answers
# /model/new in ~170 ms, /model/info in ~15 ms, so 10 s of read time is a generous ceiling.
DEFAULT_TIMEOUT = httpx.Timeout(connect=3.0, read=10.0, write=10.0, pool=5.0)
DEFAULT_LIMITS = httpx.Limits(max_connections=8, max_keepalive_connections=4, keepalive_expiry=30.0)


class _MasterKey(httpx.Auth):
    """Bearer auth whose key is never rendered."""

    def __init__(self, key: str) -> None:
        self.__key = key

    def __repr__(self) -> str:
        return "_MasterKey(<hidden>)"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if self.__key:  # an empty key sends no header (LiteLLM answers 401 "No api key passed in")
            request.headers["Authorization"] = f"Bearer {self.__key}"
        yield request

    def reveal_for_scrubbing(self) -> str:
        """For the executor's last-line scrubber only (it removes this value from any text it reports)."""
        return self.__key


class LiteLLMTransportError(Exception):
    """No usable HTTP answer: connection refused or reset, a timeout, a protocol error, an answer past
    ``AnswerBounds``. ``kind`` is stable."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind  # "timeout" | "connect" | "network" | "protocol" | TOO_LARGE
        self.detail = detail


TOO_LARGE = "too-large"

# LiteLLM's answer to a master key it refuses (401) or will not let manage models (403): our words, never
# its own (LiteLLM 1.84.0: "Received API Key = sk-...<last 4>, Key Hash (Token) =<SHA-256 of the key>").
REFUSED_KEY_TEXT = {
    401: "LiteLLM refused the master key (its answer is not shown: it quotes the key)",
    403: "LiteLLM does not let the master key manage models (its answer is not shown: it quotes the key)",
}


@attrs.frozen
class Answer:
    """An HTTP answer: status, the parsed JSON body (None when it is not JSON) and the whole text (not
    in the repr: it may echo a key; quote it only through ``safe_text``)."""

    status: int
    body: Any
    text: str = attrs.field(repr=False)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def error_message(self) -> str:
        """LiteLLM's error text: ``error.message`` or FastAPI's ``detail`` (only ``loc`` and ``msg``:
        pydantic's ``input`` would echo what we sent, api_key included). Whole and unscrubbed: pass it
        through ``safe_text`` before it is shown anywhere."""
        body = self.body
        if isinstance(body, Mapping):
            error = body.get("error")
            if isinstance(error, Mapping) and isinstance(error.get("message"), str):
                return str(error["message"])
            if isinstance(error, str):
                return error
            detail = body.get("detail")
            if isinstance(detail, str):
                return detail
            if isinstance(detail, list):
                parts = []
                for item in detail:
                    if isinstance(item, Mapping):
                        loc = ".".join(str(p) for p in item.get("loc") or () if p != "body")
                        parts.append(f"{loc}: {item.get('msg', '')}".strip(": "))
                return "; ".join(parts)
            if isinstance(body.get("message"), str):
                return str(body["message"])
        return self.text


# An answer this large (/model/info at ~1,500 rows) takes milliseconds to count and as long again to parse.
_LONG_PARSE_BYTES = 1 << 20


def parse_body(content: bytes) -> Any:
    """The JSON body, or None when it is not JSON. orjson first (several times faster on /model/info);
    what it refuses and the standard library reads (NaN, Infinity) is read as before. An integer beyond
    64 bits reads as a float (LiteLLM's own fields are far smaller)."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(content)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than any reader goes
        return None


class LiteLLMClient:
    """``info``, ``info_of``, ``new``, ``patch_update``, ``update`` (the old merge endpoint), ``delete``,
    and ``readiness`` for ``model-catalog check``.

    Every call passes the timeout explicitly. ``transport`` lets tests plug in the fake
    (``httpx.MockTransport(fake.handle)``).
    """

    def __init__(
        self,
        base_url: str,
        master_key: str,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        limits: httpx.Limits = DEFAULT_LIMITS,
        transport: httpx.AsyncBaseTransport | None = None,
        bounds: AnswerBounds | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._auth = _MasterKey(master_key)
        self._timeout = timeout
        self.bounds = bounds or AnswerBounds()
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            auth=self._auth,
            limits=limits,
            timeout=timeout,
            transport=transport,
            verify=client_tls_context(trust_env=True),  # httpx's roots, read only if TLS is ever used
            # identity: the bound counts the bytes of the answer as sent, and no decoder inflates them
            headers={"accept": "application/json", "accept-encoding": "identity", "user-agent": USER_AGENT},
        )

    def __repr__(self) -> str:
        return f"LiteLLMClient({self.base_url!r})"

    async def __aenter__(self) -> LiteLLMClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def secrets_to_scrub(self) -> tuple[str, ...]:
        return (self._auth.reveal_for_scrubbing(),)

    # --- the admin API
    async def info(self, *, parse: Callable[[bytes], Any] | None = None) -> Answer:
        """``parse``: reads the body instead of ``parse_body`` (the observer pauses the collector)."""
        return await self._call("GET", "/model/info", parse=parse)

    async def info_of(self, model_id: str) -> Answer:
        """``GET /model/info?litellm_model_id=ID``: that one row (``{"data": [row]}``), or 400 "... not found
        on litellm proxy". A lookup, not a listing: a release that hides rows from the listing
        (``model_list_healthy_only``) still answers it."""
        return await self._call("GET", f"/model/info?litellm_model_id={quote(model_id, safe='')}")

    async def readiness(self, *, details: bool = False) -> Answer:
        """``GET /health/readiness`` (public), or ``/health/readiness/details`` (authenticated: where newer
        releases moved ``litellm_version``)."""
        return await self._call("GET", "/health/readiness/details" if details else "/health/readiness")

    async def new(self, body: Mapping[str, Any]) -> Answer:
        return await self._call("POST", "/model/new", body)

    async def patch_update(self, model_id: str, body: Mapping[str, Any]) -> Answer:
        """``PATCH /model/{id}/update``: merges litellm_params *and* model_info (null keeps the old value)."""
        return await self._call("PATCH", f"/model/{quote(model_id, safe='')}/update", body)

    async def update(self, body: Mapping[str, Any]) -> Answer:
        """``POST /model/update`` (old): merges litellm_params only, ignores model_info, drops ``order``."""
        return await self._call("POST", "/model/update", body)

    async def delete(self, model_id: str) -> Answer:
        return await self._call("POST", "/model/delete", {"id": model_id})

    async def _call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        parse: Callable[[bytes], Any] | None = None,
    ) -> Answer:
        content = json.dumps(body).encode() if body is not None else None
        headers = {"content-type": "application/json"} if content is not None else None
        for attempt in (1, 2):
            try:
                status, answer = await self._read(method, path, content, headers)
                break
            except httpx.TimeoutException as exc:
                raise LiteLLMTransportError("timeout", f"{method} {path}: {type(exc).__name__}") from None
            except httpx.ConnectError as exc:
                raise LiteLLMTransportError(
                    "connect", f"{method} {path}: {safe_text(str(exc), self.secrets_to_scrub())}"
                ) from None
            except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError) as exc:
                # LiteLLM drops a keep-alive connection after an unhandled error (its generic 500), so
                # the next request on that pooled connection fails at once. One fresh try is safe for
                # every call we make: a create that did land answers 500 (existing id) the second time.
                if attempt == 1:
                    continue
                raise LiteLLMTransportError("network", f"{method} {path}: {type(exc).__name__}") from None
            except (httpx.NetworkError, httpx.ProtocolError, httpx.UnsupportedProtocol) as exc:
                raise LiteLLMTransportError("protocol", f"{method} {path}: {type(exc).__name__}") from None
        if answer is None:
            return Answer(status, None, REFUSED_KEY_TEXT[status])
        problem = self.bounds.values_problem(answer)
        if problem is not None:
            raise LiteLLMTransportError(TOO_LARGE, f"{method} {path}: {problem}")
        if len(answer) > _LONG_PARSE_BYTES:
            await anyio.lowlevel.checkpoint()  # reading and counting it was one step, the parse is another
        parsed = (parse or parse_body)(answer)
        ok = 200 <= status < 300
        # The text is only ever the fallback of an error message: not decoded again for a good answer
        # (/model/info at 10,000 rows is megabytes, read after every burst of writes).
        text = "" if ok and parsed is not None else answer.decode("utf-8", "replace")
        return Answer(status, parsed, text)

    async def _read(
        self, method: str, path: str, content: bytes | None, headers: dict[str, str] | None
    ) -> tuple[int, bytes | None]:
        """The status and the body, read up to ``bounds.max_bytes`` (None: a refused key's, never read)."""
        limit = self.bounds.max_bytes
        too_large = LiteLLMTransportError(
            TOO_LARGE,
            f"{method} {path}: the answer is larger than {limit:,} bytes (CATALOG_LITELLM_MAX_ANSWER_BYTES); "
            "not read",
        )
        request = self._http.build_request(
            method, path, content=content, headers=headers, timeout=self._timeout
        )
        response = await self._http.send(request, stream=True)
        try:
            if response.status_code in REFUSED_KEY_TEXT:
                return response.status_code, None
            encoding = response.headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                raise LiteLLMTransportError(
                    "protocol",
                    f"{method} {path}: answered with content-encoding {encoding[:40]!r}, not asked for",
                )
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and len(declared) <= 18 and int(declared) > limit:
                raise too_large
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():  # identity (checked above): the bytes as sent
                size += len(chunk)
                if size > limit:
                    raise too_large
                chunks.append(chunk)
            return response.status_code, b"".join(chunks)
        finally:
            await response.aclose()
