"""Table-driven list+watch sources: one ``WatchSource`` per row of ``contracts.kinds.RESOURCES``.

Each source lists, sends ``SourceListed`` (the complete content, so anything deleted
during a gap is detected), then watches from the list's resourceVersion with
bookmarks, sending ``ObjectUpserted`` / ``ObjectDeleted``. On 410 Gone it lists
again; on a lost connection it reconnects with capped, jittered backoff; every
request has a server-side and a client-side timeout. Every object passes through
``catalog_core.redact`` before it becomes an event.

Absent CRD -> ``SourceUnavailable(NOT_INSTALLED)`` once, looked for again every
``crd_recheck_seconds``; 403 -> ``SourceUnavailable(FORBIDDEN)`` and one log line
naming the verb; other persistent errors -> ``FAILING``. Never an empty listing on
an error: the core keeps the last good content.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Protocol

import anyio
import anyio.to_thread
import attrs
from anyio.abc import ObjectSendStream

from adapters.backoff import Backoff
from adapters.kube.api import (
    OUTAGE_STATUSES,
    KubeApi,
    KubeError,
    collection_path,
    metadata,
    resource_label,
)
from adapters.kube.liveness import UNGUARDED, Guards, keepalive_of, watch_timeout
from adapters.kube.settings import (
    ERRORS_TOTAL,
    FORBIDDEN_TOTAL,
    GONE_TOTAL,
    RECONNECTS_TOTAL,
    RELISTS_TOTAL,
    WATCH_REQUESTS_TOTAL,
    KubeSettings,
    KubeStats,
)
from adapters.vault import SecretVault
from catalog_core.config import CatalogConfig
from catalog_core.events import (
    Event,
    ObjectDeleted,
    ObjectUpserted,
    SourceKind,
    SourceListed,
    SourceUnavailable,
    Unavailability,
)
from catalog_core.ingest import DOCUMENT_NAMES
from catalog_core.redact import SECRET_HOLDING, Redacted, redact_for_source
from contracts.kinds import RESOURCES, Resource, namespace_for

log = logging.getLogger("model_catalog.kube.watch")

# Sources whose objects may hold secret values (redact.SECRET_HOLDING): redacting them fingerprints
# (PBKDF2), which runs in a worker thread so a large models.json or many keys never stall the loop (the
# Lease renews from it).


async def redact(source: SourceKind, obj: Mapping[str, Any]) -> Redacted:
    """``redact_for_source``, off the event loop when the source holds secrets."""
    if source in SECRET_HOLDING:
        return await anyio.to_thread.run_sync(redact_for_source, source, obj)
    return redact_for_source(source, obj)


async def redact_all(source: SourceKind, objects: Sequence[Mapping[str, Any]]) -> tuple[Redacted, ...]:
    if source in SECRET_HOLDING:
        return await anyio.to_thread.run_sync(lambda: tuple(redact_for_source(source, o) for o in objects))
    return tuple(redact_for_source(source, o) for o in objects)


@attrs.frozen
class WatchSpec:
    """What one source lists and watches."""

    source: SourceKind
    resource: Resource
    namespace: str
    field_selector: str = ""
    label_selector: str = ""

    @property
    def where(self) -> str:
        """``modelactivations.appliance.magicstick.dev in ai-system`` (for logs and details)."""
        return f"{resource_label(self.resource)} in {self.namespace}"


def selectors(source: SourceKind, config: CatalogConfig) -> tuple[str, str]:
    """(field selector, label selector) of a source; most sources read everything in their namespace."""
    named = DOCUMENT_NAMES.get(source)
    label = RESOURCES[source].label
    return (
        f"metadata.name={named(config)}" if named is not None else "",
        label.selector if label is not None else "",
    )


def watch_specs(config: CatalogConfig) -> list[WatchSpec]:
    """Every source of the RESOURCES table except Secrets (watched by name, see ``secrets.SecretWatcher``)."""
    specs = []
    for source, resource in RESOURCES.items():
        if source is SourceKind.SECRETS:
            continue
        field, label = selectors(source, config)
        specs.append(WatchSpec(source, resource, namespace_for(source, config), field, label))
    return specs


@attrs.frozen
class Listing:
    objects: tuple[dict[str, Any], ...]
    resource_version: str


class RelistNeededError(Exception):
    """The watch cannot continue from its resourceVersion (410 Gone, or too many failures)."""


async def list_objects(api: KubeApi, spec: WatchSpec, settings: KubeSettings) -> Listing:
    """A complete, paginated list. Items get the apiVersion and kind a List leaves out."""
    path = collection_path(spec.resource, spec.namespace)
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        query = [("limit", str(settings.list_page_size)), *_selector_query(spec)]
        if token:
            query.append(("continue", token))
        page = await api.request("GET", path, query=query)
        for item in page.get("items") or ():
            if isinstance(item, dict):
                item.setdefault("apiVersion", spec.resource.api_version)
                item.setdefault("kind", spec.resource.kind)
                items.append(item)
        meta = metadata(page)
        token = str(meta.get("continue") or "")
        if not token:
            return Listing(tuple(items), str(meta.get("resourceVersion") or ""))


def _selector_query(spec: WatchSpec) -> list[tuple[str, str]]:
    query = []
    if spec.field_selector:
        query.append(("fieldSelector", spec.field_selector))
    if spec.label_selector:
        query.append(("labelSelector", spec.label_selector))
    return query


class WatchSink(Protocol):
    """Where a ``WatchSource`` delivers what it sees (objects already redacted)."""

    async def listed(self, objects: tuple[Redacted, ...]) -> None: ...

    async def changed(self, obj: Redacted, deleted: bool) -> None: ...

    async def unavailable(self, status: Unavailability, detail: str) -> None: ...


class EventSink:
    """The usual sink: events of one source into the shell's stream; inline keys into the vault."""

    def __init__(self, source: SourceKind, send: ObjectSendStream[Event], vault: SecretVault | None) -> None:
        self.source, self.send, self.vault = source, send, vault

    def _keep(self, obj: Redacted) -> Mapping[str, Any]:
        if obj.secrets and self.vault is not None:
            self.vault.update(obj.secrets)
        return obj.obj

    async def listed(self, objects: tuple[Redacted, ...]) -> None:
        await self.send.send(SourceListed(self.source, tuple(self._keep(o) for o in objects)))

    async def changed(self, obj: Redacted, deleted: bool) -> None:
        event = ObjectDeleted if deleted else ObjectUpserted
        await self.send.send(event(self.source, self._keep(obj)))

    async def unavailable(self, status: Unavailability, detail: str) -> None:
        await self.send.send(SourceUnavailable(self.source, status, detail))


