"""Leader election with a coordination.k8s.io/v1 Lease (client-go's algorithm, simplified).

The holder renews every retry period; a candidate takes the Lease only when
the holder has not renewed it for a whole lease duration (the one the holder
wrote on the Lease) *as observed by the candidate's own clock* (never by
comparing two machines' clocks). A leader that
cannot renew within the renew deadline stops leading at once. On shutdown the
leader releases the Lease so a standby takes over without waiting.

What it costs the API server at idle: the leader renews with one update, from the Lease its last write
returned (a read only after a conflict); a replica that sees the Lease through a watch (``observe``, fed
by the watches' liveness signal, which watches this Lease anyway) reads it only once the holder looks
expired by that view, instead of every retry period.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import quote

import anyio
import attrs

from adapters.kube.api import KubeApi, KubeError
from app.lease_timing import LEASE_DURATION_SECONDS, LEASE_RENEW_DEADLINE_SECONDS, LEASE_RETRY_PERIOD_SECONDS

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"

log = logging.getLogger("model_catalog.leader")

OnChange = Callable[[bool], Awaitable[None]]
Annotations = Callable[[], Mapping[str, str]]


@attrs.frozen
class LeaseConfig:
    name: str
    namespace: str
    identity: str
    duration: float = LEASE_DURATION_SECONDS
    renew_deadline: float = LEASE_RENEW_DEADLINE_SECONDS
    retry_period: float = LEASE_RETRY_PERIOD_SECONDS
    request_timeout: float = 5.0


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _micro_time_text(value: dt.datetime) -> str:
    """A ``MicroTime`` as the API writes one: RFC 3339 in UTC with microseconds."""
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _spec(lease: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = lease.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _holder(lease: Mapping[str, Any]) -> str:
    return str(_spec(lease).get("holderIdentity") or "")


def _micro_time(value: Any) -> dt.datetime | None:
    """A Lease's ``renewTime`` as the API sends it (RFC 3339, microseconds)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


