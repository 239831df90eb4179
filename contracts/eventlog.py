"""The event log's wire format: JSON Lines written with orjson through one cattrs converter.

Every line is one record, an object whose first keys are ``seq`` (an integer,
strictly increasing along a run: each record is the previous one's ``seq`` + 1,
except the first record of a file and the record after a ``gap``), ``ts`` (the
wall clock when it was recorded, ISO 8601 UTC, for humans only: decisions come
from ``Ticked.now``) and ``k`` (the record kind):

``header``
    The first record of every file: ``format`` (always ``model-catalog/event-log``),
    ``version`` (:data:`FORMAT_VERSION`), ``service_version``, ``run`` (an id of
    the run), ``starts_run`` (false for a rotated file or a ring dump, which
    open with a snapshot), ``origin`` (``log`` or ``ring-dump``),
    ``state_schema`` (a fingerprint of the core state's shape, see
    :func:`state_schema`), ``snapshot_every`` and ``config`` (the decision-
    affecting configuration, ``CatalogConfig.as_env()``; checked by
    :func:`config_env` to hold nothing secret) and, optionally, ``sources`` (the
    source kinds the run's planning waited for; absent: the built-in catalog
    sources, as every run waited for before route sources declared their own)
    and ``gates`` (the planning rules the run decided with, ``catalog_core.gates``;
    absent: the ones of its state schema, :data:`GATES_BEFORE_THEY_WERE_RECORDED`)
    and ``catalog_keys`` (the data keys of the catalog ConfigMap the run rendered,
    ``CatalogConfig.catalog_keys``; absent:
    :data:`CATALOG_KEYS_BEFORE_THEY_WERE_RECORDED`).
``event``
    ``event``: one event exactly as the core received it (raw objects are the
    redacted plain JSON the adapters produced).
``commands``
    ``answers`` (the ``seq`` of the event record just before it) and
    ``commands``: what the fold emitted for that event, in order. An event whose
    step emitted nothing has no commands record.
``snapshot``
    ``after`` (the ``seq`` of the last event folded into it, 0 for none) and
    ``state``: the full core state, so replay can start here.
``gap``
    ``lost_from`` .. ``lost_to``: records that were never written (full disk,
    the writer fell behind); the next record is a snapshot to continue from.

Tagged unions carry the type in ``t``, from the registry tables below: a tag,
once written, keeps its meaning forever (renaming a Python class changes
nothing on the wire). Values serialize deterministically:

- attrs classes: objects in field order; commands include their ``id``, which
  is recomputed when read and must match (:class:`CommandIdError`);
- ``PMap``: an object in the map's own iteration order. That order is fixed by
  the CRC-32 trie (the same in every process) and, unlike sorted order, rebuilds
  the exact trie when read back, including the order of keys whose CRC-32
  collide (the order they arrived in), so a replay from a snapshot iterates (and
  so emits) exactly as the live run did;
- ``frozenset``: a sorted array; ``tuple``: an array; enums: their value;
- ``Json``: the JSON value itself (its canonical text is rebuilt when read);
- raw objects (``Mapping[str, Any]``): as received, key order kept (some
  parsers take the first of several keys, so order is part of the input).

Reading is strict (wrong types, unknown fields and unknown tags are errors),
so a log is replayed exactly or refused, never misread.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from enum import Enum, StrEnum
from typing import Any, Final, TypeAlias, Union, get_args, get_origin

import attrs
import orjson
from cattrs import Converter
from cattrs.errors import ClassValidationError, IterableValidationError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.preconf.orjson import make_converter as _make_orjson_converter
from cattrs.v import format_exception, transform_error

from catalog_core import commands as cmd
from catalog_core import events as ev
from catalog_core import registry
from catalog_core.catalog_files import KEYS
from catalog_core.config import CatalogConfig, ConfigError
from catalog_core.gates import ALL_GATES, NO_GATES, Gate
from catalog_core.jsonval import Json
from catalog_core.openenum import OpenEnum
from catalog_core.pmap import PMap
from catalog_core.sources.external import InlineKey, SecretKeyRef
from catalog_core.state import NO_MARKS, CatalogState, Marks, Observed, Pending

FORMAT: Final = "model-catalog/event-log"
FORMAT_VERSION: Final = 2
SCHEMA_FILE: Final = "schemas/eventlog.schema.json"

# --- the tag registry. Append only: a tag, once written, never changes meaning.
EVENT_TAGS: Final[Mapping[type, str]] = {
    ev.ObjectUpserted: "object-upserted",
    ev.ObjectDeleted: "object-deleted",
    ev.SourceListed: "source-listed",
    ev.SourceUnavailable: "source-unavailable",
    ev.LiteLLMRowsObserved: "litellm-rows-observed",
    ev.LiteLLMUnreachable: "litellm-unreachable",
    ev.RuntimeProbed: "runtime-probed",
    ev.CommandCompleted: "command-completed",
    ev.Ticked: "ticked",
    ev.LeadershipChanged: "leadership-changed",
}
COMMAND_TAGS: Final[Mapping[type, str]] = {
    cmd.CreateLiteLLMModel: "litellm-create",
    cmd.UpdateLiteLLMModel: "litellm-update",
    cmd.RecreateLiteLLMModel: "litellm-recreate",
    cmd.DeleteLiteLLMModel: "litellm-delete",
    cmd.WriteCatalog: "catalog-write",
    cmd.CreateCatalogPlaceholder: "catalog-placeholder",
    cmd.PatchAgentTemplate: "agenttemplate-patch",
    cmd.RollWorkload: "workload-roll",
    cmd.EvictPod: "pod-evict",
    cmd.ProbeRuntime: "runtime-probe",
    cmd.EmitKubernetesEvent: "kubernetes-event",
    cmd.WatchSecrets: "secrets-watch",
    cmd.ObserveLiteLLM: "observe-litellm",
}
API_KEY_REF_TAGS: Final[Mapping[type, str]] = {
    cmd.LiteralKey: "literal",
    cmd.SecretKey: "secret",
    cmd.InlineKeyRef: "inline",
}
API_KEY_SPEC_TAGS: Final[Mapping[type, str]] = {
    SecretKeyRef: "secret-ref",
    InlineKey: "inline",
}
TAG = "t"
RECORD_KINDS: Final = ("header", "event", "commands", "snapshot", "gap")
ORIGINS: Final = ("log", "ring-dump")

# orjson refuses anything that is not plain JSON (datetimes, dataclasses, str/int/dict subclasses),
# so a value that would come back as another type is never written.
_DUMP_OPTIONS: Final = (
    orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
)


class LogFormatError(ValueError):
    """A record that cannot be read as this format says (the message says why)."""


class CommandIdError(LogFormatError):
    """A command whose recorded id is not the id of its content."""


class UnsafeConfigError(ValueError):
    """The configuration cannot be recorded without writing something secret, or would not replay."""


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not plain JSON")


def dumps(value: Any) -> bytes:
    """orjson, plain JSON only (see ``_DUMP_OPTIONS``); raises ``TypeError`` otherwise."""
    return orjson.dumps(value, default=_refuse, option=_DUMP_OPTIONS)


# --- the converter -----------------------------------------------------------------------------


def _strict_str(value: Any, _: Any) -> str:
    if type(value) is not str:
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _strict_int(value: Any, _: Any) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _strict_float(value: Any, _: Any) -> float:
    if type(value) is float:
        return value
    if type(value) is int:
        return float(value)
    raise TypeError(f"expected a number, got {type(value).__name__}")


def _strict_bool(value: Any, _: Any) -> bool:
    if type(value) is not bool:
        raise TypeError(f"expected true or false, got {type(value).__name__}")
    return value


def _is_union(tp: Any) -> bool:
    return get_origin(tp) is Union or isinstance(tp, types.UnionType)


def _is_raw_mapping(tp: Any) -> bool:
    return get_origin(tp) is Mapping and get_args(tp) == (str, Any)


def _raw_object(value: Any, _: Any) -> dict[str, Any]:
    if type(value) is not dict:
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value


def _register_tagged_union(converter: Converter, tags: Mapping[type, str]) -> None:
    """Un/structure a union of attrs classes (optionally ``| None``) as ``{"t": tag, **fields}``."""
    members = frozenset(tags)
    by_tag = {tag: cls for cls, tag in tags.items()}
    if len(by_tag) != len(tags):
        raise ValueError("duplicate tags")
    names = ", ".join(sorted(by_tag))

    def matches(tp: Any) -> bool:
        return _is_union(tp) and frozenset(get_args(tp)) - {type(None)} == members

    un_hooks = {cls: converter.get_unstructure_hook(cls) for cls in tags}
    st_hooks = {tag: (cls, converter.get_structure_hook(cls)) for tag, cls in by_tag.items()}

    def unstructure(value: Any) -> Any:
        if value is None:
            return None
        return {TAG: tags[type(value)], **un_hooks[type(value)](value)}

    def structure_for(tp: Any) -> Callable[[Any, Any], Any]:
        optional = type(None) in get_args(tp)

        def structure(value: Any, _: Any) -> Any:
            if value is None and optional:
                return None
            if type(value) is not dict:
                raise TypeError(f"expected an object, got {type(value).__name__}")
            tag = value.get(TAG)
            entry = st_hooks.get(tag) if isinstance(tag, str) else None
            if entry is None:
                raise LogFormatError(f"unknown type tag {tag!r} (known: {names})")
            cls, hook = entry
            rest = dict(value)
            del rest[TAG]
            return hook(rest, cls)

        return structure

    converter.register_unstructure_hook_func(matches, unstructure)
    converter.register_structure_hook_factory(matches, structure_for)


def _register_command_ids(converter: Converter) -> None:
    """Commands carry their computed ``id``: written as is, recomputed when read and checked."""
    for cls in COMMAND_TAGS:
        converter.register_unstructure_hook(
            cls, make_dict_unstructure_fn(cls, converter, _cattrs_include_init_false=True)
        )
        base: Callable[[Any, Any], Any] = make_dict_structure_fn(
            cls, converter, _cattrs_forbid_extra_keys=True
        )

        def structure(value: Any, _: Any, _base: Any = base, _cls: type = cls) -> Any:
            if type(value) is not dict:
                raise TypeError(f"expected an object, got {type(value).__name__}")
            rest = dict(value)
            recorded = rest.pop("id", None)
            if not isinstance(recorded, str):
                raise LogFormatError("command without its id")
            command = _base(rest, _cls)
            if command.id != recorded:
                raise CommandIdError(
                    f"{COMMAND_TAGS[_cls]}: recorded id {recorded} but its content has id {command.id}"
                )
            return command

        converter.register_structure_hook(cls, structure)


def _pmap_unstructure(converter: Converter) -> Callable[[Any], Callable[[Any], Any]]:
    def factory(tp: Any) -> Callable[[Any], Any]:
        args = get_args(tp)
        hook = converter.get_unstructure_hook(args[0]) if args else (lambda v: v)

        def unstructure(value: PMap[Any]) -> dict[str, Any]:
            return {k: hook(v) for k, v in value.items()}

        return unstructure

    return factory


def _pmap_structure(converter: Converter) -> Callable[[Any], Callable[[Any, Any], Any]]:
    def factory(tp: Any) -> Callable[[Any, Any], Any]:
        args = get_args(tp)
        value_type = args[0] if args else Any
        hook = converter.get_structure_hook(value_type)

        def structure(value: Any, _: Any) -> PMap[Any]:
            if type(value) is not dict:
                raise TypeError(f"expected an object, got {type(value).__name__}")
            return PMap.of((k, hook(v, value_type)) for k, v in value.items())

        return structure

    return factory


def _frozenset_unstructure(converter: Converter) -> Callable[[Any], Callable[[Any], Any]]:
    def factory(tp: Any) -> Callable[[Any], Any]:
        args = get_args(tp)
        hook = converter.get_unstructure_hook(args[0]) if args else (lambda v: v)
        return lambda value: sorted(hook(v) for v in value)

    return factory


def _frozenset_structure(converter: Converter) -> Callable[[Any], Callable[[Any, Any], Any]]:
    def factory(tp: Any) -> Callable[[Any, Any], Any]:
        args = get_args(tp)
        item_type = args[0] if args else Any
        hook = converter.get_structure_hook(item_type)

        def structure(value: Any, _: Any) -> frozenset[Any]:
            if type(value) is not list:
                raise TypeError(f"expected an array, got {type(value).__name__}")
            return frozenset(hook(v, item_type) for v in value)

        return structure

    return factory


def _enum_structure(value: Any, tp: Any) -> Any:
    if type(value) is not str:
        raise TypeError(f"expected a string, got {type(value).__name__}")
    try:
        return tp(value)
    except ValueError:
        known = ", ".join(str(m.value) for m in tp)
        raise LogFormatError(f"{value!r} is not a {tp.__name__} (known: {known})") from None


def _enum_unstructure(value: Enum) -> Any:
    return value.value


def _open_enum_structure(value: Any, tp: Any) -> Any:
    if type(value) is not str:
        raise TypeError(f"expected a string, got {type(value).__name__}")
    try:
        return tp(value)
    except ValueError as exc:
        raise LogFormatError(str(exc)) from None


def _register_stores(c: Converter) -> None:
    """``Observed.stores``: each route source's items as its spec's ``value_type`` (from the registry)."""

    def value_type(kind: str) -> Any:
        spec = registry.BY_KIND.get(kind)  # type: ignore[call-overload]
        if spec is None or spec.value_type is None:
            raise LogFormatError(f"{kind!r} is not a route source whose items are stored")
        return PMap[spec.value_type]  # type: ignore[name-defined]

    def unstructure(stores: PMap[PMap[Any]]) -> dict[str, Any]:
        return {str(kind): c.unstructure(items, value_type(kind)) for kind, items in stores.items()}

    def structure(value: Any, _: Any) -> PMap[PMap[Any]]:
        if type(value) is not dict:
            raise TypeError(f"expected an object, got {type(value).__name__}")
        return PMap.of((kind, c.structure(items, value_type(kind))) for kind, items in value.items())

    c.register_unstructure_hook(
        Observed, make_dict_unstructure_fn(Observed, c, stores=override(unstruct_hook=unstructure))
    )
    c.register_structure_hook(
        Observed,
        make_dict_structure_fn(
            Observed, c, _cattrs_forbid_extra_keys=True, stores=override(struct_hook=structure)
        ),
    )


def _json_structure(value: Any, _: Any) -> Json:
    return Json.of(value)


def _generic(cls: Any) -> Callable[[Any], bool]:
    """``cls`` itself or any parametrisation of it (``PMap[str]``, ``frozenset[str]``)."""
    return lambda tp: tp is cls or get_origin(tp) is cls


# Every field of ``Pending`` that holds marks (by its declared type: a new one cannot be forgotten).
_MARK_FIELDS: Final = tuple(f.name for f in attrs.fields(Pending) if f.type in ("Marks", Marks))


def _marks_unstructure(marks: Marks) -> list[str]:
    """A persistent stack of marks as a flat array, top first (rebuilt exactly by ``_marks_structure``)."""
    out: list[str] = []
    while marks:
        out.append(marks[0])
        marks = marks[1]
    return out


def _marks_structure(value: Any, _: Any) -> Marks:
    if type(value) is not list or not all(type(v) is str for v in value):
        raise LogFormatError("expected an array of strings")
    marks: Marks = NO_MARKS
    for key in reversed(value):
        marks = (key, marks)
    return marks


def _register_pending(c: Converter) -> None:
    unstructure: dict[str, Any] = {f: override(unstruct_hook=_marks_unstructure) for f in _MARK_FIELDS}
    structure: dict[str, Any] = {f: override(struct_hook=_marks_structure) for f in _MARK_FIELDS}
    c.register_unstructure_hook(Pending, make_dict_unstructure_fn(Pending, c, **unstructure))
    c.register_structure_hook(
        Pending, make_dict_structure_fn(Pending, c, _cattrs_forbid_extra_keys=True, **structure)
    )


def make_converter(*, detailed_validation: bool = False) -> Converter:
    """The event log's converter. Replay uses the fast one and re-reads a bad record with the detailed one."""
    c = _make_orjson_converter(forbid_extra_keys=True, detailed_validation=detailed_validation)
    # Class hooks (they win over predicate hooks); a subclass gets the hook of the nearest class in its
    # MRO, so bool (an int) and the core's enums (StrEnums, so strs) need their own.
    c.register_structure_hook(str, _strict_str)
    c.register_structure_hook(int, _strict_int)
    c.register_structure_hook(float, _strict_float)
    c.register_structure_hook(bool, _strict_bool)
    c.register_unstructure_hook(StrEnum, _enum_unstructure)
    c.register_structure_hook(StrEnum, _enum_structure)
    c.register_unstructure_hook(OpenEnum, lambda v: v.value)
    c.register_structure_hook(OpenEnum, _open_enum_structure)
    c.register_unstructure_hook(Json, lambda v: orjson.loads(v.text))
    c.register_structure_hook(Json, _json_structure)
    c.register_unstructure_hook_func(_is_raw_mapping, lambda v: v if type(v) is dict else dict(v))
    c.register_structure_hook_func(_is_raw_mapping, _raw_object)
    c.register_unstructure_hook_factory(_generic(PMap), _pmap_unstructure(c))
    c.register_structure_hook_factory(_generic(PMap), _pmap_structure(c))
    c.register_unstructure_hook_factory(_generic(frozenset), _frozenset_unstructure(c))
    c.register_structure_hook_factory(_generic(frozenset), _frozenset_structure(c))
    _register_tagged_union(c, API_KEY_REF_TAGS)
    _register_tagged_union(c, API_KEY_SPEC_TAGS)
    _register_command_ids(c)
    # A tick's busy time is written only when there is one: ticks of replays and tests carry none, and
    # records of runs before it existed read as they were written.
    c.register_unstructure_hook(
        ev.Ticked, make_dict_unstructure_fn(ev.Ticked, c, busy=override(omit_if_default=True))
    )
    _register_tagged_union(c, COMMAND_TAGS)
    _register_tagged_union(c, EVENT_TAGS)
    _register_pending(c)
    _register_stores(c)
    return c


