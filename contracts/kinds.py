"""Which Kubernetes resources feed which source (used by the watches, render and replay tooling)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from catalog_core.ingest import DOCUMENT_NAMES
from catalog_core.sources import freetoken
from catalog_core.sources.common import LabelMatch


@attrs.frozen
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced_in: str  # "namespace" (NAMESPACE) or "appliance" (APPLIANCE_NAMESPACE)
    crd: bool = False
    label: LabelMatch | None = None  # only objects with this label belong to the source

    def holds(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` (of this resource's kind) belongs to the source."""
        return self.label is None or self.label.matches(obj)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCES: dict[SourceKind, Resource] = {
    SourceKind.KUBEAI_MODELS: Resource("kubeai.org", "v1", "models", "Model", "namespace", crd=True),
    SourceKind.EXTERNAL_MODELS: Resource("", "v1", "configmaps", "ConfigMap", "namespace"),
    SourceKind.MODEL_ACTIVATIONS: Resource(
        "appliance.magicstick.dev", "v1alpha1", "modelactivations", "ModelActivation", "appliance", crd=True
    ),
    SourceKind.FREETOKEN_DEPLOYMENTS: Resource(
        "apps", "v1", "deployments", "Deployment", "namespace", label=freetoken.RUNTIME_MATCH
    ),
    SourceKind.SERVICES: Resource("", "v1", "services", "Service", "namespace"),
    SourceKind.SECRETS: Resource("", "v1", "secrets", "Secret", "namespace"),
    SourceKind.AGENT_TEMPLATES: Resource(
        "kubeopencode.io", "v1alpha1", "agenttemplates", "AgentTemplate", "namespace", crd=True
    ),
    SourceKind.PODS: Resource("", "v1", "pods", "Pod", "namespace"),
    SourceKind.REPLICASETS: Resource("apps", "v1", "replicasets", "ReplicaSet", "namespace"),
    SourceKind.DEPLOYMENTS: Resource("apps", "v1", "deployments", "Deployment", "namespace"),
    SourceKind.STATEFULSETS: Resource("apps", "v1", "statefulsets", "StatefulSet", "namespace"),
    SourceKind.DAEMONSETS: Resource("apps", "v1", "daemonsets", "DaemonSet", "namespace"),
    SourceKind.CATALOG_CONFIGMAP: Resource("", "v1", "configmaps", "ConfigMap", "namespace"),
}


def namespace_for(source: SourceKind, config: CatalogConfig) -> str:
    return config.appliance_namespace if RESOURCES[source].namespaced_in == "appliance" else config.namespace


def sources_of(obj: Mapping[str, Any], config: CatalogConfig) -> list[SourceKind]:
    """The sources an object belongs to (a labelled runtime Deployment is also a workload)."""
    api_version, kind = raw.string(obj, "apiVersion") or "", raw.string(obj, "kind") or ""
    group = api_version.rpartition("/")[0]
    out: list[SourceKind] = []
    for source, res in RESOURCES.items():
        if res.kind != kind or res.group != group:
            continue
        named = DOCUMENT_NAMES.get(source)
        if named is not None:
            if raw.name_of(obj) == named(config):
                out.append(source)
        elif res.holds(obj):
            out.append(source)
    return out
