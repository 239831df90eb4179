"""Desired route versus observed row -> the one LiteLLM write that closes the gap (behaviour §3, §2.3)."""

from __future__ import annotations

from catalog_core.commands import (
    CreateLiteLLMModel,
    DeleteLiteLLMModel,
    LiteLLMCommand,
    RecreateLiteLLMModel,
    UpdateLiteLLMModel,
)
from catalog_core.external_fields import PARAMS
from catalog_core.sources.litellm_row import PARAM_KEYS, SET_KEYS_KEY, LiteLLMRow
from catalog_core.state import CatalogState, DesiredRoute

# For rows written before ai_appliance_set_keys existed: keys LiteLLM never fills in by itself.
_STICKY_PARAMS = ("api_base", *PARAMS, "order")
# Compared on every read: what LiteLLM returns as written (a parameter it does not return cannot be).
_COMPARED_PARAMS = frozenset(PARAM_KEYS)
_STICKY_INFO = ("features", "ai_appliance_scheduler")


def row_matches(route: DesiredRoute, row: LiteLLMRow) -> bool:
    """Every field we set reads back as we set it (api_key aside: LiteLLM never returns it)."""
    if row.model_name != route.model_name:
        return False
    params, info = row.litellm_params.value(), row.model_info.value()
    want_params, want_info = route.litellm_params.value(), route.model_info.value()
    compared = _COMPARED_PARAMS
    return all(params.get(k) == v for k, v in want_params.items() if k in compared) and all(
        info.get(k) == v for k, v in want_info.items()
    )


def needs_recreate(route: DesiredRoute, row: LiteLLMRow) -> bool:
    """A key we set before is no longer wanted: LiteLLM's updates merge, so only a fresh row drops it."""
    params, info = row.litellm_params.value(), row.model_info.value()
    want_params, want_info = route.litellm_params.value(), route.model_info.value()
    previous = info.get(SET_KEYS_KEY)
    if isinstance(previous, list):
        return bool(set(previous) - set(want_info.get(SET_KEYS_KEY, [])))
    return any(k in params and k not in want_params for k in _STICKY_PARAMS) or any(
        k in info and k not in want_info for k in _STICKY_INFO
    )


def litellm_command(state: CatalogState, rid: str) -> LiteLLMCommand | None:
    item = state.derived.winners.get(rid)
    route = state.derived.candidates[item].route if item is not None else None
    row = state.litellm.rows.get(rid)
    if route is not None:
        args = (route.id, route.model_name, route.litellm_params, route.model_info, route.api_key)
        if row is None:
            return CreateLiteLLMModel(*args)
        if not row.ours or row_matches(route, row):
            return None  # a foreign row is never touched (behaviour §3)
        return RecreateLiteLLMModel(*args) if needs_recreate(route, row) else UpdateLiteLLMModel(*args)
    if row is not None and row.ours:
        # Planning starts only once every catalog source is known (plan.catalog_inputs_known): an owned row
        # no source claims is withdrawn, never one whose source is merely unread.
        return DeleteLiteLLMModel(rid)
    return None
