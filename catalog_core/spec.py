"""What a route source is: its one declaration (the resource it watches is a ``kinds.Resource``).

A route source (its items claim LiteLLM routes) is one ``SourceSpec``: what it watches, how a raw object
becomes a typed value or a rejection, which fields of it the core may see, its item key, id family,
rank, health gating, claim and warning target. ``catalog_core/registry.py`` lists the specs; the fold,
the planner, the adapters, ``render``, ``explain`` and the schemas read them from there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from catalog_core.commands import ObjectRef
from catalog_core.events import SourceKind
from catalog_core.keys import ItemKey, item_text
from catalog_core.kinds import Resource
from catalog_core.sources.common import LabelMatch, Problem
from catalog_core.state import Candidate, CatalogState
from catalog_core.trim import Spec as TrimSpec
from catalog_core.values import ID_PREFIX, Source, slug

Claim = Callable[[CatalogState, "SourceSpec", ItemKey], Candidate | None]
WarningTarget = Callable[[CatalogState, ItemKey, str], ObjectRef | None]
PublishedName = Callable[[CatalogState, "SourceSpec", ItemKey], str | None]
StartDeadline = Callable[[CatalogState, "SourceSpec", ItemKey], float | None]
# raw (trimmed, redacted) object -> its typed value (which may carry a Problem), or None: not the source's
Parse = Callable[[CatalogState, Mapping[str, Any]], Any]


@attrs.frozen
class SourceSpec:
    source: Source  # the routes.json ``source`` of its records
    item_prefix: str  # its item keys are ``<item_prefix>/<name>``
    kind: SourceKind  # the Kubernetes source whose objects are its items
    resource: Resource  # what that source watches
    trim: TrimSpec  # the fields of its objects the core reads (catalog_core/trim.py)
    rank: int  # one owned route per name: the higher rank wins (behaviour §3)
    id_family: str  # its rows' ids are ``ai-appliance-<id_family>-<slug>``; also model_info.source
    health_gated: bool  # published only once its endpoint answers GET /health (behaviour §4)
    claim: Claim  # the item's claim to a route, or the reason it has none; None when it does not exist
    warning_target: WarningTarget  # the object a Warning Event about the item is on (state, key, uid)
    # one object per item, kept by name in the state's per-source store: how it is parsed, and its type
    # (the event log's snapshots read the store back as this type). None for a source read from one
    # document (its observation is the document's own, in catalog_core/ingest.py).
    parse: Parse | None = None
    value_type: type | None = None
    # the model name an item would publish under, known before (or without) a claim; for ``explain``
    published_name: PublishedName = lambda state, spec, key: key.name
    # for items read from one document (its warning target): that document's problem, if unreadable
    document_problem: Callable[[CatalogState], Problem | None] | None = None
    # ...and whether it still has items read from the document's last good version (kept published)
    document_has_items: Callable[[CatalogState], bool] = lambda state: False
    # Its health records and probes are keyed by the bare item name, the event log's key format since
    # its first version (FreeToken runtimes only: at most one source may); any other gated source's are
    # keyed by the whole item key.
    bare_health_keys: bool = False
    # Sources whose CRD being installed or not its claims read: a change re-derives every item of this one.
    reads_installed: tuple[SourceKind, ...] = ()
    # Its items are runtimes that anyone who may create Deployments or Models in NAMESPACE can make: among
    # such items (of any rank), the one holding a model name keeps it, and rank decides only when none
    # holds it (behaviour §3). They rank below every source without it.
    sticky_names: bool = False
    # For a source whose items may be published before their runtime is ready: the seconds an item's
    # runtime may spend starting (pods, none ready) before its claim reports it, or None while it is not
    # starting (or not published before it is ready). The claim reads ``state.starts``.
    start_deadline: StartDeadline = lambda state, spec, key: None

    def item(self, name: str) -> ItemKey:
        return ItemKey(self.item_prefix, name)

    def item_text(self, name: str) -> str:
        """``item(name).text``, without making the key."""
        return item_text(self.item_prefix, name)

    def route_id(self, model_name: str) -> str:
        return f"{ID_PREFIX}{self.id_family}-{slug(model_name)}"

    def health_key(self, item: ItemKey) -> str:
        """The key of this source's ``item``'s health record (state.health) and of its probes."""
        return item.name if self.bare_health_keys else item.text


def deployment_target(state: CatalogState, key: ItemKey, uid: str) -> ObjectRef:
    """The warning target of an item that is a Deployment of the namespace (a runtime)."""
    return ObjectRef("apps/v1", "Deployment", state.config.namespace, key.name, uid)


def runtime_model_name(state: CatalogState, spec: SourceSpec, key: ItemKey) -> str | None:
    """The model a runtime serves: its activation's name, else its own."""
    runtime = state.stored(spec.kind).get(key.name)
    return (runtime.activation or runtime.name) if runtime is not None else None


def runtime_deployments(label: LabelMatch) -> Resource:
    """The Deployments of the namespace that carry ``label``: a runtime source's watch."""
    return Resource("apps", "v1", "deployments", "Deployment", "namespace", label=label)
