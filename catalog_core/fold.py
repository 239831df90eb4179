"""The fold: ``step(state, event) -> (state, commands)``. Deterministic; no I/O.

Replaying the same events from the same initial state gives the same states and
the same commands, in the same order: that is the event log's replay contract.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from catalog_core import ingest
from catalog_core.commands import (
    Command,
    CreateLiteLLMModel,
    DeleteLiteLLMModel,
    ProbeRuntime,
    RecreateLiteLLMModel,
    RollWorkload,
    UpdateLiteLLMModel,
    WriteCatalog,
)
from catalog_core.events import (
    CommandCompleted,
    Event,
    LiteLLMRowsObserved,
    LiteLLMUnreachable,
    ObjectDeleted,
    ObjectUpserted,
    Outcome,
    RuntimeProbed,
    SourceListed,
    SourceUnavailable,
    Ticked,
)
from catalog_core.plan import mark_key, tick
from catalog_core.pmap import PMap
from catalog_core.reasons import Reason
from catalog_core.rules import health as health_rules
from catalog_core.sources.catalog_configmap import ObservedCatalog
from catalog_core.sources.consumers import Workload
from catalog_core.sources.litellm_row import LiteLLMRow
from catalog_core.state import CatalogState, Failure, Retry


@attrs.frozen
class Transition:
    state: CatalogState
    commands: tuple[Command, ...]


def step(state: CatalogState, event: Event) -> Transition:
    if isinstance(event, Ticked):
        new, commands = tick(state, event.now)
        return Transition(new, tuple(commands))
    return Transition(_observe(state, event), ())


def fold(state: CatalogState, events: Iterable[Event]) -> tuple[CatalogState, list[Command]]:
    """Fold many events; the commands of every step, in order."""
    commands: list[Command] = []
    for event in events:
        result = step(state, event)
        state = result.state
        commands.extend(result.commands)
    return state, commands


def _observe(state: CatalogState, event: Event) -> CatalogState:
    if isinstance(event, ObjectUpserted):
        return ingest.upserted(state, event)
    if isinstance(event, ObjectDeleted):
        return ingest.deleted(state, event)
    if isinstance(event, SourceListed):
        return ingest.listed(state, event)
    if isinstance(event, SourceUnavailable):
        return ingest.unavailable(state, event)
    if isinstance(event, LiteLLMRowsObserved):
        return ingest.rows_observed(state, event)
    if isinstance(event, LiteLLMUnreachable):
        return ingest.litellm_unreachable(state, event)
    if isinstance(event, RuntimeProbed):
        return _probed(state, event)
    if isinstance(event, CommandCompleted):
        return _completed(state, event)
    raise TypeError(f"not an event: {type(event).__name__}")


def _probed(state: CatalogState, event: RuntimeProbed) -> CatalogState:
    key = f"probe/{event.runtime}"
    state = attrs.evolve(state, inflight=state.inflight.delete(key))
    current = state.health.get(event.runtime)
    if current is None or current.url != event.url:
        return state  # an answer about an endpoint we no longer trust or use
    interval = float(state.config.runtime_health_seconds)
    updated = health_rules.observe(current, event.healthy, event.detail, state.now, interval)
    state = attrs.evolve(state, health=state.health.set(event.runtime, updated))
    if (updated.healthy, updated.failures >= 2, updated.detail) != (
        current.healthy,
        current.failures >= 2,
        current.detail,
    ):
        state = attrs.evolve(state, dirty_items=state.dirty_items.set(f"freetoken/{event.runtime}", True))
    return state


def _completed(state: CatalogState, event: CommandCompleted) -> CatalogState:
    command = state.inflight.get(event.key)
    state = mark_key(state, event.key)
    if command is None or command.id != event.command_id:
        return state  # an answer to a command since superseded: re-plan, nothing else
    state = attrs.evolve(state, inflight=state.inflight.delete(event.key))
    if event.outcome is Outcome.APPLIED:
        state = attrs.evolve(
            state,
            retries=state.retries.delete(event.key),
            failures=state.failures.delete(event.key),
            settled=state.settled.set(event.key, command.id),
        )
        return _applied(state, command)
    if event.outcome is Outcome.RETRY:
        retry = Retry(command.id, state.now + max(0.0, event.retry_after))
        return attrs.evolve(state, retries=state.retries.set(event.key, retry))
    if event.outcome is Outcome.TERMINAL:
        reason = _failure_reason(event)
        failure = Failure(command.id, reason, event.detail)
        return attrs.evolve(
            state,
            failures=state.failures.set(event.key, failure),
            retries=state.retries.delete(event.key),
            dirty_records=_records_of(state, command),
        )
    # GONE: the target does not exist. Do not repeat this command until the target is observed again;
    # a LiteLLM row we meant to update is forgotten, so the plan creates it instead.
    state = attrs.evolve(state, settled=state.settled.set(event.key, command.id))
    if isinstance(command, UpdateLiteLLMModel | RecreateLiteLLMModel):
        return ingest.set_row(state, command.model_id, None)
    return state


def _failure_reason(event: CommandCompleted) -> Reason:
    try:
        return Reason(event.reason)
    except ValueError:
        return Reason.LITELLM_REJECTED if event.key.startswith("litellm/") else Reason.INVALID_FIELD


def _records_of(state: CatalogState, command: Command) -> PMap[bool]:
    records = state.dirty_records
    model_id = getattr(command, "model_id", None)
    if model_id is not None:
        for item in state.by_id.get(model_id, frozenset()):
            records = records.set(item, True)
    return records


def _applied(state: CatalogState, command: Command) -> CatalogState:
    """What a successful write changed, so planning does not wait for the next observation."""
    if isinstance(command, CreateLiteLLMModel | UpdateLiteLLMModel | RecreateLiteLLMModel):
        row = LiteLLMRow.from_info(
            {
                "model_name": command.model_name,
                "litellm_params": command.litellm_params.value(),
                "model_info": command.model_info.value(),
            }
        )
        state = ingest.set_row(state, command.model_id, row)
        # set_row forgets 'settled' for a changed row; this write is what changed it.
        return attrs.evolve(state, settled=state.settled.set(command.key, command.id))
    if isinstance(command, DeleteLiteLLMModel):
        state = ingest.set_row(state, command.model_id, None)
        return attrs.evolve(state, settled=state.settled.set(command.key, command.id))
    if isinstance(command, WriteCatalog):
        observed = ObservedCatalog(
            resource_version=state.catalog.resource_version if state.catalog else "",
            catalog_hash=command.catalog_hash,
            fingerprint=command.fingerprint,
            ready=True,
        )
        return attrs.evolve(state, catalog=observed, dirty_catalog=True, dirty_rollouts=True)
    if isinstance(command, RollWorkload):
        key = f"{command.kind}/{command.name}"
        current = state.workloads.get(key)
        if current is not None:
            updated = Workload(current.kind, current.name, current.uid, command.catalog_hash)
            return attrs.evolve(state, workloads=state.workloads.set(key, updated), dirty_rollouts=True)
    if isinstance(command, ProbeRuntime):
        return state
    return state
