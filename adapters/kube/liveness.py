"""One liveness signal for every watch: a watch of one Lease (``KubeSettings.liveness``).

An HTTP/1.1 watch cannot be pinged, and a watch that hears nothing may be idle or dead: half-open (a NAT
entry dropped, a node suspended) or frozen by something in the path. A deadline per watch notices that,
at the price of one request per watch per deadline: with 5 s deadlines, ~13 watches cost the API server
~160 requests a minute at idle. The watches share one path to the API server, and what silences it
silences the connections open at the time, so one watch that must hear something regularly speaks for
all of them:

- heartbeat (``Liveness.renewed_every``): the leader renews its Lease every few seconds and the renewals
  arrive through this watch; silence for ``Liveness.stale_after`` seconds is the verdict. It costs
  nothing the Lease does not already cost.
- probe (nobody renews the Lease): the watch asks the API server to end it after ``probe_seconds``; one
  that has not ended by then + grace, or fails, is the verdict. ~12 requests a minute.

On a verdict every watch that registered its connection (``guarded``) gives it up and resumes from its
resourceVersion over a new one; the Lease's watch too, so in heartbeat mode the next verdict, if the path
is still dark, comes ``stale_after`` later and the first one after the path heals brings every watch
back. A probe's own connection is not restarted with the others, so the first probe that ends on time
after a verdict also restarts the watches opened before it (they were opened while the path was dark).

TCP keepalive, set on every watch connection, notices a peer or route that vanished on its own.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator, Mapping
from contextlib import aclosing, contextmanager
from typing import Any

import anyio

from adapters.backoff import Backoff
from adapters.kube.api import Keepalive, KubeApi, KubeError
from adapters.kube.settings import (
    LIVENESS_VERDICTS_TOTAL,
    WATCH_REQUESTS_TOTAL,
    KubeSettings,
    KubeStats,
    Liveness,
)

log = logging.getLogger("model_catalog.kube.liveness")

Observer = Callable[[Mapping[str, Any]], None]


def keepalive_of(settings: KubeSettings) -> Keepalive:
    return Keepalive(
        settings.keepalive_idle_seconds, settings.keepalive_interval_seconds, settings.keepalive_probes
    )


def watch_timeout(settings: KubeSettings, rng: random.Random) -> int:
    """One watch request's server-side timeout: ``watch_timeout_seconds``, stretched by up to
    ``watch_timeout_jitter`` of itself, so renewals spread out."""
    base = settings.watch_timeout_seconds
    return int(base * (1.0 + rng.uniform(0.0, max(0.0, settings.watch_timeout_jitter))))


class Guards:
    """The streaming connections of the watches, each with the time it was opened: what a verdict ends."""

    def __init__(self) -> None:
        self._open: dict[anyio.CancelScope, float] = {}

    @contextmanager
    def guarded(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope for one watch request, registered until it ends: enter it around the request
        (``with guards.guarded() as guard, guard:``); ``guard.cancelled_caught`` then says a verdict
        ended it."""
        scope = anyio.CancelScope()
        self._open[scope] = anyio.current_time()
        try:
            yield scope
        finally:
            self._open.pop(scope, None)

    def end(self, opened_before: float = float("inf")) -> int:
        """End every registered connection opened before ``opened_before``; how many."""
        ended = [scope for scope, opened in self._open.items() if opened < opened_before]
        for scope in ended:
            scope.cancel()
        return len(ended)

    def __len__(self) -> int:
        return len(self._open)


JUDGE_GRACE_SECONDS = 0.2

# The ``source`` label of the Lease watch's requests in ``kube_watch_requests_total`` (part of the idle cost).
LIVENESS_SOURCE = "liveness"

# The watches of a process that has no liveness signal: registered, never ended by a verdict.
UNGUARDED = Guards()


