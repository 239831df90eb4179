"""What each watched Kubernetes kind that is not a route source is to the controller: one ``Kind`` each.

A ``Kind`` says what the watch asks for (its ``Resource``: the RBAC rules, the watches and ``render`` read
it), which fields of its objects the core may see (its trim spec), how an object becomes a typed value and
where the state keeps it, what a change of it plans again, and, for a workload the controller rolls on a
catalog change, how a pod reaches it and the merge patch that rolls it. The fold, the planner, the
writers, ``simulate``, ``render`` and ``contracts`` read ``KINDS`` and never name one of these kinds. A
route source's kind is declared by its ``SourceSpec`` (``catalog_core/registry.py``).

A new rollable workload kind is one ``Kind.workload(...)`` in ``KINDS`` (its ``SourceKind`` declared
beside it); ``check`` refuses an inconsistent declaration at import.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from catalog_core.keys import RefKind, agent_template_key, evict_key, rollout_key
from catalog_core.sources.agent_template import AgentTemplateInfo
from catalog_core.sources.common import CATALOG_HASH_ANNOTATION, LabelMatch
from catalog_core.sources.consumers import ConsumerPod, ReplicaSetOwner, Workload
from catalog_core.sources.freetoken import ServicePort
from catalog_core.sources.secret import SecretInfo
from catalog_core.trim import APPLIANCE_ANNOTATIONS, KEEP, META, PROVIDER_SECRET_API_BASES, Each, Prefixed
from catalog_core.trim import Spec as TrimSpec


@attrs.frozen
class Resource:
    """The Kubernetes resource a source watches (pure data: the watch, ``render`` and RBAC read it)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced_in: Literal["namespace", "appliance"]  # NAMESPACE or APPLIANCE_NAMESPACE
    crd: bool = False
    label: LabelMatch | None = None  # only objects with this label belong to the source

    def holds(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` (of this resource's kind) belongs to the source."""
        return self.label is None or self.label.matches(obj)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class Replans(enum.Enum):
    """What a change of one of the kind's objects marks for planning."""

    DEPENDENTS = "dependents"  # the claims that read the object (``Kind.dependents`` names the reference)
    TEMPLATES = "templates"  # the AgentTemplates' patches
    ROLLOUTS = "rollouts"  # the consumers' rollouts
    CATALOG = "catalog"  # the catalog (a named document, observed whole)


# The kinds between a rollable workload and its pods that the state records (``ReplicaSetOwner`` records
# the Deployment that owns a ReplicaSet): a workload reached through another kind names one of these.
THROUGH_KINDS: Mapping[str, str] = {"ReplicaSet": "Deployment"}


@attrs.frozen
class Rollable:
    """A workload the controller rolls: it writes the catalog hash into the workload's pod template, so
    the workload's own rollout (its surge, its budget) restarts the pods (behaviour §9.2)."""

    template: tuple[str, ...] = ("spec", "template")  # where its pod template is in the object
    through: str = ""  # the kind between it and its pods (a Deployment's ReplicaSets); "" when it owns them

    def patch(self, catalog_hash: str) -> dict[str, Any]:
        """The merge patch that rolls it onto ``catalog_hash``."""
        patch: dict[str, Any] = {"metadata": {"annotations": {CATALOG_HASH_ANNOTATION: catalog_hash}}}
        for step in reversed(self.template):
            patch = {step: patch}
        return patch


# typed value of a raw (trimmed, redacted) object, or None: not one the controller reads
Parse = Callable[[Mapping[str, Any]], Any]


@attrs.frozen
class Kind:
    source: SourceKind  # its watch's events
    resource: Resource  # what the watch asks for
    trim: TrimSpec  # the fields of its objects the core reads (catalog_core/trim.py)
    replans: Replans
    # read object by object: its parser and where the state keeps the values, (group attribute, field);
    # None for a named document (``document``), observed whole by ``catalog_core/ingest.py``
    parse: Parse | None = None
    store: tuple[str, str] | None = None
    document: Callable[[CatalogConfig], str] | None = None  # the one object of the kind that is read
    dependents: RefKind | None = None  # with Replans.DEPENDENTS: how the claims that read it name it
    # the key of the command that writes the object, (namespace, name) -> key (None: no command does)
    written_by: Callable[[str, str], str] | None = None
    rollable: Rollable | None = None
    # Rollout planning waits for it from the start (the kinds every recorded log lists). Any other is
    # waited for once its watch has reported, so a log recorded before the kind existed replays as it ran;
    # until then a pod it owns is left alone (its workload is not observed), never evicted.
    waited_from_start: bool = False

    @classmethod
    def workload(
        cls,
        source: SourceKind,
        resource: Resource,
        rollable: Rollable = Rollable(),
        *,
        waited_from_start: bool = False,
    ) -> Kind:
        """A workload kind the controller rolls: watched, trimmed, parsed, stored and rolled alike."""
        template = rollable.template
        trim: dict[str, Any] = {"metadata": {"labels": KEEP, "annotations": APPLIANCE_ANNOTATIONS}}
        for step in reversed(template):
            trim = {step: trim}
        return cls(
            source,
            resource,
            {"metadata": META, **trim},
            Replans.ROLLOUTS,
            parse=lambda obj: Workload.from_k8s(obj, resource.kind, template),
            store=("cluster", "workloads"),
            written_by=lambda namespace, name: rollout_key(namespace, resource.kind, name),
            rollable=rollable,
            waited_from_start=waited_from_start,
        )

    @property
    def name(self) -> str:
        """The Kubernetes kind (``Deployment``)."""
        return self.resource.kind

    def key(self, name: str) -> str:
        """The key of the object ``name`` in its store (workloads of every kind share one: ``Kind/name``)."""
        return f"{self.resource.kind}/{name}" if self.rollable is not None else name


KINDS: tuple[Kind, ...] = (
    Kind(
        SourceKind.SERVICES,
        Resource("", "v1", "services", "Service", "namespace"),
        {"metadata": META, "spec": {"type": KEEP, "ports": Each({"name": KEEP, "port": KEEP})}},
        Replans.DEPENDENTS,
        parse=ServicePort.from_k8s,
        store=("observed", "services"),
        dependents=RefKind.SERVICE,
    ),
    Kind(
        SourceKind.SECRETS,
        Resource("", "v1", "secrets", "Secret", "namespace"),
        {
            "metadata": {
                "name": KEEP,
                "namespace": KEEP,
                "uid": KEEP,
                "resourceVersion": KEEP,
                "labels": KEEP,
                # not the others: kubectl's last-applied-configuration holds a copy of the data
                "annotations": Prefixed((PROVIDER_SECRET_API_BASES,)),
            },
            "type": KEEP,
            "data": KEEP,
            "stringData": KEEP,
        },
        Replans.DEPENDENTS,
        parse=SecretInfo.from_k8s,
        store=("observed", "secrets"),
        dependents=RefKind.SECRET,
    ),
    Kind(
        SourceKind.AGENT_TEMPLATES,
        Resource("kubeopencode.io", "v1alpha1", "agenttemplates", "AgentTemplate", "namespace", crd=True),
        {
            "metadata": META,
            "spec": {
                "config": {"model": KEEP, "small_model": KEEP, "provider": {"litellm": {"models": KEEP}}}
            },
        },
        Replans.TEMPLATES,
        parse=AgentTemplateInfo.from_k8s,
        store=("cluster", "templates"),
        written_by=agent_template_key,
    ),
    Kind(
        SourceKind.PODS,
        Resource("", "v1", "pods", "Pod", "namespace"),
        {"metadata": META},
        Replans.ROLLOUTS,
        parse=ConsumerPod.from_k8s,
        store=("cluster", "pods"),
        written_by=evict_key,
        waited_from_start=True,
    ),
    Kind(
        SourceKind.REPLICASETS,
        Resource("apps", "v1", "replicasets", "ReplicaSet", "namespace"),
        {"metadata": META},
        Replans.ROLLOUTS,
        parse=ReplicaSetOwner.from_k8s,
        store=("cluster", "replicasets"),
        waited_from_start=True,
    ),
    Kind.workload(
        SourceKind.DEPLOYMENTS,
        Resource("apps", "v1", "deployments", "Deployment", "namespace"),
        Rollable(through="ReplicaSet"),
        waited_from_start=True,
    ),
    Kind.workload(
        SourceKind.STATEFULSETS,
        Resource("apps", "v1", "statefulsets", "StatefulSet", "namespace"),
        waited_from_start=True,
    ),
    Kind.workload(
        SourceKind.DAEMONSETS,
        Resource("apps", "v1", "daemonsets", "DaemonSet", "namespace"),
        waited_from_start=True,
    ),
    Kind(
        SourceKind.CATALOG_CONFIGMAP,
        Resource("", "v1", "configmaps", "ConfigMap", "namespace"),
        {"metadata": META, "data": KEEP},
        Replans.CATALOG,
        document=lambda config: config.catalog_configmap,
    ),
)


def check(kinds: tuple[Kind, ...]) -> None:
    """Every declaration is whole and consistent with the others; the message names the one that is not."""
    for what, values in (
        ("source kind", [k.source for k in kinds]),
        ("Kubernetes kind (of a rollable workload)", [k.name for k in kinds if k.rollable is not None]),
    ):
        if len(set(values)) != len(values):
            raise RuntimeError(f"kinds: two declarations share a {what}: {values}")
    for kind in kinds:
        name = f"kinds: {kind.name} ({kind.source})"
        if (kind.parse is None) != (kind.store is None) or (kind.parse is None) == (kind.document is None):
            raise RuntimeError(f"{name}: read object by object (parse and store) or as one document")
        if (kind.replans is Replans.DEPENDENTS) != (kind.dependents is not None):
            raise RuntimeError(f"{name}: the claims that read it are marked by its reference (dependents)")
        if kind.document is not None and kind.replans is not Replans.CATALOG:
            raise RuntimeError(f"{name}: a named document is observed whole and re-plans the catalog")
        if "metadata" not in kind.trim:
            raise RuntimeError(f"{name}: its trim spec keeps no metadata (the object's name and uid)")
        rollable = kind.rollable
        if rollable is None:
            continue
        if (
            kind.replans is not Replans.ROLLOUTS
            or kind.store != ("cluster", "workloads")
            or kind.written_by is None
        ):
            raise RuntimeError(
                f"{name}: a rollable workload is stored with the workloads and re-plans rollouts"
            )
        if rollable.through and THROUGH_KINDS.get(rollable.through) != kind.name:
            raise RuntimeError(
                f"{name}: reached through {rollable.through}, which the state records for "
                f"{THROUGH_KINDS.get(rollable.through, 'no kind')} only"
            )
        if not rollable.template:
            raise RuntimeError(f"{name}: a rollable workload's pod template has a path")


check(KINDS)

BY_SOURCE: Mapping[SourceKind, Kind] = {kind.source: kind for kind in KINDS}
ROLLABLE: tuple[Kind, ...] = tuple(kind for kind in KINDS if kind.rollable is not None)
ROLLABLE_BY_NAME: Mapping[str, Kind] = {kind.name: kind for kind in ROLLABLE}
# Workloads that own their pods (a pod's owner reference names them) and those reached through another kind
OWN_PODS: frozenset[str] = frozenset(
    k.name for k in ROLLABLE if k.rollable is not None and not k.rollable.through
)
# The sources a consumer's rollout is planned from: planning waits until every one is known
# (``rollout_sources_known``).
ROLLOUT_SOURCES: tuple[SourceKind, ...] = tuple(k.source for k in KINDS if k.replans is Replans.ROLLOUTS)
_WAITED_FROM_START = frozenset(k.source for k in KINDS if k.waited_from_start)


def rollout_sources_known(
    reported: Callable[[SourceKind], bool], known: Callable[[SourceKind], bool]
) -> bool:
    """Whether every rollout source is known: those waited for from the start, and every other one whose
    watch has ``reported`` (listed, not installed, failing or forbidden)."""
    return all(known(s) for s in ROLLOUT_SOURCES if s in _WAITED_FROM_START or reported(s))
