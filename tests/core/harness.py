"""Drive the real fold against the pure simulated world, as the service drives it against the real one."""

from __future__ import annotations

import json
from typing import Any

from catalog_core.commands import Command
from catalog_core.config import CatalogConfig
from catalog_core.events import (
    CommandCompleted,
    Event,
    ObjectDeleted,
    ObjectUpserted,
    Outcome,
    SourceKind,
    SourceListed,
    Ticked,
)
from catalog_core.fold import initial_state, step
from catalog_core.kinds import ROLLABLE
from catalog_core.plan import all_records, next_deadline
from catalog_core.redact import redact_for_source
from catalog_core.rules.health import FAILURES_TO_WITHDRAW
from catalog_core.simulate import SimulatedWorld, converge, settling_probe_at
from catalog_core.state import CatalogState
from contracts.kinds import sources_of
from tests.core.builders import catalog_configmap

_ROLLED = {kind.source for kind in ROLLABLE}  # the workloads the simulated world holds and rolls


class Cluster:
    def __init__(self, config: CatalogConfig | None = None, **env: str) -> None:
        cfg = config or CatalogConfig.from_env(env)
        assert isinstance(cfg, CatalogConfig)
        self.config = cfg
        self.state: CatalogState = initial_state(cfg)
        self.world = SimulatedWorld()
        self.now = 1000.0
        self.vault: dict[str, str] = {}
        self.commands: list[Command] = []

    # --- inputs
    def _redacted(self, source: SourceKind, obj: dict[str, Any]) -> dict[str, Any]:
        out = redact_for_source(source.value, obj)
        self.vault.update(out.secrets)
        return dict(out.obj)

    def start(
        self, *objects: dict[str, Any], rows: list[dict[str, Any]] | None = None, catalog: bool = True
    ) -> list[Command]:
        """List every source (the given objects, nothing else), observe LiteLLM, converge."""
        grouped: dict[SourceKind, list[dict[str, Any]]] = {s: [] for s in SourceKind}
        objs = list(objects)
        if catalog and not any(
            o.get("metadata", {}).get("name") == self.config.catalog_configmap for o in objs
        ):
            objs.append(catalog_configmap())
        for obj in objs:
            for source in sources_of(obj, self.config):
                grouped[source].append(self._redacted(source, obj))
        for s in grouped.pop(SourceKind.SECRETS):
            self.world.secrets[s["metadata"]["name"]] = s
        for obj in objs:  # the world holds whole objects; events carry what the adapters keep of them
            sources = sources_of(obj, self.config)
            if SourceKind.CATALOG_CONFIGMAP in sources and obj in objects:
                self.world.catalog = obj  # a catalog given (not the placeholder): it is there until rewritten
            if SourceKind.AGENT_TEMPLATES in sources:
                self.world.templates[obj["metadata"]["name"]] = obj
            if _ROLLED & set(sources):
                self.world.workloads[f"{obj['kind']}/{obj['metadata']['name']}"] = obj
        for r in rows or []:
            self.world.rows[r["model_info"]["id"]] = r
        events: list[Event] = [SourceListed(s, tuple(objs_)) for s, objs_ in grouped.items()]
        events.append(self.world.rows_event())
        return self.run(*events)

    def upserts(self, obj: dict[str, Any]) -> list[Event]:
        """The events a watch would send for ``obj`` (the simulated world learns it too)."""
        events: list[Event] = []
        for source in sources_of(obj, self.config):
            red = self._redacted(source, obj)
            name = red["metadata"]["name"]
            if source is SourceKind.SECRETS:
                self.world.secrets[name] = red
            elif source is SourceKind.AGENT_TEMPLATES:
                self.world.templates[name] = obj
            elif source in _ROLLED:
                self.world.workloads[f"{obj['kind']}/{name}"] = obj
            events.append(ObjectUpserted(source, red))
        return events

    def apply(self, obj: dict[str, Any]) -> list[Command]:
        return self.run(*self.upserts(obj))

    def delete(self, obj: dict[str, Any]) -> list[Command]:
        events: list[Event] = []
        for source in sources_of(obj, self.config):
            if source is SourceKind.SECRETS:
                self.world.secrets.pop(obj["metadata"]["name"], None)
            events.append(ObjectDeleted(source, self._redacted(source, obj)))
        return self.run(*events)

    def rows_changed(self) -> list[Command]:
        """Re-observe LiteLLM after someone edited it by hand (a resync)."""
        return self.run(self.world.rows_event())

    def run(self, *events: Event) -> list[Command]:
        start = max(self.now, self.state.now, *(e.now for e in events if isinstance(e, Ticked)))
        self.state, commands, self.now = converge(self.state, self.world, start=start, events=events)
        self.now += 1.0
        self.commands.extend(commands)
        return commands

    def settle_health(self) -> list[Command]:
        """Run the clock on to the probes that settle every health gate (as ``render`` does): a runtime
        that keeps failing reads HealthCheckFailed after its second failure, whatever the clock did before.
        Two runs are comparable only once both are settled."""
        commands: list[Command] = []
        for _ in range(FAILURES_TO_WITHDRAW):
            due = settling_probe_at(self.state)
            if due is None:
                break
            commands.extend(self.run(Ticked(max(self.now, due))))
        return commands

    def feed(self, *events: Event) -> None:
        """Fold events without ticking (nothing is planned)."""
        for event in events:
            self.state = step(self.state, event).state

    # --- outputs
    @property
    def data(self) -> dict[str, str]:
        assert self.world.catalog is not None, "no catalog written"
        return dict(self.world.catalog["data"])

    def catalog(self) -> dict[str, Any]:
        return json.loads(self.data["catalog.json"])

    def model_ids(self) -> list[str]:
        return [m["id"] for m in self.catalog()["models"]]

    def entry(self, model_id: str) -> dict[str, Any]:
        return next(m for m in self.catalog()["models"] if m["id"] == model_id)

    def routes(self) -> list[dict[str, Any]]:
        return json.loads(self.data["routes.json"])

    def record(self, name: str, source: str | None = None) -> dict[str, Any]:
        found = [r for r in self.routes() if r["name"] == name and (source is None or r["source"] == source)]
        assert len(found) == 1, (name, found)
        return found[0]

    def all_records(self) -> list[dict[str, Any]]:
        return [r.as_json() for r in all_records(self.state)]


class RefusingWorld(SimulatedWorld):
    """The simulated world, but a write whose key starts with one of ``refuse``'s prefixes is answered
    ``retry`` with that reason and detail, as the executors answer what the target refuses."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse: dict[str, tuple[str, str]] = {}
        self.refused: list[Command] = []

    def execute(self, command: Command) -> list[Event]:
        for prefix, (reason, detail) in self.refuse.items():
            if command.key.startswith(prefix):
                self.refused.append(command)
                # A long backoff: ``converge`` reaches a fixed point first; ``when_due`` goes to its end.
                return [CommandCompleted(command.key, command.id, Outcome.RETRY, 600.0, reason, detail)]
        return super().execute(command)


def when_due(c: Cluster) -> list[Command]:
    """Run to the core's next deadline (a retry's backoff), as the service's loop sleeps until it."""
    due = next_deadline(c.state)
    assert due is not None, "nothing is due"
    return c.run(Ticked(max(c.now, due)))
