"""Source events -> typed observations. Parsing happens here; only typed values are stored.

An observation that parses to the value already held changes nothing (no mark),
so resyncs, relists and status-only updates cost no planning; one that repeats
the exact object the held value was parsed from (resourceVersion aside) is not
parsed again.
"""

from __future__ import annotations

import contextlib
import marshal
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from catalog_core import failing, kinds, raw, registry
from catalog_core.config import CatalogConfig
from catalog_core.events import (
    LiteLLMRowsObserved,
    LiteLLMUnreachable,
    ObjectDeleted,
    ObjectUpserted,
    SourceKind,
    SourceListed,
    SourceUnavailable,
    Unavailability,
)
from catalog_core.evolve import evolve
from catalog_core.gates import Gate
from catalog_core.keys import (
    LITELLM_READ_KEY,
    RefKey,
    RefKind,
    catalog_key,
    is_litellm_key,
    litellm_id,
    litellm_key,
    secret_ref,
)
from catalog_core.kinds import Replans
from catalog_core.pmap import PMap, empty
from catalog_core.reasons import Reason
from catalog_core.sources.catalog_configmap import ObservedCatalog, held_defaults
from catalog_core.sources.consumers import ConsumerPod
from catalog_core.sources.external import ExternalModelsDocument
from catalog_core.sources.litellm_row import LiteLLMRow, whitelist_row
from catalog_core.spec import SourceSpec
from catalog_core.state import (
    CatalogState,
    Control,
    LiteLLMStatus,
    LiteLLMView,
    Marks,
    Pending,
    SourceState,
    SourceStatus,
    mark,
    mark_all,
)

# A route source's objects that the claims of other items read (a runtime reads its activation); every
# other kind's reference is its declaration's (``Kind.dependents``).
_DEPENDENTS_KIND = {SourceKind.MODEL_ACTIVATIONS: RefKind.ACTIVATION}


def _parse(state: CatalogState, source: SourceKind, obj: Mapping[str, Any]) -> Any:
    kind = kinds.BY_SOURCE.get(source)
    if kind is not None:
        assert kind.parse is not None  # a document never reaches here (_DOCUMENTS)
        return kind.parse(obj)
    spec_parse = registry.BY_KIND[source].parse
    assert spec_parse is not None  # a document source never reaches here (_DOCUMENTS)
    return spec_parse(state, obj)


def _key(source: SourceKind, name: str) -> str:
    kind = kinds.BY_SOURCE.get(source)
    return kind.key(name) if kind is not None else name


def _dependents(state: CatalogState, ref: str) -> frozenset[str]:
    return state.derived.refs.get(ref, frozenset())


def _touched(state: CatalogState, source: SourceKind, name: str) -> tuple[Pending, Control]:
    """Mark what depends on the object ``name`` of ``source`` (not a route source's: ``_put_item``) for
    re-planning."""
    pending, control = state.pending, state.control
    kind = kinds.BY_SOURCE[source]
    if kind.dependents is not None:  # the claims that read it (a route reads its Secret, its Service)
        items = mark_all(pending.items, _dependents(state, RefKey(kind.dependents, name).text))
        pending = evolve(pending, items=items)
    elif kind.replans is Replans.TEMPLATES:
        pending = evolve(pending, templates=True)
    elif kind.replans is Replans.ROLLOUTS:
        pending = evolve(pending, rollouts=True)
    if (key := _target_key(source, state.config.namespace, name)) is not None:
        control = failing.retry_now(control, key)
    return pending, control


def _target_key(source: SourceKind, namespace: str, name: str) -> str | None:
    """The key of the command that writes the object ``name`` of ``source`` (None: no command does)."""
    kind = kinds.BY_SOURCE.get(source)
    return kind.written_by(namespace, name) if kind is not None and kind.written_by is not None else None