class LeaderElector:
    def __init__(
        self,
        api_client: Any,
        config: LeaseConfig,
        on_change: OnChange,
        clock: Callable[[], float] = time.monotonic,
        annotations: Annotations | None = None,
    ) -> None:
        # ``clock``: this replica's own monotonic seconds, the only clock expiry is judged by (a test's fake)
        self._clock = clock
        # What the holder writes on the Lease with each renewal (the health report model-catalog status
        # reads); other annotations on the Lease are kept.
        self._annotations = annotations
        # ``api_client``: a KubeClient of its own (so no number of watches or writes can starve the
        # renewal), or a host's kubernetes-asyncio ApiClient
        self._api = KubeApi(api_client, request_timeout=config.request_timeout)
        self._collection = LEASES.format(namespace=quote(config.namespace, safe=""))
        self._path = f"{self._collection}/{quote(config.name, safe='')}"
        self._config = config
        self._on_change = on_change
        self.leading = False
        self._observed: tuple[str, dt.datetime | None] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._observed_duration: float | None = None  # the holder's leaseDurationSeconds last seen
        self._held: dict[str, Any] | None = None  # the Lease as our last successful write returned it
        self._watched = False  # a watch of the Lease feeds ``observe``

    def observe(self, lease: Mapping[str, Any]) -> None:
        """A Lease object as a watch of it delivered it (plain API dict): what a standby judges expiry by,
        so it reads the Lease only when the holder looks expired."""
        meta = lease.get("metadata")
        if not isinstance(meta, Mapping) or meta.get("name") != self._config.name:
            return
        spec = lease.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        self._watched = True
        self._saw(
            str(spec.get("holderIdentity") or ""),
            _micro_time(spec.get("renewTime")),
            spec.get("leaseDurationSeconds"),
        )

    def _saw(self, holder: str, renewed: dt.datetime | None, duration: Any) -> None:
        record = (holder, renewed)
        # As client-go's candidates do, the holder's own word on how long its Lease lasts
        # (``leaseDurationSeconds``) is what a candidate waits for; this replica's when it says none.
        valid = isinstance(duration, int) and not isinstance(duration, bool) and duration > 0
        self._observed_duration = float(duration) if valid else None
        if record != self._observed:
            self._observed, self._observed_at = record, self._clock()

    async def run(self) -> None:
        """Run until cancelled; releases the Lease on the way out when leading."""
        try:
            while True:
                if self.leading:
                    await self._renew_or_step_down()
                else:
                    await self._try_acquire()
                await anyio.sleep(self._config.retry_period)
        finally:
            if self.leading:
                with anyio.CancelScope(shield=True), anyio.move_on_after(self._config.request_timeout):
                    await self._release()
            with anyio.CancelScope(shield=True):
                await self._api.aclose()

    async def _set(self, leading: bool) -> None:
        if leading != self.leading:
            self.leading = leading
            log.info(
                "leadership %s", "acquired" if leading else "lost", extra={"identity": self._config.identity}
            )
            await self._on_change(leading)

    async def _read(self) -> dict[str, Any] | None:
        try:
            return await self._api.request("GET", self._path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def _create(self, lease: Mapping[str, Any]) -> dict[str, Any]:
        return await self._api.request("POST", self._collection, body=lease)

    async def _replace(self, lease: Mapping[str, Any]) -> dict[str, Any]:
        return await self._api.request("PUT", self._path, body=lease)

    def _body(self, lease: Mapping[str, Any] | None, acquire: bool) -> dict[str, Any]:
        now = _micro_time_text(_now())
        old = _spec(lease) if lease is not None else {}
        spec: dict[str, Any] = {
            "holderIdentity": self._config.identity,
            "leaseDurationSeconds": max(1, round(self._config.duration)),
            "renewTime": now,
            "acquireTime": now if acquire or lease is None else old.get("acquireTime"),
            "leaseTransitions": (int(old.get("leaseTransitions") or 0) + (1 if acquire else 0))
            if lease is not None
            else 0,
        }
        meta: dict[str, Any] = {"name": self._config.name, "namespace": self._config.namespace}
        annotations: dict[str, str] = {}
        if lease is not None:
            old_meta = lease.get("metadata")
            old_meta = old_meta if isinstance(old_meta, Mapping) else {}
            meta["resourceVersion"] = old_meta.get("resourceVersion")
            old_annotations = old_meta.get("annotations")
            annotations.update(old_annotations if isinstance(old_annotations, Mapping) else {})
        if self._annotations is not None:
            annotations.update(self._report())
        if annotations:
            meta["annotations"] = annotations
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": {k: v for k, v in spec.items() if v is not None},
        }

    def _report(self) -> Mapping[str, str]:
        assert self._annotations is not None
        try:
            return self._annotations()
        except Exception:  # a broken report must not cost the Lease: renew without it
            log.exception("lease: the health report failed; renewing without it")
            return {}

    def _expired(self) -> bool:
        duration = self._observed_duration or self._config.duration
        return self._clock() - self._observed_at > duration

    async def _try_acquire(self) -> None:
        if self._watched and self._observed is not None:
            holder = self._observed[0]
            if holder and holder != self._config.identity and not self._expired():
                return  # held and renewed, as the watch shows: nothing to read
        try:
            lease = await self._read()
            if lease is None:
                self._held = await self._create(self._body(None, True))
                await self._set(True)
                return
            holder = _holder(lease)
            spec = _spec(lease)
            self._saw(holder, _micro_time(spec.get("renewTime")), spec.get("leaseDurationSeconds"))
            if holder and holder != self._config.identity and not self._expired():
                return
            self._held = await self._replace(self._body(lease, holder != self._config.identity))
            await self._set(True)
        except KubeError as exc:
            if exc.status not in (409, 404):
                log.warning("lease: %s", exc.reason, extra={"status": exc.status})

    async def _renew_or_step_down(self) -> None:
        deadline = self._clock() + self._config.renew_deadline
        while self._clock() < deadline:
            # Optimistically from the Lease our last write returned; a conflict (someone else wrote it
            # since) reads it again.
            lease, self._held = self._held, None
            try:
                if lease is None:
                    lease = await self._read()
                if lease is None or _holder(lease) != self._config.identity:
                    break  # someone else holds it now
                self._held = await self._replace(self._body(lease, False))
                return
            except KubeError as exc:
                if exc.status == 409:
                    continue  # raced with ourselves or someone else: read again
                log.warning("lease renewal: %s", exc.reason, extra={"status": exc.status})
            await anyio.sleep(min(self._config.retry_period, max(0.0, deadline - self._clock())))
        await self._set(False)

    async def _release(self) -> None:
        self._held = None
        try:
            lease = await self._read()
            if lease is None or _holder(lease) != self._config.identity:
                return
            spec = dict(_spec(lease))
            spec["holderIdentity"] = ""
            spec["renewTime"] = _micro_time_text(_now() - dt.timedelta(seconds=self._config.duration + 1))
            await self._replace({**lease, "spec": spec})
            log.info("lease released", extra={"identity": self._config.identity})
        except KubeError as exc:
            log.warning("lease release failed: %s", exc.reason)
