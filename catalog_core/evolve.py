"""``evolve``: ``attrs.evolve`` for the core's frozen types, through a copier made once per class.

Performance (bench P6): ``attrs.evolve`` reads the class's fields and builds keyword arguments on
every call (~2 us); the fold copies a state and its groups a few times per event. The copier made for a
class passes every field, changed or kept, by position to the same ``__init__``, so it builds the same
object ``attrs.evolve`` builds (validators, converters and ``__attrs_post_init__`` run alike) at about
half the cost. A class with a field left out of ``__init__`` (a command's ``id``) or a keyword-only
field takes ``attrs.evolve`` itself. ``tests/core/test_evolve.py`` compares the two on every frozen
class of the core.

A slotted class whose ``__init__`` only stores its arguments (no validator, converter, pre- or
post-init hook, no cached hash: the state and its groups) is copied without it: a new instance gets
each slot set through the slot's own descriptor, which is what that ``__init__`` does, minus the call
and a look-up per field (~1.1 -> ~0.5 us for the state's 12 fields; the fold copies the state about
once per event).
"""

from __future__ import annotations

from collections.abc import Callable
from types import MemberDescriptorType
from typing import Any, TypeVar

import attrs

T = TypeVar("T")

_KEPT: Any = object()  # a parameter not given: the field keeps its value
_COPIERS: dict[type, Callable[..., Any]] = {}


def evolve(inst: T, /, **changes: Any) -> T:
    """A copy of ``inst`` with ``changes`` (field names, as ``attrs.evolve`` takes them)."""
    copier = _COPIERS.get(type(inst))
    if copier is None:
        copier = _COPIERS[type(inst)] = _copier(type(inst))
    return copier(inst, **changes)  # type: ignore[no-any-return]


def evolver(cls: type[T]) -> Callable[..., T]:
    """What ``evolve`` calls for an instance of exactly ``cls``: ``evolver(cls)(inst, **changes)`` is
    ``evolve(inst, **changes)`` without the look-up and the second pass of the keyword arguments (~0.3 of
    ~1.2 us). For the copies the fold makes on nearly every event (a tick's clock, a probe and its
    answer), bound once where they are made."""
    copier = _COPIERS.get(cls)
    if copier is None:
        copier = _COPIERS[cls] = _copier(cls)
    return copier


def _copier(cls: type) -> Callable[..., Any]:
    fields = attrs.fields(cls)
    if not fields or any(not f.init or f.kw_only for f in fields):
        return attrs.evolve
    for f in fields:
        if not (f.name.isidentifier() and f.alias.isidentifier()):  # pragma: no cover - attrs ensures it
            return attrs.evolve
    params = ", ".join(f"{f.alias}=_KEPT" for f in fields)
    namespace: dict[str, Any] = {"_KEPT": _KEPT, "cls": cls}
    slots = _slot_setters(cls, fields)
    if slots is None:
        args = ", ".join(f"inst.{f.name} if {f.alias} is _KEPT else {f.alias}" for f in fields)
        source = f"def copy(inst, /, *, {params}):\n    return cls({args})\n"
    else:
        namespace.update(slots, _new=object.__new__)
        sets = "".join(
            f"    _set_{i}(new, inst.{f.name} if {f.alias} is _KEPT else {f.alias})\n"
            for i, f in enumerate(fields)
        )
        source = f"def copy(inst, /, *, {params}):\n    new = _new(cls)\n{sets}    return new\n"
    exec(compile(source, f"<evolve {cls.__module__}.{cls.__qualname__}>", "exec"), namespace)
    copy: Callable[..., Any] = namespace["copy"]
    return copy


def _slot_setters(cls: type, fields: tuple[attrs.Attribute, ...]) -> dict[str, Any] | None:  # type: ignore[type-arg]
    """Each field's slot setter, named ``_set_<position>``; None when ``__init__`` does more than store."""
    if any(f.validator is not None or f.converter is not None for f in fields):
        return None
    if hasattr(cls, "__attrs_pre_init__") or hasattr(cls, "__attrs_post_init__"):
        return None
    if hasattr(cls, "_attrs_cached_hash"):  # cache_hash=True: __init__ also clears the cached hash
        return None
    setters: dict[str, Any] = {}
    for i, f in enumerate(fields):
        slot = getattr(cls, f.name, None)
        if type(slot) is not MemberDescriptorType:  # a dict class, or a slot a subclass shadows
            return None
        setters[f"_set_{i}"] = slot.__set__
    return setters
