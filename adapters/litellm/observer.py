"""The LiteLLM observer: polls ``GET /model/info`` and sends what it sees (a ``Source``).

Polls happen every ``resync_seconds``, shortly after the executor's writes (debounced), at once when the
executor asks (a 500 on create: the row probably exists), and with backoff while LiteLLM is unreachable.
Rows are reduced with ``observed_row`` (``whitelist_row``, and no limit LiteLLM took from another row
for one of ours) before they become an event: credentials in other rows' params never enter the core.
A failed poll becomes ``LiteLLMUnreachable`` — sent only when the status changes.

The listing is not always every row: with ``model_list_healthy_only`` (newer releases) LiteLLM leaves out
the rows of a model name whose deployments all failed its background health check. Read as missing, such
a row would be created again (LiteLLM refuses: the id exists) for as long as it stays unhealthy. So a
row LiteLLM is known to hold (listed before, written by us, or refused as an existing id) that the
listing leaves out is looked up by id (``info_of``, which no listing filter applies to): found, it is
observed as it is; "not found", it is gone.

The observer is also the executor's ``WriteHooks``: a write's outcome is computed under its lock
shared, polls hold it exclusively (see ``adapters.litellm.sync`` for why that keeps every observation
at least as new as every outcome folded before it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from enum import StrEnum
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import ObjectSendStream

from adapters.backoff import Backoff
from adapters.collector import CollectorPause
from adapters.litellm.client import TOO_LARGE, Answer, LiteLLMClient, LiteLLMTransportError, parse_body
from adapters.litellm.scrub import safe_text
from adapters.litellm.sync import SharedExclusiveLock
from catalog_core.events import Event, LiteLLMRowsObserved, LiteLLMUnreachable
from catalog_core.sources.litellm_row import observed_row

log = logging.getLogger("model_catalog.litellm")

DEFAULT_RESYNC_SECONDS = 30.0
DEFAULT_DEBOUNCE_SECONDS = 0.2
DEFAULT_MAX_DEBOUNCE_SECONDS = 2.0
UNREACHABLE_POLL_CAP = 10.0  # seconds: the longest wait between polls while LiteLLM does not answer
# Rows left out of a listing that one poll looks up by id (~15 ms each): the others are observed as they
# were last looked up (a row never looked up yet counts as missing until its turn, which comes first).
MAX_LOOKUPS_PER_POLL = 100
# A poll after writes waits at least this many times as long as the last poll took, so re-reading every
# row after writes takes at most ~1/10 of the time: at 10,000 rows a poll takes ~0.1 s, and polls hold
# the writes back (see sync) and keep the loop busy. At a hundred rows it is a few ms: no wait to speak of.
# Never more than ``max_debounce_seconds``: a slow answer must not delay seeing the writes for longer.
POLL_COST_FACTOR = 10.0


class PeerStatus(StrEnum):
    OK = "ok"
    UNAUTHORIZED = "unauthorized"
    UNREACHABLE = "unreachable"
    ERROR = "error"


def status_of_http(status: int) -> PeerStatus:
    if status in (401, 403):
        return PeerStatus.UNAUTHORIZED
    if status in (502, 503, 504):
        return PeerStatus.UNREACHABLE
    return PeerStatus.ERROR


class PeerHealth:
    """What we last knew of LiteLLM, from polls and writes alike; logs each transition once."""

    def __init__(self) -> None:
        self.status: PeerStatus = PeerStatus.OK
        self.detail = ""

    def report(self, status: PeerStatus, detail: str = "", *, via: str) -> bool:
        """Record an observation; True (and one log line) when the status changed."""
        if status is self.status:
            self.detail = detail
            return False
        previous, self.status, self.detail = self.status, status, detail
        if status is PeerStatus.OK:
            log.info("LiteLLM is answering again (was %s, seen by a %s)", previous.value, via)
        elif status is PeerStatus.UNAUTHORIZED:
            log.error(
                "LiteLLM rejects the master key (seen by a %s: %s): LiteLLM writes are retried with "
                "backoff until it is accepted; check LITELLM_MASTER_KEY and its role in LiteLLM",
                via,
                detail,
            )
        elif status is PeerStatus.UNREACHABLE:
            log.warning("LiteLLM is unreachable (seen by a %s: %s); retrying with backoff", via, detail)
        else:
            log.warning("LiteLLM answers with errors (seen by a %s: %s); retrying with backoff", via, detail)
        return True


class LiteLLMObserver:
    """``Source`` of ``LiteLLMRowsObserved`` / ``LiteLLMUnreachable``, and the executor's ``WriteHooks``."""

    name = "litellm"

    def __init__(
        self,
        client: LiteLLMClient,
        *,
        resync_seconds: float = DEFAULT_RESYNC_SECONDS,
        debounce_seconds: float = DEFAULT_DEBOUNCE_SECONDS,
        max_debounce_seconds: float = DEFAULT_MAX_DEBOUNCE_SECONDS,
        backoff: Backoff | None = None,
        pause_collector: bool = False,
    ) -> None:
        """``pause_collector``: keep the garbage collector off while an answer is parsed and reduced
        (``adapters.collector``; process-wide, so for a host that lets the catalog manage it)."""
        if resync_seconds <= 0:
            raise ValueError("resync_seconds must be > 0")
        self._client = client
        self.resync_seconds = resync_seconds
        self.debounce_seconds = debounce_seconds
        self.max_debounce_seconds = max(max_debounce_seconds, debounce_seconds)
        # While LiteLLM is down it is looked at again within UNREACHABLE_POLL_CAP seconds: the core
        # retries the writes held back by the outage as soon as a poll sees it answering again.
        self._backoff = backoff or Backoff(base=0.5, cap=max(1.0, min(resync_seconds, UNREACHABLE_POLL_CAP)))
        self.lock = SharedExclusiveLock()
        self.health = PeerHealth()
        self._told: PeerStatus | None = None  # what the core was last told (None: nothing yet)
        self._next_resync = float("-inf")  # the first poll is due at once
        self._urgent = False
        self._first_write: float | None = None  # first write not yet covered by a poll
        self._last_write = 0.0
        # No write is under way or waiting since the last one answered (the host says so: writes_settled),
        # so the debounce has nothing left to gather.
        self._writes_settled = False
        self._last_poll_end = float("-inf")
        self._last_poll_cost = 0.0  # seconds the last poll that saw rows took
        self._wake = anyio.Event()
        self.polls = 0
        self.lookups = 0  # rows left out of a listing, looked up by id
        self.collector = CollectorPause(pause_collector)
        # Ids LiteLLM holds as far as we know: listed, written, or refused as existing. Forgotten only
        # once a lookup says "not found" or our delete was applied.
        self._held: set[str] = set()
        # Held rows a listing left out: as last looked up, and the poll that looked each one up.
        self._hidden: dict[str, Mapping[str, Any]] = {}
        self._looked_up: dict[str, int] = {}

    # --- WriteHooks, used by the executor
    def answered(self) -> AbstractAsyncContextManager[None]:
        """Hold while the outcome of a write that got its answer is computed (see sync)."""
        return self.lock.shared()

    def wrote(self) -> None:
        """A write got an answer: poll ``debounce_seconds`` after the last of a burst (at most
        ``max_debounce_seconds`` after the first), and no sooner than ``POLL_COST_FACTOR`` times the
        last poll's duration after it."""
        now = anyio.current_time()
        self._last_write = now
        self._writes_settled = False
        if self._first_write is None:
            self._first_write = now
        self._poke()

    def writes_settled(self) -> None:
        """Every write answered so far is the last for now: none is under way or waiting to go out. The
        poll that covers them is then due as soon as its pace allows, not ``debounce_seconds`` later: the
        debounce only gathers writes that are still coming, and the catalog waits for this poll (LiteLLM
        fills in a new row's limits), so it would only delay a publication (P2, P8's first start)."""
        if self._first_write is None:
            return
        self._writes_settled = True
        self._poke()

    def reobserve(self) -> None:
        """Poll as soon as possible (e.g. after a 500 on create: the row is probably there)."""
        self._urgent = True
        self._poke()

    def present(self, model_id: str) -> None:
        """LiteLLM holds this row (a write of it applied, or a create refused as an existing id): a
        listing that leaves it out makes the next poll look it up."""
        self._held.add(model_id)

    def absent(self, model_id: str) -> None:
        """Our delete of this row applied: a listing without it is what we expect."""
        self._held.discard(model_id)

    def write_answered(self, status: PeerStatus, detail: str = "") -> None:
        """What a write learned about LiteLLM. A change from what the core was told makes the next
        poll due now, so the observer confirms it and tells the core (once)."""
        self.health.report(status, detail, via="write")
        if status is not self._told:
            self.reobserve()

    # --- the Source
    async def run(self, send: ObjectSendStream[Event]) -> None:
        while True:
            await self._wait_until_due()
            await self.poll_once(send)

    def poll_wanted(self) -> bool:
        """A write or a re-observation request is not yet covered by a poll."""
        return self._urgent or self._first_write is not None

    def next_due(self) -> float:
        """When the next poll is due (anyio clock)."""
        if self._urgent:
            return float("-inf")
        due = self._next_resync
        if self._first_write is not None:
            debounced = (
                self._last_write
                if self._writes_settled
                else min(
                    self._last_write + self.debounce_seconds, self._first_write + self.max_debounce_seconds
                )
            )
            pace = min(POLL_COST_FACTOR * self._last_poll_cost, self.max_debounce_seconds)
            paced = self._last_poll_end + pace
            due = min(due, max(debounced, paced))
        return due

    async def poll_once(self, send: ObjectSendStream[Event]) -> bool:
        """One exclusive poll; its event is sent before the lock is released. True when rows were seen."""
        async with self.lock.exclusive():
            # Every write answered before this point is covered by the GET below.
            self._urgent = False
            self._first_write = None
            self._writes_settled = False
            self.polls += 1
            began = anyio.current_time()
            event, status, detail = await self._observe()
            now = anyio.current_time()
            self._last_poll_end = now
            if event is not None:
                self._last_poll_cost = now - began
            if status is PeerStatus.OK:
                self._backoff.reset()
                self._next_resync = now + self.resync_seconds
            else:
                self._next_resync = now + self._backoff.next()
            self.health.report(status, detail, via="poll")
            if event is not None:
                await send.send(event)
                self._told = PeerStatus.OK
            elif status is not self._told:
                await send.send(LiteLLMUnreachable(reason=status.value, detail=detail))
                self._told = status
            return event is not None

    async def _observe(self) -> tuple[LiteLLMRowsObserved | None, PeerStatus, str]:
        try:
            return await self._read_rows()
        finally:
            # after _read_rows returned: the parsed answer, no longer referenced, is freed already
            self.collector.resume()

    def _parse(self, content: bytes) -> Any:
        self.collector.pause()
        return parse_body(content)

    async def _read_rows(self) -> tuple[LiteLLMRowsObserved | None, PeerStatus, str]:
        try:
            answer = await self._client.info(parse=self._parse)
        except LiteLLMTransportError as exc:
            # an answer past the client's bounds is LiteLLM answering badly, not LiteLLM being away
            return None, PeerStatus.ERROR if exc.kind == TOO_LARGE else PeerStatus.UNREACHABLE, exc.detail
        except Exception as exc:  # the source never dies: anything else is an error status
            return None, PeerStatus.ERROR, f"GET /model/info: {type(exc).__name__}"
        if no_models_loaded(answer):
            self._held.clear()  # no row at all
            self._hidden.clear()
            return LiteLLMRowsObserved(()), PeerStatus.OK, ""
        if not answer.ok:
            return None, status_of_http(answer.status), self._failed(answer)
        rows = _rows(answer.body)
        if rows is None:
            return None, PeerStatus.ERROR, "GET /model/info: unexpected answer shape (no data list)"
        try:
            hidden = await self._left_out(rows)
        except LiteLLMTransportError as exc:
            return None, PeerStatus.UNREACHABLE, exc.detail
        except Exception as exc:
            return None, PeerStatus.ERROR, f"GET /model/info?litellm_model_id: {type(exc).__name__}"
        if isinstance(hidden, Answer):
            return None, status_of_http(hidden.status), self._failed(hidden)
        return LiteLLMRowsObserved(await _whitelisted([*rows, *hidden])), PeerStatus.OK, ""

    def _failed(self, answer: Answer) -> str:
        """A failed answer's detail, logged and sent to the core (the event log, replay): scrubbed, then
        shortened."""
        return safe_text(f"HTTP {answer.status}: {answer.error_message()}", self._client.secrets_to_scrub())

    async def _left_out(self, rows: list[Mapping[str, Any]]) -> list[Mapping[str, Any]] | Answer:
        """The rows LiteLLM holds that the listing left out: looked up by id, at most
        ``MAX_LOOKUPS_PER_POLL`` a poll (those looked up longest ago first), the others as they were
        last looked up. A lookup that fails (not "not found") is the poll's answer."""
        listed = {_row_id(row) for row in rows}
        self._held.update(i for i in listed if i is not None)
        left_out = {i for i in self._held if i not in listed}
        self._hidden = {i: row for i, row in self._hidden.items() if i in left_out}
        turn = sorted(left_out, key=lambda i: (self._looked_up.get(i, -1), i))[:MAX_LOOKUPS_PER_POLL]
        self._looked_up = {i: n for i, n in self._looked_up.items() if i in left_out}
        for model_id in turn:
            self.lookups += 1
            self._looked_up[model_id] = self.polls
            answer = await self._client.info_of(model_id)
            if not answer.ok and not _not_found(answer):
                return answer
            same = [row for row in _rows(answer.body) or () if _row_id(row) == model_id] if answer.ok else []
            if same:
                self._hidden[model_id] = same[0]
            else:  # "not found": gone
                self._held.discard(model_id)
                self._hidden.pop(model_id, None)
                self._looked_up.pop(model_id, None)
        if self._hidden:
            log.debug("%d row(s) left out of /model/info are held by LiteLLM", len(self._hidden))
        return list(self._hidden.values())

    def _poke(self) -> None:
        self._wake.set()

    async def _wait_until_due(self) -> None:
        while True:
            self._wake = anyio.Event()
            delay = self.next_due() - anyio.current_time()
            if delay <= 0:
                return
            with anyio.move_on_after(delay):
                await self._wake.wait()


