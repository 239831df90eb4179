"""The catalog for synchronous hosts: ``ModelCatalog`` on a thread of its own, behind anyio's blocking portal.

A host with no event loop (the Magic Stick Operator: ``while True: reconcile(); time.sleep(...)``)
starts it, feeds the sources it already reads and reads the view; every call is thread-safe and
returns within ``call_timeout``::

    with BlockingModelCatalog(config, kubeconfig=path,
                              host_sources={SourceKind.MODEL_ACTIVATIONS}) as catalog:
        while True:
            try:
                catalog.listed(SourceKind.MODEL_ACTIVATIONS, my_activations())
            except OSError:  # the host's own read failed: keep what was listed last
                catalog.read_failed(SourceKind.MODEL_ACTIVATIONS, "list failed")
            view = catalog.view()
            if view.ready:  # before the first sync a view says nothing about any model
                ...
            time.sleep(30)

The portal's thread runs one event loop holding the catalog, its own Kubernetes API client and, only
when asked, a Lease elector. ``close()`` (or leaving the ``with``) stops them and joins the thread. If
the catalog fails on its thread, the host's next call raises :class:`CatalogFailedError` with that
exception as its ``__cause__``; the catalog is then stopped, and ``restart()`` starts a new one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from adapters.kube.client import KubeClient, access_from_configuration
from adapters.kube.master_key import DEFAULT_TIMEOUT as MASTER_KEY_TIMEOUT
from app.http import Handler, ProbeServer, Request
from app.kube_client import ClusterAccess, load_access
from app.leader import LeaderElector, LeaseConfig
from app.library import CatalogView, ModelCatalog, read_litellm_master_key
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from catalog_core.plan import catalog_inputs_known

T = TypeVar("T")

log = logging.getLogger("model_catalog.blocking")

THREAD_NAME = "model-catalog"
LEASE_CONNECTIONS = 2  # the elector sends one request at a time, on a pool of its own (as in `run`)
LIVENESS_STALL_SECONDS = 30.0  # as `model-catalog run`'s /healthz


class CatalogError(RuntimeError):
    """The catalog cannot take this call: it failed (``CatalogFailedError``) or was closed."""


class CatalogFailedError(CatalogError):
    """The catalog stopped on its thread; ``__cause__`` is the exception it stopped on."""


class CatalogClosedError(CatalogError):
    """The call came before ``start()`` or after ``close()``."""


class CallTimeoutError(TimeoutError):
    """The catalog did not take the call within ``call_timeout``; nothing was delivered. Feeding is
    level-triggered, so the host's next pass (a full ``listed``) makes up for it."""


