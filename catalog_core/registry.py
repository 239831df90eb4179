"""The route sources: everything the fold, the planner and the tools need to know about each, in one place.

A route source turns the items of one Kubernetes source into claims to a LiteLLM route (KubeAI Models,
the models.json document, external ModelActivations, FreeToken runtimes). Each is one ``SourceSpec``
below; the rest of the system reads this registry and names no concrete source. A source missing from
it, or a spec inconsistent with the others, fails at import (``check``), never at run time.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from catalog_core import kinds
from catalog_core.commands import ObjectRef
from catalog_core.events import BUILT_IN_KINDS, CATALOG_SOURCES, SourceKind
from catalog_core.keys import ItemKey
from catalog_core.kinds import Resource
from catalog_core.rules import candidates as claims
from catalog_core.sources.activation import ModelActivation
from catalog_core.sources.common import Problem
from catalog_core.sources.freetoken import RUNTIME_MATCH, FreeTokenRuntime
from catalog_core.sources.kubeai import KubeAIModel
from catalog_core.spec import (
    SourceSpec,
    deployment_target,
    runtime_deployments,
    runtime_model_name,
)
from catalog_core.state import Candidate, CatalogState
from catalog_core.trim import TRIM
from catalog_core.trim import Spec as TrimSpec
from catalog_core.values import Source


def _kubeai_target(state: CatalogState, key: ItemKey, uid: str) -> ObjectRef:
    return ObjectRef("kubeai.org/v1", "Model", state.config.namespace, key.name, uid)


def _document_target(state: CatalogState, key: ItemKey, uid: str) -> ObjectRef:
    cfg = state.config
    return ObjectRef(
        "v1", "ConfigMap", cfg.namespace, cfg.external_models_configmap, state.observed.external_uid
    )


def _activation_target(state: CatalogState, key: ItemKey, uid: str) -> ObjectRef:
    ns = state.config.appliance_namespace
    return ObjectRef("appliance.magicstick.dev/v1alpha1", "ModelActivation", ns, key.name, uid)


SPECS: tuple[SourceSpec, ...] = (
    SourceSpec(
        Source.ACTIVATION,
        "activation",
        SourceKind.MODEL_ACTIVATIONS,
        Resource(
            "appliance.magicstick.dev",
            "v1alpha1",
            "modelactivations",
            "ModelActivation",
            "appliance",
            crd=True,
        ),
        TRIM[SourceKind.MODEL_ACTIVATIONS],
        rank=3,
        id_family="external",
        health_gated=False,
        claim=claims.activation_claim,
        warning_target=_activation_target,
        parse=lambda state, obj: ModelActivation.from_k8s(obj, state.config.namespace),
        value_type=ModelActivation,
        reads_installed=(SourceKind.KUBEAI_MODELS,),
    ),
    SourceSpec(
        Source.EXTERNAL,
        "external",
        SourceKind.EXTERNAL_MODELS,
        Resource("", "v1", "configmaps", "ConfigMap", "namespace"),
        TRIM[SourceKind.EXTERNAL_MODELS],
        rank=2,
        id_family="external",
        health_gated=False,
        claim=claims.external_claim,
        warning_target=_document_target,
        document_problem=lambda state: state.observed.external_problem,
        document_has_items=lambda state: bool(state.observed.external_items),
    ),
    SourceSpec(
        Source.FREETOKEN,
        "freetoken",
        SourceKind.FREETOKEN_DEPLOYMENTS,
        runtime_deployments(RUNTIME_MATCH),
        TRIM[SourceKind.FREETOKEN_DEPLOYMENTS],
        rank=1,
        id_family="freetoken",
        health_gated=True,
        claim=claims.runtime_claim,
        warning_target=deployment_target,
        parse=lambda state, obj: FreeTokenRuntime.from_k8s(obj),
        value_type=FreeTokenRuntime,
        bare_health_keys=True,
        published_name=runtime_model_name,
        sticky_names=True,
    ),
    SourceSpec(
        Source.KUBEAI,
        "kubeai",
        SourceKind.KUBEAI_MODELS,
        Resource("kubeai.org", "v1", "models", "Model", "namespace", crd=True),
        TRIM[SourceKind.KUBEAI_MODELS],
        rank=0,
        id_family="kubeai",
        health_gated=False,
        claim=claims.kubeai_claim,
        warning_target=_kubeai_target,
        parse=lambda state, obj: KubeAIModel.from_k8s(obj),
        value_type=KubeAIModel,
        sticky_names=True,
        start_deadline=claims.kubeai_start_deadline,
    ),
)

BY_SOURCE: Mapping[Source, SourceSpec] = {}
BY_PREFIX: Mapping[str, SourceSpec] = {}
BY_KIND: Mapping[SourceKind, SourceSpec] = {}
# Every source whose content decides the routes and the catalog: planning waits for all of them.
CATALOG_KINDS: tuple[SourceKind, ...] = ()
# The item prefix of the source whose health gates are keyed by the bare item name (``bare_health_keys``).
_BARE_HEALTH_PREFIX = ""


def check(specs: tuple[SourceSpec, ...]) -> None:
    """Every route source has exactly one spec, and no two specs share what must be unique."""
    sources = [s.source for s in specs]
    missing = set(Source) - set(sources)
    if missing or len(set(sources)) != len(sources):
        raise RuntimeError(f"registry: route sources without exactly one spec: {sorted(missing) or sources}")
    for what, values in (
        ("item prefix", [s.item_prefix for s in specs]),
        ("source kind", [s.kind for s in specs]),
    ):
        if len(set(values)) != len(values):
            raise RuntimeError(f"registry: two route sources share an {what}: {values}")
    bare = [s.source for s in specs if s.bare_health_keys]
    if len(bare) > 1 or any(s.bare_health_keys and not s.health_gated for s in specs):
        raise RuntimeError(f"registry: bare health keys belong to one health-gated source, not {bare}")
    for spec in specs:
        if "/" in spec.item_prefix or "-" in spec.id_family or not spec.id_family:
            raise RuntimeError(f"registry: {spec.source}: an item prefix or id family that cannot be parsed")
        if spec.kind not in CATALOG_SOURCES and spec.kind in BUILT_IN_KINDS:
            raise RuntimeError(
                f"registry: {spec.source}: {spec.kind} is a built-in source that is not a catalog source"
            )
        if (spec.parse is None) != (spec.value_type is None) or (spec.parse is None) != (
            spec.document_problem is not None
        ):
            raise RuntimeError(
                f"registry: {spec.source}: read object by object (parse, value_type) or as a document"
            )
    sticky = [s.rank for s in specs if s.sticky_names]
    if sticky and max(sticky) >= min((s.rank for s in specs if not s.sticky_names), default=max(sticky) + 1):
        raise RuntimeError("registry: a source with sticky names must rank below every source without")
    both = {s.kind for s in specs} & set(kinds.BY_SOURCE)
    if both:
        raise RuntimeError(f"registry: kinds declared as a route source and in kinds.KINDS: {sorted(both)}")
    declared = set(SourceKind) - {s.kind for s in specs} - set(kinds.BY_SOURCE)
    if declared:
        raise RuntimeError(
            f"registry: source kinds declared without a spec or a kinds.KINDS declaration: {sorted(declared)}"
        )


def install(specs: tuple[SourceSpec, ...]) -> None:
    """Make ``specs`` the route sources (checked first)."""
    # Module globals on purpose: every reader looks them up at call time (registry.BY_KIND...).
    global SPECS, BY_SOURCE, BY_PREFIX, BY_KIND, CATALOG_KINDS, _BARE_HEALTH_PREFIX  # noqa: PLW0603
    check(specs)
    SPECS = specs
    BY_SOURCE = {spec.source: spec for spec in specs}
    BY_PREFIX = {spec.item_prefix: spec for spec in specs}
    BY_KIND = {spec.kind: spec for spec in specs}
    CATALOG_KINDS = (*CATALOG_SOURCES, *(s.kind for s in specs if s.kind not in CATALOG_SOURCES))
    _BARE_HEALTH_PREFIX = next((s.item_prefix for s in specs if s.bare_health_keys), "")


install(SPECS)


def spec_of(item: ItemKey | str) -> SourceSpec | None:
    """The spec of an item key (None for a key no source owns)."""
    key = ItemKey.parse(item) if isinstance(item, str) else item
    return BY_PREFIX.get(key.prefix)


def trim_spec(kind: SourceKind) -> TrimSpec:
    """What of ``kind``'s objects the core may see: a route source's own trim spec, else its declaration's
    (``catalog_core/kinds.py``)."""
    spec = BY_KIND.get(kind)
    return spec.trim if spec is not None else kinds.BY_SOURCE[kind].trim


def claim(state: CatalogState, item: str) -> Candidate | None:
    """The item's claim (None when it does not exist, or is not a catalog item, e.g. a local activation)."""
    key = ItemKey.parse(item)
    spec = BY_PREFIX.get(key.prefix)
    if spec is None:
        return None
    return claims.checked(state, spec.claim(state, spec, key))


