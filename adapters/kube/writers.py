"""Executors of the core's Kubernetes commands. They carry a command out and report what happened.

Outcome mapping (the same for every writer): 2xx -> applied; 404 on a patch or an update -> gone (the
target vanished; the core re-plans once it is observed again). Everything else the API server answers
may be mended without a new command (RBAC fixed, a webhook or a policy changed, an immutable object
deleted, the server back), so it is retried, forever, after a capped, jittered exponential backoff per
key (``KeyedBackoff``, the cap ``CATALOG_WRITE_RETRY_MAX_SECONDS``), with a reason code the core reports
once two attempts in a row failed: 403 -> ``Forbidden``; 0 (a timeout, a refused or reset connection),
429 and 5xx -> ``WriteFailed``; any other 4xx (400, 404 on a create, 409, 422, ...) ->
``WriteRejected``; the catalog ConfigMap read back with ``immutable: true`` -> ``CatalogImmutable``
(nothing is sent: it can only be deleted). An executor never raises.

The events reported match ``catalog_core.simulate.SimulatedWorld``: a successful
write also reports the object as written (redacted), so the core need not wait
for the watch to see its own write.
"""

from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import anyio

from adapters.backoff import KeyedBackoff
from adapters.identity import NAME
from adapters.kube.api import (
    MERGE_PATCH,
    OUTAGE_STATUSES,
    KubeApi,
    KubeError,
    collection_path,
    metadata,
    object_path,
)
from adapters.kube.settings import ERRORS_TOTAL, FORBIDDEN_TOTAL, KubeStats
from catalog_core.commands import (
    Command,
    CreateCatalogPlaceholder,
    EmitKubernetesEvent,
    EvictPod,
    PatchAgentTemplate,
    RollWorkload,
    WriteCatalog,
)
from catalog_core.events import CommandCompleted, Event, ObjectUpserted, Outcome, SourceKind
from catalog_core.kinds import ROLLABLE, ROLLABLE_BY_NAME
from catalog_core.reasons import Reason
from catalog_core.redact import redact_for_source
from catalog_core.sources.common import CATALOG_HASH_ANNOTATION, PREVIOUS_HASH_ANNOTATION
from contracts.kinds import RESOURCES, Resource

log = logging.getLogger("model_catalog.kube.writers")

COMPONENT = NAME  # an Event's source and reporting component
CONFLICT_ATTEMPTS = 4  # read-modify-write attempts before a conflict becomes a retry outcome
RETRY_BASE_SECONDS = 1.0
RETRY_CAP_SECONDS = 300.0  # the default of CATALOG_WRITE_RETRY_MAX_SECONDS
CONFLICT_BASE_SECONDS = 0.2  # a conflict is usually mended by the next observation: start sooner

_CONFIGMAP = RESOURCES[SourceKind.CATALOG_CONFIGMAP]
_AGENT_TEMPLATE = RESOURCES[SourceKind.AGENT_TEMPLATES]
_POD = RESOURCES[SourceKind.PODS]
_EVENT = Resource("", "v1", "events", "Event", "namespace")
_WORKLOADS: dict[str, SourceKind] = {kind.name: kind.source for kind in ROLLABLE}

# Every (command kind, verb, resource) a writer below may be refused: its 403 counter exists from the start.
WRITES: tuple[tuple[type[Command], str, Resource], ...] = (
    *((WriteCatalog, verb, _CONFIGMAP) for verb in ("get", "create", "update")),
    (PatchAgentTemplate, "patch", _AGENT_TEMPLATE),
    *((RollWorkload, "patch", RESOURCES[kind]) for kind in _WORKLOADS.values()),
    (EvictPod, "create", _POD),
    *((EmitKubernetesEvent, verb, _EVENT) for verb in ("get", "create", "update")),
)