class BlockingModelCatalog(AbstractContextManager["BlockingModelCatalog"]):
    def __init__(
        self,
        config: CatalogConfig,
        *,
        litellm_master_key: str | None = None,
        kubeconfig: str | None = None,
        kube_configuration: Any = None,
        host_sources: Iterable[SourceKind] = (),
        call_timeout: float = 5.0,
        lease: LeaseConfig | None = None,
        meter_provider: Any = None,
        shutdown_grace_seconds: float = 5.0,
        probes: tuple[str, int] | None = None,
        master_key_timeout: float = MASTER_KEY_TIMEOUT,
        **catalog_options: Any,
    ) -> None:
        """``litellm_master_key``: without it, ``start()`` reads it from the Secret LiteLLM uses
        (``config.litellm_master_key_secret``, key ``LITELLM_MASTER_KEY``, in LiteLLM's namespace
        ``config.namespace``) within ``master_key_timeout`` seconds, with the catalog's own client, and
        raises ``MasterKeyError`` (what to fix, never the value) if it cannot.
        ``kube_configuration`` (a kubernetes-asyncio ``Configuration``) wins over ``kubeconfig`` (a
        file); with neither, the in-cluster ServiceAccount. ``lease``: take this Lease and write only
        while holding it (default: no Lease, this host is the only writer). ``meter_provider``: the
        host's OpenTelemetry provider for the catalog's metrics (default: none). ``probes``: serve
        ``/healthz`` and ``/readyz`` on this (host, port) (default: no server; port 0 picks one, see
        ``probe_port``). Other keywords go to :class:`~app.library.ModelCatalog` as they are."""
        self._config = config
        self._key = litellm_master_key
        self._kubeconfig = kubeconfig
        self._kube_configuration = kube_configuration
        self._host_sources = frozenset(host_sources)
        self._call_timeout = call_timeout
        self._lease = lease
        self._meter_provider = meter_provider
        self._grace = shutdown_grace_seconds
        self._options = catalog_options
        self._probes = probes
        self._key_timeout = master_key_timeout
        self._reset()

    def _reset(self) -> None:
        self.probe_port: int | None = None
        self._portal_cm: AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._run_future: concurrent.futures.Future[None] | None = None
        self._catalog: ModelCatalog | None = None
        self._stop: anyio.Event | None = None
        self._closed = False
        self._reported = False  # a failure was raised to the host once

    # --- lifecycle
    def start(self) -> Self:
        """Start the catalog's thread; returns once the catalog runs (its sources are being read)."""
        if self._portal is not None or self._closed:
            raise CatalogClosedError("start() once per BlockingModelCatalog")
        portal_cm = start_blocking_portal("asyncio", name=THREAD_NAME)
        portal = portal_cm.__enter__()
        try:
            self._run_future, _ = portal.start_task(self._run, name="model-catalog")
        except BaseException as exc:
            portal_cm.__exit__(type(exc), exc, exc.__traceback__)
            self._closed = True
            raise
        self._portal_cm, self._portal = portal_cm, portal
        return self

    def restart(self) -> Self:
        """Stop the catalog, whatever its state (running, failed, closed, or a ``start()`` that raised),
        and start a new one with the same arguments: what a host does after ``CatalogFailedError``. The
        new catalog starts from nothing, like a restarted process: its view is not ``ready`` until every
        source has been read again (a host source: until the host's next ``listed``), and until then it
        plans nothing, so no route is withdrawn meanwhile. Raises what ``start()`` raises. Not to be
        called while another thread uses the catalog."""
        try:
            self.close()
        except CatalogFailedError as failed:  # not reported to the host yet: say it here, it is why
            log.warning("restarting the catalog, which had stopped: %s", failed)
        self._reset()
        return self.start()

    def close(self) -> None:
        """Stop the catalog: writes already running get ``shutdown_grace_seconds``, the Lease (if any)
        is released, the API clients are closed and the thread is joined. Idempotent. Raises
        :class:`CatalogFailedError` if the catalog had failed and no earlier call has said so."""
        portal_cm, portal, future = self._portal_cm, self._portal, self._run_future
        self._closed = True
        if portal_cm is None or portal is None or future is None:
            return
        self._portal_cm = self._portal = None
        try:
            if not future.done() and self._stop is not None:
                portal.start_task_soon(self._stop.set)
                try:
                    future.result(self._grace + self._call_timeout)
                except concurrent.futures.TimeoutError:
                    future.cancel()  # cancels the task's scope; the clients still close (shielded)
                except BaseException:  # reported below, from the future
                    pass
        finally:
            portal_cm.__exit__(None, None, None)  # stops the portal and joins its thread
            self._join_workers()
        self._raise_if_failed(future, once=True)

    def _join_workers(self) -> None:
        """Join the worker threads of the catalog's loop (anyio's, for the redaction of secret-holding
        objects): told to stop when the loop ended, they are gone when ``close()`` returns, as the host
        expects of every thread the catalog made."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        for thread in threading.enumerate():
            if thread is not threading.current_thread() and getattr(thread, "loop", None) is loop:
                thread.join(self._call_timeout)

    def __enter__(self) -> Self:
        return self.start() if self._portal is None else self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.close()
        except CatalogFailedError:
            if exc is None:
                raise  # else the host's own exception is the one to see

    # --- feeding what the host already reads (thread-safe; each returns within call_timeout)
    def listed(self, source: SourceKind, objects: Iterable[Mapping[str, Any]]) -> None:
        """The host's full current content of ``source``: anything not in it is gone."""
        items = tuple(objects)
        self._call(lambda catalog: catalog.listed(source, items))

    def upserted(self, source: SourceKind, obj: Mapping[str, Any]) -> None:
        self._call(lambda catalog: catalog.upserted(source, obj))

    def deleted(self, source: SourceKind, obj: Mapping[str, Any]) -> None:
        self._call(lambda catalog: catalog.deleted(source, obj))

    def read_failed(self, source: SourceKind, detail: str = "", *, forbidden: bool = False) -> None:
        """The host could not read ``source`` this pass: the content last ``listed`` is kept, with every
        route from it, and the source shows as failing (``forbidden``: denied) until the next ``listed``.
        Say this, never ``listed(source, [])``, when the host's own read fails: an empty listing means
        the source is empty, and withdraws its routes. ``detail``: a short reason, no secret in it."""
        self._call(lambda catalog: catalog.read_failed(source, detail, forbidden=forbidden))

    def set_leading(self, leading: bool) -> None:
        """For a host that runs its own leader election (without ``lease``): only the leader writes."""
        self._call(lambda catalog: catalog.set_leading(leading))

    # --- reading
    def wait_ready(self, timeout: float) -> bool:
        """True once every source has been read and LiteLLM observed (what is published is decided);
        False if that has not happened within ``timeout`` seconds. A source in ``host_sources`` is read
        once the host has ``listed`` it."""
        catalog, portal, future = self._running()
        if catalog.ready:  # answered on this thread: wait_ready(0) is a probe
            return True
        ready = _submit(portal, catalog.wait_ready)
        done, _ = concurrent.futures.wait(
            [ready, future], timeout, return_when=concurrent.futures.FIRST_COMPLETED
        )
        if ready not in done:
            ready.cancel()
        self._raise_if_failed(future)
        return ready in done

    def view(self) -> CatalogView:
        """What is published now. Computed on the calling thread from the catalog's state as of its
        last tick (an immutable value), so it never waits for the catalog's thread. Until ``ready`` (every
        source read once, LiteLLM observed) it is empty and says nothing about any model."""
        catalog, _, _ = self._running()
        return catalog.view()

    # --- the catalog's thread
    async def _run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self._loop = asyncio.get_running_loop()  # the portal runs the asyncio backend
        access = await self._load_access()
        async with KubeClient(access) as api_client:
            key = self._key
            if key is None:
                key = await read_litellm_master_key(api_client, self._config, timeout=self._key_timeout)
            catalog = ModelCatalog(
                self._config,
                api_client,
                litellm_master_key=key,
                host_sources=self._host_sources,
                leading=self._lease is None,
                meter_provider=self._meter_provider,
                **self._options,
            )
            self._stop = anyio.Event()
            async with anyio.create_task_group() as tg:
                await tg.start(catalog.run)
                if self._lease is not None:
                    tg.start_soon(self._elect, access, catalog, self._lease)
                if self._probes is not None:
                    server = ProbeServer(*self._probes, probe_routes(catalog))
                    self.probe_port = await tg.start(server.run)
                self._catalog = catalog
                task_status.started()
                await self._stop.wait()
                with anyio.move_on_after(self._grace):  # let running writes finish
                    while catalog.loop.queue.depth:
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()

    async def _load_access(self) -> ClusterAccess:
        if self._kube_configuration is not None:
            return access_from_configuration(self._kube_configuration)
        if self._kubeconfig and not Path(self._kubeconfig).is_file():
            raise FileNotFoundError(f"no kubeconfig file at {self._kubeconfig}")
        return await load_access(self._kubeconfig or "")

    @staticmethod
    async def _elect(access: ClusterAccess, catalog: ModelCatalog, lease: LeaseConfig) -> None:
        async with KubeClient(access, connections=LEASE_CONNECTIONS) as lease_client:
            await LeaderElector(lease_client, lease, catalog.set_leading).run()

    # --- plumbing
    def _running(self) -> tuple[ModelCatalog, BlockingPortal, concurrent.futures.Future[None]]:
        catalog, portal, future = self._catalog, self._portal, self._run_future
        if catalog is None or portal is None or future is None:
            raise CatalogClosedError(
                "the catalog is not running: start() it (or use `with`); after close() it is gone"
            )
        self._raise_if_failed(future)
        return catalog, portal, future

    def _call(self, call: Callable[[ModelCatalog], Awaitable[T]]) -> T:
        catalog, portal, future = self._running()

        async def on_the_loop() -> T:
            return await call(catalog)

        answer = _submit(portal, on_the_loop)
        try:
            return answer.result(self._call_timeout)
        except concurrent.futures.TimeoutError:
            answer.cancel()
            self._raise_if_failed(future)
            raise CallTimeoutError(f"the catalog took no call within {self._call_timeout} s") from None
        except concurrent.futures.CancelledError:
            self._raise_if_failed(future)  # cancelled because the catalog stopped under it
            raise

    def _raise_if_failed(self, future: concurrent.futures.Future[None], *, once: bool = False) -> None:
        if not future.done() or future.cancelled():
            return
        error = future.exception()
        if error is None or (once and self._reported):
            return
        self._reported = True
        cause = _single(error)
        raise CatalogFailedError(
            f"the catalog stopped on its thread: {type(cause).__name__}: {cause}"[:500]
        ) from cause


