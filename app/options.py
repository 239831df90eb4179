"""How the library's adapters run, one nested object per adapter: what ``ModelCatalog`` takes as
``options=`` (``ServiceSettings.catalog_options()`` builds it from the environment for ``model-catalog
run``). What decides routes and the catalog is ``CatalogConfig``; this is only how the shell gets there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from adapters.kube.settings import KubeSettings


@attrs.frozen
class LiteLLMOptions:
    base_url: str | None = None  # the admin API; default: CatalogConfig.litellm_base_url
    resync_seconds: float = 30.0  # re-read /model/info this often (and shortly after writes)


@attrs.frozen
class WriteOptions:
    concurrency: int = 4  # commands carried out at once
    catalog_min_interval: float = 0.5  # catalog ConfigMap writes at most this often (bursts coalesce)


@attrs.frozen
class CatalogOptions:
    litellm: LiteLLMOptions = LiteLLMOptions()
    kube: KubeSettings = attrs.field(factory=KubeSettings)
    writes: WriteOptions = WriteOptions()
    # host:port -> host:port for the runtimes' health probes (a controller outside the cluster)
    probe_resolve: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_keywords(
        cls,
        *,
        litellm_base_url: str | None = None,
        litellm_resync_seconds: float | None = None,
        kube_settings: KubeSettings | None = None,
        probe_resolve: Mapping[str, str] | None = None,
        write_concurrency: int | None = None,
        catalog_min_write_interval: float | None = None,
    ) -> CatalogOptions:
        """The options that ``ModelCatalog``'s older keyword arguments spell one by one (None: default)."""
        litellm, writes = LiteLLMOptions(), WriteOptions()
        return cls(
            litellm=LiteLLMOptions(
                litellm_base_url,
                litellm.resync_seconds if litellm_resync_seconds is None else litellm_resync_seconds,
            ),
            kube=kube_settings if kube_settings is not None else KubeSettings(),
            writes=WriteOptions(
                writes.concurrency if write_concurrency is None else write_concurrency,
                writes.catalog_min_interval
                if catalog_min_write_interval is None
                else catalog_min_write_interval,
            ),
            probe_resolve=tuple((probe_resolve or {}).items()),
        )


def options_of(options: CatalogOptions | None, keywords: Mapping[str, Any]) -> CatalogOptions:
    """``options``, or the one the compatibility keywords describe; never both (which wins is unclear)."""
    given = {name: value for name, value in keywords.items() if value is not None}
    if options is None:
        return CatalogOptions.from_keywords(**given)
    if given:
        raise TypeError(f"pass either options= or {', '.join(sorted(given))}, not both")
    return options
