"""``model-catalog run``: the library (app.library.ModelCatalog) plus what a Deployment needs —
leader election, probes and metrics over HTTP, the event log, signals.

Shutdown (SIGTERM/SIGINT): stop watching, give the queue ``shutdown_grace_seconds``
to finish or abandon its writes, release the Lease, flush the event log, exit 0.
SIGUSR1 (or GET /debug/eventlog) dumps the event-log ring. The endpoint answers loopback clients
(``kubectl exec`` / ``port-forward``), and others only with ``Authorization: Bearer
$CATALOG_DEBUG_TOKEN`` (when that is set): the HTTP server binds every address for probes and metrics,
and the ring holds what the controller saw (redacted, but still the cluster's configuration).
"""

from __future__ import annotations

import io
import logging
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from adapters.identity import version
from adapters.telemetry import Telemetry
from app.catalog_size import CatalogSize
from app.health import HealthReport
from app.http import ProbeServer, Request, debug_allowed
from app.kube_client import KubeClient, load_api_client
from app.leader import LeaderElector
from app.library import ModelCatalog
from app.settings import ServiceSettings
from catalog_core.events import SourceKind
from catalog_core.kinds import ROLLOUT_SOURCES
from catalog_core.registry import CATALOG_KINDS

if TYPE_CHECKING:
    from adapters.eventlog.recorder import Recorder

log = logging.getLogger("model_catalog.service")

LIVENESS_STALL_SECONDS = 30.0
METRICS_MIN_INTERVAL_SECONDS = 1.0
_DEBUG_FORBIDDEN = (
    b"forbidden: ask from the pod itself (loopback) or with Authorization: Bearer <CATALOG_DEBUG_TOKEN>\n"
)
READY_SOURCES = (*CATALOG_KINDS, *ROLLOUT_SOURCES, SourceKind.AGENT_TEMPLATES)


# The elector sends one request at a time; a pool of its own means no watch or write can delay it.
LEASE_CONNECTIONS = 2