CONVERTER: Final = make_converter()


@functools.cache
def detailed_converter() -> Converter:
    """The converter with detailed validation, built on first use: only a bad record needs it, and
    building it at import cost ~65 ms of every start (a replay's, the service's)."""
    return make_converter(detailed_validation=True)


Commands: TypeAlias = tuple[cmd.Command, ...]


def _explain(exc: BaseException, path: str) -> str:
    def fmt(e: BaseException, tp: type | None) -> str:
        if isinstance(e, LogFormatError | TypeError) and not isinstance(e, ClassValidationError):
            return str(e)
        return format_exception(e, tp)

    if isinstance(exc, ClassValidationError | IterableValidationError):
        return "; ".join(transform_error(exc, path, fmt))
    return f"{fmt(exc, None)} @ {path}"


def _structure(value: Any, tp: Any, path: str) -> Any:
    """Structure fast; on failure, structure again with detailed validation for a readable reason."""
    try:
        return CONVERTER.structure(value, tp)
    except Exception:
        try:
            detailed_converter().structure(value, tp)
        except Exception as exc:
            raise LogFormatError(_explain(exc, path)) from None
        raise LogFormatError(f"unreadable value @ {path}") from None


# --- values ------------------------------------------------------------------------------------


def unstructure_event(event: ev.Event) -> dict[str, Any]:
    out: dict[str, Any] = CONVERTER.unstructure(event, ev.Event)
    return out


