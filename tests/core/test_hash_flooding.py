"""Names chosen to collide in the core's maps cost what ordinary names cost.

Whoever may create KubeAI Models (or edit models.json) chooses the keys of the core's persistent maps. Their
first levels hash with CRC-32, which is linear: 10,000 valid DNS labels with one CRC-32 made the first tick
take 98 s instead of 4 s, stopping ``/healthz`` and the Lease, and again after every restart. Such keys now
go on into a trie of a 64-bit BLAKE2b (``catalog_core/pmap.py``), so no lookup compares more than a bounded
number of keys. The bound is checked on the shape of every map in the state after the fold, not on a clock.
"""

from __future__ import annotations

import math
from typing import Any
from zlib import crc32

import attrs

from catalog_core.pmap import PMap
from tests.core import builders as b
from tests.core.crc_collisions import same_crc32_names
from tests.core.harness import Cluster


def _keys_compared(node: Any) -> int:
    """The most keys one lookup compares in this subtree."""
    if type(node) is tuple:
        return 1
    if hasattr(node, "bitmap"):
        return max((_keys_compared(child) for child in node.array), default=0)
    if hasattr(node, "root"):
        return _keys_compared(node.root)
    if type(node).__name__ == "_Bucket":  # sorted and bisected
        return math.ceil(math.log2(len(node.entries))) + 1
    return len(node.entries)  # searched one key after another


def _maps(value: Any, found: list[PMap[Any]], seen: set[int]) -> None:
    if id(value) in seen or isinstance(value, str | int | float | bool | bytes) or value is None:
        return
    seen.add(id(value))
    if isinstance(value, PMap):
        found.append(value)
        for v in value.values():
            _maps(v, found, seen)
    elif attrs.has(type(value)):
        for field in attrs.fields(type(value)):
            _maps(getattr(value, field.name), found, seen)
    elif isinstance(value, tuple | list | frozenset | set):
        for v in value:
            _maps(v, found, seen)
    elif isinstance(value, dict):
        for v in value.values():
            _maps(v, found, seen)


def test_two_thousand_models_with_one_crc32_fold_with_a_bounded_cost_per_key():
    names = same_crc32_names(2_000, prefix="m-")
    assert len({crc32(n.encode()) for n in names}) == 1
    c = Cluster()
    c.start(*(b.kubeai_model(n) for n in names))
    assert {f"ai-appliance-kubeai-{n}" for n in names} <= set(c.world.rows)  # every one was published
    maps: list[PMap[Any]] = []
    _maps(c.state, maps, set())
    assert any(len(m) >= len(names) for m in maps)  # the per-name maps were reached
    worst = max(_keys_compared(m._root) for m in maps)
    assert worst <= 2, f"a lookup compares up to {worst} keys"