def _put(state: CatalogState, source: SourceKind, name: str, value: Any) -> CatalogState:
    """Store (or, with None, remove) one parsed object; a no-op when nothing changed."""
    spec = registry.BY_KIND.get(source)
    if spec is not None:
        return _put_item(state, spec, name, value)
    current = state.stored(source)
    key = _key(source, name)
    old = current.get(key)
    if old == value:
        return state
    updated = current.delete(key) if value is None else current.set(key, value)
    pending, control = _touched(state, source, name)
    if source is SourceKind.PODS:
        cluster = evolve(state.cluster, pods=updated, pod_birth=_pod_birth(state, old, value))
        state = evolve(state, cluster=cluster, pending=pending, control=control)
    else:
        state = state.with_stored(source, updated, pending=pending, control=control)
    target = _target_key(source, state.config.namespace, name) if value is None else None
    return state if target is None else failing.recovered(state, target)  # nothing left to write to


def _upsert_item(state: CatalogState, spec: SourceSpec, name: str, obj: Mapping[str, Any]) -> CatalogState:
    """``_put_item`` of ``spec.parse(state, obj)``; the state itself when the value held for ``name`` was
    parsed from this very object but for its resourceVersion (which no item's parse reads).

    Performance (bench P6, P5): a watch delivers every status write of a Model or a Deployment, and
    nearly all of them change nothing a route reads; parsing each one (~4 us) was the largest part of a
    watch event's fold. The object's exact text (marshal, as for LiteLLM rows: 1, 1.0 and True differ)
    is compared instead (~1.5 us). A parse that gives a value equal to the held one keeps the held object,
    now known by this text too."""
    text = _item_text(obj)
    held = state.observed.stores.get(spec.kind, _NO_ITEMS).get(name)
    if held is not None and text is not None and _ITEM_TEXT.get(held) == text:
        return state
    assert spec.parse is not None  # a route source's spec (upserted)
    value = spec.parse(state, obj)
    if held is not None and held == value:
        value = held
    if text is not None and len(text) <= _MAX_ITEM_TEXT_BYTES:
        _ITEM_TEXT.remember(value, text)
    return _put_item(state, spec, name, value)


# The largest object text kept. Whoever may edit a Model or a Deployment can make it megabytes long (its
# annotations); the typed value keeps only what the parse reads, and such an object is parsed each time
# rather than kept whole. The objects of the appliance are under 2 KiB.
_MAX_ITEM_TEXT_BYTES = 64 * 1024


def _item_text(obj: Mapping[str, Any]) -> bytes | None:
    """The text of a watched object without its resourceVersion (None for what is not plain data)."""
    meta = obj.get("metadata")
    if type(meta) is dict and "resourceVersion" in meta:
        meta = dict(meta)
        del meta["resourceVersion"]
        obj = {**obj, "metadata": meta}
    return _text_of(obj)


def _put_item(state: CatalogState, spec: SourceSpec, name: str, value: Any) -> CatalogState:
    """``_put`` for an item of a route source: the store, the item's mark and the claims that read it, in
    one copy of the state (bench P5: the watch events of Models are most of a fold's work)."""
    kind = spec.kind
    current = state.observed.stores.get(kind, _NO_ITEMS)
    updated = current.delete(name) if value is None else current.set_if_changed(name, value)
    if updated is current:
        return state
    items = state.pending.items
    ref_kind = _DEPENDENTS_KIND.get(kind)
    if ref_kind is not None:  # the claims that read this object (a runtime reads its activation)
        items = mark_all(items, _dependents(state, RefKey(ref_kind, name).text))
    items = mark(items, spec.item_text(name))
    return state.with_route_items(kind, updated, items)


_NO_ITEMS: PMap[Any] = empty()


def _pod_birth(state: CatalogState, old: Any, new: Any) -> PMap[str]:
    """Remember which catalog a pod read when it started: the current one, for a pod that appears while we
    watch. A pod of the first listing started earlier: it gets the start-up catalog when planning."""
    births = state.cluster.pod_birth
    if isinstance(old, ConsumerPod) and (new is None or new.uid != old.uid):
        births = births.delete(old.uid)
    catalog = state.cluster.catalog
    live = state.source(SourceKind.PODS).known
    if isinstance(new, ConsumerPod) and new.uid not in births and catalog is not None and live:
        births = births.set(new.uid, catalog.catalog_hash or "")
    return births