def unstructure_commands(commands: Iterable[cmd.Command]) -> list[dict[str, Any]]:
    hook = CONVERTER.get_unstructure_hook(cmd.Command)
    return [hook(c) for c in commands]


def unstructure_state(state: CatalogState) -> dict[str, Any]:
    out: dict[str, Any] = CONVERTER.unstructure(state, CatalogState)
    return out


def structure_event(value: Any, path: str = "$.event") -> ev.Event:
    # Performance: most events are read straight into their class (see _fast_event_decoder);
    # the rest, and anything the fast path does not accept, take the converter's way, which gives the
    # readable reason for a bad one. (The union's hook is looked up once, not per record.)
    if type(value) is dict:
        fast = decode_event_fast(value)
        if fast is not None:
            return fast
    try:
        event: ev.Event = _EVENT_HOOK(value, ev.Event)
    except Exception:
        event = _structure(value, ev.Event, path)
    return event


_EVENT_HOOK: Final = CONVERTER.get_structure_hook(ev.Event)

# --- the fast event decoder ----------------------------------------------------------------------
# A replay decodes a million events. The converter's way copies each one without its tag, then runs the
# union's and the class's generated hooks; this one reads the fields straight into the class. It is
# derived from the same definitions -- the tag registry, the classes' attrs fields and the converter's
# strict hooks above -- accepts a subset of what the converter accepts, with the same result, and answers
# None for anything else (the converter then decides). tests/eventlog/test_fast_decode.py holds it to
# that on generated events, valid and damaged.