def _submit(portal: BlockingPortal, func: Callable[[], Awaitable[T]]) -> concurrent.futures.Future[T]:
    try:
        return portal.start_task_soon(func)
    except RuntimeError as exc:  # the portal stopped between this thread's check and the call
        raise CatalogClosedError("the catalog was closed") from exc


def probe_routes(catalog: ModelCatalog) -> dict[str, Handler]:
    """``/healthz``: the control loop is not stuck in a step. ``/readyz``: every source read once and
    LiteLLM observed, no watch stale (the rules of ``model-catalog run``'s probes, for what the library
    runs: no Lease, no event log)."""

    async def healthz(request: Request) -> tuple[int, str, bytes]:
        busy = catalog.loop.busy_since
        if busy is not None and time.monotonic() - busy > LIVENESS_STALL_SECONDS:
            return 503, "text/plain", b"the control loop is stuck\n"
        return 200, "text/plain", b"ok\n"

    async def readyz(request: Request) -> tuple[int, str, bytes]:
        state = catalog.state
        if not catalog_inputs_known(state):
            waiting = sorted(k.value for k in state.waits_for if not state.source(k).known)
            if not state.litellm.status.observed_once:
                waiting.append("litellm")
            return 503, "text/plain", ("not ready: waiting for " + ", ".join(waiting) + "\n").encode()
        stale = sorted(catalog.kube.stats.stale)
        if stale:
            return 503, "text/plain", ("not ready: stale (reconnecting): " + ", ".join(stale) + "\n").encode()
        return 200, "text/plain", f"ok ({'leader' if state.control.leading else 'standby'})\n".encode()

    return {"/healthz": healthz, "/readyz": readyz}


def _single(error: BaseException) -> BaseException:
    """The one exception inside nested single-member groups (task groups wrap what a task raised)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


__all__ = [
    "BlockingModelCatalog",
    "CallTimeoutError",
    "CatalogClosedError",
    "CatalogError",
    "CatalogFailedError",
]
