"""Deep equality that also checks types: a StrEnum equals its str and a frozenset equals a set, not here."""

from __future__ import annotations

from typing import Any

import attrs

from catalog_core.pmap import PMap


def differences(a: Any, b: Any, path: str = "$") -> list[str]:
    if type(a) is not type(b):
        return [f"{path}: {type(a).__name__} != {type(b).__name__}"]
    if attrs.has(type(a)):
        out: list[str] = []
        for f in attrs.fields(type(a)):
            out += differences(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
        return out
    if isinstance(a, PMap):
        if list(a.keys()) != list(b.keys()):
            return [f"{path}: keys (or their order) differ"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}[{k!r}]")]
    if isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            return [f"{path}: keys (or their order) differ"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}[{k!r}]")]
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return [f"{path}: lengths {len(a)} != {len(b)}"]
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")
        ]
    if isinstance(a, frozenset):
        # members of the same type (a SourceKind read back is a SourceKind, not a plain str)
        same_types = {type(x) for x in a} == {type(y) for y in b} and all(isinstance(x, str) for x in a | b)
        return [] if a == b and same_types else [f"{path}: {a!r} != {b!r}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def same(a: Any, b: Any) -> bool:
    return not differences(a, b)