_STR, _FLOAT, _BOOL, _INT, _ENUM, _RAW, _RAWS, _HOOK = range(8)
_ABSENT: Final = object()


def _field_reader(tp: Any) -> tuple[int, Any]:
    """How one field is read: the inline form of the converter's hook for its type, or that hook."""
    if tp is str:
        return _STR, None  # _strict_str
    if tp is float:
        return _FLOAT, None  # _strict_float
    if tp is bool:
        return _BOOL, None  # _strict_bool
    if tp is int:
        return _INT, None  # _strict_int
    if isinstance(tp, type) and issubclass(tp, StrEnum):
        return _ENUM, {m.value: m for m in tp}  # _enum_structure
    if isinstance(tp, type) and issubclass(tp, OpenEnum):
        return _ENUM, tp._members  # _open_enum_structure; live, so members declared later are known
    if _is_raw_mapping(tp):
        return _RAW, None  # _raw_object
    args = get_args(tp)
    if get_origin(tp) is tuple and len(args) == 2 and args[1] is Ellipsis and _is_raw_mapping(args[0]):
        return _RAWS, None  # a JSON array of objects (anything else goes the converter's way)
    return _HOOK, (CONVERTER.get_structure_hook(tp), tp)


def _fast_event_decoder(cls: type) -> Callable[[dict[str, Any]], Any]:
    """A decoder for ``cls``, generated from its fields' readers (Performance, bench P6: a loop over
    a plan of readers cost ~1.5 us more per event than the straight-line code it interprets)."""
    hints = typing.get_type_hints(cls)
    namespace: dict[str, Any] = {"_ABSENT": _ABSENT, "cls": cls}
    lines = ["def decode(value):", "    count = 1"]  # the tag
    keywords = []
    for i, f in enumerate(attrs.fields(cls)):
        kind, extra = _field_reader(hints[f.name])
        v = f"v{i}"
        required = f.default is attrs.NOTHING
        lines.append(f"    {v} = value.get({f.name!r}, _ABSENT)")
        if required:
            lines.append(f"    if {v} is _ABSENT:")
            lines.append("        return None")
            pad = "    "
        else:
            lines.append(f"    if {v} is not _ABSENT:")
            pad = "        "
        lines.extend(pad + line for line in _reader_lines(kind, v, i))
        if kind in (_ENUM, _HOOK):
            namespace[f"extra{i}"] = extra
        lines.append(pad + "count += 1")
        keywords.append((f.alias, v, required))
    lines.append("    if len(value) != count:  # a key that is no field")
    lines.append("        return None")
    # Every field by position, an absent optional one as its default (a keyword call with a dict of the
    # fields given cost ~0.3 us more); a default made by a factory, or a keyword-only field, by keyword.
    positional: list[str] = []
    named: list[str] = []  # once one field goes by keyword, every later one does
    for i, (f, (alias, v, required)) in enumerate(zip(attrs.fields(cls), keywords, strict=True)):
        if not required and isinstance(f.default, attrs.Factory):  # type: ignore[arg-type]
            lines.append(f"    given{i} = {{}} if {v} is _ABSENT else {{{alias!r}: {v}}}")
            named.append(f"**given{i}")
            continue
        if not required:
            namespace[f"default{i}"] = f.default
            lines.append(f"    if {v} is _ABSENT:")
            lines.append(f"        {v} = default{i}")
        if f.kw_only or named:
            named.append(f"{alias}={v}")
        else:
            positional.append(v)
    lines.append(f"    return cls({', '.join([*positional, *named])})")
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<event decoder {cls.__qualname__}>", "exec"), namespace)
    decode: Callable[[dict[str, Any]], Any] = namespace["decode"]
    return decode


