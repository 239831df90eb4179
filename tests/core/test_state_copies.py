"""Issue 15, P5: the fold's hot path copies the state by position (``CatalogState.with_route_items``)
instead of ``attrs.evolve``. The copies must equal what ``evolve`` gives."""

from __future__ import annotations

import attrs

from catalog_core import ingest
from catalog_core.config import CatalogConfig
from catalog_core.events import ObjectUpserted, SourceKind, SourceListed
from catalog_core.fold import fold, initial_state
from catalog_core.pmap import PMap, empty
from catalog_core.state import CatalogState, mark
from tests.core import builders as b


def _busy_state() -> CatalogState:
    """A state whose every group differs from its default, so a field copied from the wrong place shows."""
    events = [SourceListed(kind, ()) for kind in SourceKind if kind is not SourceKind.KUBEAI_MODELS]
    events.append(SourceListed(SourceKind.KUBEAI_MODELS, (b.kubeai_model("llama"), b.kubeai_model("qwen"))))
    events.append(ObjectUpserted(SourceKind.SERVICES, b.service("svc", 8000)))
    state, _ = fold(initial_state(CatalogConfig()), events)
    pending = attrs.evolve(state.pending, names=mark((), "n"), ids=mark((), "i"), templates=True)
    return attrs.evolve(state, pending=pending, now=12.5)


def test_with_route_items_is_evolve_of_the_store_and_pending():
    state = _busy_state()
    kind = SourceKind.KUBEAI_MODELS
    objects = state.stored(kind).delete("qwen")
    items = mark(state.pending.items, "kubeai/qwen")
    pending = attrs.evolve(state.pending, items=items)
    expected = attrs.evolve(
        state,
        observed=attrs.evolve(state.observed, stores=state.observed.stores.set(kind, objects)),
        pending=pending,
    )
    assert state.with_route_items(kind, objects, items) == expected
    assert state.with_stored(kind, objects, pending=pending) == expected


def test_with_route_items_drops_an_emptied_store():
    state = _busy_state()
    kind = SourceKind.KUBEAI_MODELS
    emptied = state.with_route_items(kind, empty(), state.pending.items)
    assert kind not in emptied.observed.stores
    assert emptied == state.with_stored(kind, PMap(), pending=state.pending)


def test_a_changed_item_is_stored_and_marked_once_and_an_equal_one_changes_nothing():
    state = _busy_state()
    event = ObjectUpserted(SourceKind.KUBEAI_MODELS, b.kubeai_model("llama", ready=0))
    changed = ingest.upserted(state, event)
    assert changed.stored(SourceKind.KUBEAI_MODELS)["llama"].ready is False
    assert changed.pending.items == ("kubeai/llama", state.pending.items)
    assert ingest.upserted(changed, event) is changed  # the same object again: the same state
