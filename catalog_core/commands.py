"""Commands: imperative effects the core asks the shell to carry out.

Every command has a ``key`` (what it writes; the shell's queue keeps one entry
per key, the newest) and an ``id`` (a hash of its content), so running it twice
is harmless and an outcome names exactly which command it answers.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

import attrs

from catalog_core import keys
from catalog_core.jsonval import Json, canonical, short_hash

T = TypeVar("T")


@attrs.frozen
class LiteralKey:
    """A non-secret placeholder key, e.g. ``none`` for local runtimes."""

    value: str


@attrs.frozen
class SecretKey:
    """A key held in a Secret; the shell's vault supplies the value at execution time."""

    namespace: str
    name: str
    key: str
    uid: str
    resource_version: str
    fingerprint: str


@attrs.frozen
class InlineKeyRef:
    """An inline key from models.json, known to the core only by fingerprint."""

    fingerprint: str


ApiKeyRef = LiteralKey | SecretKey | InlineKeyRef


def plain(value: Any) -> Any:
    """A JSON-able form of a command field (for ids and human output; secrets are refs, never values)."""
    if isinstance(value, Json):
        return value.value()
    if attrs.has(type(value)):
        return {
            f.name: plain(getattr(value, f.name)) for f in attrs.fields(type(value)) if f.name not in ("id",)
        } | {"type": type(value).__name__}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _ident(self: Any) -> None:
    object.__setattr__(self, "id", short_hash(canonical(plain(self))))


def _identified(cls: type[T]) -> type[T]:
    """A command whose ``id`` is the hash of its content (set once made; apply under ``attrs.frozen``)."""
    cls.__attrs_post_init__ = _ident  # type: ignore[attr-defined]
    return cls


class _Key:
    """A command's ``key``, computed from its fields by ``catalog_core.keys`` (read-only, not a field)."""

    def __init__(self, of: Callable[[Any], str]) -> None:
        self._of = of

    def __get__(self, command: Any, owner: type | None = None) -> str:
        return self._of(command)


@attrs.frozen
@_identified
class _LiteLLMWrite:
    model_id: str
    model_name: str
    litellm_params: Json  # without api_key
    model_info: Json
    api_key: ApiKeyRef | None
    id: str = attrs.field(init=False, default="")

    key = _Key(lambda c: keys.litellm_key(c.model_id))


@attrs.frozen
class CreateLiteLLMModel(_LiteLLMWrite):
    """POST /model/new."""


@attrs.frozen
class UpdateLiteLLMModel(_LiteLLMWrite):
    """Merge the fields into the existing row (LiteLLM's PATCH /model/{id}/update)."""


@attrs.frozen
class RecreateLiteLLMModel(_LiteLLMWrite):
    """Delete then create: LiteLLM's updates merge, so dropping a field needs a fresh row."""


@attrs.frozen
@_identified
class DeleteLiteLLMModel:
    model_id: str
    id: str = attrs.field(init=False, default="")

    key = _Key(lambda c: keys.litellm_key(c.model_id))


@attrs.frozen
class WriteCatalog:
    """Replace the data of ConfigMap/ai-model-catalog and its hash annotation (foreign metadata kept)."""

    namespace: str
    name: str
    data: tuple[tuple[str, str], ...]
    catalog_hash: str
    fingerprint: str
    id: str = attrs.field(init=False, default="")

    def __attrs_post_init__(self) -> None:
        object.__setattr__(
            self, "id", short_hash(f"WriteCatalog/{self.namespace}/{self.name}/{self.fingerprint}")
        )

    key = _Key(lambda c: keys.catalog_key(c.namespace, c.name))


@attrs.frozen
class CreateCatalogPlaceholder:
    """Create ConfigMap/ai-model-catalog as the bootstrap placeholder (READY false) if it does not exist, so
    consumers can start before a catalog can be written. Create only: one that exists is never touched."""

    namespace: str
    name: str
    data: tuple[tuple[str, str], ...]
    catalog_hash: str
    fingerprint: str
    id: str = attrs.field(init=False, default="")

    def __attrs_post_init__(self) -> None:
        object.__setattr__(
            self,
            "id",
            short_hash(f"CreateCatalogPlaceholder/{self.namespace}/{self.name}/{self.fingerprint}"),
        )

    key = _Key(lambda c: keys.catalog_key(c.namespace, c.name))


