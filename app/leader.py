"""Leader election with a coordination.k8s.io/v1 Lease (client-go's algorithm, simplified).

The holder renews every retry period; a candidate takes the Lease only when
the holder has not renewed it for a whole lease duration *as observed by the
candidate's own clock* (never by comparing two machines' clocks). A leader that
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

import anyio
import attrs

from adapters.identity import FIELD_MANAGER
from app.kube_client import ApiException
from app.kube_client import k8s_client as client

log = logging.getLogger("model_catalog.leader")

OnChange = Callable[[bool], Awaitable[None]]
Annotations = Callable[[], Mapping[str, str]]


@attrs.frozen
class LeaseConfig:
    name: str
    namespace: str
    identity: str
    duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    request_timeout: float = 5.0


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _micro_time(value: Any) -> dt.datetime | None:
    """A Lease's ``renewTime`` as the API sends it (RFC 3339, microseconds), as the typed client reads it."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


class LeaderElector:
    def __init__(
        self,
        api_client: client.ApiClient,
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
        self._api = client.CoordinationV1Api(api_client)
        self._config = config
        self._on_change = on_change
        self.leading = False
        self._observed: tuple[str, dt.datetime | None] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._held: Any | None = None  # the Lease as our last successful write returned it
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
        self._saw(str(spec.get("holderIdentity") or ""), _micro_time(spec.get("renewTime")))

    def _saw(self, holder: str, renewed: dt.datetime | None) -> None:
        record = (holder, renewed)
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

    async def _set(self, leading: bool) -> None:
        if leading != self.leading:
            self.leading = leading
            log.info(
                "leadership %s", "acquired" if leading else "lost", extra={"identity": self._config.identity}
            )
            await self._on_change(leading)

    async def _read(self) -> Any | None:
        try:
            return await self._api.read_namespaced_lease(
                self._config.name, self._config.namespace, _request_timeout=self._config.request_timeout
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _body(self, lease: Any | None, acquire: bool) -> Any:
        now = _now()
        spec = client.V1LeaseSpec(
            holder_identity=self._config.identity,
            lease_duration_seconds=max(1, round(self._config.duration)),
            renew_time=now,
            acquire_time=now if acquire or lease is None else lease.spec.acquire_time,
            lease_transitions=((lease.spec.lease_transitions or 0) + (1 if acquire else 0))
            if lease is not None
            else 0,
        )
        meta = client.V1ObjectMeta(name=self._config.name, namespace=self._config.namespace)
        annotations: dict[str, str] = {}
        if lease is not None:
            meta.resource_version = lease.metadata.resource_version
            annotations.update(lease.metadata.annotations or {})
        if self._annotations is not None:
            annotations.update(self._report())
        if annotations:
            meta.annotations = annotations
        return client.V1Lease(metadata=meta, spec=spec)

    def _report(self) -> Mapping[str, str]:
        assert self._annotations is not None
        try:
            return self._annotations()
        except Exception:  # a broken report must not cost the Lease: renew without it
            log.exception("lease: the health report failed; renewing without it")
            return {}

    def _expired(self) -> bool:
        return self._clock() - self._observed_at > self._config.duration

    async def _try_acquire(self) -> None:
        if self._watched and self._observed is not None:
            holder = self._observed[0]
            if holder and holder != self._config.identity and not self._expired():
                return  # held and renewed, as the watch shows: nothing to read
        try:
            lease = await self._read()
            if lease is None:
                self._held = await self._api.create_namespaced_lease(
                    self._config.namespace,
                    self._body(None, True),
                    field_manager=FIELD_MANAGER,
                    _request_timeout=self._config.request_timeout,
                )
                await self._set(True)
                return
            holder = lease.spec.holder_identity or ""
            self._saw(holder, lease.spec.renew_time)
            if holder and holder != self._config.identity and not self._expired():
                return
            self._held = await self._api.replace_namespaced_lease(
                self._config.name,
                self._config.namespace,
                self._body(lease, holder != self._config.identity),
                field_manager=FIELD_MANAGER,
                _request_timeout=self._config.request_timeout,
            )
            await self._set(True)
        except ApiException as exc:
            if exc.status not in (409, 404):
                log.warning("lease: %s", exc.reason, extra={"status": exc.status})
        except (OSError, TimeoutError) as exc:
            log.warning("lease: %s", type(exc).__name__)

    async def _renew_or_step_down(self) -> None:
        deadline = self._clock() + self._config.renew_deadline
        while self._clock() < deadline:
            # Optimistically from the Lease our last write returned; a conflict (someone else wrote it
            # since) reads it again.
            lease, self._held = self._held, None
            try:
                if lease is None:
                    lease = await self._read()
                if lease is None or (lease.spec.holder_identity or "") != self._config.identity:
                    break  # someone else holds it now
                self._held = await self._api.replace_namespaced_lease(
                    self._config.name,
                    self._config.namespace,
                    self._body(lease, False),
                    field_manager=FIELD_MANAGER,
                    _request_timeout=self._config.request_timeout,
                )
                return
            except ApiException as exc:
                if exc.status == 409:
                    continue  # raced with ourselves or someone else: read again
                log.warning("lease renewal: %s", exc.reason, extra={"status": exc.status})
            except (OSError, TimeoutError) as exc:
                log.warning("lease renewal: %s", type(exc).__name__)
            await anyio.sleep(min(self._config.retry_period, max(0.0, deadline - self._clock())))
        await self._set(False)

    async def _release(self) -> None:
        self._held = None
        try:
            lease = await self._read()
            if lease is None or (lease.spec.holder_identity or "") != self._config.identity:
                return
            lease.spec.holder_identity = ""
            lease.spec.renew_time = _now() - dt.timedelta(seconds=self._config.duration + 1)
            await self._api.replace_namespaced_lease(
                self._config.name,
                self._config.namespace,
                lease,
                field_manager=FIELD_MANAGER,
                _request_timeout=self._config.request_timeout,
            )
            log.info("lease released", extra={"identity": self._config.identity})
        except (ApiException, OSError, TimeoutError) as exc:
            log.warning("lease release failed: %s", type(exc).__name__)