_EXACT_TYPE: Final = {_STR: "str", _BOOL: "bool", _INT: "int", _RAW: "dict"}  # no subclass, no conversion


def _reader_lines(kind: int, v: str, i: int) -> list[str]:
    """The checks (and conversion) of one field's value ``v``, as the converter's strict hooks decide."""
    if kind in _EXACT_TYPE:
        return [f"if type({v}) is not {_EXACT_TYPE[kind]}:", "    return None"]
    if kind == _FLOAT:  # an int is a number; a bool is not
        return [
            f"if type({v}) is int:",
            f"    {v} = float({v})",
            f"elif type({v}) is not float:",
            "    return None",
        ]
    if kind == _ENUM:
        return [
            f"{v} = extra{i}.get({v}) if type({v}) is str else None",
            f"if {v} is None:",
            "    return None",
        ]
    if kind == _RAWS:
        return [
            f"if type({v}) is not list:",
            "    return None",
            f"{v} = tuple({v})",
            f"for item in {v}:",
            "    if type(item) is not dict:",
            "        return None",
        ]
    return [f"{v} = extra{i}[0]({v}, extra{i}[1])"]


_FAST_EVENTS: Final[Mapping[str, Callable[[dict[str, Any]], Any]]] = {
    tag: _fast_event_decoder(cls) for cls, tag in EVENT_TAGS.items()
}


def decode_event_fast(value: dict[str, Any]) -> ev.Event | None:
    """The fast decoder alone: the event, or None where the converter must decide (also when a field's
    hook refuses the value: the converter then says why, with the path)."""
    tag = value.get(TAG)
    decode = _FAST_EVENTS.get(tag) if type(tag) is str else None
    if decode is None:
        return None
    try:
        event: ev.Event | None = decode(value)
    except Exception:
        return None
    return event


def structure_commands(value: Any, path: str = "$.commands") -> Commands:
    if type(value) is not list:
        raise LogFormatError(f"expected an array @ {path}")
    commands: Commands = _structure(value, Commands, path)
    return commands


def structure_state(value: Any, path: str = "$.state") -> CatalogState:
    if isinstance(value, dict) and isinstance(value.get("config"), dict):
        # a snapshot written before a setting existed decided as its default of that day did
        missing = {k: v for k, v in _CONFIG_FIELDS_BEFORE_THEY_EXISTED.items() if k not in value["config"]}
        if missing:
            value = {**value, "config": {**value["config"], **missing}}
    state: CatalogState = _structure(value, CatalogState, path)
    return state


# --- records -----------------------------------------------------------------------------------


_WAITED_FOR_BEFORE_SOURCES_WERE_RECORDED: Final = tuple(k.value for k in ev.CATALOG_SOURCES)

# The catalog keys every run rendered before headers recorded them: the files declared then, written out
# here because they are a fact about those runs, not a declaration (``catalog_core/catalog_files.py`` is
# that). A file declared since is rendered by a new run and recorded in its header, never by a replay of an
# older log, whose writes held exactly these; so this set never changes.
CATALOG_KEYS_BEFORE_THEY_WERE_RECORDED: Final = frozenset(
    {
        "AI_APPLIANCE_DEFAULT_CHAT_MODEL",
        "AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL",
        "AI_APPLIANCE_DEFAULT_OPENCODE_MODEL",
        "AI_APPLIANCE_MODEL_CATALOG_HASH",
        "AI_APPLIANCE_MODEL_CATALOG_READY",
        "catalog.json",
        "chat-models.json",
        "defaults.env",
        "embedding-models.json",
        "hermes.yaml",
        "openclaw.json",
        "opencode-providers.json",
        "paperclip-adapter-models.json",
        "paperclip-opencode-providers.json",
        "routes.json",
    }
)


@attrs.frozen
class Header:
    seq: int
    ts: str
    service_version: str
    run: str
    starts_run: bool
    origin: str
    state_schema: str
    snapshot_every: int
    config: Mapping[str, str]
    # the sources the run's planning waited for (``CatalogState.waits_for``); a log written before route
    # sources declared their own kinds does not say, and waited for the built-in ones
    sources: tuple[str, ...] = _WAITED_FOR_BEFORE_SOURCES_WERE_RECORDED
    # the planning gates the run decided with (``CatalogConfig.gates``), sorted; ``decode_header`` reads
    # those of its state schema into a header written before gates were recorded
    gates: tuple[str, ...] = tuple(sorted(gate.value for gate in ALL_GATES))
    # the data keys of the catalog ConfigMap the run rendered (``CatalogConfig.catalog_keys``), sorted;
    # ``decode_header`` reads CATALOG_KEYS_BEFORE_THEY_WERE_RECORDED into a header written before they were
    catalog_keys: tuple[str, ...] = tuple(sorted(KEYS))
    format: str = FORMAT
    version: int = FORMAT_VERSION

    def catalog_config(self) -> CatalogConfig:
        # A log written before a setting existed decided without it: replay it that way.
        config = CatalogConfig.from_env({**ABSENT_BEFORE_IT_EXISTED, **self.config})
        if isinstance(config, ConfigError):
            raise LogFormatError(f"header: invalid configuration: {config}")
        return attrs.evolve(config, gates=self.planning_gates(), catalog_keys=self.rendered_keys())

    def planning_gates(self) -> frozenset[Gate]:
        """The gates a replay of this log plans with, as the run did; one this version does not know was
        added by a newer one, whose decisions this version cannot make (refused)."""
        unknown = sorted(set(self.gates) - set(ALL_GATES))
        if unknown:
            raise LogFormatError(
                f"header: planning gates {', '.join(unknown)} are not known to this version (the log was "
                f"written by model-catalog {self.service_version}); replay it with that version or newer"
            )
        return frozenset(Gate(name) for name in self.gates)

    def rendered_keys(self) -> frozenset[str]:
        """The catalog keys a replay of this log renders, as the run did; one this version does not declare
        was added by a newer one, whose writes this version cannot render (refused)."""
        unknown = sorted(set(self.catalog_keys) - KEYS)
        if unknown:
            raise LogFormatError(
                f"header: catalog keys {', '.join(unknown)} are not declared by this version (the log was "
                f"written by model-catalog {self.service_version}); replay it with that version or newer"
            )
        return frozenset(self.catalog_keys)

    def waits_for(self) -> frozenset[ev.SourceKind]:
        """The sources a replay of this log waits for, as the run did."""
        try:
            return frozenset(ev.SourceKind(name) for name in self.sources)
        except ValueError as exc:
            raise LogFormatError(f"header: sources: {exc}") from None


