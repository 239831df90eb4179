"""The LiteLLM observer: reads ``GET /model/info`` and sends what it sees (a ``Source``), and carries out
the core's re-reads (the executor of ``ObserveLiteLLM``).

Two kinds of read, one poll: the observer's own resync every ``resync_seconds`` (with backoff while
LiteLLM does not answer), as a watch relists; and the re-read the core plans after writes, or when a
write's answer left what LiteLLM holds or its status unknown (``catalog_core.plan._reread``: the core
coalesces a burst of writes into one, so the event log shows each re-read and a replay reproduces it).
A planned re-read waits at most ``POLL_COST_FACTOR`` times as long as the last poll took after it (never
more than ``MAX_PACE_SECONDS``): the pace of its execution, as the command queue paces a key's writes;
whether and when a re-read is wanted is the core's. Its answer is the observation: ``LiteLLMRowsObserved``,
or ``LiteLLMUnreachable`` (sent for a planned read even when the status did not change, so the core
learns the read is over; the resync sends it only when the status changes).
Rows are reduced with ``observed_row`` (``whitelist_row``, and no limit LiteLLM took from another row
for one of ours) before they become an event: credentials in other rows' params never enter the core.

The listing is not always every row: with ``model_list_healthy_only`` (newer releases) LiteLLM leaves out
the rows of a model name whose deployments all failed its background health check. Read as missing, such
a row would be created again (LiteLLM refuses: the id exists) for as long as it stays unhealthy. So a
row LiteLLM is known to hold (listed before, written by us, or refused as an existing id:
``LiteLLMShared.held``, which the writer fills in) that the listing leaves out is looked up by id
(``info_of``, which no listing filter applies to): found, it is observed as it is; "not found", it is gone.

The writer and the observer share ``LiteLLMShared`` (``adapters.litellm.sync``): a write's outcome is
built under its lock shared, polls hold it exclusively, which keeps every observation at least as new as
every outcome folded before it. That is an adapter-internal detail: it decides no read.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import ObjectSendStream

from adapters.backoff import Backoff
from adapters.collector import CollectorPause
from adapters.litellm.client import TOO_LARGE, Answer, LiteLLMClient, LiteLLMTransportError, parse_body
from adapters.litellm.scrub import safe_text
from adapters.litellm.sync import LiteLLMShared, PeerHealth, PeerStatus, status_of_http
from catalog_core.commands import Command, ObserveLiteLLM
from catalog_core.events import CommandCompleted, Event, LiteLLMRowsObserved, LiteLLMUnreachable, Outcome
from catalog_core.ingest import prepare_row_texts
from catalog_core.sources.litellm_row import observed_row

log = logging.getLogger("model_catalog.litellm")

__all__ = ["LiteLLMObserver", "PeerHealth", "PeerStatus", "no_models_loaded", "status_of_http"]

DEFAULT_RESYNC_SECONDS = 30.0
UNREACHABLE_POLL_CAP = 10.0  # seconds: the longest wait between polls while LiteLLM does not answer
# Rows left out of a listing that one poll looks up by id (~15 ms each): the others are observed as they
# were last looked up (a row never looked up yet counts as missing until its turn, which comes first).
MAX_LOOKUPS_PER_POLL = 100
# A planned re-read waits at least this many times as long as the last poll took, so re-reading every
# row after writes takes at most ~1/10 of the time: at 10,000 rows a poll takes ~0.1 s, and polls hold
# the writes' outcomes back (see sync) and keep the loop busy. At a hundred rows it is a few ms: no wait
# to speak of. Never more than MAX_PACE_SECONDS: a slow answer must not delay seeing the writes longer.
POLL_COST_FACTOR = 10.0
MAX_PACE_SECONDS = 2.0


class LiteLLMObserver:
    """``Source`` of ``LiteLLMRowsObserved`` / ``LiteLLMUnreachable``; executor of ``ObserveLiteLLM``."""

    name = "litellm"

    def __init__(
        self,
        client: LiteLLMClient,
        *,
        resync_seconds: float = DEFAULT_RESYNC_SECONDS,
        max_pace_seconds: float = MAX_PACE_SECONDS,
        backoff: Backoff | None = None,
        pause_collector: bool = False,
        shared: LiteLLMShared | None = None,
    ) -> None:
        """``pause_collector``: keep the garbage collector off while an answer is parsed and reduced
        (``adapters.collector``; process-wide, so for a host that lets the catalog manage it).
        ``shared``: what the LiteLLM writer shares with it (default: its own; hand ``shared`` to the
        writer)."""
        if resync_seconds <= 0:
            raise ValueError("resync_seconds must be > 0")
        self._client = client
        self.resync_seconds = resync_seconds
        self.max_pace_seconds = max_pace_seconds
        # While LiteLLM is down it is looked at again within UNREACHABLE_POLL_CAP seconds: the core
        # retries the writes held back by the outage as soon as a poll sees it answering again.
        self._backoff = backoff or Backoff(base=0.5, cap=max(1.0, min(resync_seconds, UNREACHABLE_POLL_CAP)))
        self.shared = shared or LiteLLMShared()
        self.lock = self.shared.lock
        self.health = self.shared.health
        self._told: PeerStatus | None = None  # what the core was last told (None: nothing yet)
        self._next_resync = float("-inf")  # the first poll is due at once
        self._last_poll_end = float("-inf")
        self._last_poll_cost = 0.0  # seconds the last poll that saw rows took
        self._send: ObjectSendStream[Event] | None = None
        self.polls = 0
        self.lookups = 0  # rows left out of a listing, looked up by id
        self.collector = CollectorPause(pause_collector)
        # Held rows a listing left out: as last looked up, and the poll that looked each one up.
        self._hidden: dict[str, Mapping[str, Any]] = {}
        self._looked_up: dict[str, int] = {}

    @property
    def _held(self) -> set[str]:
        return self.shared.held

    # --- the Source
    async def run(self, send: ObjectSendStream[Event]) -> None:
        self._send = send
        while True:
            delay = self._next_resync - anyio.current_time()
            if delay > 0:
                await anyio.sleep(delay)
            if anyio.current_time() >= self._next_resync:  # a planned read meanwhile moved the resync
                await self.poll_once(send)

    # --- the Executor of the core's re-reads
    def handles(self, command: Command) -> bool:
        return isinstance(command, ObserveLiteLLM)

    async def execute(self, command: Command) -> Sequence[Event]:
        """Read LiteLLM now (at the pace above); the answer, the observation, goes into the stream before
        the lock is released, so nothing is returned. Before the source runs, there is no stream yet: the
        read waits a moment and is planned again."""
        if not isinstance(command, ObserveLiteLLM):
            return [CommandCompleted(command.key, command.id, Outcome.TERMINAL, detail="not a LiteLLM read")]
        send = self._send
        if send is None:
            return [CommandCompleted(command.key, command.id, Outcome.RETRY, retry_after=0.5)]
        wait = self.read_not_before() - anyio.current_time()
        if wait > 0:
            await anyio.sleep(wait)
        await self.poll_once(send, planned=True)
        return []

    def read_not_before(self) -> float:
        """When a planned re-read may go (anyio clock): ``POLL_COST_FACTOR`` times the last poll's cost
        after it ended, never more than ``max_pace_seconds``."""
        return self._last_poll_end + min(POLL_COST_FACTOR * self._last_poll_cost, self.max_pace_seconds)

    async def poll_once(self, send: ObjectSendStream[Event], *, planned: bool = False) -> bool:
        """One exclusive poll; its event is sent before the lock is released. True when rows were seen.
        ``planned``: the core's re-read, which always gets an answer (an unchanged failing status too)."""
        async with self.lock.exclusive():
            # Every write answered before this point is covered by the GET below.
            self.polls += 1
            began = anyio.current_time()
            event, status, detail = await self._observe()
            if event is not None:
                # the fold's long step at 10,000 rows, in steps here (the answer is freed by now)
                for _ in prepare_row_texts(event.rows, TEXTS_CHUNK):
                    await anyio.lowlevel.checkpoint()
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
            elif planned or status is not self._told:
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
        await anyio.lowlevel.checkpoint()  # the parse was one long step at 10,000 rows: let others run
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
        listed = [*rows, *hidden]
        del answer, rows  # the raw rows live in `listed` alone, freed a chunk at a time as they are reduced
        await anyio.lowlevel.checkpoint()  # taking the listing apart (~10 ms at 10,000 rows) was a step
        return LiteLLMRowsObserved(await _whitelisted(listed)), PeerStatus.OK, ""

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


WHITELIST_CHUNK = 500  # rows reduced between two checkpoints (~1.5-5 ms)
TEXTS_CHUNK = 1000  # rows whose texts are prepared between two checkpoints (~5 ms)


async def _whitelisted(rows: list[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The rows reduced by ``observed_row``, letting the other tasks run between chunks: at 10,000 rows
    the pass takes ~30-60 ms, and a loop that long bunches the watch's deliveries, which the core's burst
    probe would read as rows changing together. ``rows`` is emptied as it goes, so the raw rows are
    freed a chunk at a time too (freeing them all at once was another ~20 ms step)."""
    out: list[dict[str, Any]] = []
    first = True
    while rows:
        if not first:
            await anyio.lowlevel.checkpoint()
        first = False
        out.extend(observed_row(r) for r in rows[:WHITELIST_CHUNK])
        del rows[:WHITELIST_CHUNK]
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