def start_deadline(state: CatalogState, key: ItemKey) -> float | None:
    """The start deadline of an item published before its runtime is ready, while that runtime starts."""
    spec = BY_PREFIX.get(key.prefix)
    return spec.start_deadline(state, spec, key) if spec is not None else None


def rank(source: Source) -> int:
    return BY_SOURCE[source].rank


def sticky_names(source: Source) -> bool:
    """Whether ``source``'s items keep a model name they hold against each other (behaviour §3)."""
    return BY_SOURCE[source].sticky_names


def catalog_source(source: Source) -> str:
    """The ``source`` of a catalog route: its id family (an activation's routes are "external")."""
    return BY_SOURCE[source].id_family


def warning_target(state: CatalogState, item: str) -> ObjectRef | None:
    """The object a Warning Event about ``item`` is attached to."""
    key = ItemKey.parse(item)
    spec = BY_PREFIX.get(key.prefix)
    if spec is None:
        return None
    cand = state.derived.candidates.get(item)
    return spec.warning_target(state, key, cand.involved_uid if cand is not None else "")


def health_key(item: ItemKey) -> str:
    """The key of a health-gated item's health record (state.health) and of its probes."""
    return item.name if item.prefix == _BARE_HEALTH_PREFIX else item.text


def health_item(key: str) -> ItemKey:
    """The item a health record or a probe is about."""
    if "/" in key:
        parsed = ItemKey.parse(key)
        spec = BY_PREFIX.get(parsed.prefix)
        if spec is not None and spec.health_gated and parsed.prefix != _BARE_HEALTH_PREFIX:
            return parsed
    return ItemKey(_BARE_HEALTH_PREFIX, key)


