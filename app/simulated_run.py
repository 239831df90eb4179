"""A simulated shell that records what it does: the real fold and recorder, the core's simulated world.

It plays the controller's part without a cluster: raw objects are redacted as
the adapters redact them (secret values go to a vault, never into events), each
event is folded with ``step`` and recorded, ticks plan, and the commands are
carried out by ``SimulatedWorld`` whose outcomes are fed back as events. The
example log (``examples/make_event_log.py``), the big benchmark log
(``bench/make_big_log.py``) and the event-log tests are produced with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from adapters.eventlog.recorder import Recorder
from catalog_core.commands import Command
from catalog_core.config import CatalogConfig
from catalog_core.events import (
    Event,
    ObjectDeleted,
    ObjectUpserted,
    SourceKind,
    SourceListed,
    SourceUnavailable,
    Ticked,
    Unavailability,
)
from catalog_core.fold import Transition, step
from catalog_core.redact import (
    Redacted,
    redact_activation,
    redact_configmap,
    redact_object,
    redact_secret,
)
from catalog_core.simulate import SimulatedWorld
from catalog_core.state import CatalogState, initial_state


def redact_for(source: SourceKind, obj: Mapping[str, Any]) -> Redacted:
    """What an adapter of ``source`` does to a raw object before it becomes an event."""
    if source is SourceKind.SECRETS:
        return redact_secret(obj)
    if source is SourceKind.EXTERNAL_MODELS:
        return redact_configmap(obj, "models.json")
    if source is SourceKind.MODEL_ACTIVATIONS:
        return redact_activation(obj)
    return redact_object(obj)


class SimulatedShell:
    """Feeds events to the fold (recording every step) and carries out the commands in a simulated world."""

    def __init__(
        self,
        config: CatalogConfig,
        *,
        recorder: Recorder | None = None,
        world: SimulatedWorld | None = None,
        now: float = 0.0,
        executor: Callable[[Command], list[Event]] | None = None,
    ) -> None:
        self.config = config
        self.state: CatalogState = initial_state(config)
        self.recorder = recorder
        self.world = world if world is not None else SimulatedWorld()
        self.now = now
        self.vault: dict[str, str] = {}
        self.commands: list[Command] = []  # every command emitted, in order
        self.steps = 0
        self._execute = executor if executor is not None else self.world.execute

    # --- events in -----------------------------------------------------------------------------

    def feed(self, event: Event) -> Transition:
        result = step(self.state, event)
        if self.recorder is not None:
            self.recorder.record(event, result)
        self.state = result.state
        self.commands.extend(result.commands)
        self.steps += 1
        return result

    def redact(self, source: SourceKind, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        redacted = redact_for(source, obj)
        self.vault.update(redacted.secrets)
        return redacted.obj

    def upsert(self, source: SourceKind, obj: Mapping[str, Any]) -> Transition:
        return self.feed(ObjectUpserted(source, self.redact(source, obj)))

    def delete(self, source: SourceKind, obj: Mapping[str, Any]) -> Transition:
        return self.feed(ObjectDeleted(source, self.redact(source, obj)))

    def listed(self, source: SourceKind, objects: Iterable[Mapping[str, Any]]) -> Transition:
        return self.feed(SourceListed(source, tuple(self.redact(source, o) for o in objects)))

    def not_installed(self, source: SourceKind) -> Transition:
        return self.feed(SourceUnavailable(source, Unavailability.NOT_INSTALLED))

    def secrets(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Secrets the simulated cluster holds: redacted for the world, values into the vault."""
        for obj in objects:
            redacted = self.redact(SourceKind.SECRETS, obj)
            self.world.secrets[str(redacted["metadata"]["name"])] = redacted

    def rows_observed(self) -> Transition:
        return self.feed(self.world.rows_event())

    # --- planning and commands out -------------------------------------------------------------

    def tick(self) -> tuple[Command, ...]:
        return self.feed(Ticked(self.now)).commands

    def execute(self, commands: Iterable[Command]) -> None:
        for command in commands:
            for event in self._execute(command):
                self.feed(event)

    def settle(self, *, rounds: int = 60, seconds_per_round: float = 1.0) -> int:
        """Tick and carry out the commands until a tick emits nothing; returns the rounds taken."""
        for n in range(rounds):
            commands = self.tick()
            if not commands:
                return n
            self.execute(commands)
            self.now += seconds_per_round
        raise RuntimeError(f"no fixed point after {rounds} rounds")

    def advance(self, seconds: float) -> None:
        self.now += seconds
