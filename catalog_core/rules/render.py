"""The generated ConfigMap/ai-model-catalog: the files ``catalog_core/catalog_files.py`` declares (the keys
apps read, behaviour §5.1, and routes.json, behaviour §7), kept rendered as the state changes.

Only the keys of ``CatalogConfig.catalog_keys`` are rendered and counted by the size bound: every declared
one in a running controller; those a recorded run wrote when a replay plans its log."""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Container, Iterable
from typing import Any, ClassVar, Generic, TypeVar

import attrs

from catalog_core.catalog_files import (
    FILES,
    ROUTE_RECORDS,
    CatalogFile,
    Format,
    Models,
    Published,
)
from catalog_core.config import CatalogConfig
from catalog_core.jsonval import Fragment, Run, canonical_join, pretty, short_hash
from catalog_core.pmap import PMap, empty
from catalog_core.rules.limits import openclaw_compaction
from catalog_core.sources.catalog_configmap import (
    CONFIGMAP_DATA_LIMIT,
    NO_DEFAULTS,
    HeldDefaults,
    configmap_data_size,
    data_fingerprint,
)
from catalog_core.state import CatalogEntry, RouteRecord
from catalog_core.values import ModelType

BOOTSTRAP_HASH = "bootstrap"


@attrs.frozen
class RenderedCatalog:
    data: tuple[tuple[str, str], ...]
    catalog_hash: str
    fingerprint: str

    def as_dict(self) -> dict[str, str]:
        return dict(self.data)


T = TypeVar("T")
P = TypeVar("P")


class PerObject(Generic[T, P]):
    """Memo of what is derived from one frozen value (an entry, a record) under one configuration.

    Performance: each entry's parts are rendered once, when the entry object first appears, and every
    later render splices their text (encoding every model again cost ~1 s at 10,000 models). Keyed by
    identity (the state keeps an unchanged entry as the same object), dropped when the object is; so it
    holds what the live state holds and never changes a result.
    """

    def __init__(self, build: Callable[[T, CatalogConfig], P]) -> None:
        self._build = build
        self._slots: dict[int, tuple[weakref.ref[Any], CatalogConfig, P]] = {}

    def get(self, obj: T, config: CatalogConfig) -> P:
        key = id(obj)
        hit = self._slots.get(key)
        if hit is not None and hit[0]() is obj and hit[1] is config:
            return hit[2]
        value = self._build(obj, config)
        slots = self._slots

        def drop(ref: weakref.ref[Any], key: int = key) -> None:
            current = slots.get(key)
            if current is not None and current[0] is ref:
                del slots[key]

        slots[key] = (weakref.ref(obj, drop), config, value)
        return value


# --- the layout the declarations give ---------------------------------------------------------------
# One run per listing file, in FILES order. A model's fragments are built once per distinct fragment
# function (files declaring the same one share its text), only those its type needs.

_LISTING: tuple[CatalogFile, ...] = tuple(f for f in FILES if f.members is not None)
_MODEL_FILES: tuple[tuple[int, Models], ...] = tuple(
    (n, f.members) for n, f in enumerate(_LISTING) if isinstance(f.members, Models)
)
_RECORDS_RUN: int = next(n for n, f in enumerate(_LISTING) if f.members is ROUTE_RECORDS)
_HASHED_RUN: int = next(n for n, m in _MODEL_FILES if m.hashed)
# Not the YAML files': they write a character beyond the BMP as itself, 4 bytes instead of 12.
_BOUNDED_RUNS: tuple[int, ...] = tuple(n for n, f in enumerate(_LISTING) if f.format is not Format.YAML)
# Each listing file's run, by key.
_RUN_OF: dict[str, int] = {f.key: n for n, f in enumerate(_LISTING)}
_FRAGMENTS: tuple[Callable[[Any, CatalogConfig], Any], ...] = tuple(
    dict.fromkeys(m.fragment for _, m in _MODEL_FILES)
)
_HASHED_FRAGMENTS = frozenset(m.fragment for _, m in _MODEL_FILES if m.hashed)
# Per model type: (run, fragment slot, keyed, sorted by type first) of every file that lists it ...
_TARGETS: dict[ModelType, tuple[tuple[int, int, bool, bool], ...]] = {
    t: tuple(
        (n, _FRAGMENTS.index(m.fragment), m.keyed, len(m.types) > 1) for n, m in _MODEL_FILES if t in m.types
    )
    for t in ModelType
}
# ... and the fragment slots to build for it.
_SLOTS: dict[ModelType, frozenset[int]] = {t: frozenset(s for _, s, _, _ in _TARGETS[t]) for t in ModelType}
_FORMATS: dict[str, Format] = {f.key: f.format for f in FILES}