def health_gated(item: ItemKey) -> bool:
    spec = BY_PREFIX.get(item.prefix)
    return spec is not None and spec.health_gated


def route_id(source: Source, model_name: str) -> str:
    """The LiteLLM row id of ``source``'s route for ``model_name``."""
    return BY_SOURCE[source].route_id(model_name)


def document_problem(state: CatalogState, item: str) -> Problem | None:
    """The problem of the whole document ``item`` comes from, if its source reads one and it is unreadable."""
    spec = spec_of(item)
    return spec.document_problem(state) if spec is not None and spec.document_problem is not None else None


@attrs.frozen
class UnreadableDocument:
    spec: SourceSpec
    problem: Problem
    ref: ObjectRef  # the document (its Warning Event target)
    keeping: bool  # its last good items stay published


DOCUMENT_SPECS: tuple[SourceSpec, ...] = tuple(s for s in SPECS if s.document_problem is not None)


def unreadable_documents(state: CatalogState) -> list[UnreadableDocument]:
    """The documents route sources read their items from that are unreadable now."""
    out: list[UnreadableDocument] = []
    for spec in DOCUMENT_SPECS:
        assert spec.document_problem is not None
        problem = spec.document_problem(state)
        if problem is not None:
            ref = spec.warning_target(state, spec.item(""), "")
            assert ref is not None, f"{spec.source}: a document source's warning target is its document"
            out.append(UnreadableDocument(spec, problem, ref, spec.document_has_items(state)))
    return out


def document_of(state: CatalogState, item: str) -> ObjectRef | None:
    """The document ``item`` is read from (None for an item that is an object of its own)."""
    spec = spec_of(item)
    return warning_target(state, item) if spec is not None and spec.document_problem is not None else None


def published_name(state: CatalogState, item: str) -> str | None:
    """The model name ``item`` would publish under (None when the item does not exist)."""
    key = ItemKey.parse(item)
    spec = BY_PREFIX.get(key.prefix)
    return spec.published_name(state, spec, key) if spec is not None else None