class Outcomes:
    """Maps API answers to ``CommandCompleted`` (shared by the writers: one backoff per command key).

    Its counters are labelled by the command's kind, never by its key: a key names the object written
    (a pod, an Event), which whoever creates that object chooses.
    """

    def __init__(
        self,
        stats: KubeStats | None = None,
        backoff: KeyedBackoff | None = None,
        rng: random.Random | None = None,
        retry_cap: float = RETRY_CAP_SECONDS,
    ) -> None:
        self.stats = stats or KubeStats()
        for command, verb, resource in WRITES:
            self.stats.declare(FORBIDDEN_TOTAL, kind=command.__name__, verb=verb, resource=resource.plural)
            for status in OUTAGE_STATUSES:
                self.stats.declare(ERRORS_TOTAL, kind=command.__name__, status=str(status))
        self.rng = rng or random.Random()
        self.backoff = backoff or KeyedBackoff(base=RETRY_BASE_SECONDS, cap=retry_cap, rng=self.rng)
        self.conflicts = KeyedBackoff(base=CONFLICT_BASE_SECONDS, cap=retry_cap, rng=self.rng)

    def applied(self, command: Command, detail: str = "") -> CommandCompleted:
        self.backoff.forget(command.key)
        self.conflicts.forget(command.key)
        return CommandCompleted(command.key, command.id, Outcome.APPLIED, detail=detail)

    def failed(self, command: Command, err: KubeError, verb: str, where: str) -> CommandCompleted:
        """``where``: ``configmaps/ai-model-catalog in ai`` (for the log line and the detail)."""
        key, cid, kind = command.key, command.id, type(command).__name__
        detail = f"{verb} {where}: {err}"
        if err.status == 404 and verb != "create":
            self.backoff.forget(key)
            return CommandCompleted(key, cid, Outcome.GONE, reason="NotFound", detail=detail)
        if err.status == 409:
            delay = self.conflicts.next(key, cid)
            return CommandCompleted(key, cid, Outcome.RETRY, delay, Reason.WRITE_REJECTED.value, detail)
        if err.status == 403:
            self.stats.inc(FORBIDDEN_TOTAL, kind=kind, verb=verb, resource=where.partition("/")[0])
            delay = self.backoff.next(key, cid)
            log.warning("forbidden: %s %s (command %s; retrying in %.1fs)", verb, where, key, delay)
            return self.retry(command, delay, Reason.FORBIDDEN, f"forbidden: {detail}")
        self.stats.inc(ERRORS_TOTAL, kind=kind, status=str(err.status))
        delay = max(self.backoff.next(key, cid), err.retry_after)  # the server's Retry-After, when longer
        if err.transient:
            log.info("%s %s failed (%s); retrying in %.1fs", verb, where, err, delay)
            return self.retry(command, delay, Reason.WRITE_FAILED, detail)
        log.warning("%s %s rejected: %s; retrying in %.1fs", verb, where, err, delay)
        return self.retry(command, delay, Reason.WRITE_REJECTED, detail)

    def retry(self, command: Command, delay: float, reason: Reason, detail: str) -> CommandCompleted:
        return CommandCompleted(command.key, command.id, Outcome.RETRY, delay, reason.value, detail)

    def crashed(self, command: Command, exc: Exception) -> CommandCompleted:
        """A bug in an executor: retried with backoff, logged without the command's content."""
        delay = self.backoff.next(command.key, command.id)
        log.error("executing %s failed: %s", command.key, type(exc).__name__, exc_info=exc)
        return self.retry(command, delay, Reason.WRITE_FAILED, f"internal error: {type(exc).__name__}")


async def _guarded(
    outcomes: Outcomes, command: Command, run: Callable[[], Awaitable[Sequence[Event]]]
) -> Sequence[Event]:
    try:
        return await run()
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:
        return [outcomes.crashed(command, exc)]


def _where(resource: Resource, namespace: str, name: str) -> str:
    return f"{resource.plural}/{name} in {namespace}"


LAST_SYNC_ANNOTATION = "ai-appliance.io/last-sync"
CATALOG_LABELS = {"app": "ai-model-catalog"}


