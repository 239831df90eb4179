"""How the library's adapters run, one nested object per adapter: what ``ModelCatalog`` takes as
``options=`` (``ServiceSettings.catalog_options()`` builds it from the environment for ``model-catalog
run``). What decides routes and the catalog is ``CatalogConfig``; this is only how the shell gets there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from adapters.kube.settings import KubeSettings
from adapters.litellm.bounds import AnswerBounds


@attrs.frozen
class LiteLLMOptions:
    base_url: str | None = None  # the admin API; default: CatalogConfig.litellm_base_url
    resync_seconds: float = 30.0  # re-read /model/info this often (and shortly after writes)
    bounds: AnswerBounds = attrs.field(factory=AnswerBounds)  # the largest answer read and parsed


@attrs.frozen
class WriteOptions:
    concurrency: int = 4  # commands carried out at once
    catalog_min_interval: float = 0.5  # catalog ConfigMap writes at most this often (bursts coalesce)
    # A failed write is retried, forever, after a jittered exponential backoff capped at this: once its cause
    # is mended (RBAC, LiteLLM's key, an immutable object deleted) it goes through within this long.
    retry_cap: float = 300.0


@attrs.frozen
class HeapOptions:
    # Freeze the heap once the first convergence settled (app.heap): no full collection walks it then.
    # Process-wide, so off for an embedding host unless it asks; ``model-catalog run`` turns it on.
    freeze_after_sync: bool = False
    refreeze_seconds: float = 3600.0  # collect once and freeze again this often (frozen cycles)
    # The read buffer asyncio gives every TLS connection (256 KiB, resident while it is open; each
    # watch holds one): None leaves asyncio's default. Process-wide (app.process_memory), so off for an
    # embedding host unless it asks; ``model-catalog run`` asks for 32 KiB.
    tls_read_buffer_bytes: int | None = None


@attrs.frozen
class CatalogOptions:
    litellm: LiteLLMOptions = LiteLLMOptions()
    kube: KubeSettings = attrs.field(factory=KubeSettings)
    writes: WriteOptions = WriteOptions()
    heap: HeapOptions = HeapOptions()
    # host:port -> host:port for the runtimes' health probes (a controller outside the cluster)
    probe_resolve: tuple[tuple[str, str], ...] = ()


def options_of(options: CatalogOptions | None, keywords: Mapping[str, Any]) -> CatalogOptions:
    """``options``, or the one that ``ModelCatalog``'s older keywords (``keywords``, None: not given) spell
    one by one; never both (which would win is unclear)."""
    given: dict[str, Any] = {name: value for name, value in keywords.items() if value is not None}
    if options is not None:
        if given:
            raise TypeError(f"pass either options= or {', '.join(sorted(given))}, not both")
        return options
    litellm, writes = LiteLLMOptions(), WriteOptions()
    return CatalogOptions(
        litellm=LiteLLMOptions(
            given.get("litellm_base_url"), given.get("litellm_resync_seconds", litellm.resync_seconds)
        ),
        kube=given.get("kube_settings", KubeSettings()),
        writes=WriteOptions(
            given.get("write_concurrency", writes.concurrency),
            given.get("catalog_min_write_interval", writes.catalog_min_interval),
        ),
        probe_resolve=tuple(given.get("probe_resolve", {}).items()),
    )