@attrs.frozen
@_identified
class PatchAgentTemplate:
    """A JSON merge patch guarded by resourceVersion (409 when the template changed meanwhile)."""

    namespace: str
    name: str
    resource_version: str
    patch: Json
    id: str = attrs.field(init=False, default="")

    key = _Key(lambda c: keys.agent_template_key(c.namespace, c.name))


@attrs.frozen
@_identified
class RollWorkload:
    """Set ai-appliance.io/catalog-hash in the workload's pod template: its own rollout strategy applies."""

    namespace: str
    kind: str
    name: str
    catalog_hash: str
    id: str = attrs.field(init=False, default="")

    key = _Key(lambda c: keys.rollout_key(c.namespace, c.kind, c.name))


@attrs.frozen
@_identified
class EvictPod:
    """Evict an ownerless consumer pod through the Eviction API."""

    namespace: str
    name: str
    uid: str
    catalog_hash: str
    id: str = attrs.field(init=False, default="")

    key = _Key(lambda c: keys.evict_key(c.namespace, c.name))


@attrs.frozen
@_identified
class ProbeRuntime:
    """GET the runtime's /health (3 s timeout); the answer comes back as RuntimeProbed."""

    runtime: str
    url: str
    id: str = attrs.field(init=False, default="")

    key = _Key(lambda c: keys.probe_key(c.runtime))


@attrs.frozen
class ObjectRef:
    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str


@attrs.frozen
@_identified
class EmitKubernetesEvent:
    """A Warning Event on the object whose input was rejected; the adapter aggregates repeats."""

    involved: ObjectRef
    reason: str
    message: str
    event_type: str = "Warning"
    id: str = attrs.field(init=False, default="")

    key = _Key(lambda c: keys.event_key(c.id))


@attrs.frozen
class SecretWatch:
    name: str
    # True: usable only if labelled model-provider-secret=true (the label-selected watch covers it);
    # False: allowed by its name (ai-model-provider-*), read by name whatever its labels (behaviour §1.5)
    provider_only: bool


@attrs.frozen
@_identified
class WatchSecrets:
    """The Secrets the core needs to see: the adapter reads exactly these names (never the master key's)."""

    namespace: str
    secrets: tuple[SecretWatch, ...]
    id: str = attrs.field(init=False, default="")

    key = _Key(lambda c: keys.secret_watch_key(c.namespace))


class ReadReason(StrEnum):
    """Why the core asks LiteLLM to be read again (``ObserveLiteLLM.reason``)."""

    # Writes were applied that no observation covers yet: LiteLLM fills a new row's limits in from its
    # model map, and the catalog publishes what LiteLLM holds.
    AFTER_WRITES = "after-writes"
    # A create was answered with LiteLLM's duplicate-id 500: the row probably exists.
    ROW_PROBABLY_EXISTS = "row-probably-exists"
    # A recreate did not complete: its delete may have applied, so the row may be gone.
    RECREATE_UNFINISHED = "recreate-unfinished"
    # A write's answer says LiteLLM is failing (unreachable, refusing the master key, erroring) while the
    # last observation saw it answering: a read confirms it, and the status is reported.
    WRITE_SAW_FAILURE = "write-saw-failure"
    # A write got an answer while the last observation found LiteLLM failing: it is back, and the writes
    # held back by the outage are due once an observation says so.
    WRITE_SAW_ANSWER = "write-saw-answer"


@attrs.frozen
@_identified
class ObserveLiteLLM:
    """Read every row LiteLLM holds now (``GET /model/info``): the answer is the observation
    (``LiteLLMRowsObserved``, or ``LiteLLMUnreachable`` when the read fails), which any observation folded
    later also stands for. The key is one for all re-reads, so many reasons are one read."""

    reason: ReadReason
    id: str = attrs.field(init=False, default="")

    key = _Key(lambda c: keys.LITELLM_READ_KEY)


# Commands that only read: a standby replica still issues them to keep its state warm.
READ_COMMANDS = (ProbeRuntime, WatchSecrets, ObserveLiteLLM)

LiteLLMCommand = CreateLiteLLMModel | UpdateLiteLLMModel | RecreateLiteLLMModel | DeleteLiteLLMModel
Command = (
    CreateLiteLLMModel
    | UpdateLiteLLMModel
    | RecreateLiteLLMModel
    | DeleteLiteLLMModel
    | WriteCatalog
    | CreateCatalogPlaceholder
    | PatchAgentTemplate
    | RollWorkload
    | EvictPod
    | ProbeRuntime
    | EmitKubernetesEvent
    | WatchSecrets
    | ObserveLiteLLM
)
