"""Gauges of the catalog as a whole: its items by state, its size against the 1 MiB a ConfigMap holds,
and whether it went unwritten for being too large.

Exported as ``model_catalog_items`` (routes.json records by ``state``), ``model_catalog_catalog_bytes``
(the data of the catalog the current state renders), ``model_catalog_catalog_limit_bytes`` and
``model_catalog_catalog_too_large`` (1 while that catalog is too large to write, so apps keep an older
one). Rendering costs a little, so the size is computed again only when what it is rendered from
changed (persistent maps: compared by identity).
"""

from __future__ import annotations

from collections.abc import Callable

from catalog_core.plan import all_records, rendered_catalog
from catalog_core.reasons import RouteState
from catalog_core.sources.catalog_configmap import CONFIGMAP_DATA_LIMIT, configmap_data_size
from catalog_core.state import CatalogState

# The core announces one Warning Event under this key while the rendered catalog does not fit, and
# forgets it once a catalog is written again (catalog_core/plan.py, CatalogTooLarge).
TOO_LARGE_KEY = "configmap/catalog"

Samples = list[tuple[float, dict[str, str]]]


class CatalogSize:
    """Gauge callbacks over the latest state (``state()`` gives it; None before the first event)."""

    def __init__(self, state: Callable[[], CatalogState | None]) -> None:
        self._state = state
        self._basis: tuple[object, ...] | None = None
        self._bytes = 0

    def size(self) -> Samples:
        state = self._state()
        if state is None or not state.derived.entries:
            return []
        basis = (state.derived.entries, state.derived.records, state.observed.external_problem, state.config)
        if self._basis is None or any(a is not b for a, b in zip(basis, self._basis, strict=True)):
            self._bytes = configmap_data_size(rendered_catalog(state).data)
            self._basis = basis
        return [(float(self._bytes), {})]

    @staticmethod
    def limit() -> Samples:
        return [(float(CONFIGMAP_DATA_LIMIT), {})]

    def items(self) -> Samples:
        """routes.json records by state (every state, zeros included, so a panel shows each line)."""
        state = self._state()
        if state is None:
            return []
        counts = dict.fromkeys(RouteState, 0)
        for record in all_records(state):
            counts[record.state] += 1
        return [(float(n), {"state": route_state.value}) for route_state, n in counts.items()]

    def too_large(self) -> Samples:
        state = self._state()
        if state is None:
            return []
        return [(1.0 if TOO_LARGE_KEY in state.control.announced else 0.0, {})]