# A LiteLLM started with no models in its config and none in its database has no router yet: its
# /model/info answers 500 with one of these until the first model is added (then ``{"data": []}``
# even when every model is deleted again). It lists the DB's models before it serves, so this answer
# means "no rows" — and reading it as an error would stop the core from ever planning the first row.
_NOT_LOADED = ("LLM Model List not loaded", "LLM Router is not loaded")


def no_models_loaded(answer: Answer) -> bool:
    if answer.status != 500 or not isinstance(answer.body, Mapping):
        return False
    detail = answer.body.get("detail")
    error = detail.get("error") if isinstance(detail, Mapping) else None
    return isinstance(error, str) and error.startswith(_NOT_LOADED)


WHITELIST_CHUNK = 500  # rows reduced between two checkpoints (~1.5 ms)


async def _whitelisted(rows: list[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The rows reduced by ``observed_row``, letting the other tasks run between chunks: at 10,000 rows
    the pass takes ~30 ms, and a loop that long bunches the watch's deliveries, which the core's burst
    probe would read as rows changing together."""
    out: list[dict[str, Any]] = []
    for start in range(0, len(rows), WHITELIST_CHUNK):
        if start:
            await anyio.lowlevel.checkpoint()
        out.extend(observed_row(r) for r in rows[start : start + WHITELIST_CHUNK])
    return tuple(out)


def _row_id(row: Mapping[str, Any]) -> str | None:
    info = row.get("model_info")
    model_id = info.get("id") if isinstance(info, Mapping) else None
    return model_id if isinstance(model_id, str) else None


def _not_found(answer: Answer) -> bool:
    """LiteLLM's answer to a lookup of an id it does not hold: 400 "Model id = ... not found on litellm
    proxy" (both releases measured)."""
    return answer.status in (400, 404) and "not found" in answer.error_message().lower()


def _rows(body: Any) -> list[Mapping[str, Any]] | None:
    if not isinstance(body, Mapping) or not isinstance(body.get("data"), list):
        return None
    return [row for row in body["data"] if isinstance(row, Mapping)]