def mark_litellm_key(ids: Marks, key: str) -> Marks:
    """Mark the model id a ``litellm/<id>`` key writes; other keys mark nothing."""
    rid = litellm_id(key)
    return mark(ids, rid) if rid is not None else ids


def _set_status(
    state: CatalogState, source: SourceKind, status: SourceStatus, detail: str = ""
) -> CatalogState:
    old = state.source(source)
    listed = status in (SourceStatus.LISTED, SourceStatus.NOT_INSTALLED)
    new = SourceState(status, detail, old.ever_listed or listed)
    if new == old:
        return state
    pending = evolve(state.pending, catalog=True)
    if (old.status is SourceStatus.NOT_INSTALLED) != (status is SourceStatus.NOT_INSTALLED):
        # Claims that read whether this source's CRD is installed (a local activation needs KubeAI's).
        items = pending.items
        for spec in registry.SPECS:
            if source in spec.reads_installed:
                items = mark_all(items, (spec.item_text(name) for name in state.stored(spec.kind)))
        pending = evolve(pending, items=items)
    if not old.known and new.known:
        # Everything this source feeds may now be decidable, including owned rows held while it was unknown.
        ids = mark_all(pending.ids, (rid for rid, row in state.litellm.rows.items() if row.ours))
        pending = evolve(pending, rollouts=True, templates=True, ids=ids)
    return evolve(state, sources=state.sources.set(source.value, new), pending=pending)


def upserted(state: CatalogState, event: ObjectUpserted) -> CatalogState:
    source, obj = event.source, event.object
    spec = registry.BY_KIND.get(source)
    if spec is not None and spec.parse is not None:  # an item of a route source: the common event first
        name = raw.name_of(obj)
        return _upsert_item(state, spec, name, obj) if name else state
    if (document := _DOCUMENTS.get(source)) is not None:
        named, observe = document
        return observe(state, obj) if raw.name_of(obj) == named(state.config) else state
    name = raw.name_of(obj)
    if not name:
        return state
    return _put(state, source, name, _parse(state, source, obj))


def deleted(state: CatalogState, event: ObjectDeleted) -> CatalogState:
    name = raw.name_of(event.object)
    if (document := _DOCUMENTS.get(event.source)) is not None:
        named, observe = document
        return observe(state, None) if name == named(state.config) else state
    if not name:
        return state
    return _put(state, event.source, name, None)


def listed(state: CatalogState, event: SourceListed) -> CatalogState:
    source = event.source
    if (document := _DOCUMENTS.get(source)) is not None:
        named, observe = document
        wanted = named(state.config)
        state = observe(state, next((o for o in event.objects if raw.name_of(o) == wanted), None))
    else:
        state = _replace_all(state, source, event.objects)
        if source is SourceKind.SECRETS and event.scope is not None:
            scope = frozenset(event.scope)
            items = state.pending.items
            for name in scope.symmetric_difference(state.observed.secrets_scope):
                items = mark_all(items, _dependents(state, secret_ref(name)))
            state = evolve(
                state,
                observed=evolve(state.observed, secrets_scope=scope),
                pending=evolve(state.pending, items=items),
            )
    return _set_status(state, source, SourceStatus.LISTED)


def _replace_all(
    state: CatalogState, source: SourceKind, objects: Iterable[Mapping[str, Any]]
) -> CatalogState:
    seen: set[str] = set()
    for obj in objects:
        name = raw.name_of(obj)
        if not name:
            continue
        seen.add(name)
        state = _put(state, source, name, _parse(state, source, obj))
    current = state.stored(source)
    prefix = _key(source, "")
    for key in list(current):
        if prefix and not key.startswith(prefix):
            continue
        name = key[len(prefix) :]
        if name not in seen:
            state = _put(state, source, name, None)
    return state