def _model_fragments(e: CatalogEntry, config: CatalogConfig) -> tuple[Fragment | None, ...]:
    """One model's fragment of every file it appears in, rendered once (None where its type is not listed)."""
    slots = _SLOTS[e.model_type]
    return tuple(
        Fragment(fragment(e, config), hashed=fragment in _HASHED_FRAGMENTS) if n in slots else None
        for n, fragment in enumerate(_FRAGMENTS)
    )


_MODEL_FRAGMENTS: PerObject[CatalogEntry, tuple[Fragment | None, ...]] = PerObject(_model_fragments)
_RECORD_JSON: PerObject[RouteRecord, Fragment] = PerObject(lambda r, _: Fragment(r.as_json()))


def pick_default(wanted: str, ids: list[str], held: str = "") -> str:
    """The default model among ``ids`` (the models of one type, in id order; behaviour §5.1): the
    configured id if it is among them; else the one the written catalog holds (``held``) while it is;
    else the first; else ''. So with ``auto`` adding a model never changes the default (whoever may
    create a model could name it to sort first), and a new one is chosen only when the current one goes."""
    if wanted in ids:
        return wanted
    if held and held in ids:
        return held
    return ids[0] if ids else ""


class CatalogParts:
    """The catalog's per-model and per-record parts: one ``Run`` per file that lists them, kept in that
    file's published order.

    ``put_entry``/``remove_entry`` and ``put_record``/``remove_record`` cost what one member costs
    (a bisection and C-level list inserts), so a catalog kept up to date costs per change what the
    change touches; ``render`` then joins cached texts.
    """

    def __init__(self, config: CatalogConfig, held: HeldDefaults = NO_DEFAULTS) -> None:
        self.config = config
        self.held = held  # the defaults the written catalog holds
        self.runs: tuple[Run, ...] = tuple(
            Run(is_object=isinstance(f.members, Models) and f.members.keyed) for f in _LISTING
        )
        rendered = config.catalog_keys
        # The hashed run is kept whether or not its file is rendered: the hash and the defaults read it.
        kept = frozenset(n for n, f in enumerate(_LISTING) if f.key in rendered) | {_HASHED_RUN}
        self._targets = {
            t: tuple((self.runs[n], slot, keyed, by_type) for n, slot, keyed, by_type in targets if n in kept)
            for t, targets in _TARGETS.items()
        }
        self._bounded = tuple(self.runs[n] for n in _BOUNDED_RUNS if _LISTING[n].key in rendered)
        self._files = tuple(f for f in FILES if f.key in rendered)
        self._hashed = self.runs[_HASHED_RUN]  # every model, by (type, id)
        self._records = self.runs[_RECORDS_RUN]
        self.by_type: dict[ModelType, dict[str, CatalogEntry]] = {t: {} for t in ModelType}

    @classmethod
    def of(
        cls,
        entries: Iterable[CatalogEntry],
        records: Iterable[RouteRecord],
        config: CatalogConfig,
        held: HeldDefaults = NO_DEFAULTS,
    ) -> CatalogParts:
        parts = cls(config, held)
        for e in sorted(entries, key=lambda e: (e.model_type.value, e.id)):
            parts.put_entry(e)
        # routes.json is sorted by (source, name), ties in the order given (a stable sort)
        for n, r in enumerate(records):
            parts.put_record((r.source, r.name, n), r)
        return parts

    def put_entry(self, e: CatalogEntry) -> None:
        """Add an entry (one with its type and id must not be held: ``remove_entry`` it first)."""
        fragments = _MODEL_FRAGMENTS.get(e, self.config)
        model_id = e.id
        for run, slot, keyed, by_type in self._targets[e.model_type]:
            fragment = fragments[slot]
            assert fragment is not None
            run.put(
                (e.model_type.value, model_id) if by_type else model_id, fragment, model_id if keyed else ""
            )
        self.by_type[e.model_type][model_id] = e

    def remove_entry(self, e: CatalogEntry) -> None:
        model_id = e.id
        for run, _, _, by_type in self._targets[e.model_type]:
            run.remove((e.model_type.value, model_id) if by_type else model_id)
        del self.by_type[e.model_type][model_id]

    def put_record(self, key: tuple[Any, ...], r: RouteRecord) -> None:
        """``key`` sorts records as routes.json lists them: it starts with (source, name)."""
        self._records.put(key, _RECORD_JSON.get(r, self.config))

    def remove_record(self, key: tuple[Any, ...]) -> None:
        self._records.remove(key)

    def _defaults(self) -> tuple[str, str, Any]:
        """The default chat model, the default embedding model and OpenClaw's compaction settings."""
        config = self.config
        held = self.held
        chat = self.by_type[ModelType.CHAT]
        default_chat = _pick(config.default_chat_model, held.chat, chat, self._first(ModelType.CHAT))
        default_embedding = _pick(
            config.default_embedding_model,
            held.embedding,
            self.by_type[ModelType.EMBEDDING],
            self._first(ModelType.EMBEDDING),
        )
        default_entry = chat.get(default_chat)
        return (
            default_chat,
            default_embedding,
            openclaw_compaction(default_entry.context_window if default_entry else None),
        )

    def _first(self, model_type: ModelType) -> str:
        """The first id of a type, in id order ('' if none), from the hashed run (sorted by type, id)."""
        if not self.by_type[model_type]:
            return ""
        key = self._hashed.first_from((model_type.value,))
        return str(key[1])

    def catalog_hash(self) -> str:
        """The catalog's hash (``AI_APPLIANCE_MODEL_CATALOG_HASH``): of the models and the defaults."""
        config = self.config
        default_chat, default_embedding, compaction = self._defaults()
        return short_hash(
            canonical_join(
                {
                    "models": self._hashed,
                    "defaultChatModel": default_chat,
                    "defaultEmbeddingModel": default_embedding,
                    "opencodeDefaultContextTokens": config.opencode_default_context_tokens,
                    "opencodeDefaultOutputTokens": config.opencode_default_output_tokens,
                    "paperclipOpenCodeMaxOutputTokens": config.paperclip_max_output_tokens,
                    "paperclipOpenCodeContextHeadroomTokens": config.paperclip_headroom_tokens,
                    "openclawCompaction": compaction,
                    "openclawToolsProfile": config.openclaw_tools_profile,
                }
            )
        )

    def data_size_at_least(self) -> int:
        """A lower bound of the rendered data's size in bytes, known without rendering: every run is in
        its file, and a JSON file's text is ASCII (``pretty`` escapes the rest)."""
        return sum(run.length_at_least() for run in self._bounded)

    def files(self, *, placeholder: bool = False) -> tuple[dict[str, Any], str]:
        """The value of every data key the configuration renders (the listing ones as values holding
        ``Run``s, not rendered yet), and the catalog hash."""
        default_chat, default_embedding, compaction = self._defaults()
        catalog_hash = BOOTSTRAP_HASH if placeholder else self.catalog_hash()
        published = Published(
            self.config,
            ready=not placeholder,
            catalog_hash=catalog_hash,
            default_chat=default_chat,
            default_embedding=default_embedding,
            compaction=compaction,
            counts={t: len(ids) for t, ids in self.by_type.items()},
        )
        runs = self.runs
        out: dict[str, Any] = {}
        for f in self._files:
            value = f.document(runs[_RUN_OF[f.key]] if f.members is not None else None, published)
            out[f.key] = _Text(value) if f.format is Format.TEXT else value
        return out, catalog_hash

    def render(self, *, placeholder: bool = False) -> RenderedCatalog:
        """The data and its fingerprint: per change, no pass over every model in Python (each file is
        a join of the runs' cached texts; the fingerprint escapes the files in C)."""
        files, catalog_hash = self.files(placeholder=placeholder)
        pairs = tuple((key, _file_text(key, value)) for key, value in sorted(files.items()))
        return RenderedCatalog(pairs, catalog_hash, data_fingerprint(dict(pairs)))


