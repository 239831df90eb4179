"""A simulated world that carries out commands the way the real adapters would, without I/O.

``render`` uses it to show what the controller would publish, and the property
tests use it to prove convergence: run the fold, execute its commands here,
feed the outcomes back, until nothing is left to do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from catalog_core import damping
from catalog_core.commands import (
    Command,
    CreateCatalogPlaceholder,
    CreateLiteLLMModel,
    DeleteLiteLLMModel,
    EmitKubernetesEvent,
    EvictPod,
    ObserveLiteLLM,
    PatchAgentTemplate,
    ProbeRuntime,
    RecreateLiteLLMModel,
    RollWorkload,
    UpdateLiteLLMModel,
    WatchSecrets,
    WriteCatalog,
)
from catalog_core.events import (
    CommandCompleted,
    Event,
    LiteLLMRowsObserved,
    ObjectUpserted,
    Outcome,
    RuntimeProbed,
    SourceKind,
    SourceListed,
    Ticked,
)
from catalog_core.evolve import evolve
from catalog_core.fold import step
from catalog_core.gates import Gate
from catalog_core.kinds import ROLLABLE_BY_NAME
from catalog_core.reasons import LiteLLMWait
from catalog_core.redact import redact_for_source
from catalog_core.rules.health import FAILURES_TO_WITHDRAW
from catalog_core.sources.litellm_row import observed_row
from catalog_core.state import CatalogState


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge_patch(out.get(key), value)
    return out


@attrs.define
class SimulatedWorld:
    """LiteLLM rows by id, Kubernetes objects by name, the Secrets a watch would find, healthy runtimes."""

    rows: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    secrets: dict[str, Mapping[str, Any]] = attrs.field(factory=dict)  # redacted Secret objects by name
    templates: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    workloads: dict[str, dict[str, Any]] = attrs.field(factory=dict)  # "Kind/name"
    healthy: frozenset[str] = frozenset()
    # LiteLLM's own model map: /model/info shows these model_info fields for a row of that
    # litellm_params.model when the row does not set them (e.g. max_input_tokens of openai/gpt-4o-mini).
    model_map: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    catalog: dict[str, Any] | None = None
    evicted: list[str] = attrs.field(factory=list)
    events: list[EmitKubernetesEvent] = attrs.field(factory=list)
    writes: list[Command] = attrs.field(factory=list)  # every write carried out, in order
    # The observer of a run without ``Gate.PLANNED_LITELLM_READS``: it read LiteLLM after each write by
    # itself, so each write is answered with its outcome and a read of every row.
    reads_after_writes: bool = False

    def rows_event(self) -> LiteLLMRowsObserved:
        return LiteLLMRowsObserved(tuple(observed_row(self.info_row(k)) for k in sorted(self.rows)))

    def info_row(self, rid: str) -> dict[str, Any]:
        """A row as ``GET /model/info`` shows it: what was written, with the model map filled in."""
        row = self.rows[rid]
        known = self.model_map.get(str(row.get("litellm_params", {}).get("model")))
        if not known:
            return row
        return {**row, "model_info": {**known, **row.get("model_info", {})}}

    def execute(self, command: Command) -> list[Event]:
        """Carry out one command; the events the real adapter would report. LiteLLM is read again only
        when the core plans it (``ObserveLiteLLM``), as the observer does."""
        if isinstance(command, ObserveLiteLLM):
            return [self.rows_event()]
        done = CommandCompleted(command.key, command.id, Outcome.APPLIED)
        if isinstance(command, CreateLiteLLMModel | UpdateLiteLLMModel | RecreateLiteLLMModel):
            body = {
                "model_name": command.model_name,
                "litellm_params": command.litellm_params.value(),
                "model_info": command.model_info.value(),
            }
            exists = command.model_id in self.rows
            if isinstance(command, CreateLiteLLMModel) and exists:
                # LiteLLM answers 500 on a duplicate id: the core reads LiteLLM again and the write waits.
                refused = evolve(
                    done, outcome=Outcome.RETRY, retry_after=1.0, reason=LiteLLMWait.DUPLICATE_ID
                )
                return [refused, self.rows_event()] if self.reads_after_writes else [refused]
            if isinstance(command, UpdateLiteLLMModel):
                if not exists:
                    return [evolve(done, outcome=Outcome.GONE)]
                current = self.rows[command.model_id]
                body = {
                    "model_name": body["model_name"],
                    "litellm_params": {**current["litellm_params"], **body["litellm_params"]},
                    "model_info": {**current["model_info"], **body["model_info"]},
                }
            self.rows[command.model_id] = body
            self.writes.append(command)
            return [done, self.rows_event()] if self.reads_after_writes else [done]
        if isinstance(command, DeleteLiteLLMModel):
            if self.rows.pop(command.model_id, None) is not None:
                self.writes.append(command)
            return [done, self.rows_event()] if self.reads_after_writes else [done]
        if isinstance(command, CreateCatalogPlaceholder):
            if self.catalog is not None:
                return [done]  # the API server's 409 AlreadyExists: nothing to do
            self.catalog = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": command.name,
                    "namespace": command.namespace,
                    "annotations": {"ai-appliance.io/catalog-hash": command.catalog_hash},
                },
                "data": dict(command.data),
            }
            self.writes.append(command)
            return [
                done,
                ObjectUpserted(
                    SourceKind.CATALOG_CONFIGMAP, _seen(SourceKind.CATALOG_CONFIGMAP, self.catalog)
                ),
            ]
        if isinstance(command, WriteCatalog):
            annotations = {"ai-appliance.io/catalog-hash": command.catalog_hash}
            if self.catalog is not None:
                held = dict(self.catalog["metadata"].get("annotations") or {})
                replaced = held.get("ai-appliance.io/catalog-hash")
                previous = held.get("ai-appliance.io/previous-catalog-hash")
                previous = (replaced or "") if replaced != command.catalog_hash else previous
                if previous is not None:
                    annotations["ai-appliance.io/previous-catalog-hash"] = previous
            self.catalog = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": command.name,
                    "namespace": command.namespace,
                    "annotations": annotations,
                },
                "data": dict(command.data),
            }
            self.writes.append(command)
            return [
                done,
                ObjectUpserted(
                    SourceKind.CATALOG_CONFIGMAP, _seen(SourceKind.CATALOG_CONFIGMAP, self.catalog)
                ),
            ]
        if isinstance(command, PatchAgentTemplate):
            template = self.templates.get(command.name)
            if template is None:
                return [evolve(done, outcome=Outcome.GONE)]
            patch = dict(command.patch.value())
            patch.pop("metadata", None)
            self.templates[command.name] = apply_merge_patch(template, patch)
            self.writes.append(command)
            return [
                done,
                ObjectUpserted(
                    SourceKind.AGENT_TEMPLATES,
                    _seen(SourceKind.AGENT_TEMPLATES, self.templates[command.name]),
                ),
            ]
        if isinstance(command, RollWorkload):
            key = f"{command.kind}/{command.name}"
            workload = self.workloads.get(key)
            kind = ROLLABLE_BY_NAME.get(command.kind)
            if workload is None or kind is None or kind.rollable is None:
                return [evolve(done, outcome=Outcome.GONE)]
            self.workloads[key] = apply_merge_patch(workload, kind.rollable.patch(command.catalog_hash))
            self.writes.append(command)
            return [done, ObjectUpserted(kind.source, _seen(kind.source, self.workloads[key]))]
        if isinstance(command, EvictPod):
            self.evicted.append(command.name)
            self.writes.append(command)
            return [done]
        if isinstance(command, ProbeRuntime):
            healthy = command.runtime in self.healthy
            return [
                RuntimeProbed(
                    command.runtime, command.url, healthy, "" if healthy else "not probed (simulated)"
                )
            ]
        if isinstance(command, EmitKubernetesEvent):
            self.events.append(command)
            return [done]
        return self._watch_secrets(command, done)

    def _watch_secrets(self, command: WatchSecrets, done: CommandCompleted) -> list[Event]:
        names = tuple(s.name for s in command.secrets)
        found = []
        for watch in command.secrets:
            secret = self.secrets.get(watch.name)
            if secret is None:
                continue
            labels = secret.get("metadata", {}).get("labels") or {}
            if watch.provider_only and labels.get("appliance.magicstick.dev/model-provider-secret") != "true":
                continue  # a label selector would not return it
            found.append(secret)
        return [done, SourceListed(SourceKind.SECRETS, tuple(found), names)]


_LITELLM_WRITES = (CreateLiteLLMModel, UpdateLiteLLMModel, RecreateLiteLLMModel, DeleteLiteLLMModel)


def converge(
    state: CatalogState,
    world: SimulatedWorld,
    *,
    start: float,
    events: Iterable[Event] = (),
    max_rounds: int = 50,
    seconds_per_round: float = 1.0,
) -> tuple[CatalogState, list[Command], float]:
    """Fold ``events``, then tick and execute until a tick emits nothing. Returns (state, commands, clock).

    Health probes recur (every ``runtime_health_seconds``), and the world answers each runtime's probes
    the same way for the whole call: once a runtime has been probed often enough to settle its health
    gate, a round that only probes such runtimes again is a fixed point too (with an interval of one
    round or less, probes alone would otherwise never stop).
    """
    emitted: list[Command] = []
    now = start
    pending = list(events)
    probed: dict[str, int] = {}
    for _ in range(max_rounds):
        commands: list[Command] = []
        for event in [*pending, Ticked(now)]:
            result = step(state, event)
            state = result.state
            commands.extend(result.commands)  # a Ticked among the given events plans too
        pending = []
        if not commands:
            # A write, rollout or template patch waiting for its key or the catalog to settle is due
            # later: the world waits for it as the service would.
            held = damping.waiting_until(state.damping)
            if held is None:
                return state, emitted, now
            now = max(now + seconds_per_round, held)
            continue
        emitted.extend(commands)
        settled = all(
            isinstance(c, ProbeRuntime) and probed.get(c.runtime, 0) >= FAILURES_TO_WITHDRAW for c in commands
        )
        for command in commands:
            if isinstance(command, ProbeRuntime):
                probed[command.runtime] = probed.get(command.runtime, 0) + 1
            pending.extend(world.execute(command))
        if Gate.PLANNED_LITELLM_READS not in state.config.gates and any(
            isinstance(c, _LITELLM_WRITES) for c in commands
        ):
            # A run whose observer read LiteLLM by itself: one read after the round's writes, as its
            # debounce coalesced a burst's re-reads.
            pending.append(world.rows_event())
        if settled:
            for event in pending:  # the answers, as known already: fold them, nothing more to plan
                state = step(state, event).state
            return state, emitted, now
        now += seconds_per_round
    raise RuntimeError(f"no fixed point after {max_rounds} rounds")


def settling_probe_at(state: CatalogState) -> float | None:
    """When the next probe of a runtime whose health gate is not settled yet is due: one that failed
    fewer than ``FAILURES_TO_WITHDRAW`` times since its last success (None when every gate is settled)."""
    due = [
        h.next_probe_at
        for h in state.health.values()
        if not h.healthy and 0 < h.failures < FAILURES_TO_WITHDRAW and h.probing_since is None
    ]
    return min(due) if due else None


def _seen(source: SourceKind, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """What a watch of ``source`` delivers of ``obj``: the adapters' redaction, as in the real shell."""
    return redact_for_source(source, obj).obj