def unavailable(state: CatalogState, event: SourceUnavailable) -> CatalogState:
    if event.status is Unavailability.NOT_INSTALLED:
        # An absent CRD is an empty source (behaviour §1.1), not an error.
        state = listed(state, SourceListed(event.source, ()))
        return _set_status(state, event.source, SourceStatus.NOT_INSTALLED, event.detail)
    status = SourceStatus.FORBIDDEN if event.status is Unavailability.FORBIDDEN else SourceStatus.FAILING
    return _set_status(state, event.source, status, event.detail)  # keep the last good content


def _external(state: CatalogState, obj: Mapping[str, Any] | None) -> CatalogState:
    doc = ExternalModelsDocument.from_configmap(obj, state.config.namespace)
    uid = raw.uid_of(obj) if obj is not None else ""
    observed = state.observed
    if doc.problem is not None:
        # Unreadable: keep the last good items, report the document (behaviour §8).
        if doc.problem == observed.external_problem and uid == observed.external_uid:
            return state
        return evolve(
            state,
            observed=evolve(observed, external_problem=doc.problem, external_uid=uid),
            pending=evolve(state.pending, catalog=True),
        )
    items = observed.external_items
    document = registry.BY_KIND[SourceKind.EXTERNAL_MODELS]
    new_names = {item.name for item in doc.items}
    marks = state.pending.items
    for name in list(items):
        if name not in new_names:
            items = items.delete(name)
            marks = mark(marks, document.item(name).text)
    for item in doc.items:
        if items.get(item.name) != item:
            items = items.set(item.name, item)
            marks = mark(marks, document.item(item.name).text)
    if uid != observed.external_uid:
        marks = mark_all(marks, (document.item(name).text for name in items))
    return evolve(
        state,
        observed=evolve(observed, external_items=items, external_problem=None, external_uid=uid),
        pending=evolve(
            state.pending, items=marks, catalog=state.pending.catalog or observed.external_problem is not None
        ),
    )


def _catalog(state: CatalogState, observed: ObservedCatalog | None) -> CatalogState:
    cluster = state.cluster
    if observed == cluster.catalog:
        return state
    initial = cluster.initial_catalog_hash
    if initial is None and observed is not None:
        initial = observed.previous_hash or observed.catalog_hash or ""
    ns, name = state.config.namespace, state.config.catalog_configmap
    # The defaults it holds are the ones that stay while published: an AgentTemplate without a model of
    # the catalog gets the default, so it is planned again when that may have moved.
    held = Gate.STICKY_DEFAULTS in state.config.gates and held_defaults(cluster.catalog) != held_defaults(
        observed
    )
    return evolve(
        state,
        cluster=evolve(cluster, catalog=observed, initial_catalog_hash=initial),
        pending=evolve(state.pending, catalog=True, rollouts=True, templates=state.pending.templates or held),
        control=failing.retry_now(state.control, catalog_key(ns, name)),
    )


def _catalog_document(state: CatalogState, obj: Mapping[str, Any] | None) -> CatalogState:
    return _catalog(state, ObservedCatalog.from_k8s(obj) if obj is not None else None)


# Sources that are one ConfigMap named by the configuration: its name (objects of any other name are not
# the source's; the watch asks for that name alone), and how its content is observed (None: absent).
DOCUMENT_NAMES: dict[SourceKind, Callable[[CatalogConfig], str]] = {
    SourceKind.EXTERNAL_MODELS: lambda config: config.external_models_configmap,
    **{kind.source: kind.document for kind in kinds.KINDS if kind.document is not None},
}
_OBSERVE_DOCUMENT: dict[SourceKind, Callable[[CatalogState, Mapping[str, Any] | None], CatalogState]] = {
    SourceKind.EXTERNAL_MODELS: _external,
    SourceKind.CATALOG_CONFIGMAP: _catalog_document,
}
if set(_OBSERVE_DOCUMENT) != set(DOCUMENT_NAMES):
    raise RuntimeError(
        f"ingest: documents named {sorted(DOCUMENT_NAMES)}, observed {sorted(_OBSERVE_DOCUMENT)}"
    )