# A character beyond the BMP escaped as JSON escapes it: a surrogate pair, "\ud83d\ude00" (after an even
# number of backslashes: "\\ud83d" is an escaped backslash followed by text).
_SURROGATE_PAIR = re.compile(r"(?<!\\)((?:\\\\)*)\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})")


def _astral(match: re.Match[str]) -> str:
    high, low = int(match.group(2), 16), int(match.group(3), 16)
    return match.group(1) + chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))


def yaml_readable(text: str) -> str:
    """JSON text that YAML reads as JSON does: PyYAML reads a surrogate pair escape as two lone
    surrogates and libyaml refuses it, so each is written as the character itself (valid JSON too)."""
    if "\\ud" not in text:
        return text
    return _SURROGATE_PAIR.sub(_astral, text)


def _file_text(key: str, value: Any) -> str:
    if type(value) is _Text:
        return value.text
    text = pretty(value)
    return yaml_readable(text) if _FORMATS[key] is Format.YAML else text


class _Text:
    """A data value that is already text (not a JSON document)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _pick(wanted: str, held: str, ids: Container[str], first: str) -> str:
    """``pick_default`` over ids whose first (in id order) is ``first``, without listing them."""
    if wanted in ids:
        return wanted
    if held and held in ids:
        return held
    return first


def render_catalog(
    entries: Iterable[CatalogEntry],
    records: Iterable[RouteRecord],
    config: CatalogConfig,
    *,
    placeholder: bool = False,
    held: HeldDefaults = NO_DEFAULTS,
) -> RenderedCatalog:
    """Every data key ``config`` renders (behaviour §5.1 plus routes.json), from scratch. ``placeholder``:
    the bootstrap form (READY false, hash ``bootstrap``) that deploy/ ships so consumers can start before
    the first catalog (behaviour §5.2).

    This is the oracle of ``IncrementalCatalog`` (tests/core/test_incremental_render.py): its parts are
    built afresh and its fingerprint is taken over the data itself."""
    files, catalog_hash = CatalogParts.of(entries, records, config, held).files(placeholder=placeholder)
    data = {k: _file_text(k, v) for k, v in files.items()}
    pairs = tuple(sorted(data.items()))
    return RenderedCatalog(pairs, catalog_hash, data_fingerprint(dict(pairs)))


def _record_key(item: str, r: RouteRecord) -> tuple[Any, ...]:
    return (r.source, r.name, 0, item)


class IncrementalCatalog:
    """One catalog kept rendered from the state's entries and records.

    ``update`` reads what changed since the maps it last saw (``PMap.changes``: what differs, not the
    size of the maps, when the new maps were made from the old ones) and moves only those members.
    Derived data, never part of the state: a replay, a snapshot or a restart rebuilds it from the maps
    on first use, and its output equals ``render_catalog``'s for the same maps (the property test).
    """

    def __init__(self, config: CatalogConfig) -> None:
        self.config = config
        self.parts = CatalogParts(config)
        self.entries: PMap[CatalogEntry] = empty()
        self.records: PMap[RouteRecord] = empty()
        self.extras: tuple[RouteRecord, ...] = ()
        # The last render and its data size, until a member changes. Performance (bench P6): most
        # ticks that plan the catalog follow an event that changed none of it (the echo of our own
        # ConfigMap write, a probe answer that changed no health), and rendering it again cost ~300 us.
        # Only a render a ConfigMap may hold is kept: one of 10,000 models (a metrics scrape renders it)
        # is ~17 MiB, held for nothing, since the plan never renders a catalog known to be too large.
        self.rendered: RenderedCatalog | None = None
        self.rendered_size: int | None = None

    def update(
        self,
        entries: PMap[CatalogEntry],
        records: PMap[RouteRecord],
        extras: tuple[RouteRecord, ...],
        held: HeldDefaults = NO_DEFAULTS,
    ) -> None:
        """``extras``: records each listed after every record of the same (source, name) (those of
        unreadable documents); ``held``: the defaults the written catalog holds."""
        parts = self.parts
        changed = held != parts.held
        parts.held = held
        for _, old, new in self.entries.changes(entries):
            changed = True
            if old is not None:
                parts.remove_entry(old)
            if new is not None:
                parts.put_entry(new)
        for item, old_record, new_record in self.records.changes(records):
            changed = True
            if old_record is not None:
                parts.remove_record(_record_key(item, old_record))
            if new_record is not None:
                parts.put_record(_record_key(item, new_record), new_record)
        if extras != self.extras:
            changed = True
            for old_extra in self.extras:
                parts.remove_record((old_extra.source, old_extra.name, 1))
            for extra in extras:
                parts.put_record((extra.source, extra.name, 1), extra)
        if changed:
            self.rendered = self.rendered_size = None
        self.entries, self.records, self.extras = entries, records, extras

    def render(self) -> RenderedCatalog:
        """The catalog, rendered again only when a member changed (or when it is too large to keep)."""
        if self.rendered is not None:
            return self.rendered
        rendered = self.parts.render()
        if self.parts.data_size_at_least() <= CONFIGMAP_DATA_LIMIT:
            self.rendered = rendered
        return rendered

    def data_size(self, rendered: RenderedCatalog) -> int:
        """The size of ``rendered``'s data (as a ConfigMap counts it), kept with the render it is of."""
        if rendered is not self.rendered:
            return configmap_data_size(rendered.data)
        if self.rendered_size is None:
            self.rendered_size = configmap_data_size(rendered.data)
        return self.rendered_size


