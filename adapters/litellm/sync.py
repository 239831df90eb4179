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

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio


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