_DOCUMENTS = {kind: (DOCUMENT_NAMES[kind], _OBSERVE_DOCUMENT[kind]) for kind in DOCUMENT_NAMES}


def rows_observed(state: CatalogState, event: LiteLLMRowsObserved) -> CatalogState:
    held = state.litellm.rows
    texts = _PREPARED_TEXTS.take(event.rows) or [_text_of(row) for row in event.rows]
    known = tuple(t for t in texts if t is not None)
    whole = known if len(known) == len(texts) else None
    if whole is None or not _LAST_OBSERVATION.same(held, whole):
        # One walk of the map: a look-up per row in the persistent map costs ~3 us at 10,000 rows.
        before = dict(held.items())
        new: dict[str, LiteLLMRow] = {}
        for i, (row, text) in enumerate(zip(event.rows, texts, strict=True)):
            parsed, texts[i] = _row(before, row, text)
            if parsed is not None:
                new[parsed.id] = parsed
        upserts = [(rid, row) for rid, row in new.items() if before.get(rid) is not row]
        state = _set_rows(state, upserts, [rid for rid in before if rid not in new])
        if whole is not None:
            # the texts the rows were parsed from: one copy of each row's text is kept (bench P7)
            _LAST_OBSERVATION.remember(state.litellm.rows, tuple(texts))  # type: ignore[arg-type]
    was_reachable = state.litellm.status.reachable
    failures, retries, ids = state.control.failures, state.control.retries, state.pending.ids
    for key, failure in list(failures.items()):
        if failure.reason is Reason.LITELLM_UNAUTHORIZED:
            # The master key works again: what failed for that reason may be tried again.
            failures = failures.delete(key)
            ids = mark_litellm_key(ids, key)
    if not was_reachable:
        # LiteLLM answers again: writes still backing off from the outage are due now (their backoff
        # grew with the outage, up to minutes, while the proxy is already back).
        for key in [k for k in retries if is_litellm_key(k)]:
            retries = retries.delete(key)
            ids = mark_litellm_key(ids, key)
    status = LiteLLMStatus(observed_once=True, reachable=True)
    if (
        status == state.litellm.status
        and not _awaits_observation(state)
        and failures is state.control.failures
        and retries is state.control.retries
    ):
        return state  # the usual resync: nothing new (evolve costs more than the check)
    return evolve(
        state,
        litellm=_observed(state.litellm, status),
        control=_read_answered(evolve(state.control, failures=failures, retries=retries)),
        pending=evolve(state.pending, ids=ids),
    )


def _awaits_observation(state: CatalogState) -> bool:
    """Something an observation settles: writes it covers, an unknown a write left, a re-read asked for."""
    view = state.litellm
    return (
        view.unobserved_writes or view.unconfirmed is not None or LITELLM_READ_KEY in state.control.inflight
    )


def _observed(view: LiteLLMView, status: LiteLLMStatus) -> LiteLLMView:
    """An observation covers every write whose outcome was folded before it (``adapters.litellm.sync``) and
    settles what a write's answer left unknown."""
    return evolve(view, status=status, unobserved_writes=False, unobserved_since=None, unconfirmed=None)


def _read_answered(control: Control) -> Control:
    """Any observation answers the planned re-read: it is at least as new as every outcome folded before
    it, so the re-read, if it has not started, has nothing left to show (the shell skips it)."""
    if LITELLM_READ_KEY not in control.inflight:
        return control
    return evolve(control, inflight=control.inflight.delete(LITELLM_READ_KEY))