class WatchLiveness:
    """The Lease watch that vouches for every watch registered in ``guards``."""

    def __init__(
        self,
        api: KubeApi,
        liveness: Liveness,
        *,
        settings: KubeSettings | None = None,
        stats: KubeStats | None = None,
    ) -> None:
        self.api = api
        self.spec = liveness
        self.settings = settings or KubeSettings()
        self.stats = stats or KubeStats()
        self.guards = Guards()
        self.name = "kube/liveness"
        self._observers: list[Observer] = []
        self._heard: float | None = None  # when the Lease's watch last delivered (None: not yet)
        self._dark = False  # a verdict was given and the path has not been seen working since
        self._rng = random.Random()
        self.verdicts = 0
        for reason in ("silent", "probe"):
            self.stats.declare(LIVENESS_VERDICTS_TOTAL, reason=reason)
        self.stats.declare(WATCH_REQUESTS_TOTAL, source=LIVENESS_SOURCE)

    def observe(self, observer: Observer) -> None:
        """``observer`` gets every Lease object the watch delivers (the leader elector reads it)."""
        self._observers.append(observer)

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.spec.namespace}/leases"

    @property
    def query(self) -> list[tuple[str, str]]:
        # No resourceVersion: each watch starts with the Lease as it is now (one ADDED event), so it needs
        # no list and no 410 handling; the renewals that follow are the signal.
        return [("fieldSelector", f"metadata.name={self.spec.name}")]

    async def run(self) -> None:
        """Until cancelled."""
        if self.spec.renewed_every is None:
            await self._probe()
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._judge, self.spec.stale_after)
            await self._heartbeat()

    # --- heartbeat
    async def _heartbeat(self) -> None:
        s = self.settings
        backoff = Backoff(s.retry_base_seconds, s.retry_cap_seconds)
        forbidden = Backoff(s.retry_base_seconds, s.forbidden_recheck_seconds)
        while True:
            self.stats.inc(WATCH_REQUESTS_TOTAL, source=LIVENESS_SOURCE)
            try:
                with self.guards.guarded() as guard, guard:
                    async with (
                        self.api.watch(
                            self.path,
                            self.query,
                            watch_timeout(s, self._rng),
                            s.timeout_grace_seconds,
                            response_timeout=s.watch_response_seconds,
                            keepalive=keepalive_of(s),
                        ) as events,
                        aclosing(events),
                    ):
                        async for event in events:
                            self._deliver(event)
                            backoff.reset()
                            forbidden.reset()
            except KubeError as err:
                await anyio.sleep(self._failed(err, backoff, forbidden))

    async def _judge(self, stale_after: float) -> None:
        while True:
            heard = self._heard
            now = anyio.current_time()
            if heard is None:  # nothing heard yet (the Lease may not exist yet): nothing to expect
                await anyio.sleep(stale_after)
                continue
            if now - heard < stale_after:
                await anyio.sleep(heard + stale_after - now)
                continue
            # A loop that was busy for that long may hold the renewal already received but not read yet:
            # let the watch read what arrived before judging.
            await anyio.sleep(JUDGE_GRACE_SECONDS)
            if self._heard != heard:
                continue
            now = anyio.current_time()
            self._verdict(
                "silent",
                f"Lease {self.spec.namespace}/{self.spec.name} not renewed for {now - heard:.1f} s "
                f"(renewed every {self.spec.renewed_every:g} s)",
            )
            self._heard = now  # the connections opened now are judged from now

    # --- probe
    async def _probe(self) -> None:
        s = self.settings
        backoff = Backoff(s.retry_base_seconds, s.retry_cap_seconds)
        forbidden = Backoff(s.retry_base_seconds, s.forbidden_recheck_seconds)
        while True:
            opened = anyio.current_time()
            self.stats.inc(WATCH_REQUESTS_TOTAL, source=LIVENESS_SOURCE)
            try:
                async with (
                    self.api.watch(
                        self.path, self.query, self.spec.probe_seconds, s.timeout_grace_seconds
                    ) as events,
                    aclosing(events),
                ):
                    async for event in events:
                        self._deliver(event)
            except KubeError as err:
                if err.transient:
                    self._verdict("probe", f"the probe watch of Lease {self._lease} failed ({err})")
                await anyio.sleep(self._failed(err, backoff, forbidden))
                continue
            # Ended by the API server, as asked: the path delivered for the probe's whole life.
            backoff.reset()
            forbidden.reset()
            if self._dark:
                self._dark = False
                restarted = self.guards.end(opened_before=opened)
                log.info("the probe watch ends on time again; %d watches opened before it resume", restarted)
            if anyio.current_time() - opened < 1.0:  # ended at once (a restarting API server): no spin
                await anyio.sleep(backoff.next())

    # --- shared
    @property
    def _lease(self) -> str:
        return f"{self.spec.namespace}/{self.spec.name}"

    def _deliver(self, event: Mapping[str, Any]) -> None:
        if event.get("type") == "ERROR":
            obj = event.get("object")
            raise KubeError.from_status(obj if isinstance(obj, Mapping) else {})
        self._heard = anyio.current_time()
        if self._dark and self.spec.renewed_every is not None:
            self._dark = False
            log.info("Lease %s heard again; the watches resumed", self._lease)
        obj = event.get("object")
        if isinstance(obj, Mapping) and event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
            for observer in self._observers:
                observer(obj)

    def _verdict(self, reason: str, detail: str) -> None:
        self.verdicts += 1
        self.stats.inc(LIVENESS_VERDICTS_TOTAL, reason=reason)
        ended = self.guards.end()
        # One warning per incident: during an outage the verdicts repeat until the path works again.
        level = logging.DEBUG if self._dark else logging.WARNING
        self._dark = True
        log.log(level, "%s: presuming the API server connections dead; %d watches resume", detail, ended)

    def _failed(self, err: KubeError, backoff: Backoff, forbidden: Backoff) -> float:
        """The delay before the Lease's watch is opened again after ``err``."""
        if err.status == 403:
            log.warning(
                "forbidden: watch leases %s (no liveness signal until allowed: grant list and watch on "
                "it, docs/rbac.md)",
                self._lease,
            )
            return forbidden.next()
        log.debug("%s: the Lease's watch failed (%s)", self.name, err)
        return max(backoff.next(), err.retry_after)