# The warm catalog of the last render. Taken out while in use, so two threads (a blocking host's view
# and the catalog's loop) never share one: the other builds its own.
_WARM: list[IncrementalCatalog] = []


@attrs.frozen
class OversizedCatalog:
    """A catalog whose data exceeds the limit: only its hash, no data and no fingerprint of its own.

    Performance (bench P1): a catalog that cannot be written is not worth its render, which hashes
    every file (~56 ms at 10,000 models, once per change: the stall bunched the watch's deliveries).
    It is known too large from a lower bound the warm cache keeps, or, when the cache is cold, from the
    rendered data; either way the answer is this."""

    catalog_hash: str
    data_size_at_least: int

    # Its fingerprint as the plan records it: no observed ConfigMap has it.
    fingerprint: ClassVar[str] = "oversized"


def render_incremental(
    entries: PMap[CatalogEntry],
    records: PMap[RouteRecord],
    extras: tuple[RouteRecord, ...],
    config: CatalogConfig,
    *,
    held: HeldDefaults = NO_DEFAULTS,
) -> RenderedCatalog:
    """``render_catalog(entries.values(), [*records.values(), *extras], config, held=held)``, at the cost
    of what changed since the last call."""
    rendered = _incremental(entries, records, extras, config, None, held=held)
    assert isinstance(rendered, RenderedCatalog)
    return rendered