def _text_of(value: Mapping[str, Any]) -> bytes | None:
    """The exact text of an observed row or object, to tell it unchanged: marshal keeps types apart (1,
    1.0 and True differ) and is several times cheaper than a sorted JSON text (at 10,000 rows, the re-read
    after a write cost ~100 ms in the fold, long enough to bunch the watch's deliveries). Equal texts
    decode to equal values, so they are equal. Format 4 writes ASCII strings as they are (~2.4x faster
    than format 2 for a dozen rows) and an object met twice as a back-reference: two equal values whose
    objects are shared differently may then differ in text, which costs only a parse. None for what is
    not plain data (a test's Mapping)."""
    try:
        return marshal.dumps(value, 4)  # type: ignore[arg-type]
    except ValueError:
        return None


def _row(
    held: Mapping[str, LiteLLMRow], row: Mapping[str, Any], text: bytes | None
) -> tuple[LiteLLMRow | None, bytes | None]:
    """Parse one /model/info row; the row already held when it is the same. With it, ``text`` or the
    equal text remembered for the held row (so the observation kept for the next one shares it).

    Performance: every resync observes every row again and nearly all are unchanged, so
    parsing each one anew (~450 us per observation of a dozen rows) was the largest cost of a replay.
    A row is a function of the row as observed, so the same exact text gives an equal row: the one
    held (whose text is remembered) is returned and nothing downstream sees a change.
    """
    info = row.get("model_info") if type(row) is dict else None
    rid = info.get("id") if type(info) is dict else None
    if isinstance(rid, str):
        old = held.get(rid)
        if old is not None and text is not None and (kept := _ROW_TEXT.get(old)) == text:
            return old, kept
    clean = whitelist_row(row)
    parsed = LiteLLMRow.from_clean(clean)
    if parsed is not None:
        if isinstance(rid, str) and (old := held.get(rid)) is not None and old == parsed:
            parsed = old  # the same row seen through another spelling: keep the held object
        if text is not None:
            _ROW_TEXT.remember(parsed, text)
    return parsed, text


def prepare_row_texts(rows: tuple[Mapping[str, Any], ...], chunk: int) -> Iterator[None]:
    """Compute the rows' texts that folding ``LiteLLMRowsObserved(rows)`` starts with, ``chunk`` rows per
    step, for the fold of that very tuple to take. A caller that runs the other tasks between the steps
    (the LiteLLM observer) spares the loop one long step: at 10,000 rows the texts are ~45 ms of a fold.
    The texts are what the fold would compute (the same function, the same rows), so the fold's result
    is the same whether it takes them or not; a tuple folded twice computes them the second time."""
    texts: list[bytes | None] = []
    for start in range(0, len(rows), chunk):
        if start:
            yield
        texts.extend(_text_of(row) for row in rows[start : start + chunk])
    _PREPARED_TEXTS.keep(rows, texts)


class _PreparedTexts:
    """The texts of one observation's rows, prepared before its fold, until that fold takes them (held
    strongly, by the tuple's identity: one observation at a time, dropped when taken or replaced)."""

    def __init__(self) -> None:
        self._prepared: tuple[tuple[Mapping[str, Any], ...], list[bytes | None]] | None = None

    def keep(self, rows: tuple[Mapping[str, Any], ...], texts: list[bytes | None]) -> None:
        self._prepared = (rows, texts)

    def take(self, rows: tuple[Mapping[str, Any], ...]) -> list[bytes | None] | None:
        prepared = self._prepared  # one read: a blocking host's view on another thread sees a whole pair
        if prepared is None or prepared[0] is not rows:
            return None
        self._prepared = None  # the fold owns the list from here (it writes into it)
        return prepared[1]


_PREPARED_TEXTS = _PreparedTexts()


