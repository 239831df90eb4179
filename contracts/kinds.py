"""Which Kubernetes resources feed which source (used by the watches, render and replay tooling)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from catalog_core import raw, registry
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from catalog_core.ingest import DOCUMENT_NAMES
from catalog_core.kinds import KINDS, Resource

__all__ = ["RESOURCES", "Resource", "namespace_for", "sources_of"]

# The sources that are not route sources: each kind's declaration (catalog_core/kinds.py); a route
# source's resource is in its spec.
_BUILT_IN: dict[SourceKind, Resource] = {kind.source: kind.resource for kind in KINDS}


class _Resources(Mapping[SourceKind, Resource]):
    """Every source's resource: the built-in table, then each route source's spec (read at call time, so
    a source installed later, a test's throwaway one, is watched and recognised like the others)."""

    def __getitem__(self, kind: SourceKind) -> Resource:
        found = _BUILT_IN.get(kind)
        if found is not None:
            return found
        return registry.BY_KIND[kind].resource

    def __iter__(self) -> Iterator[SourceKind]:
        # in declaration order: the built-in kinds first, as they always were
        yield from (kind for kind in SourceKind if kind in _BUILT_IN or kind in registry.BY_KIND)

    def __len__(self) -> int:
        return sum(1 for _ in self)


RESOURCES: Mapping[SourceKind, Resource] = _Resources()


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
