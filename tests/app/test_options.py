"""The adapters' settings, nested: ``options=`` is the way in; the older keywords still say the same."""

from __future__ import annotations

import pytest

from adapters.kube.settings import KubeSettings
from app.library import ModelCatalog
from app.options import CatalogOptions, LiteLLMOptions, WriteOptions
from app.settings import ServiceSettings, load
from catalog_core.config import CatalogConfig


def test_the_older_keywords_build_the_same_options_as_options() -> None:
    nested = CatalogOptions(
        litellm=LiteLLMOptions("http://litellm:4000", 7.0),
        kube=KubeSettings(watch_timeout_seconds=3),
        writes=WriteOptions(2, 0.0),
        probe_resolve=(("rt.ai.svc:8080", "127.0.0.1:18080"),),
    )
    by_keywords = ModelCatalog(
        CatalogConfig(),
        None,
        litellm_master_key="sk-unused",
        litellm_base_url="http://litellm:4000",
        litellm_resync_seconds=7.0,
        kube_settings=KubeSettings(watch_timeout_seconds=3),
        write_concurrency=2,
        catalog_min_write_interval=0.0,
        probe_resolve={"rt.ai.svc:8080": "127.0.0.1:18080"},
    )
    by_options = ModelCatalog(CatalogConfig(), None, litellm_master_key="sk-unused", options=nested)
    assert by_keywords.options == by_options.options == nested
    assert by_options.observer.resync_seconds == 7.0
    assert str(by_options.litellm_client.base_url).startswith("http://litellm:4000")
    assert ModelCatalog(CatalogConfig(), None, litellm_master_key="k").options == CatalogOptions()


def test_options_and_an_older_keyword_together_are_refused() -> None:
    with pytest.raises(TypeError, match="either options= or write_concurrency"):
        ModelCatalog(
            CatalogConfig(), None, litellm_master_key="k", options=CatalogOptions(), write_concurrency=3
        )


def test_the_service_settings_nest_each_part_as_it_takes_them() -> None:
    settings = load(
        {
            "LITELLM_MASTER_KEY": "sk-unused",
            "CATALOG_MAX_CONCURRENT_WRITES": "6",
            "CATALOG_WATCH_TIMEOUT_SECONDS": "9",
            "CATALOG_LEASE_NAME": "my-lease",
            "CATALOG_EVENT_LOG_PATH": "/tmp/events.jsonl",
            "CATALOG_PROBE_RESOLVE": "rt.ai.svc:8080=127.0.0.1:18080",
        }
    )
    assert isinstance(settings, ServiceSettings)
    options = settings.catalog_options()
    assert (options.writes.concurrency, options.kube.watch_timeout_seconds) == (6, 9)
    assert options.probe_resolve == (("rt.ai.svc:8080", "127.0.0.1:18080"),)
    lease = settings.lease()
    assert lease is not None and lease.name == "my-lease"
    event_log = settings.event_log()
    assert event_log is not None and str(event_log.path) == "/tmp/events.jsonl"
    quiet = load({"LITELLM_MASTER_KEY": "sk-unused", "CATALOG_LEADER_ELECTION": "false"})
    assert isinstance(quiet, ServiceSettings)
    assert quiet.lease() is None and quiet.event_log() is None