class _TextOf:
    """Which observed text each held value (a row, an item) was parsed from, for as long as it lives."""

    def __init__(self) -> None:
        self._texts: dict[int, tuple[weakref.ref[Any], bytes]] = {}

    def get(self, value: Any) -> bytes | None:
        hit = self._texts.get(id(value))
        return hit[1] if hit is not None and hit[0]() is value else None

    def remember(self, value: Any, text: bytes) -> None:
        key, texts = id(value), self._texts

        def drop(ref: weakref.ref[Any], key: int = key) -> None:
            current = texts.get(key)
            if current is not None and current[0] is ref:
                del texts[key]

        with contextlib.suppress(TypeError):  # a value no weak reference can follow (None): not kept
            texts[key] = (weakref.ref(value, drop), text)


_ROW_TEXT = _TextOf()
_ITEM_TEXT = _TextOf()


class _LastObservation:
    """The rows map that the last observation left, and that observation's text.

    Performance: a resync that sees exactly what the previous one saw, while the held rows
    are still the map that observation produced, changes no row: one marshal pass over the rows
    decides it instead of a look-up per row (the rows' texts, compared as a tuple). One entry, held
    strongly (a map the state holds anyway).
    """

    def __init__(self) -> None:
        self._rows: PMap[LiteLLMRow] | None = None
        self._texts: tuple[bytes, ...] = ()

    def same(self, rows: PMap[LiteLLMRow], texts: tuple[bytes, ...]) -> bool:
        return rows is self._rows and texts == self._texts

    def remember(self, rows: PMap[LiteLLMRow], texts: tuple[bytes, ...]) -> None:
        self._rows, self._texts = rows, texts


_LAST_OBSERVATION = _LastObservation()


def set_row(state: CatalogState, rid: str, row: LiteLLMRow | None) -> CatalogState:
    return _set_rows(state, [(rid, row)] if row is not None else [], [] if row is not None else [rid])


def _set_rows(
    state: CatalogState, upserts: Iterable[tuple[str, LiteLLMRow]], deletes: Iterable[str]
) -> CatalogState:
    rows, by_logical = state.litellm.rows, state.litellm.rows_by_logical
    ids, logical, settled = state.pending.ids, state.pending.logical, state.control.settled
    retries = state.control.retries

    def unindex(row: LiteLLMRow) -> None:
        nonlocal by_logical, logical
        members = by_logical.get(row.logical_name, frozenset()) - {row.id}
        by_logical = (
            by_logical.set(row.logical_name, members) if members else by_logical.delete(row.logical_name)
        )
        logical = mark(logical, row.logical_name)

    def changed(rid: str) -> None:
        nonlocal ids, settled, retries
        ids = mark(ids, rid)
        settled = settled.delete(litellm_key(rid))
        retries = retries.delete(litellm_key(rid))  # a failed write goes again: the row changed meanwhile

    for rid, row in upserts:
        old = rows.get(rid)
        if old is row or old == row:
            continue
        if old is not None:
            unindex(old)
        rows = rows.set(rid, row)
        by_logical = by_logical.set(row.logical_name, by_logical.get(row.logical_name, frozenset()) | {rid})
        logical = mark(logical, row.logical_name)
        changed(rid)
    for rid in deletes:
        old = rows.get(rid)
        if old is None:
            continue
        unindex(old)
        rows = rows.delete(rid)
        changed(rid)
    if rows is state.litellm.rows:
        return state  # every row as held: nothing to re-plan
    return evolve(
        state,
        litellm=evolve(state.litellm, rows=rows, rows_by_logical=by_logical),
        pending=evolve(state.pending, ids=ids, logical=logical),
        control=evolve(state.control, settled=settled, retries=retries),
    )


def litellm_unreachable(state: CatalogState, event: LiteLLMUnreachable) -> CatalogState:
    """Keep every observed row: the last published catalog stays as it is (behaviour §8)."""
    detail = f"{event.reason}: {event.detail}" if event.detail else event.reason
    status = evolve(state.litellm.status, reachable=False, detail=detail)
    if status == state.litellm.status and not _awaits_observation(state):
        return state
    # No observation will confirm the writes soon: the catalog goes out with what is known.
    return evolve(state, litellm=_observed(state.litellm, status), control=_read_answered(state.control))
