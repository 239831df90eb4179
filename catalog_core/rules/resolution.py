"""One owned route per name and per id (behaviour §3): ModelActivation > ConfigMap > local runtime.

Only the items connected to what changed (through shared names or ids) are
re-resolved, so the cost follows the change, not the catalog's size.
"""

from __future__ import annotations

from collections.abc import Iterable

from catalog_core.evolve import evolve
from catalog_core.reasons import Reason
from catalog_core.registry import rank
from catalog_core.state import CatalogState


def component(
    state: CatalogState, names: Iterable[str], ids: Iterable[str]
) -> tuple[set[str], set[str], set[str]]:
    """Items, names and ids connected to the given names and ids."""
    todo_names, todo_ids = list(names), list(ids)
    seen_names: set[str] = set()
    seen_ids: set[str] = set()
    items: set[str] = set()
    while todo_names or todo_ids:
        while todo_names:
            name = todo_names.pop()
            if name in seen_names:
                continue
            seen_names.add(name)
            for item in state.derived.by_name.get(name, frozenset()):
                if item not in items:
                    items.add(item)
                    route = state.derived.candidates[item].route
                    if route is not None:
                        todo_ids.append(route.id)
        while todo_ids:
            rid = todo_ids.pop()
            if rid in seen_ids:
                continue
            seen_ids.add(rid)
            for item in state.derived.by_id.get(rid, frozenset()):
                if item not in items:
                    items.add(item)
                    route = state.derived.candidates[item].route
                    if route is not None:
                        todo_names.append(route.model_name)
    return items, seen_names, seen_ids


def resolve(
    state: CatalogState, names: Iterable[str], ids: Iterable[str]
) -> tuple[CatalogState, set[str], set[str], set[str]]:
    """Re-share names and ids among the connected items; returns those items, names and ids."""
    items, all_names, all_ids = component(state, names, ids)
    ranked = sorted(
        (state.derived.candidates[i] for i in items if state.derived.candidates[i].route is not None),
        key=lambda c: (-rank(c.source), c.name, c.item),
    )
    taken_names: dict[str, str] = {}
    taken_ids: dict[str, str] = {}
    winners, losses = state.derived.winners, state.derived.losses
    for cand in ranked:
        route = cand.route
        assert route is not None
        foreign = state.litellm.rows.get(route.id)
        if foreign is not None and not foreign.ours:
            loss = (Reason.ID_TAKEN, f"LiteLLM id {route.id} belongs to {foreign.owner or 'someone else'}")
        elif route.model_name in taken_names:
            loss = (Reason.CONFLICT, f"{route.model_name!r} is published by {taken_names[route.model_name]}")
        elif route.id in taken_ids:
            loss = (Reason.ID_COLLISION, f"id {route.id} is used by {taken_ids[route.id]}")
        else:
            taken_names[route.model_name] = cand.item
            taken_ids[route.id] = cand.item
            losses = losses.delete(cand.item)
            continue
        losses = losses.set(cand.item, loss)
    for item in items:
        if state.derived.candidates[item].route is None:
            losses = losses.delete(item)
    for rid in all_ids:
        winner = taken_ids.get(rid)
        winners = winners.set(rid, winner) if winner is not None else winners.delete(rid)
    derived = evolve(state.derived, winners=winners, losses=losses)
    return evolve(state, derived=derived), items, all_names, all_ids