# Settings added after format version 1, with the value that decides as the code did before them.
ABSENT_BEFORE_IT_EXISTED: Final[Mapping[str, str]] = {
    "CATALOG_LITELLM_BURST_ROWS": "0",
    "CATALOG_LITELLM_BURST_PROBE_SECONDS": "0",
}


def _config_fields_before_they_existed() -> dict[str, Any]:
    """``ABSENT_BEFORE_IT_EXISTED`` as ``CatalogConfig`` field values (for snapshots, which store fields)."""
    today, older = CatalogConfig(), CatalogConfig.from_env(ABSENT_BEFORE_IT_EXISTED)
    assert isinstance(older, CatalogConfig), older
    return {
        f.name: getattr(older, f.name)
        for f in attrs.fields(CatalogConfig)
        if getattr(older, f.name) != getattr(today, f.name)
    }


_CONFIG_FIELDS_BEFORE_THEY_EXISTED: Final = _config_fields_before_they_existed()

# The gates each state schema's code planned with, for a header written before headers recorded them (a
# schema not listed is older than every gate). A gate added since is recorded in every header, so this
# table never grows.
GATES_BEFORE_THEY_WERE_RECORDED: Final[Mapping[str, frozenset[Gate]]] = {
    # the bootstrap placeholder
    "0f6ffb4ccf89a74b": frozenset({Gate.CATALOG_PLACEHOLDER}),
    # a Secret's key only to its API bases, no ambient credentials, revocation of a last good route's key
    "4d1f9c755027eb79": frozenset(
        {Gate.CATALOG_PLACEHOLDER, Gate.SECRET_API_BASES, Gate.AMBIENT_CREDENTIALS, Gate.SECRET_REVOCATION}
    ),
    # verified rollouts, sticky runtime names and defaults, owned metadata first: every gate of today
    "49af2580675a676d": frozenset(
        {
            Gate.CATALOG_PLACEHOLDER,
            Gate.SECRET_API_BASES,
            Gate.AMBIENT_CREDENTIALS,
            Gate.SECRET_REVOCATION,
            Gate.VERIFIED_ROLLOUTS,
            Gate.STICKY_RUNTIME_NAMES,
            Gate.STICKY_DEFAULTS,
            Gate.OWNED_METADATA,
        }
    ),
}


def gates_of_state_schema(state_schema: str) -> frozenset[Gate]:
    """The gates of a log whose header does not record them: those its state schema's code planned with."""
    return GATES_BEFORE_THEY_WERE_RECORDED.get(state_schema, NO_GATES)


def with_header_fields(state: Any, config: CatalogConfig) -> Any:
    """A raw snapshot state written before snapshots recorded ``config.gates`` or ``config.catalog_keys``,
    given the header's (``config``, from ``Header.catalog_config``; the shapes of
    ``READABLE_OLDER_STATE_SCHEMAS`` do not hold them)."""
    if not (isinstance(state, dict) and isinstance(state.get("config"), dict)):
        return state
    recorded = {
        "gates": sorted(gate.value for gate in config.gates),
        "catalog_keys": sorted(config.catalog_keys),
    }
    missing = {name: value for name, value in recorded.items() if name not in state["config"]}
    if missing:
        return {**state, "config": {**state["config"], **missing}}
    return state


@attrs.frozen
class EventRecord:
    seq: int
    ts: str
    event: ev.Event


@attrs.frozen
class CommandsRecord:
    seq: int
    ts: str
    answers: int
    commands: Commands


@attrs.frozen
class SnapshotRecord:
    seq: int
    ts: str
    after: int
    state: CatalogState


@attrs.frozen
class GapRecord:
    seq: int
    ts: str
    lost_from: int
    lost_to: int
    reason: str


Record = Header | EventRecord | CommandsRecord | SnapshotRecord | GapRecord


def encode_header(header: Header) -> bytes:
    return dumps(
        {
            "seq": header.seq,
            "ts": header.ts,
            "k": "header",
            "format": header.format,
            "version": header.version,
            "service_version": header.service_version,
            "run": header.run,
            "starts_run": header.starts_run,
            "origin": header.origin,
            "state_schema": header.state_schema,
            "snapshot_every": header.snapshot_every,
            "config": dict(header.config),
            "sources": list(header.sources),
            "gates": list(header.gates),
            "catalog_keys": list(header.catalog_keys),
        }
    )


def encode_event(seq: int, ts: str, event: ev.Event) -> bytes:
    return dumps({"seq": seq, "ts": ts, "k": "event", "event": unstructure_event(event)})


def encode_commands(seq: int, ts: str, answers: int, commands: Iterable[cmd.Command]) -> bytes:
    body = unstructure_commands(commands)
    return dumps({"seq": seq, "ts": ts, "k": "commands", "answers": answers, "commands": body})


def encode_snapshot(seq: int, ts: str, after: int, state: CatalogState) -> bytes:
    return dumps({"seq": seq, "ts": ts, "k": "snapshot", "after": after, "state": unstructure_state(state)})


def encode_gap(seq: int, ts: str, lost_from: int, lost_to: int, reason: str) -> bytes:
    return dumps(
        {"seq": seq, "ts": ts, "k": "gap", "lost_from": lost_from, "lost_to": lost_to, "reason": reason}
    )


def encode(record: Record) -> bytes:
    if isinstance(record, Header):
        return encode_header(record)
    if isinstance(record, EventRecord):
        return encode_event(record.seq, record.ts, record.event)
    if isinstance(record, CommandsRecord):
        return encode_commands(record.seq, record.ts, record.answers, record.commands)
    if isinstance(record, SnapshotRecord):
        return encode_snapshot(record.seq, record.ts, record.after, record.state)
    return encode_gap(record.seq, record.ts, record.lost_from, record.lost_to, record.reason)


