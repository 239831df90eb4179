"""routes.json records (behaviour §7) and the Kubernetes objects they are about."""

from __future__ import annotations

from catalog_core.evolve import evolve
from catalog_core.keys import litellm_key
from catalog_core.reasons import Reason, RouteState, state_of
from catalog_core.rules.entries import published_route
from catalog_core.state import Candidate, CatalogState, RouteRecord
from catalog_core.values import logical_name


def record_for(state: CatalogState, item: str) -> RouteRecord | None:
    cand = state.derived.candidates.get(item)
    if cand is None:
        return None
    record = _record(state, item, cand)
    return evolve(record, warnings=cand.warnings) if cand.warnings else record


def _record(state: CatalogState, item: str, cand: Candidate) -> RouteRecord:
    source, name = cand.source.value, cand.name
    logical = logical_name(name)
    route = cand.route
    if route is None:
        return RouteRecord(source, name, logical, state_of(cand.reason), cand.reason, cand.message)
    loss = state.derived.losses.get(item)
    if loss is not None:
        return RouteRecord(source, name, logical, RouteState.CONFLICT, loss[0], loss[1], route.id)
    key = litellm_key(route.id)
    failure = state.control.failing.get(key)
    published = published_route(state, route.id) is not None
    if failure is not None and failure.reported and _still_shown(state, key, failure.command_id):
        message = failure.detail if failure.terminal else failure.message
        return RouteRecord(
            source, name, logical, RouteState.ERROR, failure.reason, message, route.id, published
        )
    state_now = state_of(cand.reason)
    if state_now is not RouteState.PUBLISHED:
        # Bad input while the last good route stays (behaviour §8), a Secret not read yet, or a runtime
        # that keeps starting while its route stays.
        return RouteRecord(source, name, logical, state_now, cand.reason, cand.message, route.id, published)
    if published:
        # Published, or published while it scales from zero (the claim says why, in the same words whether
        # or not a replica is ready).
        return RouteRecord(source, name, logical, state_now, cand.reason, cand.message, route.id)
    return RouteRecord(
        source, name, logical, RouteState.WITHHELD, Reason.PENDING, "waiting for LiteLLM", route.id
    )


def _still_shown(state: CatalogState, key: str, failed: str) -> bool:
    """A write's failure is shown until another command for its row is on its way (the input changed)."""
    current = state.control.inflight.get(key)
    return current is None or current.id == failed
