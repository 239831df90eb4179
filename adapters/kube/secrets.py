"""The Secrets the core asked for (``WatchSecrets``) — and nothing else reaches the vault.

How many connections the Secrets take is bounded whatever the input (the shared client's pool also
serves the writers; behaviour §1.5):

- one list+watch of the namespace with the label selector
  ``appliance.magicstick.dev/model-provider-secret=true``, filtered in memory, before redaction, to the
  wanted names the core marks ``provider_only`` (only a labelled Secret may be used under those names);
- one ``metadata.name=<name>`` list+watch for each Secret the core reads by name (``ai-model-provider-*``,
  which need not be labelled), at most ``KubeSettings.secret_name_watches`` of them;
- the by-name Secrets beyond that are re-listed by name, one request at a time, every
  ``secret_poll_seconds``: still resolved (a change shows within that period), never more connections.

The Secret holding LiteLLM's master key (``never``) is excluded by the label watch's field selector, so
the API server never sends it, and is dropped from any command that names it. Values go to the
``SecretVault`` only for wanted names; the core sees only redacted objects.

``SecretWatcher`` is both a source (``run``: the reads) and the executor of ``WatchSecrets``
(``execute``: change the wanted set). Once every read of a new set is listed it sends
``SourceListed(SECRETS, objects, scope=names)`` — names in the scope without an object are known not to
exist (or not to be labelled) — and upserts/deletes after that. Any later relist (410, reconnect) sends
the complete listing again. A label removed looks like the Secret deleted, which is what it means here.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import anyio
import attrs
from anyio.abc import ObjectSendStream, TaskGroup

from adapters.backoff import Backoff
from adapters.kube.api import KubeApi, KubeError, resource_label
from adapters.kube.liveness import UNGUARDED, Guards
from adapters.kube.settings import (
    ERRORS_TOTAL,
    FORBIDDEN_TOTAL,
    SECRET_BY_NAME_WATCHES,
    SECRET_LABELLED_WATCH,
    KubeSettings,
    KubeStats,
    secret_watch_name,
)
from adapters.kube.watch import WatchSource, WatchSpec, declare_watch_series, list_objects, redact_all
from adapters.vault import SecretVault
from catalog_core import raw
from catalog_core.commands import Command, WatchSecrets
from catalog_core.events import (
    CommandCompleted,
    Event,
    ObjectDeleted,
    ObjectUpserted,
    Outcome,
    SourceKind,
    SourceListed,
    SourceUnavailable,
    Unavailability,
)
from catalog_core.redact import Redacted
from catalog_core.sources.common import PROVIDER_SECRET_LABEL
from contracts.kinds import RESOURCES

log = logging.getLogger("model_catalog.kube.secrets")

PROVIDER_SELECTOR = f"{PROVIDER_SECRET_LABEL}=true"


# Keys of the reads: the label-selected watch, the poller, and BY_NAME + name for a watch by name.
LABELLED = "label"
POLLED = "poll"
BY_NAME = "name/"


@attrs.define
class _Watched:
    namespace: str
    names: frozenset[str]  # the wanted names this watch answers for
    scope: anyio.CancelScope
    listed: bool = False


class SecretWatcher:
    """Source and executor: watches exactly the Secrets of the latest ``WatchSecrets``."""

    def __init__(
        self,
        api: KubeApi,
        vault: SecretVault,
        *,
        namespace: str = "",
        never: Collection[str] = (),
        settings: KubeSettings | None = None,
        stats: KubeStats | None = None,
        guards: Guards = UNGUARDED,
    ) -> None:
        """``never``: Secrets not to read whatever a command says (the LiteLLM master key's). ``guards``:
        where its watches register their connections (for the liveness signal)."""
        self.api = api
        self.guards = guards
        self._never = frozenset(never)
        self.vault = vault
        self.settings = settings or KubeSettings()
        self.stats = stats or KubeStats()
        self.name = "kube/secrets"
        self._namespace = namespace
        self._wanted: dict[str, bool] = {}  # name -> provider_only
        self._generation = 0  # bumped by every WatchSecrets that changes the set
        self._sent_generation = -1  # the generation whose complete listing was sent
        self._changed: anyio.Event | None = None  # created in run (an Event needs a running loop)
        self._progress: anyio.Event | None = None
        self._watched: dict[str, _Watched] = {}  # LABELLED, POLLED or BY_NAME + name -> its read
        self._objects: dict[str, Mapping[str, Any]] = {}  # redacted, by name (only Secrets that exist)
        self._lock = anyio.Lock()
        self._send: ObjectSendStream[Event] | None = None
        self._reported: Unavailability | None = None
        resource = RESOURCES[SourceKind.SECRETS]
        declare_watch_series(self.stats, SourceKind.SECRETS, resource_label(resource), namespace)
        self.stats.declare_watch(SECRET_LABELLED_WATCH)
        self.stats.declare_watch(SECRET_BY_NAME_WATCHES)

    @property
    def watches(self) -> int:
        """How many list+watch loops run (for tests): the label-selected one + the Secrets watched by name."""
        return sum(key != POLLED for key in self._watched)

    @property
    def polled(self) -> frozenset[str]:
        """The Secrets re-listed by name instead of watched (beyond ``secret_name_watches``)."""
        watched = self._watched.get(POLLED)
        return watched.names if watched is not None else frozenset()

    # --- executor
    def handles(self, command: Command) -> bool:
        return isinstance(command, WatchSecrets)

    async def execute(self, command: Command) -> Sequence[Event]:
        assert isinstance(command, WatchSecrets)
        generation = self.want(command.namespace, {s.name: s.provider_only for s in command.secrets})
        detail = ""
        with anyio.move_on_after(self.settings.secret_listing_wait_seconds):
            while self._sent_generation < generation:
                if self._progress is None:
                    self._progress = anyio.Event()
                await self._progress.wait()
        if self._sent_generation < generation:
            detail = "the new set of Secrets is not listed yet; it will be sent when it is"
        return [CommandCompleted(command.key, command.id, Outcome.APPLIED, detail=detail)]

    def want(self, namespace: str, wanted: Mapping[str, bool]) -> int:
        """Set the watched Secrets (name -> provider_only); the generation to wait for."""
        refused = self._never.intersection(wanted)
        if refused:
            log.warning("not reading Secret %s: it holds the LiteLLM master key", ", ".join(sorted(refused)))
            wanted = {name: p for name, p in wanted.items() if name not in refused}
        if self._generation == 0 or namespace != self._namespace or dict(wanted) != self._wanted:
            self._namespace = namespace
            self._wanted = dict(wanted)
            self._generation += 1
            if self._changed is not None:
                self._changed.set()
        return self._generation

    def _desired(self) -> dict[str, frozenset[str]]:
        """Read key -> the names it answers for."""
        by_name = sorted(name for name, provider_only in self._wanted.items() if not provider_only)
        budget = max(0, self.settings.secret_name_watches)
        out = {BY_NAME + name: frozenset({name}) for name in by_name[:budget]}
        if by_name[budget:]:
            out[POLLED] = frozenset(by_name[budget:])
        labelled = frozenset(name for name, provider_only in self._wanted.items() if provider_only)
        if labelled:
            out[LABELLED] = labelled
        return out

    # --- source
    async def run(self, send: ObjectSendStream[Event]) -> None:
        """Until cancelled: keeps the label-selected watch, the watches by name and the poller."""
        self._send = send
        async with anyio.create_task_group() as tg:
            while True:
                self._changed = changed = anyio.Event()
                await self._reconcile(tg)
                await changed.wait()

    async def _reconcile(self, tg: TaskGroup) -> None:
        async with self._lock:
            namespace, desired = self._namespace, self._desired()
            for key, watched in list(self._watched.items()):
                if desired.get(key) != watched.names or namespace != watched.namespace:
                    watched.scope.cancel()
                    del self._watched[key]
                    for name in watched.names:
                        if name not in self._wanted or namespace != watched.namespace:
                            # No longer wanted: it leaves the vault now, not after a relist. (A name still
                            # wanted keeps its value until the new watch's listing replaces it.)
                            self._forget(watched.namespace, name)
            for key, names in sorted(desired.items()):
                if key not in self._watched:
                    watched = _Watched(namespace, names, anyio.CancelScope())
                    self._watched[key] = watched
                    tg.start_soon(self._poll if key == POLLED else self._watch_one, key, watched)
            await self._send_listing_if_complete()

    async def _watch_one(self, key: str, watched: _Watched) -> None:
        resource = RESOURCES[SourceKind.SECRETS]
        if key == LABELLED:
            # The master key's Secret is excluded by the server, so not even its labelled copy is sent;
            # other labelled Secrets not wanted are dropped before redaction.
            never = ",".join(f"metadata.name!={name}" for name in sorted(self._never))
            spec = WatchSpec(SourceKind.SECRETS, resource, watched.namespace, never, PROVIDER_SELECTOR)
            source = WatchSource(
                self.api,
                spec,
                settings=self.settings,
                stats=self.stats,
                name=SECRET_LABELLED_WATCH,
                keep=lambda obj: raw.name_of(obj) in watched.names,
                guards=self.guards,
            )
        else:
            name = key[len(BY_NAME) :]
            spec = WatchSpec(SourceKind.SECRETS, resource, watched.namespace, f"metadata.name={name}")
            source = WatchSource(
                self.api,
                spec,
                settings=self.settings,
                stats=self.stats,
                name=secret_watch_name(name),
                guards=self.guards,
            )
        with watched.scope:
            await source.run_into(_WatchSink(self, key, watched))

    async def _poll(self, key: str, watched: _Watched) -> None:
        """The by-name Secrets beyond the watch budget: each re-listed by name, one request at a time."""
        s = self.settings
        backoff = Backoff(s.retry_base_seconds, s.retry_cap_seconds)
        failures = 0
        with watched.scope:
            while True:
                try:
                    found = await self._list_by_name(watched)
                except KubeError as err:
                    failures += 1
                    await self._poll_failed(watched.namespace, err, failures)
                    await anyio.sleep(backoff.next())
                    continue
                except Exception as exc:  # a bug must not end the reads: log the class, back off, go on
                    log.error("kube/secrets/polled: unexpected %s", type(exc).__name__, exc_info=exc)
                    await anyio.sleep(backoff.next())
                    continue
                failures = 0
                backoff.reset()
                await self._polled(key, watched, found)
                await anyio.sleep(s.secret_poll_seconds)

    async def _list_by_name(self, watched: _Watched) -> dict[str, dict[str, Any]]:
        found = {}
        for name in sorted(watched.names):
            spec = WatchSpec(
                SourceKind.SECRETS,
                RESOURCES[SourceKind.SECRETS],
                watched.namespace,
                field_selector=f"metadata.name={name}",
            )
            listing = await list_objects(self.api, spec, self.settings)
            obj = next((o for o in listing.objects if raw.name_of(o) == name), None)
            if obj is not None:
                found[name] = obj
        return found

    async def _polled(self, key: str, watched: _Watched, found: Mapping[str, Mapping[str, Any]]) -> None:
        """One pass of the poller: the first is its listing; later ones send what changed."""
        async with self._lock:
            if not self._current(key, watched):
                return
            changed = [
                name
                for name, obj in found.items()
                if raw.resource_version_of(obj) != raw.resource_version_of(self._objects.get(name) or {})
            ]
        # only changed Secrets are redacted again (fingerprinting is the costly part)
        fresh = await redact_all(SourceKind.SECRETS, [found[n] for n in changed])
        redacted = dict(zip(changed, fresh, strict=True))
        async with self._lock:
            if not self._current(key, watched):
                return
            for name in sorted(watched.names):
                obj = redacted.get(name)
                if name not in found and name in self._objects:
                    gone = self._objects[name]
                    self._forget(watched.namespace, name)
                    if watched.listed:
                        await self._emit(ObjectDeleted(SourceKind.SECRETS, gone))
                elif obj is not None:
                    self._keep(watched.namespace, name, obj)
                    if watched.listed:
                        await self._emit(ObjectUpserted(SourceKind.SECRETS, obj.obj))
            if not watched.listed:
                watched.listed = True
                await self._send_listing_if_complete()

    async def _poll_failed(self, namespace: str, err: KubeError, failures: int) -> None:
        if err.status == 403:
            self.stats.inc(
                FORBIDDEN_TOTAL, source="secrets", verb="list", resource="secrets", namespace=namespace
            )
            await self._unavailable(Unavailability.FORBIDDEN, f"forbidden: list secrets in {namespace}")
            return
        self.stats.inc(ERRORS_TOTAL, source="secrets", status=str(err.status))
        if failures >= self.settings.failing_after:
            await self._unavailable(Unavailability.FAILING, f"list secrets by name in {namespace}: {err}")

    def _forget(self, namespace: str, name: str) -> None:
        self._objects.pop(name, None)
        self.vault.forget_secret(namespace, name)

    async def _emit(self, event: Event) -> None:
        assert self._send is not None
        await self._send.send(event)

    async def _send_listing_if_complete(self) -> None:
        """The complete listing of the wanted set, once every read of it is listed. Holds the lock."""
        if self._generation == 0:
            return  # not told what to watch yet: an empty listing now would claim "no Secrets"
        desired = self._desired()
        if set(self._watched) != set(desired) or not all(
            w.listed and w.names == desired[k] and w.namespace == self._namespace
            for k, w in self._watched.items()
        ):
            return  # a read is not listed yet, or the set changed again meanwhile
        scope = tuple(sorted(self._wanted))
        objects = tuple(self._objects[n] for n in scope if n in self._objects)
        await self._emit(SourceListed(SourceKind.SECRETS, objects, scope=scope))
        self._reported = None
        if self._sent_generation < self._generation:
            self._sent_generation = self._generation
            progress, self._progress = self._progress, None
            if progress is not None:
                progress.set()

    # --- called by the sinks
    def _current(self, key: str, watched: _Watched) -> bool:
        return self._watched.get(key) is watched

    async def _listed(self, key: str, watched: _Watched, objects: tuple[Redacted, ...]) -> None:
        async with self._lock:
            if not self._current(key, watched):
                return
            by_name = {raw.name_of(o.obj): o for o in objects}
            for name in watched.names:  # every other Secret of a label-selected listing is dropped here
                found = by_name.get(name)
                if found is None:
                    self._forget(watched.namespace, name)
                else:
                    self._keep(watched.namespace, name, found)
            watched.listed = True
            await self._send_listing_if_complete()

    async def _changed_one(self, key: str, watched: _Watched, obj: Redacted, deleted: bool) -> None:
        async with self._lock:
            name = raw.name_of(obj.obj)
            if not self._current(key, watched) or name not in watched.names:
                return
            if deleted:
                self._forget(watched.namespace, name)
                await self._emit(ObjectDeleted(SourceKind.SECRETS, obj.obj))
            else:
                self._keep(watched.namespace, name, obj)
                await self._emit(ObjectUpserted(SourceKind.SECRETS, obj.obj))

    def _keep(self, namespace: str, name: str, obj: Redacted) -> None:
        self._objects[name] = obj.obj
        self.vault.replace_secret(namespace, name, obj.secrets)

    async def _unavailable(self, status: Unavailability, detail: str) -> None:
        async with self._lock:
            if self._reported is status:
                return
            self._reported = status
            await self._emit(SourceUnavailable(SourceKind.SECRETS, status, detail))


class _WatchSink:
    """Where one watch delivers: the watcher's shared cache, vault and listing."""

    def __init__(self, owner: SecretWatcher, key: str, watched: _Watched) -> None:
        self.owner, self.key, self.watched = owner, key, watched

    async def listed(self, objects: tuple[Redacted, ...]) -> None:
        await self.owner._listed(self.key, self.watched, objects)

    async def changed(self, obj: Redacted, deleted: bool) -> None:
        await self.owner._changed_one(self.key, self.watched, obj, deleted)

    async def unavailable(self, status: Unavailability, detail: str) -> None:
        await self.owner._unavailable(status, detail)