class CatalogWriter:
    """``WriteCatalog``: replace ``data``, set the hash and last-sync annotations and the ``app`` label (as
    the previous controller did); every other field is kept. ``CreateCatalogPlaceholder``: create it as the
    bootstrap placeholder unless it exists.

    A read-modify-write with the read resourceVersion; a 409 (someone wrote in between)
    re-reads and tries again, a few times, then reports retry.
    """

    def __init__(self, api: KubeApi, outcomes: Outcomes | None = None) -> None:
        self.api = api
        self.outcomes = outcomes or Outcomes()

    def handles(self, command: Command) -> bool:
        return isinstance(command, WriteCatalog | CreateCatalogPlaceholder)

    async def execute(self, command: Command) -> Sequence[Event]:
        if isinstance(command, CreateCatalogPlaceholder):
            return await _guarded(self.outcomes, command, lambda: self._create_placeholder(command))
        assert isinstance(command, WriteCatalog)
        return await _guarded(self.outcomes, command, lambda: self._write(command))

    async def _create_placeholder(self, command: CreateCatalogPlaceholder) -> Sequence[Event]:
        """Create only: a POST, which the API server refuses (409 AlreadyExists) when the ConfigMap exists."""
        where = _where(_CONFIGMAP, command.namespace, command.name)
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": command.name,
                "namespace": command.namespace,
                "labels": dict(CATALOG_LABELS),
                "annotations": {CATALOG_HASH_ANNOTATION: command.catalog_hash},
            },
            "data": dict(command.data),
        }
        try:
            written = await self.api.request(
                "POST", collection_path(_CONFIGMAP, command.namespace), body=body
            )
        except KubeError as err:
            if err.status == 409:  # someone created it first: it is theirs, and the watch will show it
                return [self.outcomes.applied(command, "it exists already")]
            return [self.outcomes.failed(command, err, "create", where)]
        written.setdefault("apiVersion", "v1")
        written.setdefault("kind", "ConfigMap")
        log.info("created the bootstrap catalog placeholder", extra={"configmap": where})
        return [
            self.outcomes.applied(command),
            ObjectUpserted(
                SourceKind.CATALOG_CONFIGMAP, redact_for_source(SourceKind.CATALOG_CONFIGMAP, written).obj
            ),
        ]

    async def _write(self, command: WriteCatalog) -> Sequence[Event]:
        path = object_path(_CONFIGMAP, command.namespace, command.name)
        where = _where(_CONFIGMAP, command.namespace, command.name)
        verb = "get"
        for attempt in range(CONFLICT_ATTEMPTS):
            try:
                verb = "get"
                current = await _get_or_none(self.api, path)
                if current is None:
                    verb = "create"
                    written = await self.api.request(
                        "POST", collection_path(_CONFIGMAP, command.namespace), body=self._created(command)
                    )
                elif current.get("immutable") is True:
                    return [self._immutable(command, where)]
                else:
                    verb = "update"
                    written = await self.api.request("PUT", path, body=self._updated(current, command))
            except KubeError as err:
                # 409: someone wrote (or created it) in between; 404 on update: deleted in between.
                again = err.status == 409 or (err.status == 404 and verb == "update")
                if again and attempt + 1 < CONFLICT_ATTEMPTS:
                    log.debug("%s %s: %s, reading again", verb, where, err.reason)
                    await anyio.sleep(self.outcomes.rng.uniform(0.02, 0.1) * (attempt + 1))
                    continue
                if err.status == 422 and "immutable" in err.message:
                    return [self._immutable(command, where)]  # made immutable since we read it
                return [self.outcomes.failed(command, err, verb, where)]
            written.setdefault("apiVersion", "v1")
            written.setdefault("kind", "ConfigMap")
            return [
                self.outcomes.applied(command),
                ObjectUpserted(
                    SourceKind.CATALOG_CONFIGMAP, redact_for_source(SourceKind.CATALOG_CONFIGMAP, written).obj
                ),
            ]
        raise AssertionError("unreachable")  # the loop returns on its last attempt

    def _immutable(self, command: WriteCatalog, where: str) -> CommandCompleted:
        """An immutable ConfigMap can never be rewritten, only deleted: say how, and look again later (the
        watch sees it deleted, and the core writes at once)."""
        delay = self.outcomes.backoff.next(command.key, command.id)
        fix = f"kubectl delete configmap -n {command.namespace} {command.name}"
        detail = (
            f"update {where}: the ConfigMap is immutable (immutable: true), so the catalog cannot be "
            f"written; delete it ({fix}) and it is written again at once"
        )
        log.error("%s; retrying in %.1fs", detail, delay)
        return self.outcomes.retry(command, delay, Reason.CATALOG_IMMUTABLE, detail)

    @staticmethod
    def _created(command: WriteCatalog) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": command.name,
                "namespace": command.namespace,
                "labels": dict(CATALOG_LABELS),
                "annotations": {
                    CATALOG_HASH_ANNOTATION: command.catalog_hash,
                    LAST_SYNC_ANNOTATION: _now(),
                },
            },
            "data": dict(command.data),
        }

    @staticmethod
    def _updated(current: dict[str, Any], command: WriteCatalog) -> dict[str, Any]:
        body = dict(current)
        meta = dict(metadata(current))
        annotations = meta.get("annotations")
        meta["annotations"] = {**(annotations if isinstance(annotations, dict) else {})}
        replaced = meta["annotations"].get(CATALOG_HASH_ANNOTATION)
        if replaced != command.catalog_hash:
            # What consumers started before this write read, until they are rolled (rules/rollouts.py).
            meta["annotations"][PREVIOUS_HASH_ANNOTATION] = replaced if isinstance(replaced, str) else ""
        meta["annotations"][CATALOG_HASH_ANNOTATION] = command.catalog_hash
        meta["annotations"][LAST_SYNC_ANNOTATION] = _now()
        labels = meta.get("labels")
        meta["labels"] = {**(labels if isinstance(labels, dict) else {}), **CATALOG_LABELS}
        meta.pop("managedFields", None)  # the server keeps them; sending them back is noise
        body["metadata"] = meta
        body["data"] = dict(command.data)
        body.setdefault("apiVersion", "v1")
        body.setdefault("kind", "ConfigMap")
        return body