class Service:
    """One controller replica. ``run()`` returns after a graceful shutdown."""

    def __init__(
        self,
        settings: ServiceSettings,
        api_client: KubeClient,
        lease_client: KubeClient | None = None,
    ) -> None:
        self.settings = settings
        self.telemetry = Telemetry(otlp_endpoint=settings.otlp_endpoint, service_version=version())
        self.recorder = _recorder(settings)
        self.catalog = ModelCatalog(
            settings.catalog,
            api_client,
            litellm_master_key=settings.litellm_master_key.value,
            options=settings.catalog_options(),
            leading=not settings.leader_election,
            telemetry=self.telemetry,
            recorder=self.recorder,
        )
        self.loop = self.catalog.loop
        self.elector: LeaderElector | None = None
        # What stops or limits publishing, on the Lease for model-catalog status (contracts/controller_status)
        self.health = HealthReport(lambda: self.loop.state, self.catalog.kube.stats.stale)
        lease = settings.lease()
        if lease is not None:
            # Its own client (connection pool): no number of watches or writes can starve the renewal.
            self.elector = LeaderElector(
                lease_client or api_client,
                lease,
                self.catalog.set_leading,
                annotations=self.health.annotations,
            )
            if self.catalog.kube.liveness is not None:
                # The watches' liveness signal watches this Lease: the elector reads it from there.
                self.catalog.kube.liveness.observe(self.elector.observe)
        self.http = ProbeServer(
            settings.http_host,
            settings.http_port,
            {
                "/healthz": self._healthz,
                "/readyz": self._readyz,
                "/metrics": self._metrics,
                "/debug/eventlog": self._ring,
            },
        )
        self.telemetry.bind_state()
        self.telemetry.bind_kube(self.catalog.kube.stats)
        self.telemetry.set_gauge("model_catalog_queue_depth", lambda: [(float(self.loop.queue.depth), {})])
        self.telemetry.set_gauge("model_catalog_leader", lambda: [(1.0 if self.leading else 0.0, {})])
        # read as /metrics renders, on the event loop's thread
        self.telemetry.set_gauge("model_catalog_tasks", lambda: [(float(len(anyio.get_running_tasks())), {})])
        size = CatalogSize(lambda: self.loop.state)
        self.telemetry.set_gauge("model_catalog_items", size.items)
        self.telemetry.set_gauge("model_catalog_catalog_bytes", size.size)
        self.telemetry.set_gauge("model_catalog_catalog_limit_bytes", size.limit)
        self.telemetry.set_gauge("model_catalog_catalog_too_large", size.too_large)
        if self.recorder is not None:
            self.telemetry.bind_event_log(self.recorder.stats)
        self._metrics_cache: tuple[float, bytes | None] = (0.0, None)
        self.stopping = anyio.Event()

    @property
    def leading(self) -> bool:
        return self.loop.state.control.leading

    # --- probes
    async def _healthz(self, request: Request) -> tuple[int, str, bytes]:
        busy = self.loop.busy_since
        if busy is not None and time.monotonic() - busy > LIVENESS_STALL_SECONDS:
            return 503, "text/plain", b"the control loop is stuck\n"
        return 200, "text/plain", b"ok\n"

    async def _readyz(self, request: Request) -> tuple[int, str, bytes]:
        state = self.loop.state
        missing = [k.value for k in READY_SOURCES if not state.source(k).known]
        if not state.litellm.status.observed_once:
            missing.append("litellm")
        if missing:
            return 503, "text/plain", ("not ready: waiting for " + ", ".join(missing) + "\n").encode()
        stale = self._stale_watches()
        if stale:
            # What the controller knows of those sources may be old: say which, and since when.
            return 503, "text/plain", ("not ready: stale (reconnecting): " + "; ".join(stale) + "\n").encode()
        return 200, "text/plain", f"ok ({'leader' if self.leading else 'standby'})\n".encode()

    def _stale_watches(self) -> list[str]:
        now = time.time()
        return [
            f"{watch} since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(since))} ({now - since:.1f} s)"
            for watch, since in sorted(self.catalog.kube.stats.stale.items())
        ]

    async def _metrics(self, request: Request) -> tuple[int, str, bytes]:
        # Rendered at most once a second: anyone on the pod network may ask, as often as they like, and
        # each render is a few milliseconds of the loop's thread (Prometheus asks every 30 s).
        now = time.monotonic()
        rendered_at, text = self._metrics_cache
        if text is None or now - rendered_at >= METRICS_MIN_INTERVAL_SECONDS:
            text = self.telemetry.metrics_text()
            self._metrics_cache = (now, text)
        return 200, "text/plain; version=0.0.4; charset=utf-8", text

    async def _ring(self, request: Request) -> tuple[int, str, bytes]:
        token = self.settings.debug_token.value if self.settings.debug_token is not None else None
        if not debug_allowed(request, token):
            return 403, "text/plain", _DEBUG_FORBIDDEN
        if self.recorder is None:
            return 404, "text/plain", b"the event log is off (CATALOG_EVENT_LOG_PATH)\n"
        buffer = io.BytesIO()
        self.recorder.dump_ring(buffer)
        return 200, "application/x-ndjson", buffer.getvalue()

    # --- run
    async def run(self, *, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            async with anyio.create_task_group() as outer:
                port = await outer.start(self.http.run)
                if self.recorder is not None:
                    outer.start_soon(self.recorder.run)
                outer.start_soon(self._signals)
                async with anyio.create_task_group() as inputs:
                    await inputs.start(self.catalog.run)
                    if self.elector is not None:
                        inputs.start_soon(self.elector.run)
                    task_status.started(port)
                    await self.stopping.wait()
                    log.info("shutting down", extra={"grace_seconds": self.settings.shutdown_grace_seconds})
                    await self._drain()
                    inputs.cancel_scope.cancel()  # the elector releases the Lease on its way out
                outer.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                if self.recorder is not None:
                    await self.recorder.aclose()
                self.telemetry.shutdown()

    async def _drain(self) -> None:
        """Let queued and running writes finish within the grace period; then they are abandoned."""
        with anyio.move_on_after(self.settings.shutdown_grace_seconds):
            while self.loop.queue.depth:
                await anyio.sleep(0.05)
        if self.loop.queue.depth:
            log.warning("abandoning writes still queued at shutdown", extra={"queued": self.loop.queue.depth})

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGUSR1) as signals:
            async for received in signals:
                if received == signal.SIGUSR1:
                    await self._dump_ring_to_file()
                    continue
                log.info("signal received", extra={"signal": signal.Signals(received).name})
                self.stopping.set()

    async def _dump_ring_to_file(self) -> None:
        if self.recorder is None:
            log.warning("SIGUSR1: the event log is off, nothing to dump")
            return
        base = Path(self.settings.event_log_path).parent if self.settings.event_log_path else Path("/tmp")
        target = base / f"ring-{time.strftime('%Y%m%dT%H%M%S')}.jsonl"
        try:
            records = await self.recorder.dump_ring_to(target)
            log.info("event-log ring dumped", extra={"path": str(target), "records": records})
        except OSError as exc:
            log.error("event-log ring dump failed", extra={"path": str(target), "error": type(exc).__name__})


def _recorder(settings: ServiceSettings) -> Recorder | None:
    event_log = settings.event_log()
    if event_log is None:
        return None
    # Imported only when the event log is on (off by default): its wire format is a few MiB of converters.
    from adapters.eventlog.recorder import Recorder

    return Recorder(event_log, settings.catalog)


async def serve(
    settings: ServiceSettings, on_started: Callable[[int], Awaitable[None]] | None = None
) -> None:
    # Nested, so each client is closed on the way out even when the other could not be made.
    async with await load_api_client(settings.kubeconfig) as api_client:
        lease_client = await load_api_client(settings.kubeconfig, connections=LEASE_CONNECTIONS)
        async with lease_client:
            service = Service(settings, api_client, lease_client)
            async with anyio.create_task_group() as tg:
                port = await tg.start(service.run)
                if on_started is not None:
                    await on_started(port)
