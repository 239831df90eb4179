"""The Mesh-aware catalog: logical models from our routes and the rows LiteLLM reports (behaviour §6).

An entry is rebuilt only when something under its logical name changed.
"""

from __future__ import annotations

import attrs

from catalog_core.gates import Gate
from catalog_core.registry import catalog_source
from catalog_core.sources.litellm_row import LiteLLMRow
from catalog_core.state import CatalogEntry, CatalogState, DesiredRoute, RouteRef
from catalog_core.values import ALIAS_PREFIXES, OWNER, ModelType, name_problem

_BIG = 1 << 62


@attrs.frozen
class RouteView:
    id: str
    model_name: str
    owner: str
    owned: bool
    local: bool
    order: int | None
    locality: str
    model_type: ModelType
    litellm_model: str
    api_base: str | None
    context_window: int | None
    max_output_tokens: int | None
    display_name: str | None
    source: str


def _from_route(route: DesiredRoute, row: LiteLLMRow | None) -> RouteView:
    """Our route as published. A limit the source gave wins; else the one LiteLLM reports for the row it
    holds (it fills limits in from its model map, and apps should see what LiteLLM enforces;
    behaviour §5.2)."""
    return RouteView(
        id=route.id,
        model_name=route.model_name,
        owner=OWNER,
        owned=True,
        local=route.locality == "local",
        order=route.order,
        locality=route.locality,
        model_type=route.model_type,
        litellm_model=route.litellm_model,
        api_base=route.api_base,
        context_window=route.context_window or (row.context_window if row is not None else None),
        max_output_tokens=route.max_output_tokens or (row.max_output_tokens if row is not None else None),
        display_name=None,
        source=catalog_source(route.source),
    )


def _from_row(row: LiteLLMRow, owned: bool) -> RouteView:
    return RouteView(
        id=row.id,
        model_name=row.model_name,
        owner=OWNER if owned else (row.owner or "litellm"),
        owned=owned,
        local=row.locality == "local",
        order=row.order,
        locality=row.locality,
        model_type=row.model_type,
        litellm_model=row.litellm_model,
        api_base=row.api_base,
        context_window=row.context_window,
        max_output_tokens=row.max_output_tokens,
        display_name=row.display_name,
        source=row.source,
    )


def published_route(state: CatalogState, rid: str) -> DesiredRoute | None:
    """The winning route for ``rid`` if LiteLLM holds a row of ours under that id."""
    item = state.derived.winners.get(rid)
    if item is None:
        return None
    row = state.litellm.rows.get(rid)
    if row is None or not row.ours:
        return None
    return state.derived.candidates[item].route


def views_for(state: CatalogState, logical: str) -> list[RouteView]:
    views: list[RouteView] = []
    seen: set[str] = set()
    for name in (logical, *(p + logical for p in ALIAS_PREFIXES if p != "share/")):
        for item in state.derived.by_name.get(name, frozenset()):
            cand = state.derived.candidates[item]
            if cand.route is None or state.derived.winners.get(cand.route.id) != item:
                continue
            route = published_route(state, cand.route.id)
            if route is not None:
                views.append(_from_route(route, state.litellm.rows.get(route.id)))
                seen.add(route.id)
    for rid in state.litellm.rows_by_logical.get(logical, frozenset()):
        row = state.litellm.rows[rid]
        if rid in seen or row.export_only or name_problem(row.model_name) is not None:
            # LiteLLM does not check names: one with a line break would add lines to defaults.env
            continue
        if row.ours:
            # An owned row nobody claims is being withdrawn. (Entries are derived only once every catalog
            # source is known -- plan.catalog_inputs_known -- so no owned row is held for an unread source.)
            continue
        views.append(_from_row(row, owned=False))
    return views


def _metadata_key(view: RouteView) -> tuple[int, int, str, str]:
    """The entry's metadata comes from the lowest-order row, owned local rows first, then the other owned
    ones: a row the catalog does not own adds a route and aliases (behaviour §6) but never changes what an
    owned route publishes, whatever order, owner or locality it claims (anyone who may add a LiteLLM row
    can claim ``ai_appliance_owner: private-mesh``)."""
    return (
        (0 if view.local else 1) if view.owned else 2,
        view.order if view.order is not None else _BIG,
        view.owner,
        view.id,
    )


def _order_key(view: RouteView) -> tuple[int, int, str, str]:
    """``_metadata_key`` without ``Gate.OWNED_METADATA``: owned local rows first, then every other row by
    order, owned or not."""
    return (
        0 if view.owned and view.local else 1,
        view.order if view.order is not None else _BIG,
        view.owner,
        view.id,
    )


def entry_for(state: CatalogState, logical: str) -> CatalogEntry | None:
    views = views_for(state, logical)
    primary = [v for v in views if v.model_name == logical]
    if not primary:
        return None  # aliases alone do not make an entry: requests to litellm/<logical> would fail
    meta = min(primary, key=_metadata_key if Gate.OWNED_METADATA in state.config.gates else _order_key)
    routes = sorted(
        {RouteRef(v.order, v.locality, v.owner) for v in primary},
        key=lambda r: (r.order if r.order is not None else _BIG, r.locality, r.owner),
    )
    aliases = sorted({v.model_name for v in views if v.model_name != logical})
    return CatalogEntry(
        id=logical,
        name=meta.display_name or logical,
        model_type=meta.model_type,
        source=meta.source,
        managed=meta.owned,
        litellm_model=meta.litellm_model,
        api_base=meta.api_base,
        context_window=meta.context_window,
        max_output_tokens=meta.max_output_tokens,
        routes=tuple(routes),
        aliases=tuple(aliases),
    )
