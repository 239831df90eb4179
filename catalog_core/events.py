"""Events: past-tense facts the core receives. The event log records them exactly as received.

Source events carry raw (redacted) Kubernetes objects; ``ingest`` parses them
with the named constructors before anything is folded.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, ClassVar

import attrs

from catalog_core.openenum import OpenEnum


class SourceKind(OpenEnum):
    """A Kubernetes source of events (its wire text is the value). The built-in kinds are declared below; a
    route source declares its own in its module (``catalog_core/registry.py`` lists them)."""

    KUBEAI_MODELS: ClassVar[SourceKind]
    EXTERNAL_MODELS: ClassVar[SourceKind]
    MODEL_ACTIVATIONS: ClassVar[SourceKind]
    FREETOKEN_DEPLOYMENTS: ClassVar[SourceKind]
    SERVICES: ClassVar[SourceKind]
    SECRETS: ClassVar[SourceKind]
    AGENT_TEMPLATES: ClassVar[SourceKind]
    PODS: ClassVar[SourceKind]
    REPLICASETS: ClassVar[SourceKind]
    DEPLOYMENTS: ClassVar[SourceKind]
    STATEFULSETS: ClassVar[SourceKind]
    DAEMONSETS: ClassVar[SourceKind]
    CATALOG_CONFIGMAP: ClassVar[SourceKind]


SourceKind.declare_constants(
    {
        "KUBEAI_MODELS": "kubeai-models",
        "EXTERNAL_MODELS": "external-models",
        "MODEL_ACTIVATIONS": "model-activations",
        "FREETOKEN_DEPLOYMENTS": "freetoken-deployments",
        "SERVICES": "services",
        "SECRETS": "secrets",
        "AGENT_TEMPLATES": "agent-templates",
        "PODS": "pods",
        "REPLICASETS": "replicasets",
        "DEPLOYMENTS": "deployments",
        "STATEFULSETS": "statefulsets",
        "DAEMONSETS": "daemonsets",
        "CATALOG_CONFIGMAP": "catalog-configmap",
    }
)
# The kinds the non-route tables know (ingest, trim, contracts/kinds.py); every other kind is declared by
# a route source's spec.
BUILT_IN_KINDS = frozenset(SourceKind)


# The built-in sources whose content decides the routes and the catalog: what a run waited for before
# route sources declared their own kinds (the default of an event log header without ``sources``);
# ``registry.CATALOG_KINDS`` adds every registered route source.
CATALOG_SOURCES = (
    SourceKind.KUBEAI_MODELS,
    SourceKind.EXTERNAL_MODELS,
    SourceKind.MODEL_ACTIVATIONS,
    SourceKind.FREETOKEN_DEPLOYMENTS,
    SourceKind.SERVICES,
    SourceKind.SECRETS,
    SourceKind.CATALOG_CONFIGMAP,
)


class Unavailability(StrEnum):
    NOT_INSTALLED = "not-installed"  # the CRD is absent: an empty source, not an error
    FORBIDDEN = "forbidden"  # 403: keep the last good value
    FAILING = "failing"  # other errors: keep the last good value


class Outcome(StrEnum):
    APPLIED = "applied"
    RETRY = "retry"  # try again after ``retry_after`` seconds (the executor chose backoff and jitter)
    TERMINAL = "terminal"  # do not retry this exact command
    GONE = "gone"  # the target does not exist (e.g. update of a row someone deleted)


@attrs.frozen
class ObjectUpserted:
    source: SourceKind
    object: Mapping[str, Any]


@attrs.frozen
class ObjectDeleted:
    source: SourceKind
    object: Mapping[str, Any]


@attrs.frozen
class SourceListed:
    """The complete content of a source: anything not in ``objects`` is gone.

    ``scope`` names what the listing covered when a source is watched by name
    (Secrets); objects named in it but absent are known not to exist.
    """

    source: SourceKind
    objects: tuple[Mapping[str, Any], ...]
    scope: tuple[str, ...] | None = None


@attrs.frozen
class SourceUnavailable:
    source: SourceKind
    status: Unavailability
    detail: str = ""


@attrs.frozen
class LiteLLMRowsObserved:
    """Every row of ``GET /model/info``, reduced to the whitelist (litellm_row.whitelist_row)."""

    rows: tuple[Mapping[str, Any], ...]


@attrs.frozen
class LiteLLMUnreachable:
    reason: str  # "unauthorized" | "unreachable" | "error"
    detail: str = ""


@attrs.frozen
class RuntimeProbed:
    runtime: str
    url: str
    healthy: bool
    detail: str = ""


@attrs.frozen
class CommandCompleted:
    key: str
    command_id: str
    outcome: Outcome
    retry_after: float = 0.0
    reason: str = ""
    detail: str = ""


@attrs.frozen
class LeadershipChanged:
    """This replica started or stopped leading. A standby folds and plans, but issues only reads."""

    leading: bool


@attrs.frozen
class Ticked:
    """Time passed. Also the moment the core plans: source events only record what changed."""

    now: float
    # How long the loop had been folding this tick's events when it ticked (seconds): events delivered
    # meanwhile waited, and reach the core back to back after it (``damping``: one moment, not a burst).
    busy: float = 0.0


Event = (
    ObjectUpserted
    | ObjectDeleted
    | SourceListed
    | SourceUnavailable
    | LiteLLMRowsObserved
    | LiteLLMUnreachable
    | RuntimeProbed
    | CommandCompleted
    | LeadershipChanged
    | Ticked
)