async def _get_or_none(api: KubeApi, path: str) -> dict[str, Any] | None:
    try:
        return await api.request("GET", path)
    except KubeError as err:
        if err.status == 404:
            return None
        raise


class AgentTemplatePatcher:
    """``PatchAgentTemplate``: the core's JSON merge patch, guarded by the resourceVersion it carries."""

    def __init__(self, api: KubeApi, outcomes: Outcomes | None = None) -> None:
        self.api = api
        self.outcomes = outcomes or Outcomes()

    def handles(self, command: Command) -> bool:
        return isinstance(command, PatchAgentTemplate)

    async def execute(self, command: Command) -> Sequence[Event]:
        assert isinstance(command, PatchAgentTemplate)
        return await _guarded(self.outcomes, command, lambda: self._patch(command))

    async def _patch(self, command: PatchAgentTemplate) -> Sequence[Event]:
        path = object_path(_AGENT_TEMPLATE, command.namespace, command.name)
        try:
            patched = await self.api.request(
                "PATCH", path, body=command.patch.value(), content_type=MERGE_PATCH
            )
        except KubeError as err:
            return [
                self.outcomes.failed(
                    command, err, "patch", _where(_AGENT_TEMPLATE, command.namespace, command.name)
                )
            ]
        return [
            self.outcomes.applied(command),
            ObjectUpserted(
                SourceKind.AGENT_TEMPLATES, redact_for_source(SourceKind.AGENT_TEMPLATES, patched).obj
            ),
        ]


class WorkloadRoller:
    """``RollWorkload``: the catalog hash into the pod template, so the workload's own rollout applies."""

    def __init__(self, api: KubeApi, outcomes: Outcomes | None = None) -> None:
        self.api = api
        self.outcomes = outcomes or Outcomes()

    def handles(self, command: Command) -> bool:
        return isinstance(command, RollWorkload)

    async def execute(self, command: Command) -> Sequence[Event]:
        assert isinstance(command, RollWorkload)
        return await _guarded(self.outcomes, command, lambda: self._roll(command))

    async def _roll(self, command: RollWorkload) -> Sequence[Event]:
        source = _WORKLOADS.get(command.kind)
        if source is None:
            return [
                CommandCompleted(
                    command.key,
                    command.id,
                    Outcome.TERMINAL,
                    reason="UnsupportedKind",
                    detail=f"cannot roll a {command.kind}",
                )
            ]
        resource = RESOURCES[source]
        rollable = ROLLABLE_BY_NAME[command.kind].rollable
        assert rollable is not None  # ROLLABLE holds only rollable kinds
        patch = rollable.patch(command.catalog_hash)
        path = object_path(resource, command.namespace, command.name)
        try:
            patched = await self.api.request("PATCH", path, body=patch, content_type=MERGE_PATCH)
        except KubeError as err:
            return [
                self.outcomes.failed(command, err, "patch", _where(resource, command.namespace, command.name))
            ]
        patched.setdefault("apiVersion", resource.api_version)
        patched.setdefault("kind", resource.kind)
        return [
            self.outcomes.applied(command),
            ObjectUpserted(source, redact_for_source(source, patched).obj),
        ]