def declare_watch_series(stats: KubeStats, source: SourceKind, resource: str, namespace: str) -> None:
    """Every counter series a source's reads can move, at 0 from the start (Prometheus' ``increase()``
    cannot see the first increment of a series that appears with it)."""
    for metric in (RELISTS_TOTAL, GONE_TOTAL, RECONNECTS_TOTAL, WATCH_REQUESTS_TOTAL):
        stats.declare(metric, source=source.value)
    for verb in ("list", "watch"):
        stats.declare(FORBIDDEN_TOTAL, source=source.value, verb=verb, resource=resource, namespace=namespace)
    for status in OUTAGE_STATUSES:
        stats.declare(ERRORS_TOTAL, source=source.value, status=str(status))


class WatchSource:
    """One source: list, then watch; relist on 410; report absence, denial and failure once each."""

    def __init__(
        self,
        api: KubeApi,
        spec: WatchSpec,
        *,
        vault: SecretVault | None = None,
        settings: KubeSettings | None = None,
        stats: KubeStats | None = None,
        name: str = "",
        keep: Callable[[Mapping[str, Any]], bool] | None = None,
        guards: Guards = UNGUARDED,
    ) -> None:
        """``keep``: objects it rejects are dropped before redaction (never fingerprinted nor delivered).
        ``guards``: where the watch registers each connection, so a liveness verdict can end it."""
        self.api = api
        self.spec = spec
        self.keep = keep
        self.guards = guards
        self._rng = random.Random()
        self.vault = vault
        self.settings = settings or KubeSettings()
        self.stats = stats or KubeStats()
        self.name = name or f"kube/{spec.source.value}"
        self._reported: Unavailability | None = None  # what the sink was last told, None = listed
        self._health = "starting"  # for one log line per transition
        self._failures = 0
        s = self.settings
        self._list_backoff = Backoff(s.retry_base_seconds, s.retry_cap_seconds)
        self._watch_backoff = Backoff(s.retry_base_seconds, s.retry_cap_seconds)
        self._forbidden_backoff = Backoff(s.retry_base_seconds, s.forbidden_recheck_seconds)
        declare_watch_series(self.stats, spec.source, resource_label(spec.resource), spec.namespace)
        self.stats.declare_watch(self.name)

    async def run(self, send: ObjectSendStream[Event]) -> None:
        """Until cancelled. Never raises for an API error or a bad object."""
        await self.run_into(EventSink(self.spec.source, send, self.vault))

    async def run_into(self, sink: WatchSink) -> None:
        try:
            while True:
                try:
                    await self._cycle(sink)
                except anyio.get_cancelled_exc_class():
                    raise
                except Exception as exc:  # a bug must not end the source: log the class, back off, start over
                    self._stale()
                    log.error("%s: unexpected %s; starting over", self.name, type(exc).__name__, exc_info=exc)
                    await anyio.sleep(self._list_backoff.next())
        finally:
            self.stats.mark_fresh(self.name)  # a watch that is stopped is not stale, it is gone

    def _stale(self) -> None:
        self.stats.mark_stale(self.name, time.time())

    async def _cycle(self, sink: WatchSink) -> None:
        try:
            listing = await list_objects(self.api, self.spec, self.settings)
        except KubeError as err:
            if err.transient:  # (an absent CRD or a 403 is reported as such, not as staleness)
                self._stale()
            await anyio.sleep(await self._list_failed(sink, err))
            return
        self.stats.inc(RELISTS_TOTAL, source=self.spec.source.value)
        self._list_backoff.reset()
        self._failures = 0
        objects = listing.objects if self.keep is None else tuple(filter(self.keep, listing.objects))
        resource_version = listing.resource_version
        # The listed objects are whole (managedFields and all) and the watch lives for minutes: let them
        # go now, the core keeps what it reads of them (~5 KiB per KubeAI Model held).
        del listing
        redacted = await redact_all(self.spec.source, objects)
        del objects
        await sink.listed(redacted)
        del redacted
        self._reported = None
        try:
            await self._watch(sink, resource_version)
        except RelistNeededError:
            return

    async def _watch(self, sink: WatchSink, resource_version: str) -> None:
        """Watch from ``resource_version`` until a relist is needed (raises RelistNeededError)."""
        s = self.settings
        path = collection_path(self.spec.resource, self.spec.namespace)
        rv = resource_version
        failures = 0
        while True:
            query = [("resourceVersion", rv), ("allowWatchBookmarks", "true"), *_selector_query(self.spec)]
            started, seen, connected = anyio.current_time(), 0, False
            self.stats.inc(WATCH_REQUESTS_TOTAL, source=self.spec.source.value)
            try:
                with self.guards.guarded() as guard, guard:
                    async with self.api.watch(
                        path,
                        query,
                        watch_timeout(s, self._rng),
                        s.timeout_grace_seconds,
                        response_timeout=s.watch_response_seconds,
                        keepalive=keepalive_of(s),
                    ) as events:
                        connected = True
                        self._healthy()
                        self.stats.mark_fresh(self.name)
                        async with aclosing(events):
                            async for event in events:
                                seen += 1
                                rv = await self._handle(sink, event, rv)
                if guard.cancelled_caught:
                    # The liveness signal presumed this connection dead (it may be half-open): resume from
                    # the last resourceVersion over a new connection now, once per verdict.
                    self._stale()
                    self.stats.inc(RECONNECTS_TOTAL, source=self.spec.source.value)
                    failures = 0
                    self._watch_backoff.reset()
                    continue
                failures = 0
                if seen == 0 and anyio.current_time() - started < 1.0:
                    await anyio.sleep(self._watch_backoff.next())  # a stream that ends at once: do not spin
                else:
                    self._watch_backoff.reset()
            except KubeError as err:
                if err.status == 410 or err.reason == "Expired":
                    self.stats.inc(GONE_TOTAL, source=self.spec.source.value)
                    log.debug("%s: resourceVersion %s is gone; relisting", self.name, rv)
                    raise RelistNeededError from err
                if err.status == 403:
                    await self._forbidden(sink, "watch", err)
                    await anyio.sleep(self._forbidden_backoff.next())
                    raise RelistNeededError from err
                if err.transient:
                    self._stale()  # presumed dead (no end of stream by timeout + grace) or cut
                if not err.transient:
                    raise RelistNeededError from err  # e.g. 404: the CRD went away; the list tells
                lived = anyio.current_time() - started
                stable = connected and lived >= min(s.watch_stable_seconds, s.watch_timeout_seconds)
                if stable:
                    # It streamed for a while (or its whole life, then was presumed dead), then broke: a
                    # new incident, not the next failure of an old one.
                    failures = 0
                    self._watch_backoff.reset()
                failures += 1
                self.stats.inc(RECONNECTS_TOTAL, source=self.spec.source.value)
                if failures >= s.failing_after:
                    raise RelistNeededError from err  # the list path reports FAILING if this persists
                if stable:
                    continue  # replace the dead connection now: at most once per watch lifetime, no spin
                delay = max(self._watch_backoff.next(), err.retry_after)
                log.debug("%s: watch failed (%s); reconnecting in %.1fs", self.name, err, delay)
                await anyio.sleep(delay)

    async def _handle(self, sink: WatchSink, event: dict[str, Any], rv: str) -> str:
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, dict):
            return rv
        if kind == "ERROR":
            raise KubeError.from_status(obj)
        meta = metadata(obj)
        new_rv = str(meta.get("resourceVersion") or rv)
        if kind == "BOOKMARK":
            return new_rv
        if kind in ("ADDED", "MODIFIED", "DELETED") and (self.keep is None or self.keep(obj)):
            await sink.changed(await redact(self.spec.source, obj), kind == "DELETED")
        return new_rv

    async def _list_failed(self, sink: WatchSink, err: KubeError) -> float:
        """Report what a failed list means (once per transition); the delay before the next try."""
        s = self.settings
        if err.status == 404 and self.spec.resource.crd:
            if self._reported is not Unavailability.NOT_INSTALLED:
                detail = f"CustomResourceDefinition {resource_label(self.spec.resource)} is not installed"
                await sink.unavailable(Unavailability.NOT_INSTALLED, detail)
                self._reported = Unavailability.NOT_INSTALLED
            self._transition(
                "not-installed",
                logging.INFO,
                "%s: %s is not installed; looking again every %ss",
                self.name,
                resource_label(self.spec.resource),
                s.crd_recheck_seconds,
            )
            self._failures = 0
            return s.crd_recheck_seconds
        if err.status == 403:
            await self._forbidden(sink, "list", err)
            return self._forbidden_backoff.next()
        self._failures += 1
        self.stats.inc(ERRORS_TOTAL, source=self.spec.source.value, status=str(err.status))
        if self._failures >= s.failing_after and self._reported is not Unavailability.FAILING:
            detail = f"list {self.spec.where}: {err}"
            await sink.unavailable(Unavailability.FAILING, detail)
            self._reported = Unavailability.FAILING
        if self._failures >= s.failing_after:
            self._transition(
                "failing",
                logging.WARNING,
                "%s: list %s keeps failing (%s); retrying with backoff",
                self.name,
                self.spec.where,
                err,
            )
        else:
            log.debug("%s: list %s failed (%s)", self.name, self.spec.where, err)
        return max(self._list_backoff.next(), err.retry_after)  # the server's Retry-After, when longer

    async def _forbidden(self, sink: WatchSink, verb: str, err: KubeError) -> None:
        detail = f"forbidden: {verb} {self.spec.where}"
        self.stats.inc(
            FORBIDDEN_TOTAL,
            source=self.spec.source.value,
            verb=verb,
            resource=resource_label(self.spec.resource),
            namespace=self.spec.namespace,
        )
        if self._reported is not Unavailability.FORBIDDEN:
            await sink.unavailable(Unavailability.FORBIDDEN, detail)
            self._reported = Unavailability.FORBIDDEN
        self._transition(
            f"forbidden:{verb}", logging.WARNING, "%s: %s (keeping the last good content)", self.name, detail
        )

    def _healthy(self) -> None:
        self._failures = 0
        self._forbidden_backoff.reset()
        self._transition("watching", logging.INFO, "%s: watching %s", self.name, self.spec.where)

    def _transition(self, health: str, level: int, message: str, *args: Any) -> None:
        if health == self._health:
            return
        if health == "watching" and self._health == "starting":
            level = logging.DEBUG  # the normal start is not news
        self._health = health
        log.log(level, message, *args)