def render_within(
    entries: PMap[CatalogEntry],
    records: PMap[RouteRecord],
    extras: tuple[RouteRecord, ...],
    config: CatalogConfig,
    limit: int,
    *,
    held: HeldDefaults = NO_DEFAULTS,
) -> RenderedCatalog | OversizedCatalog:
    """``render_incremental``, or ``OversizedCatalog`` when the data exceeds ``limit`` bytes (then not
    rendered at all when a lower bound already tells; a catalog near the limit is rendered and measured)."""
    return _incremental(entries, records, extras, config, limit, held=held)


def _incremental(
    entries: PMap[CatalogEntry],
    records: PMap[RouteRecord],
    extras: tuple[RouteRecord, ...],
    config: CatalogConfig,
    limit: int | None,
    *,
    held: HeldDefaults,
) -> RenderedCatalog | OversizedCatalog:
    try:
        warm = _WARM.pop()
    except IndexError:
        warm = IncrementalCatalog(config)
    if warm.config is not config:
        warm = IncrementalCatalog(config)
    warm.update(entries, records, extras, held)
    parts = warm.parts
    rendered: RenderedCatalog | OversizedCatalog
    if limit is not None and (at_least := parts.data_size_at_least()) > limit:
        rendered = OversizedCatalog(parts.catalog_hash(), at_least)  # known too large: not rendered
    else:
        rendered = warm.render()
        if limit is not None and (size := warm.data_size(rendered)) > limit:
            # Rendered, as a cold cache must, and too large all the same: the same answer, so what the
            # cache held (its history) never shows in the result.
            rendered = OversizedCatalog(rendered.catalog_hash, size)
    if not _WARM:  # after an exception the half-updated one is dropped, never put back
        _WARM.append(warm)
    return rendered


def bootstrap_data(config: CatalogConfig) -> dict[str, str]:
    """The placeholder shipped in deploy/ (behaviour §5.2): every data key ``config`` renders with today's
    empty values, so every consumer can start (and mount the keys it reads) before the first catalog is
    written."""
    return render_catalog((), (), config, placeholder=True).as_dict()
