"""Issue 15, P6: the core copies its frozen values with ``catalog_core.evolve.evolve``, a copier made once
per class. It must build what ``attrs.evolve`` builds, for every class of the core and every field."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from hypothesis import given, settings

import catalog_core
from catalog_core.evolve import evolve
from catalog_core.pmap import PMap
from tests.core import strategies as gen
from tests.core.harness import Cluster


def _values(value: Any, seen: set[int]) -> Iterator[Any]:
    """Every attrs instance reachable from ``value`` (through fields, maps and containers)."""
    if id(value) in seen:
        return
    seen.add(id(value))
    if attrs.has(type(value)):
        yield value
        for field in attrs.fields(type(value)):
            yield from _values(getattr(value, field.name), seen)
    elif isinstance(value, PMap | dict):
        for item in value.values():
            yield from _values(item, seen)
    elif isinstance(value, tuple | list | frozenset):
        for item in value:
            yield from _values(item, seen)


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b and attrs.asdict(a, recurse=False) == attrs.asdict(b, recurse=False)


def _check(instances: list[Any]) -> int:
    """Evolve each instance with each field replaced by the value another instance of its class holds."""
    by_class: dict[type, list[Any]] = {}
    for value in instances:
        by_class.setdefault(type(value), []).append(value)
    checked = 0
    for cls, values in by_class.items():
        for field in attrs.fields(cls):
            if not field.init:
                continue
            for inst, other in zip(values, [*values[1:], values[0]], strict=True):
                replacement = getattr(other, field.name)
                ours = evolve(inst, **{field.alias: replacement})
                theirs = attrs.evolve(inst, **{field.alias: replacement})
                assert _same(ours, theirs), (cls, field.name)
                assert getattr(ours, field.name) is getattr(theirs, field.name)
                checked += 1
        for inst in values:
            assert _same(evolve(inst), attrs.evolve(inst))
    return checked


@settings(max_examples=40, deadline=None)
@given(gen.cluster())
def test_evolve_builds_what_attrs_evolve_builds(world):
    objs, rows = world
    c = Cluster()
    c.start(*objs, rows=rows)
    instances = list(_values(c.state, set())) + list(_values(c.commands, set()))
    assert _check(instances) > 100


def test_every_frozen_class_of_the_core_is_covered_or_falls_back() -> None:
    """Classes the generated clusters may not reach: made from their defaults where they have them."""
    for module in pkgutil.walk_packages(catalog_core.__path__, "catalog_core."):
        importlib.import_module(module.name)
    classes = {
        cls
        for name in list(sys.modules)
        if name.startswith("catalog_core.")
        for cls in vars(sys.modules[name]).values()
        if isinstance(cls, type) and attrs.has(cls) and cls.__module__.startswith("catalog_core.")
    }
    assert len(classes) > 30
    made = 0
    for cls in classes:
        if any(f.default is attrs.NOTHING for f in attrs.fields(cls)):
            continue
        inst = cls()
        assert _same(evolve(inst), attrs.evolve(inst))
        made += 1
    assert made > 5


def test_an_unknown_field_is_refused_like_attrs_evolve() -> None:
    from catalog_core.state import SourceState

    inst = SourceState()
    with pytest.raises(TypeError):
        attrs.evolve(inst, no_such_field=1)
    with pytest.raises(TypeError):
        evolve(inst, no_such_field=1)


@attrs.frozen
class _Validated:
    count: int = attrs.field(validator=attrs.validators.ge(0))


@attrs.frozen
class _Converted:
    text: str = attrs.field(converter=str)


@attrs.frozen(cache_hash=True)
class _CachedHash:
    name: str


@attrs.frozen
class _PostInit:
    value: int
    seen: list[int] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        self.seen.append(self.value)


@attrs.frozen
class _Plain:
    a: int
    b: tuple[int, ...] = ()


def test_a_copy_runs_what_init_runs() -> None:
    """The slot copier is for classes whose __init__ only stores; the others still get their checks."""
    with pytest.raises(ValueError):
        evolve(_Validated(1), count=-1)
    assert evolve(_Converted("a"), text=5).text == "5"  # type: ignore[arg-type]
    named = _CachedHash("a")
    assert hash(named) == hash(_CachedHash("a"))
    assert evolve(named, name="b") == _CachedHash("b")
    assert hash(evolve(named, name="b")) == hash(_CachedHash("b"))  # not the cached hash of "a"
    seen: list[int] = []
    evolve(_PostInit(1, seen), value=2)
    assert seen == [1, 2]
    plain = _Plain(1, (2,))
    copy = evolve(plain, a=3)
    assert copy == _Plain(3, (2,)) and copy.b is plain.b
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        copy.a = 4  # type: ignore[misc]
