"""One owned route per name and per id (behaviour §3): ModelActivation > ConfigMap > runtimes, and among
runtimes the one holding a name keeps it.

Only the items connected to what changed (through shared names or ids) are
re-resolved, so the cost follows the change, not the catalog's size.
"""

from __future__ import annotations

from collections.abc import Iterable

from catalog_core.evolve import evolve
from catalog_core.gates import Gate
from catalog_core.reasons import Reason
from catalog_core.registry import rank, route_id, sticky_names
from catalog_core.rules.routes import SPEC_HASH_KEY
from catalog_core.state import Candidate, CatalogState


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
    """Re-share names and ids among the connected items; returns those items, names and ids.

    Sources without sticky names take names by rank. Runtimes (sources with sticky names, which anyone
    who may create Deployments or Models can make) then share what is left: a runtime its ModelActivation
    owns (uid verified) wins; else the runtime holding the name keeps it, even while withheld; with no
    holder, the higher rank; a tie goes to nobody, never to the name that sorts first (behaviour §3)."""
    items, all_names, all_ids = component(state, names, ids)
    derived = state.derived
    taken_names: dict[str, str] = {}
    taken_ids: dict[str, str] = {}
    winners, losses, holders = derived.winners, derived.losses, derived.holders

    def take(cand: Candidate) -> Loss | None:
        """Give ``cand`` its name and id, or say why it cannot have them."""
        route = cand.route
        assert route is not None
        if (taken := _id_taken(state, cand)) is not None:
            return taken
        if route.model_name in taken_names:
            return Reason.CONFLICT, f"{route.model_name!r} is published by {taken_names[route.model_name]}"
        if route.id in taken_ids:
            return Reason.ID_COLLISION, f"id {route.id} is used by {taken_ids[route.id]}"
        taken_names[route.model_name] = cand.item
        taken_ids[route.id] = cand.item
        return None

    runtimes: dict[str, list[Candidate]] = {}  # name -> the runtimes claiming it, with a route or not
    ranked: list[Candidate] = []
    # Without the gate every source takes names by rank (a tie: the name, then the item, sorting first).
    sticky = Gate.STICKY_RUNTIME_NAMES in state.config.gates
    for item in items:
        cand = derived.candidates[item]
        if sticky and sticky_names(cand.source):
            runtimes.setdefault(cand.route.model_name if cand.route else cand.name, []).append(cand)
        elif cand.route is not None:
            ranked.append(cand)
    for cand in sorted(ranked, key=lambda c: (-rank(c.source), c.name, c.item)):
        loss = take(cand)
        losses = losses.set(cand.item, loss) if loss is not None else losses.delete(cand.item)
    for name in sorted(set(runtimes) | {n for n in all_names if n in holders}):
        group = sorted(runtimes.get(name, ()), key=lambda c: c.item)
        holder = _holder(state, name, group)
        routed = [c for c in group if c.route is not None]
        if name in taken_names:  # a source of a higher rank publishes it
            for cand in routed:
                losses = losses.set(
                    cand.item, (Reason.CONFLICT, f"{name!r} is published by {taken_names[name]}")
                )
        else:
            eligible: list[Candidate] = []
            for cand in routed:
                taken = _id_taken(state, cand)
                if taken is not None:
                    losses = losses.set(cand.item, taken)
                else:
                    eligible.append(cand)
            winner, why = _contest(state, name, eligible, holder)
            for cand in eligible:
                loss = take(cand) if cand is winner else why
                losses = losses.set(cand.item, loss) if loss is not None else losses.delete(cand.item)
            if winner is not None and taken_names.get(name) == winner.item:
                holder = winner.item
        if holders.get(name) != holder:
            holders = holders.set(name, holder) if holder is not None else holders.delete(name)
    for item in items:
        if derived.candidates[item].route is None:
            losses = losses.delete(item)
    for rid in all_ids:
        winner_item = taken_ids.get(rid)
        winners = winners.set(rid, winner_item) if winner_item is not None else winners.delete(rid)
    derived = evolve(derived, winners=winners, losses=losses, holders=holders)
    return evolve(state, derived=derived), items, all_names, all_ids


