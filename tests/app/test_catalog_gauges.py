"""The catalog gauges the alerts and the dashboard read (issue 16): items by state, the catalog's size
against the 1 MiB a ConfigMap holds, and whether it went unwritten for being too large. Driven by the
core's own scenario harness (the same one that proves CatalogTooLarge in tests/core)."""

from __future__ import annotations

from app.catalog_size import CatalogSize
from catalog_core.sources.catalog_configmap import CONFIGMAP_DATA_LIMIT
from tests.core import builders as b
from tests.core.harness import Cluster


def test_size_items_and_too_large_follow_the_catalog() -> None:
    c = Cluster()
    gauges = CatalogSize(lambda: c.state)
    c.start(
        b.external_configmap(
            [{"name": "small", "model": "openai/small"}, {"name": "off", "model": "x/y", "enabled": False}]
        )
    )
    assert {labels["state"]: n for n, labels in gauges.items()} == {
        "published": 1.0,
        "withheld": 1.0,
        "error": 0.0,
        "conflict": 0.0,
    }
    [(small, _)] = gauges.size()
    assert 0 < small < CONFIGMAP_DATA_LIMIT
    assert gauges.limit() == [(float(CONFIGMAP_DATA_LIMIT), {})]
    assert gauges.too_large() == [(0.0, {})]

    many = [{"name": f"many-{i}", "model": f"openai/many-{i}"} for i in range(900)]
    c.apply(b.external_configmap(many))
    [(big, _)] = gauges.size()
    assert big > CONFIGMAP_DATA_LIMIT
    assert gauges.too_large() == [(1.0, {})]  # not written: apps keep the small one

    c.apply(b.external_configmap(many[:10]))
    [(back, _)] = gauges.size()
    assert small < back < CONFIGMAP_DATA_LIMIT
    assert gauges.too_large() == [(0.0, {})]


def test_nothing_before_the_first_event() -> None:
    gauges = CatalogSize(lambda: None)
    assert gauges.size() == [] and gauges.items() == [] and gauges.too_large() == []
