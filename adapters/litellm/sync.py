"""Coordination between LiteLLM writes and /model/info polls: a shared/exclusive lock.

Why: the core folds events in stream order. If a poll's ``GET /model/info`` were answered *before* a
write landed but its ``LiteLLMRowsObserved`` reached the stream *after* that write's
``CommandCompleted(applied)``, the core would take the stale view for the newer one, forget that the
write settled the key and plan the same write again (or, for a create, a duplicate create).

The rule that prevents it: a poll holds the lock *exclusively* from before its GET until its event is in
the stream; a write sends its request at once, and once answered takes the lock *shared* to build its
outcome (writes share: each touches its own id). So an outcome is built either before a poll began
(that poll's GET then ran after the write was answered, and shows it) or after the event of every poll
in progress when it was answered (that event is in the stream first). Either way no observation older
than an outcome is folded after that outcome.

The request does not wait for a poll (at 10,000 rows a poll takes ~0.1-0.5 s, and writes
queued behind it were P1's tail); only the outcome does. Waiting polls block new shares (writer
preference, in lock terms "exclusive preference"), so a steady stream of outcomes cannot starve
observation.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from enum import StrEnum

import anyio

log = logging.getLogger("model_catalog.litellm")


class SharedExclusiveLock:
    """An async readers-writer lock: ``shared()`` for writes, ``exclusive()`` for polls."""

    def __init__(self) -> None:
        self._cond = anyio.Condition()
        self._shared = 0
        self._exclusive = False
        self._exclusive_waiting = 0

    @property
    def holders(self) -> tuple[int, bool]:
        """(shared holders, exclusive held): for tests and debugging."""
        return self._shared, self._exclusive

    @asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        async with self._cond:
            while self._exclusive or self._exclusive_waiting:
                await self._cond.wait()
            self._shared += 1
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                async with self._cond:
                    self._shared -= 1
                    if self._shared == 0:
                        self._cond.notify_all()

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        async with self._cond:
            self._exclusive_waiting += 1
            try:
                while self._exclusive or self._shared:
                    await self._cond.wait()
            finally:
                self._exclusive_waiting -= 1
                self._cond.notify_all()  # a cancelled waiter must not keep writes blocked
            self._exclusive = True
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                async with self._cond:
                    self._exclusive = False
                    self._cond.notify_all()


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


class LiteLLMShared:
    """What the LiteLLM writer and the LiteLLM observer share, inside the adapter: the lock above, the ids
    LiteLLM holds as far as the writes know, and what was last known of LiteLLM's health (for its log
    lines). None of it decides whether or when LiteLLM is read: the core plans each re-read
    (``ObserveLiteLLM``) from the outcomes the writes report.

    ``held`` serves the listing filter of newer releases (``model_list_healthy_only``): a row a listing
    leaves out is looked up by id only if LiteLLM is known to hold it (the observer's module docstring)."""

    def __init__(self) -> None:
        self.lock = SharedExclusiveLock()
        self.health = PeerHealth()
        self.held: set[str] = set()  # forgotten once a lookup says "not found" or our delete applied

    def answered(self) -> AbstractAsyncContextManager[None]:
        """Hold while the outcome of a write that got its answer is built (see the module docstring)."""
        return self.lock.shared()

    def present(self, model_id: str) -> None:
        """LiteLLM holds this row: a write of it applied, or a create was refused as an existing id."""
        self.held.add(model_id)

    def absent(self, model_id: str) -> None:
        """Our delete of this row applied: a listing without it is what we expect."""
        self.held.discard(model_id)