Loss = tuple[Reason, str]


def _id_taken(state: CatalogState, cand: Candidate) -> Loss | None:
    assert cand.route is not None
    foreign = state.litellm.rows.get(cand.route.id)
    if foreign is not None and not foreign.ours:
        return Reason.ID_TAKEN, f"LiteLLM id {cand.route.id} belongs to {foreign.owner or 'someone else'}"
    return None


def _holder(state: CatalogState, name: str, claims: list[Candidate]) -> str | None:
    """The runtime holding ``name``: the one that held it last, while it still claims it (with a route or
    not); else, as after a restart, the one whose route LiteLLM holds (``_held_in_litellm``)."""
    item = state.derived.holders.get(name)
    if item is not None:
        cand = state.derived.candidates.get(item)
        if cand is not None and cand.name == name and sticky_names(cand.source):
            return item
    held = _held_in_litellm(state, name, claims)
    return held.item if held is not None else None


def _held_in_litellm(state: CatalogState, name: str, claims: list[Candidate]) -> Candidate | None:
    """The runtime among ``claims`` whose route LiteLLM holds: an owned row under ``name`` with the id of
    its source, and its API base (for one awaiting its first probe, that API base's origin); if several
    match, the one whose route is the row's exactly. None when it is not one of them."""
    matches: list[Candidate] = []
    for cand in claims:
        row = state.litellm.rows.get(route_id(cand.source, name))
        if row is None or not row.ours or row.model_name != name:
            continue
        if cand.route is not None:
            same = row.api_base == cand.route.api_base
        elif cand.health_url is not None:  # its endpoint is known: it is waiting for its probe
            same = _origin(row.api_base) == _origin(cand.health_url)
        else:  # withheld before its endpoint was known: only the row's id names its source
            same = True
        if same:
            matches.append(cand)
    if len(matches) > 1:
        matches = [
            c
            for c in matches
            if c.route is not None
            and state.litellm.rows[c.route.id].model_info.value().get(SPEC_HASH_KEY) == c.route.spec_hash
        ]
    return matches[0] if len(matches) == 1 else None


def _origin(url: str | None) -> str:
    """scheme://host[:port] of an absolute URL."""
    return "/".join((url or "").split("/", 3)[:3])


def _contest(
    state: CatalogState, name: str, claims: list[Candidate], holder: str | None
) -> tuple[Candidate | None, Loss]:
    """Which of the runtimes ``claims`` (each with a route to ``name``, in item order) gets the name, and
    what the others are told. ``holder``: the runtime holding it (``_holder``), with a route or not."""
    if not claims:
        return None, (Reason.NAME_HELD, "")
    vouched = [c for c in claims if c.vouched]
    if len(vouched) == 1:
        winner = vouched[0]
        return winner, (
            Reason.NAME_HELD,
            f"{name!r} is published by {winner.item}, the runtime its ModelActivation owns "
            "(owner reference, uid verified)",
        )
    pool = vouched or claims
    held = state.derived.candidates.get(holder) if holder is not None else None
    if held is not None and (held.vouched or not vouched):
        # the holder keeps it; while it is withheld (not among the claims) nobody publishes it
        return next((c for c in pool if c.item == holder), None), _held_by(name, held.item)
    if len(pool) == 1:
        return pool[0], _held_by(name, pool[0].item)
    top = max(rank(c.source) for c in pool)
    best = [c for c in pool if rank(c.source) == top]
    if len(best) == 1:
        return best[0], (Reason.CONFLICT, f"{name!r} is published by {best[0].item}")
    shown = ", ".join(c.item for c in best[:3]) + (f" and {len(best) - 3} more" if len(best) > 3 else "")
    return None, (
        Reason.NAME_CONTESTED,
        f"{name!r} is claimed at once by {shown} and none holds it: none is published until only one "
        "claims it (or the operator marks its own with an owner reference to the ModelActivation)",
    )


def _held_by(name: str, holder: str) -> Loss:
    return (
        Reason.NAME_HELD,
        f"{name!r} is held by {holder}, which had it first; a runtime never takes a name from the route "
        "holding it, even while that route is withheld",
    )
