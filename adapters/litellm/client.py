"""A small client for LiteLLM's admin API (behaviour §2.1): one connection pool, explicit timeouts.

It only sends and parses; what an answer *means* for a command is the executor's business. The master
key lives in an ``httpx.Auth`` that never shows it: not in a repr, a log line or an exception message.
Answers keep LiteLLM's text whole: whoever quotes it passes it through ``scrub.safe_text`` (scrub,
then shorten — never the other way round).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Mapping
from types import TracebackType
from typing import Any
from urllib.parse import quote

import attrs
import httpx
import orjson

from adapters.identity import USER_AGENT
from adapters.litellm.scrub import safe_text

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
    """No HTTP answer: connection refused or reset, a timeout, a protocol error. ``kind`` is stable."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind  # "timeout" | "connect" | "network" | "protocol"
        self.detail = detail


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
    """``info``, ``new``, ``patch_update``, ``update`` (the old merge endpoint), ``delete``, and
    ``readiness`` for ``model-catalog check``.

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
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._auth = _MasterKey(master_key)
        self._timeout = timeout
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            auth=self._auth,
            limits=limits,
            timeout=timeout,
            transport=transport,
            headers={"accept": "application/json", "user-agent": USER_AGENT},
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
                response = await self._http.request(
                    method, path, content=content, headers=headers, timeout=self._timeout
                )
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
        parsed = (parse or parse_body)(response.content)
        ok = 200 <= response.status_code < 300
        # The text is only ever the fallback of an error message: not decoded again for a good answer
        # (/model/info at 10,000 rows is megabytes, read after every burst of writes).
        return Answer(response.status_code, parsed, "" if ok and parsed is not None else response.text)
