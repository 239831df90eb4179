"""The catalog as a library: run it inside a host's own anyio event loop and task group.

The Magic Stick Operator embeds it like this (see ARCHITECTURE.md, "Embedding")::

    catalog = ModelCatalog(config, api_client, litellm_master_key=key,
                           host_sources={SourceKind.MODEL_ACTIVATIONS})
    async with anyio.create_task_group() as tg:
        await tg.start(catalog.run)
        await catalog.listed(SourceKind.MODEL_ACTIVATIONS, activations_from_my_cache)
        await catalog.wait_ready()
        async for view in catalog.changes():
            ...  # view.catalog (ConfigMap data), view.routes (routes.json records)

The host passes its own kubernetes-asyncio ``ApiClient`` (and keeps owning it): the catalog sends its
requests with httpx, to the server, with the TLS files, token (refreshed as the ``ApiClient`` refreshes
it) and default headers of that client's configuration (``adapters/kube/client.py``). Sources it already
watches are fed as objects instead of watched twice.
Cancelling the host's task group stops the catalog.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import attrs
import httpx

from adapters.kube import KubeAdapters
from adapters.kube.api import KubeApi
from adapters.kube.master_key import DEFAULT_TIMEOUT, read_master_key
from adapters.kube.settings import KubeSettings
from adapters.litellm.client import LiteLLMClient
from adapters.litellm.executor import LiteLLMExecutor
from adapters.litellm.observer import LiteLLMObserver
from adapters.ports import Executor
from adapters.vault import SecretVault
from app.fed import FedRedactions
from app.heap import keep_heap_frozen
from app.loop import CatalogLoop, Recorder, Telemetry
from app.options import CatalogOptions, options_of
from app.process_memory import limit_tls_read_buffer
from catalog_core.config import CatalogConfig
from catalog_core.events import (
    Event,
    LeadershipChanged,
    ObjectDeleted,
    ObjectUpserted,
    SourceKind,
    SourceListed,
    SourceUnavailable,
    Unavailability,
)
from catalog_core.plan import all_records, catalog_inputs_known, rendered_catalog
from catalog_core.registry import CATALOG_KINDS as CATALOG_SOURCES
from catalog_core.state import CatalogState

if TYPE_CHECKING:
    from adapters.telemetry import Telemetry as OtelTelemetry


DETAIL_LIMIT = 200  # characters of a host's "my read failed" detail kept in the state and event log


@attrs.frozen
class CatalogView:
    """What is published now: the ConfigMap data and the routes.json records.

    ``ready`` is False until every source has been read once (a host source: once the host has ``listed``
    it) and LiteLLM observed. Until then ``routes`` is empty and ``catalog`` None, which says nothing about
    any model: a host must not act on a model's absence from a view that is not ready (a restart would
    otherwise look like every route withdrawn). ``catalog_hash`` is the hash of the catalog ConfigMap as
    last read or written (None before the ConfigMap was seen)."""

    catalog: Mapping[str, str] | None
    catalog_hash: str | None
    routes: tuple[Mapping[str, Any], ...]
    leading: bool
    ready: bool = False

    def route(self, name: str) -> list[Mapping[str, Any]]:
        """The records of one model name or logical name."""
        return [r for r in self.routes if name in (r["name"], r["logicalName"])]


async def read_litellm_master_key(
    api_client: Any, config: CatalogConfig, *, timeout: float = DEFAULT_TIMEOUT
) -> str:
    """The LiteLLM master key from the Secret LiteLLM uses (``config.litellm_master_key_secret``, key
    ``LITELLM_MASTER_KEY``, in LiteLLM's namespace ``config.namespace``), read with the host's
    kubernetes-asyncio ``ApiClient`` (or a ``KubeClient``). Raises ``MasterKeyError`` (what to fix,
    never the value) when it is not readable within ``timeout`` seconds."""
    api = KubeApi(api_client)
    try:
        return await read_master_key(api, config.namespace, config.litellm_master_key_secret, timeout=timeout)
    finally:
        with anyio.CancelScope(shield=True):
            await api.aclose()


class ModelCatalog:
    def __init__(
        self,
        config: CatalogConfig,
        api_client: Any,
        *,
        litellm_master_key: str,
        options: CatalogOptions | None = None,
        host_sources: Iterable[SourceKind] = (),
        leading: bool = True,
        telemetry: Telemetry | None = None,
        recorder: Recorder | None = None,
        litellm_transport: httpx.AsyncBaseTransport | None = None,
        extra_executors: Iterable[Executor] = (),
        meter_provider: Any = None,
        # The adapters' settings one by one, as before ``options``: still accepted (not with ``options``).
        litellm_base_url: str | None = None,
        litellm_resync_seconds: float | None = None,
        kube_settings: KubeSettings | None = None,
        probe_resolve: Mapping[str, str] | None = None,
        write_concurrency: int | None = None,
        catalog_min_write_interval: float | None = None,
    ) -> None:
        """``options``: how the adapters run (``app.options.CatalogOptions``; default: the defaults).
        ``meter_provider``: a host's OpenTelemetry ``MeterProvider`` to register the catalog's metrics
        with (ignored when ``telemetry`` is given); without either, no metrics at all."""
        self.options = options = options_of(
            options,
            {
                "litellm_base_url": litellm_base_url,
                "litellm_resync_seconds": litellm_resync_seconds,
                "kube_settings": kube_settings,
                "probe_resolve": probe_resolve,
                "write_concurrency": write_concurrency,
                "catalog_min_write_interval": catalog_min_write_interval,
            },
        )
        if options.heap.tls_read_buffer_bytes is not None:
            # Before any connection of ours opens: a connection keeps the buffer it was given.
            limit_tls_read_buffer(options.heap.tls_read_buffer_bytes)
        self.config = config
        self.vault = SecretVault()
        self.host_sources = frozenset(host_sources)
        self.kube = KubeAdapters(
            api_client,
            config,
            self.vault,
            settings=options.kube,
            probe_resolve=dict(options.probe_resolve),
            skip=self.host_sources,
            write_retry_cap=options.writes.retry_cap,
        )
        self.litellm_client = LiteLLMClient(
            options.litellm.base_url or config.litellm_base_url,
            litellm_master_key,
            transport=litellm_transport,
            bounds=options.litellm.bounds,
        )
        self.observer = LiteLLMObserver(
            self.litellm_client,
            resync_seconds=options.litellm.resync_seconds,
            pause_collector=options.heap.freeze_after_sync,
        )
        executors: list[Executor] = [
            *extra_executors,
            LiteLLMExecutor(
                self.litellm_client, self.vault, self.observer.shared, retry_cap=options.writes.retry_cap
            ),
            self.observer,  # the core's re-reads of LiteLLM
            *self.kube.executors,
        ]
        host_metrics = None
        if telemetry is None and meter_provider is not None:
            # Imported here: a host without metrics does not pay for the OpenTelemetry SDK's import.
            from adapters.telemetry import Telemetry as OtelTelemetry

            telemetry = host_metrics = OtelTelemetry(meter_provider=meter_provider)
        self.loop = CatalogLoop(
            config,
            executors,
            recorder=recorder,
            telemetry=telemetry,
            write_concurrency=options.writes.concurrency,
            catalog_min_interval=options.writes.catalog_min_interval,
            leading=leading,
        )
        self._ready = anyio.Event()
        self._fed = FedRedactions()
        if host_metrics is not None:
            self._bind_gauges(host_metrics)

    def _bind_gauges(self, telemetry: OtelTelemetry) -> None:
        """The gauges the library can answer (``model-catalog run`` adds its own: it owns more)."""
        telemetry.bind_state()
        telemetry.bind_kube(self.kube.stats)
        queue = self.loop.queue
        telemetry.set_gauge("model_catalog_queue_depth", lambda: [(float(queue.depth), {})])
        telemetry.set_gauge(
            "model_catalog_leader", lambda: [(1.0 if self.loop.state.control.leading else 0.0, {})]
        )

    # --- running
    async def run(
        self, *, task_status: anyio.abc.TaskStatus[ModelCatalog] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Run until cancelled: the loop, the Kubernetes sources not fed by the host, the LiteLLM observer."""
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(self.loop.run)
                tg.start_soon(self.kube.run, self.loop.sender())
                tg.start_soon(self.observer.run, self.loop.sender())
                tg.start_soon(self._watch_ready)
                if self.options.heap.freeze_after_sync:
                    tg.start_soon(
                        keep_heap_frozen, self._ready, self._settled, self.options.heap.refreeze_seconds
                    )
                task_status.started(self)
        finally:
            with anyio.CancelScope(shield=True):
                await self.litellm_client.aclose()
                await self.kube.aclose()

    async def _watch_ready(self) -> None:
        while not catalog_inputs_known(self.loop.state):
            await self.loop.wait_changed_or_tick()
        self._ready.set()

    def _settled(self) -> bool:
        """Nothing left to plan, hold or carry out: the catalog has converged on what it knows."""
        state = self.loop.state
        return state.pending.idle and not state.damping.waiting and self.loop.queue.depth == 0

    async def wait_ready(self) -> None:
        """Every source has been read once and LiteLLM observed: what is published is decided."""
        await self._ready.wait()

    @property
    def ready(self) -> bool:
        """What ``wait_ready`` waits for, now (and what ``view().ready`` says): safe from any thread."""
        return catalog_inputs_known(self.loop.ticked)

    async def set_leading(self, leading: bool) -> None:
        """For a host that runs its own leader election: only the leader writes."""
        await self.loop.send(LeadershipChanged(leading))

    # --- feeding what the host already watches
    async def send(self, event: Event) -> None:
        """Feed a raw event; objects in it must already be redacted (see ``listed``/``upserted``)."""
        await self.loop.send(event)

    async def _redacted(
        self, source: SourceKind, objects: Sequence[Mapping[str, Any]], *, replace: bool = False
    ) -> tuple[Mapping[str, Any], ...]:
        """Redacted as the watches redact (the fingerprints off the event loop); values to the vault."""
        out = []
        for redacted in await self._fed.redact(source, objects, replace=replace):
            if redacted.secrets:
                self.vault.update(redacted.secrets)
            out.append(redacted.obj)
        return tuple(out)

    async def listed(self, source: SourceKind, objects: Iterable[Mapping[str, Any]]) -> None:
        """The host's full current content of ``source`` (e.g. its ModelActivation cache): anything not in
        it is gone. After a read of the host's own that failed, call ``read_failed`` instead: an empty
        listing withdraws every route of the source."""
        await self.loop.send(SourceListed(source, await self._redacted(source, tuple(objects), replace=True)))

    async def upserted(self, source: SourceKind, obj: Mapping[str, Any]) -> None:
        (redacted,) = await self._redacted(source, (obj,))
        await self.loop.send(ObjectUpserted(source, redacted))

    async def deleted(self, source: SourceKind, obj: Mapping[str, Any]) -> None:
        (redacted,) = await self._redacted(source, (obj,))
        self._fed.forget(source, obj)
        await self.loop.send(ObjectDeleted(source, redacted))

    async def read_failed(self, source: SourceKind, detail: str = "", *, forbidden: bool = False) -> None:
        """The host could not read ``source`` this time: the catalog keeps the content last listed (and
        the routes from it) and shows the source as failing (``forbidden``: denied) until the next
        ``listed``. Before a first ``listed`` nothing is planned at all, as for a watch that cannot list.
        ``detail`` (a short reason, e.g. the HTTP status) is kept in the state and the event log: no
        secret in it."""
        status = Unavailability.FORBIDDEN if forbidden else Unavailability.FAILING
        await self.loop.send(SourceUnavailable(source, status, detail[:DETAIL_LIMIT]))

    # --- reading
    @property
    def state(self) -> CatalogState:
        return self.loop.state

    def view(self) -> CatalogView:
        """What is published, as of the loop's last tick (a whole state, safe to read from any thread)."""
        state = self.loop.ticked
        observed = state.cluster.catalog
        ready = catalog_inputs_known(state)
        catalog = rendered_catalog(state).as_dict() if ready else None
        routes = tuple(r.as_json() for r in sorted(all_records(state), key=lambda r: (r.source, r.name)))
        return CatalogView(
            catalog=catalog,
            catalog_hash=observed.catalog_hash if observed is not None else None,
            routes=routes,
            leading=state.control.leading,
            ready=ready,
        )

    async def changes(self) -> AsyncIterator[CatalogView]:
        """The current view, then a new one after every change to what is published."""
        seen = self.loop.version
        yield self.view()
        while True:
            await self.loop.wait_changed(seen)  # no change is missed while the host handles a view
            seen = self.loop.version
            yield self.view()


__all__ = ["CATALOG_SOURCES", "CatalogView", "ModelCatalog", "read_litellm_master_key"]