_ENVELOPE: Final = {
    "header": frozenset(
        {
            "format",
            "version",
            "service_version",
            "run",
            "starts_run",
            "origin",
            "state_schema",
            "snapshot_every",
            "config",
        }
    ),
    "event": frozenset({"event"}),
    "commands": frozenset({"answers", "commands"}),
    "snapshot": frozenset({"after", "state"}),
    "gap": frozenset({"lost_from", "lost_to", "reason"}),
}


def load(line: bytes) -> dict[str, Any]:
    """One line to a JSON object (nothing else checked: see :func:`check_envelope`)."""
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise LogFormatError(f"not JSON ({exc})") from None
    if type(raw) is not dict:
        raise LogFormatError("a record must be a JSON object")
    return raw


def check_envelope(raw: dict[str, Any]) -> dict[str, Any]:
    """``seq``, ``ts``, ``k`` and exactly the keys of the record's kind (of the current format version)."""
    kind = raw.get("k")
    full = _KEYS.get(kind) if isinstance(kind, str) else None
    if full is None or not isinstance(kind, str):
        raise LogFormatError(f"unknown record kind {kind!r} (known: {', '.join(RECORD_KINDS)})")
    seq = raw.get("seq")
    if type(seq) is not int or seq < 0:
        raise LogFormatError("seq must be a non-negative integer")
    if type(raw.get("ts")) is not str:
        raise LogFormatError("ts must be a string")
    if raw.keys() != full and not (full < raw.keys() <= full | _OPTIONAL.get(kind, frozenset())):
        keys = raw.keys() - {"seq", "ts", "k"}
        expected = _ENVELOPE[kind] | _OPTIONAL.get(kind, frozenset())
        missing, extra = sorted(_ENVELOPE[kind] - keys), sorted(keys - expected)
        why = "; ".join(
            part
            for part in (
                f"missing {', '.join(missing)}" if missing else "",
                f"unknown {', '.join(extra)}" if extra else "",
            )
            if part
        )
        raise LogFormatError(f"{kind} record: {why}")
    return raw


_KEYS: Final = {kind: keys | {"seq", "ts", "k"} for kind, keys in _ENVELOPE.items()}
# Every key of a record of each kind, envelope included: a reader's quick check of the common case (a record
# with other keys, or of an unknown kind, takes check_envelope, which says what is wrong).
ENVELOPE_KEYS: Final[Mapping[str, frozenset[str]]] = _KEYS
# Keys a record may leave out: a header written before it said which sources the run waited for, which
# gates it planned with, or which catalog keys it rendered.
_OPTIONAL: Final = {"header": frozenset({"sources", "gates", "catalog_keys"})}


def parse_line(line: bytes) -> dict[str, Any]:
    """One line of a current-version log to its raw record, envelope checked."""
    return check_envelope(load(line))


def _int_field(raw: Mapping[str, Any], name: str, kind: str) -> int:
    value = raw[name]
    if type(value) is not int:
        raise LogFormatError(f"{kind} record: {name} must be an integer")
    return value


def decode_header(raw: Mapping[str, Any]) -> Header:
    """A header record (any version: call :func:`check_version` before reading further)."""
    if raw.get("format") != FORMAT:
        raise LogFormatError(f"not a model-catalog event log (format {raw.get('format')!r})")
    strings = ("service_version", "run", "origin", "state_schema")
    for name in strings:
        if type(raw.get(name)) is not str:
            raise LogFormatError(f"header record: {name} must be a string")
    if type(raw.get("starts_run")) is not bool:
        raise LogFormatError("header record: starts_run must be true or false")
    if raw["origin"] not in ORIGINS:
        raise LogFormatError(f"header record: unknown origin {raw['origin']!r}")
    config = raw.get("config")
    if type(config) is not dict or not all(type(v) is str for v in config.values()):
        raise LogFormatError("header record: config must map names to strings")
    sources = raw.get("sources", list(_WAITED_FOR_BEFORE_SOURCES_WERE_RECORDED))
    if type(sources) is not list or not all(type(v) is str for v in sources):
        raise LogFormatError("header record: sources must be an array of strings")
    if "gates" in raw:
        gates = raw["gates"]
        if type(gates) is not list or not all(type(v) is str for v in gates):
            raise LogFormatError("header record: gates must be an array of strings")
    else:
        gates = sorted(gate.value for gate in gates_of_state_schema(raw["state_schema"]))
    catalog_keys = raw.get("catalog_keys", sorted(CATALOG_KEYS_BEFORE_THEY_WERE_RECORDED))
    if type(catalog_keys) is not list or not all(type(v) is str for v in catalog_keys):
        raise LogFormatError("header record: catalog_keys must be an array of strings")
    return Header(
        seq=raw["seq"],
        ts=raw["ts"],
        service_version=raw["service_version"],
        run=raw["run"],
        starts_run=raw["starts_run"],
        origin=raw["origin"],
        state_schema=raw["state_schema"],
        snapshot_every=_int_field(raw, "snapshot_every", "header"),
        config=config,
        sources=tuple(sources),
        gates=tuple(gates),
        catalog_keys=tuple(catalog_keys),
        format=raw["format"],
        version=_int_field(raw, "version", "header"),
    )


def decode(raw: Mapping[str, Any]) -> Record:
    """A raw record (from :func:`parse_line`) to its typed value."""
    kind, seq, ts = raw["k"], raw["seq"], raw["ts"]
    if kind == "header":
        return decode_header(raw)
    if kind == "event":
        return EventRecord(seq, ts, structure_event(raw["event"]))
    if kind == "commands":
        return CommandsRecord(seq, ts, _int_field(raw, "answers", kind), structure_commands(raw["commands"]))
    if kind == "snapshot":
        return SnapshotRecord(seq, ts, _int_field(raw, "after", kind), structure_state(raw["state"]))
    if type(raw["reason"]) is not str:
        raise LogFormatError("gap record: reason must be a string")
    return GapRecord(
        seq, ts, _int_field(raw, "lost_from", kind), _int_field(raw, "lost_to", kind), raw["reason"]
    )


# --- versions and migrations -------------------------------------------------------------------

Migration: TypeAlias = Callable[[dict[str, Any]], dict[str, Any]]
# MIGRATIONS[v] upgrades one raw record (header included) of format version v to version v + 1.


