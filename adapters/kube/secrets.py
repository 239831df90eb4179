"""The Secrets the core asked for (``WatchSecrets``) — and nothing else reaches the vault.

Two kinds of watch, whatever the number of names (each watch holds a connection of the shared client, so
input must not decide how many there are; contracts C.8):

- one list+watch of the namespace with the label selector
  ``appliance.magicstick.dev/model-provider-secret=true``, filtered in memory to the wanted names that
  the core marks ``provider_only`` (only a labelled Secret may be used under those names);
- one ``metadata.name=<name>`` list+watch per Secret allowed by its name (``ai-model-provider-*``, which
  need not be labelled), at most ``plan.MAX_SECRETS_WATCHED_BY_NAME`` of them.

The core never asks for the Secret holding LiteLLM's master key. Values go to the ``SecretVault`` only
for wanted names; the core sees only redacted objects (fingerprints, uid, resourceVersion).

``SecretWatcher`` is both a source (``run``: the watches) and the executor of ``WatchSecrets``
(``execute``: change the watched set). Once every watch of a new set is listed it sends
``SourceListed(SECRETS, objects, scope=names)`` — names in the scope without an object are known not to
exist (or not to be labelled) — and upserts/deletes after that. Any later relist (410, reconnect) sends
the complete listing again. A label removed looks like the Secret deleted, which is what it means here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import attrs
from anyio.abc import ObjectSendStream, TaskGroup

from adapters.kube.api import KubeApi
from adapters.kube.settings import KubeSettings, KubeStats
from adapters.kube.watch import WatchSource, WatchSpec
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


LABELLED = ""  # the key of the label-selected watch (a Secret name is never empty)


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
        settings: KubeSettings | None = None,
        stats: KubeStats | None = None,
    ) -> None:
        self.api = api
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
        self._watched: dict[str, _Watched] = {}  # LABELLED or a Secret name -> its watch
        self._objects: dict[str, Mapping[str, Any]] = {}  # redacted, by name (only Secrets that exist)
        self._lock = anyio.Lock()
        self._send: ObjectSendStream[Event] | None = None
        self._reported: Unavailability | None = None

    @property
    def watches(self) -> int:
        """How many list+watch loops run (for tests and metrics): 1 + the Secrets watched by name."""
        return len(self._watched)

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
        if self._generation == 0 or namespace != self._namespace or dict(wanted) != self._wanted:
            self._namespace = namespace
            self._wanted = dict(wanted)
            self._generation += 1
            if self._changed is not None:
                self._changed.set()
        return self._generation

    def _desired(self) -> dict[str, frozenset[str]]:
        """Watch key -> the names it answers for."""
        out = {name: frozenset({name}) for name, provider_only in self._wanted.items() if not provider_only}
        labelled = frozenset(name for name, provider_only in self._wanted.items() if provider_only)
        if labelled:
            out[LABELLED] = labelled
        return out

    # --- source
    async def run(self, send: ObjectSendStream[Event]) -> None:
        """Until cancelled: keeps the label-selected watch and the per-name watches the set needs."""
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
                    tg.start_soon(self._watch_one, key, watched)
            await self._send_listing_if_complete()

    async def _watch_one(self, key: str, watched: _Watched) -> None:
        if key == LABELLED:
            spec = WatchSpec(
                SourceKind.SECRETS,
                RESOURCES[SourceKind.SECRETS],
                watched.namespace,
                label_selector=PROVIDER_SELECTOR,
            )
            name = "kube/secrets/labelled"
        else:
            spec = WatchSpec(
                SourceKind.SECRETS,
                RESOURCES[SourceKind.SECRETS],
                watched.namespace,
                field_selector=f"metadata.name={key}",
            )
            name = f"kube/secrets/{key}"
        source = WatchSource(self.api, spec, settings=self.settings, stats=self.stats, name=name)
        with watched.scope:
            await source.run_into(_WatchSink(self, key, watched))

    def _forget(self, namespace: str, name: str) -> None:
        self._objects.pop(name, None)
        self.vault.forget_secret(namespace, name)

    async def _emit(self, event: Event) -> None:
        assert self._send is not None
        await self._send.send(event)

    async def _send_listing_if_complete(self) -> None:
        """The complete listing of the wanted set, once every watch of it is listed. Holds the lock."""
        if self._generation == 0:
            return  # not told what to watch yet: an empty listing now would claim "no Secrets"
        desired = self._desired()
        if set(self._watched) != set(desired) or not all(
            w.listed and w.names == desired[k] and w.namespace == self._namespace
            for k, w in self._watched.items()
        ):
            return  # a watch is not listed yet, or the set changed again meanwhile
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
