"""Writes that keep failing: what the core remembers of them, so the operator is told where they look
(the routes.json records of a LiteLLM row's items, a Warning Event on any other target, the
``model_catalog_failing_writes`` gauge) until the write succeeds or is no longer needed.

Retrying is not decided here: an executor's ``retry`` outcome carries its backoff (``Control.retries``),
a ``terminal`` one waits for a new command (``Control.failures``). This only keeps the report.
"""

from __future__ import annotations

from catalog_core.commands import Command
from catalog_core.evolve import evolve
from catalog_core.keys import litellm_id
from catalog_core.reasons import Reason
from catalog_core.state import CatalogState, Control, WriteFailure, mark, mark_all


def failed(
    state: CatalogState, command: Command, reason: Reason, detail: str, *, terminal: bool = False
) -> CatalogState:
    """One more failed attempt of ``command``'s write."""
    control = state.control
    old = control.failing.get(command.key)
    failure = WriteFailure(
        command.id,
        type(command).__name__,
        reason,
        detail,
        since=old.since if old is not None else state.now,
        attempts=(old.attempts if old is not None else 0) + 1,
        terminal=terminal,
    )
    state = evolve(state, control=evolve(control, failing=control.failing.set(command.key, failure)))
    if old is not None and _shown(old) == _shown(failure):
        return state  # one more attempt failed the same way: nothing a reader sees has changed
    return _changed(state, command.key)


def recovered(state: CatalogState, key: str) -> CatalogState:
    """``key``'s write no longer fails: it succeeded, its target needs no write, or the target is gone."""
    failing = state.control.failing
    if key not in failing:
        return state
    return _changed(evolve(state, control=evolve(state.control, failing=failing.delete(key))), key)


def retry_now(control: Control, key: str) -> Control:
    """The target of ``key`` was observed to change: what was applied to it is no longer known to hold,
    and a write backing off from a failure goes again at once (the change may be what mends it)."""
    settled, retries = control.settled, control.retries
    if key not in settled and key not in retries:
        return control
    return evolve(control, settled=settled.delete(key), retries=retries.delete(key))


def _shown(failure: WriteFailure) -> tuple[object, ...]:
    return (failure.reported, failure.reason, failure.detail, failure.terminal)


def _changed(state: CatalogState, key: str) -> CatalogState:
    """What reports ``key``'s write is planned again: the records of a LiteLLM row's items, the Event of
    any other target."""
    rid = litellm_id(key)
    if rid is not None:
        records = mark_all(state.pending.records, state.derived.by_id.get(rid, frozenset()))
        return evolve(state, pending=evolve(state.pending, records=records))
    return evolve(state, pending=evolve(state.pending, failures=mark(state.pending.failures, key)))
