"""The fold: ``step(state, event) -> (state, commands)``. Deterministic; no I/O.

Replaying the same events from the same initial state gives the same states and
the same commands, in the same order: that is the event log's replay contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from catalog_core import failing, ingest, registry
from catalog_core.commands import (
    Command,
    CreateLiteLLMModel,
    DeleteLiteLLMModel,
    EmitKubernetesEvent,
    ObserveLiteLLM,
    ReadReason,
    RecreateLiteLLMModel,
    RollWorkload,
    UpdateLiteLLMModel,
    WriteCatalog,
)
from catalog_core.config import CatalogConfig
from catalog_core.events import (
    CommandCompleted,
    Event,
    LeadershipChanged,
    LiteLLMRowsObserved,
    LiteLLMUnreachable,
    ObjectDeleted,
    ObjectUpserted,
    Outcome,
    RuntimeProbed,
    SourceKind,
    SourceListed,
    SourceUnavailable,
    Ticked,
)
from catalog_core.evolve import evolve, evolver
from catalog_core.gates import Gate
from catalog_core.keys import is_litellm_key, probe_key
from catalog_core.plan import leadership_changed, mark_key, tick
from catalog_core.reasons import LiteLLMWait, Reason
from catalog_core.rules import health as health_rules
from catalog_core.sources.catalog_configmap import HeldDefaults, ObservedCatalog
from catalog_core.sources.litellm_row import LiteLLMRow
from catalog_core.state import CatalogState, Control, Failure, Pending, Retry, mark, mark_all


def initial_state(config: CatalogConfig, waits_for: Iterable[SourceKind] | None = None) -> CatalogState:
    """The state before any event; ``waits_for``: the catalog sources to wait for (default: all of them)."""
    return CatalogState(
        config=config, waits_for=frozenset(registry.CATALOG_KINDS if waits_for is None else waits_for)
    )


@attrs.frozen
class Transition:
    state: CatalogState
    commands: tuple[Command, ...]


def step(state: CatalogState, event: Event) -> Transition:
    observe = _OBSERVERS.get(type(event))
    if observe is not None:  # every event but a tick, by its exact class: one look-up, not a chain
        return Transition(observe(state, event), ())
    if isinstance(event, Ticked):
        new, commands = tick(state, event.now, busy=event.busy)
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
    if isinstance(event, LeadershipChanged):
        return _leadership(state, event)
    raise TypeError(f"not an event: {type(event).__name__}")


def _leadership(state: CatalogState, event: LeadershipChanged) -> CatalogState:
    return leadership_changed(state, event.leading)


_evolve_state = evolver(CatalogState)  # the copies of a probe's answer, a few every 15 s per runtime
_evolve_control = evolver(Control)


def _probed(state: CatalogState, event: RuntimeProbed) -> CatalogState:
    control = state.control
    inflight = control.inflight.delete(probe_key(event.runtime))  # the map itself when not in flight
    if inflight is not control.inflight:
        control = _evolve_control(control, inflight=inflight)
    current = state.health.get(event.runtime)
    if current is None or current.url != event.url:
        # an answer about an endpoint we no longer trust or use
        return state if control is state.control else _evolve_state(state, control=control)
    interval = float(state.config.runtime_health_seconds)
    updated = health_rules.observe(current, event.healthy, event.detail, state.now, interval)
    pending = state.pending
    before = (current.healthy, current.failures >= 2, current.detail)
    if (updated.healthy, updated.failures >= 2, updated.detail) != before:
        item = registry.health_item(event.runtime).text
        pending = evolve(pending, items=mark(pending.items, item))
    # one copy of the state for the three changes (a probe answer every few seconds per runtime)
    return _evolve_state(
        state, control=control, health=state.health.set(event.runtime, updated), pending=pending
    )


def _completed(state: CatalogState, event: CommandCompleted) -> CatalogState:
    command = state.control.inflight.get(event.key)
    state = mark_key(state, event.key)
    if command is None or command.id != event.command_id:
        # An answer to a command since superseded or withdrawn: re-plan. If it was applied, the next
        # observation of the target (a watch event, the LiteLLM re-read after writes) shows its effect.
        return state
    if isinstance(command, _LITELLM_WRITES) and Gate.PLANNED_LITELLM_READS in state.config.gates:
        state = _left_unknown(state, command, event)
    control = evolve(state.control, inflight=state.control.inflight.delete(event.key))
    if isinstance(command, ObserveLiteLLM):
        # A re-read is answered by its observation; an outcome comes only from a shell that could not
        # carry it out. A retry waits out its backoff, a terminal one is not planned again (a shell
        # without an observer); the next tick plans it again while an observation is still wanted.
        if event.outcome is Outcome.RETRY:
            retry = Retry(command.id, state.now + max(0.0, event.retry_after), None)
            control = evolve(control, retries=control.retries.set(event.key, retry))
        elif event.outcome is Outcome.TERMINAL:
            failure = Failure(command.id, _failure_reason(event), event.detail)
            control = evolve(control, failures=control.failures.set(event.key, failure))
        return evolve(state, control=control)
    if event.outcome is Outcome.APPLIED:
        control = evolve(
            control,
            retries=control.retries.delete(event.key),
            failures=control.failures.delete(event.key),
            settled=control.settled.set(event.key, command.id),
        )
        return _applied(failing.recovered(evolve(state, control=control), event.key), command)
    if event.outcome is Outcome.RETRY:
        resend = command if isinstance(command, EmitKubernetesEvent) else None
        retry = Retry(command.id, state.now + max(0.0, event.retry_after), resend)
        state = evolve(state, control=evolve(control, retries=control.retries.set(event.key, retry)))
        reason = _reported_reason(event)
        return state if reason is None else failing.failed(state, command, reason, event.detail)
    if event.outcome is Outcome.TERMINAL:
        reason = _failure_reason(event)
        failure = Failure(command.id, reason, event.detail)
        control = evolve(
            control,
            failures=control.failures.set(event.key, failure),
            retries=control.retries.delete(event.key),
        )
        state = evolve(state, control=control, pending=_records_of(state, command))
        return failing.failed(state, command, reason, event.detail, terminal=True)
    # GONE: the target does not exist. Do not repeat this command until the target is observed again;
    # a LiteLLM row we meant to update is forgotten, so the plan creates it instead.
    state = evolve(state, control=evolve(control, settled=control.settled.set(event.key, command.id)))
    state = failing.recovered(state, event.key)
    if isinstance(command, UpdateLiteLLMModel | RecreateLiteLLMModel):
        return ingest.set_row(state, command.model_id, None)
    return state


_LITELLM_WRITES = (CreateLiteLLMModel, UpdateLiteLLMModel, RecreateLiteLLMModel, DeleteLiteLLMModel)
# What a LiteLLM write's retry says of LiteLLM itself: it did not answer, or answered with an error.
_LITELLM_FAILING = frozenset({LiteLLMWait.UNREACHABLE, LiteLLMWait.SERVER_ERROR, Reason.LITELLM_UNAUTHORIZED})


def _left_unknown(state: CatalogState, command: Command, event: CommandCompleted) -> CatalogState:
    """What a LiteLLM write's answer left unknown, for the planner to read LiteLLM again at once
    (``plan._reread``). An applied write alone is not one of them: ``_applied`` notes it as an unobserved
    write, whose re-read waits for the writes still in flight."""
    view = state.litellm
    if view.unconfirmed is not None:
        return state  # one re-read settles every unknown
    outcome = event.outcome
    # LiteLLM answered the request (a refusal of ours, or a missing Secret, sends none)
    answered = outcome in (Outcome.APPLIED, Outcome.GONE) or (
        outcome is Outcome.TERMINAL and event.reason == Reason.LITELLM_REJECTED
    )
    reason: ReadReason | None = None
    if outcome is Outcome.RETRY and event.reason == LiteLLMWait.DUPLICATE_ID:
        reason = ReadReason.ROW_PROBABLY_EXISTS
    elif isinstance(command, RecreateLiteLLMModel) and outcome is not Outcome.APPLIED:
        reason = ReadReason.RECREATE_UNFINISHED
    elif view.status.reachable and outcome is Outcome.RETRY and event.reason in _LITELLM_FAILING:
        reason = ReadReason.WRITE_SAW_FAILURE
    elif view.status.observed_once and not view.status.reachable and answered:
        reason = ReadReason.WRITE_SAW_ANSWER
    if reason is None:
        return state
    return evolve(state, litellm=evolve(view, unconfirmed=reason))


def _failure_reason(event: CommandCompleted) -> Reason:
    try:
        return Reason(event.reason)
    except ValueError:
        return Reason.LITELLM_REJECTED if is_litellm_key(event.key) else Reason.WRITE_REJECTED


def _reported_reason(event: CommandCompleted) -> Reason | None:
    """The reason of a ``retry`` outcome when it reports a failure: executors give a reason code of
    ``Reason`` for a failed attempt, and another word for a wait they chose (LiteLLM's duplicate-id answer,
    LiteLLM unreachable, which the LiteLLM status reports once for every write)."""
    try:
        return Reason(event.reason)
    except ValueError:
        return None


def _records_of(state: CatalogState, command: Command) -> Pending:
    records = state.pending.records
    model_id = getattr(command, "model_id", None)
    if model_id is not None:
        records = mark_all(records, state.derived.by_id.get(model_id, frozenset()))
    return evolve(state.pending, records=records)


def _settle(state: CatalogState, command: Command) -> CatalogState:
    control = state.control
    return evolve(state, control=evolve(control, settled=control.settled.set(command.key, command.id)))


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
        # set_row forgets 'settled' for a changed row; this write is what changed it.
        state = _settle(ingest.set_row(state, command.model_id, row), command)
        return evolve(state, litellm=evolve(state.litellm, unobserved_writes=True))
    if isinstance(command, DeleteLiteLLMModel):
        return _settle(ingest.set_row(state, command.model_id, None), command)
    if isinstance(command, WriteCatalog):
        current = state.cluster.catalog
        observed = ObservedCatalog(
            resource_version=current.resource_version if current else "",
            catalog_hash=command.catalog_hash,
            fingerprint=command.fingerprint,
            ready=True,
            defaults=HeldDefaults.of(dict(command.data)),
        )
        return evolve(
            state,
            cluster=evolve(state.cluster, catalog=observed),
            pending=evolve(state.pending, catalog=True, rollouts=True),
        )
    if isinstance(command, RollWorkload):
        key = f"{command.kind}/{command.name}"
        workload = state.cluster.workloads.get(key)
        if workload is not None:
            updated = evolve(workload, template_hash=command.catalog_hash)
            return evolve(
                state,
                cluster=evolve(state.cluster, workloads=state.cluster.workloads.set(key, updated)),
                pending=evolve(state.pending, rollouts=True),
            )
    return state


# What an observation does to the state, by the event's exact class (a subclass takes ``_observe``).
_OBSERVERS: dict[type, Callable[[CatalogState, Any], CatalogState]] = {
    ObjectUpserted: ingest.upserted,
    ObjectDeleted: ingest.deleted,
    SourceListed: ingest.listed,
    SourceUnavailable: ingest.unavailable,
    LiteLLMRowsObserved: ingest.rows_observed,
    LiteLLMUnreachable: ingest.litellm_unreachable,
    RuntimeProbed: _probed,
    CommandCompleted: _completed,
    LeadershipChanged: _leadership,
}
