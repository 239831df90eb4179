"""The two shapes every adapter takes: a source that sends events, an executor that carries out commands.

The shell wires them to the fold: sources -> one bounded event stream -> fold ->
command queue -> executors -> outcome events back into the same stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from anyio.abc import ObjectSendStream

from catalog_core.commands import Command
from catalog_core.events import Event


class Source(Protocol):
    """Runs until cancelled, sending what it observes. Never raises for a bad object or a lost connection."""

    name: str

    async def run(self, send: ObjectSendStream[Event]) -> None: ...


class Executor(Protocol):
    """Carries out one command and reports what happened as events (at least a CommandCompleted,
    except for reads answered by what they observe: probes with RuntimeProbed, the re-reads of LiteLLM
    with the observation the observer sends itself). Never raises: failures become outcomes."""

    def handles(self, command: Command) -> bool: ...

    async def execute(self, command: Command) -> Sequence[Event]: ...