class PodEvictor:
    """``EvictPod`` through the Eviction API: policy/v1, or policy/v1beta1 where v1 is not served (<1.22).

    A PodDisruptionBudget refusal (429) is retried later; a pod that is already gone (404),
    or was replaced by another pod of the same name (uid precondition, 409), needs no eviction.
    """

    VERSIONS = ("policy/v1", "policy/v1beta1")

    def __init__(self, api: KubeApi, outcomes: Outcomes | None = None) -> None:
        self.api = api
        self.outcomes = outcomes or Outcomes()
        self._version = 0  # index into VERSIONS; moves to v1beta1 once the server says v1 is unknown

    def handles(self, command: Command) -> bool:
        return isinstance(command, EvictPod)

    async def execute(self, command: Command) -> Sequence[Event]:
        assert isinstance(command, EvictPod)
        return await _guarded(self.outcomes, command, lambda: self._evict(command))

    async def _evict(self, command: EvictPod) -> Sequence[Event]:
        path = object_path(_POD, command.namespace, command.name, "eviction")
        where = _where(_POD, command.namespace, command.name) + " (eviction)"
        while True:
            body: dict[str, Any] = {
                "apiVersion": self.VERSIONS[self._version],
                "kind": "Eviction",
                "metadata": {"name": command.name, "namespace": command.namespace},
            }
            if command.uid:
                body["deleteOptions"] = {"preconditions": {"uid": command.uid}}
            try:
                await self.api.request("POST", path, body=body)
            except KubeError as err:
                if err.status == 400 and self._version + 1 < len(self.VERSIONS) and _version_unknown(err):
                    self._version += 1
                    log.info(
                        "the API server does not serve Eviction %s; using %s",
                        self.VERSIONS[self._version - 1],
                        self.VERSIONS[self._version],
                    )
                    continue
                if err.status == 404:
                    return [self.outcomes.applied(command, "the pod is already gone")]
                if err.status == 409:
                    return [self.outcomes.applied(command, "the pod was replaced (uid changed)")]
                return [self.outcomes.failed(command, err, "create", where)]
            return [self.outcomes.applied(command)]


def _version_unknown(err: KubeError) -> bool:
    return "Eviction" in err.message and "policy/v1" in err.message and "registered" in err.message


def event_name(command: EmitKubernetesEvent) -> str:
    """Deterministic per (involved object, type, reason), as the Kubernetes event recorder aggregates: a
    repeat finds the same Event, raises its count and carries the newest message."""
    ref = command.involved
    key = "\x00".join(
        (ref.api_version, ref.kind, ref.namespace, ref.name, ref.uid, command.event_type, command.reason)
    )
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]
    prefix = ref.name[:200].rstrip(".-") or "object"
    return f"{prefix}.mc{digest}"


def _now() -> str:
    """UTC, seconds: Event timestamps, and when a catalog was written (as the previous controller did)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    """``EmitKubernetesEvent``: a core/v1 Event; a repeat increments ``count`` and ``lastTimestamp``."""

    MESSAGE_LIMIT = 1024

    def __init__(
        self, api: KubeApi, outcomes: Outcomes | None = None, clock: Callable[[], str] = _now
    ) -> None:
        self.api = api
        self.outcomes = outcomes or Outcomes()
        self.clock = clock

    def handles(self, command: Command) -> bool:
        return isinstance(command, EmitKubernetesEvent)

    async def execute(self, command: Command) -> Sequence[Event]:
        assert isinstance(command, EmitKubernetesEvent)
        return await _guarded(self.outcomes, command, lambda: self._record(command))

    async def _record(self, command: EmitKubernetesEvent) -> Sequence[Event]:
        namespace = command.involved.namespace or "default"
        name = event_name(command)
        path = object_path(_EVENT, namespace, name)
        where = _where(_EVENT, namespace, name)
        verb = "get"
        for attempt in range(CONFLICT_ATTEMPTS):
            try:
                verb = "get"
                current = await _get_or_none(self.api, path)
                now = self.clock()
                if current is None:
                    verb = "create"
                    await self.api.request(
                        "POST",
                        collection_path(_EVENT, namespace),
                        body=self._new(command, namespace, name, now),
                    )
                else:
                    verb = "update"
                    count = current.get("count")
                    body = {
                        **current,
                        "count": (count if isinstance(count, int) else 1) + 1,
                        "message": command.message[: self.MESSAGE_LIMIT],
                        "lastTimestamp": now,
                    }
                    await self.api.request("PUT", path, body=body)
            except KubeError as err:
                # 409: updated in between; 404 on update: it expired (its TTL) in between: read again.
                again = err.status == 409 or (err.status == 404 and verb == "update")
                if again and attempt + 1 < CONFLICT_ATTEMPTS:
                    await anyio.sleep(self.outcomes.rng.uniform(0.02, 0.1) * (attempt + 1))
                    continue
                return [self.outcomes.failed(command, err, verb, where)]
            return [self.outcomes.applied(command)]
        raise AssertionError("unreachable")

    def _new(self, command: EmitKubernetesEvent, namespace: str, name: str, now: str) -> dict[str, Any]:
        ref = command.involved
        involved = {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "namespace": ref.namespace,
            "name": ref.name,
        }
        if ref.uid:
            involved["uid"] = ref.uid
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved,
            "type": command.event_type,
            "reason": command.reason,
            "message": command.message[: self.MESSAGE_LIMIT],
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
        }
