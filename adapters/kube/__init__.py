"""Kubernetes adapters: table-driven watches, the Secret watcher, the writers and the runtime prober.

The host passes in one ``KubeClient`` (``adapters/kube/client.py``) or a host's kubernetes-asyncio
``ApiClient`` (it owns and closes it) and the send side of its one bounded event stream; ``kube_sources`` and
``kube_executors`` build everything from the core's ``CatalogConfig``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import anyio
from anyio.abc import ObjectSendStream

from adapters.kube.api import KubeApi, KubeError
from adapters.kube.liveness import UNGUARDED, WatchLiveness
from adapters.kube.probe import RuntimeProber
from adapters.kube.secrets import SecretWatcher
from adapters.kube.settings import KubeSettings, KubeStats
from adapters.kube.watch import WatchSource, WatchSpec, watch_specs
from adapters.kube.writers import (
    RETRY_CAP_SECONDS,
    AgentTemplatePatcher,
    CatalogWriter,
    EventRecorder,
    Outcomes,
    PodEvictor,
    WorkloadRoller,
)
from adapters.ports import Executor, Source
from adapters.vault import SecretVault
from catalog_core.config import CatalogConfig
from catalog_core.events import Event, SourceKind

__all__ = [
    "KubeAdapters",
    "KubeApi",
    "KubeError",
    "KubeSettings",
    "KubeStats",
    "RuntimeProber",
    "WatchLiveness",
    "SecretWatcher",
    "WatchSource",
    "WatchSpec",
    "run_sources",
    "watch_specs",
]


class KubeAdapters:
    """Every Kubernetes source and executor for one ``CatalogConfig``, sharing one client."""

    def __init__(
        self,
        api_client: Any,
        config: CatalogConfig,
        vault: SecretVault,
        *,
        settings: KubeSettings | None = None,
        stats: KubeStats | None = None,
        probe_resolve: Mapping[str, str] | None = None,
        skip: Collection[SourceKind] = (),
        write_retry_cap: float = RETRY_CAP_SECONDS,
    ) -> None:
        """``skip``: sources the host feeds itself (e.g. an operator's ModelActivation cache);
        ``write_retry_cap``: the longest backoff of a failed write."""
        self.settings = settings or KubeSettings()
        self.stats = stats or KubeStats()
        self.api = KubeApi(api_client, request_timeout=self.settings.request_timeout_seconds)
        # One signal that every watch connection still delivers (KubeSettings.liveness), when configured.
        self.liveness = (
            WatchLiveness(self.api, self.settings.liveness, settings=self.settings, stats=self.stats)
            if self.settings.liveness is not None
            else None
        )
        guards = self.liveness.guards if self.liveness is not None else UNGUARDED
        self.secrets = SecretWatcher(
            self.api,
            vault,
            namespace=config.namespace,
            never=(config.litellm_master_key_secret,),
            settings=self.settings,
            stats=self.stats,
            guards=guards,
        )
        self.sources: list[Source] = [
            WatchSource(self.api, spec, vault=vault, settings=self.settings, stats=self.stats, guards=guards)
            for spec in watch_specs(config)
            if spec.source not in skip
        ]
        self.sources.append(self.secrets)
        outcomes = Outcomes(self.stats, retry_cap=write_retry_cap)
        self.prober = RuntimeProber(resolve=probe_resolve)
        self.executors: list[Executor] = [
            CatalogWriter(self.api, outcomes),
            AgentTemplatePatcher(self.api, outcomes),
            WorkloadRoller(self.api, outcomes),
            PodEvictor(self.api, outcomes),
            EventRecorder(self.api, outcomes),
            self.secrets,
            self.prober,
        ]

    async def run(self, send: ObjectSendStream[Event]) -> None:
        """Every source, concurrently, until cancelled (and the liveness signal they share)."""
        async with anyio.create_task_group() as tg:
            if self.liveness is not None:
                tg.start_soon(self.liveness.run, name=self.liveness.name)
            await run_sources(self.sources, send)

    async def aclose(self) -> None:
        await self.prober.aclose()
        await self.api.aclose()


async def run_sources(sources: Sequence[Source], send: ObjectSendStream[Event]) -> None:
    """Run sources concurrently in one task group, all feeding ``send``, until cancelled."""
    async with anyio.create_task_group() as tg:
        for source in sources:
            tg.start_soon(source.run, send, name=source.name)