def _v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    """Version 2 adds ``busy`` to a tick (how long the loop folded before it), absent when 0: a version 1
    record is a version 2 one; only the header's number changes."""
    return {**raw, "version": 2} if raw.get("k") == "header" else raw


MIGRATIONS: dict[int, Migration] = {1: _v1_to_v2}


def migration_chain(version: int) -> list[Migration] | None:
    """The migrations that bring a record of ``version`` to :data:`FORMAT_VERSION`, or None if impossible."""
    if version > FORMAT_VERSION or version < 0:
        return None
    chain = []
    for v in range(version, FORMAT_VERSION):
        step = MIGRATIONS.get(v)
        if step is None:
            return None
        chain.append(step)
    return chain


def refusal(version: int, service_version: str) -> str:
    """Why a log of ``version`` cannot be read (for the error message)."""
    if version > FORMAT_VERSION:
        return (
            f"format version {version} was written by a newer model-catalog ({service_version}); "
            f"this one reads versions up to {FORMAT_VERSION}"
        )
    missing = (
        next(v for v in range(version, FORMAT_VERSION) if v not in MIGRATIONS) if version >= 0 else version
    )
    return (
        f"format version {version} (written by model-catalog {service_version}) cannot be read: "
        f"no migration from version {missing} to {missing + 1} is defined"
    )


# --- the header's configuration and state shape ------------------------------------------------

_SECRET_NAME = re.compile(r"(^|_)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH)$", re.IGNORECASE)
_USERINFO = re.compile(r"^[a-z][a-z0-9+.-]*://[^/@\s]*@", re.IGNORECASE)


def config_env(config: CatalogConfig) -> dict[str, str]:
    """``config.as_env()`` checked for the header: no secret-looking variable, no credentials in a URL,
    and it reads back as the same configuration (else a replay would decide differently)."""
    env = config.as_env()
    for name, value in env.items():
        if _SECRET_NAME.search(name):
            raise UnsafeConfigError(f"{name} looks like a secret; it cannot go into the event log header")
        if _USERINFO.match(value.strip()):
            raise UnsafeConfigError(f"{name} carries credentials in its URL; the event log would record them")
    back = CatalogConfig.from_env(env)
    if (
        not isinstance(back, CatalogConfig)
        or attrs.evolve(back, gates=config.gates, catalog_keys=config.catalog_keys) != config
    ):
        raise UnsafeConfigError("the configuration does not read back from its environment spelling")
    return env


def _type_text(tp: Any) -> str:
    if isinstance(tp, type) and not get_args(tp):
        return f"{tp.__module__}.{tp.__qualname__}"
    if _is_union(tp):
        return " | ".join(sorted(_type_text(a) for a in get_args(tp)))
    origin = get_origin(tp)
    if origin is not None:
        return f"{_type_text(origin)}[{', '.join(_type_text(a) for a in get_args(tp))}]"
    return repr(tp)


def _walk_types(tp: Any) -> Iterable[Any]:
    yield tp
    for arg in get_args(tp):
        yield from _walk_types(arg)


def state_schema() -> str:
    """A fingerprint of the shape of ``CatalogState``: every attrs class and enum reachable from it, with
    field names, types and enum values, and the types of the route sources' stored items. A snapshot is read
    only by code with the same fingerprint. Which sources exist is not part of it (``SourceKind`` and
    ``Source`` are open enums; a new source whose items are of a type already stored changes nothing), nor
    which planning gates exist (the header names those a run planned with)."""
    parts: dict[str, Any] = {}
    todo: list[Any] = [CatalogState, *(s.value_type for s in registry.SPECS if s.value_type is not None)]
    while todo:
        tp = todo.pop()
        name = _type_text(tp)
        if name in parts:
            continue
        if tp is Gate:
            # which gates exist is the header's to say (an older snapshot names fewer, and reads as is)
            parts[name] = "planning gates"
            continue
        if isinstance(tp, type) and issubclass(tp, Enum):
            parts[name] = sorted(str(m.value) for m in tp)
            continue
        if not (isinstance(tp, type) and attrs.has(tp)):
            continue
        hints = typing.get_type_hints(tp)
        parts[name] = [[f.name, _type_text(hints[f.name])] for f in attrs.fields(tp)]
        for f in attrs.fields(tp):
            for inner in _walk_types(hints[f.name]):
                todo.append(inner)
    text = orjson.dumps(parts, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(text).hexdigest()[:16]


STATE_SCHEMA: Final = state_schema()

# Older state shapes whose snapshots this version reads as they are: each differs from the next only by
# fields added with a default that decides as the code of its day did (a snapshot migration by default).
READABLE_OLDER_STATE_SCHEMAS: Final[Mapping[str, str]] = {
    # Failed writes reported and retried (Control.failing, Pending.failures, Retry.command, two more reason
    # codes); absent: nothing failing, nothing to report, no Event to send again (none was, then).
    "5e0f2e83a97dd0d4": "before Control.failing (failed writes reported; absent: none)",
    # The catalog keys rendered (CatalogConfig.catalog_keys); absent: the header's (with_header_fields).
    "997d443f8813c16d": "before CatalogConfig.catalog_keys (the keys rendered; absent: the header's)",
    # The write damping's backlog after a busy fold (Damping.backlog); absent: none (no tick said it was).
    "5d2625e6ff56ce5b": "before Damping.backlog (changes behind a busy fold; absent: none)",
}
# No shape before 5e0f2e83a97dd0d4 is listed: bfed55144b4b38cb and its successor were not read as is by
# the version after them (bfed55144b4b38cb holds an external model's optional LiteLLM parameters as
# ExternalModel.params, which older snapshots spell as fields of their own, and 49af2580675a676d added
# owner uids, consumer marks and held defaults). Their logs verify command by command (tests/eventlog/corpus).


def snapshots_readable(state_schema_of_log: str) -> bool:
    """Whether snapshots written with ``state_schema_of_log`` are read by this version."""
    return state_schema_of_log == STATE_SCHEMA or state_schema_of_log in READABLE_OLDER_STATE_SCHEMAS


def timestamp(seconds: float) -> str:
    """Wall-clock seconds as ISO 8601 UTC with milliseconds (the ``ts`` of a record)."""
    moment = _dt.datetime.fromtimestamp(seconds, tz=_dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
