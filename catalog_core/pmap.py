"""A persistent (immutable, structurally shared) map from strings to values.

The fold keeps thousands of items per source and must not copy them on every
event: a ``PMap`` is a hash array mapped trie, so ``set``/``delete`` copy only
the few small nodes on the path to the key (O(log32 n)) and share the rest.

Keys are strings hashed with CRC-32 rather than ``hash()``: the trie's shape,
and so its iteration order, is the same in every process, which keeps replay
byte-for-byte deterministic regardless of ``PYTHONHASHSEED``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar, overload
from zlib import crc32

V = TypeVar("V")
D = TypeVar("D")

_BITS = 5
_MASK = (1 << _BITS) - 1
_HASH_BITS = 32
_MISSING: Any = object()


def _hash(key: str) -> int:
    return crc32(key.encode("utf-8", "surrogatepass"))


class _Node:
    """Bitmap-indexed node: ``array`` holds, per set bit, an entry ``(key, value)`` or a child."""

    __slots__ = ("array", "bitmap")

    def __init__(self, bitmap: int, array: tuple[Any, ...]) -> None:
        self.bitmap = bitmap
        self.array = array


class _Collision:
    """Keys whose 32-bit hashes are equal: a flat tuple of entries."""

    __slots__ = ("entries", "hash")

    def __init__(self, hash_: int, entries: tuple[tuple[str, Any], ...]) -> None:
        self.hash = hash_
        self.entries = entries


_EMPTY = _Node(0, ())


def _get(node: Any, key: str, h: int, shift: int) -> Any:
    while True:
        if type(node) is _Collision:
            for k, v in node.entries:
                if k == key:
                    return v
            return _MISSING
        bit = 1 << ((h >> shift) & _MASK)
        if not node.bitmap & bit:
            return _MISSING
        child = node.array[(node.bitmap & (bit - 1)).bit_count()]
        if type(child) is tuple:
            return child[1] if child[0] == key else _MISSING
        node = child
        shift += _BITS


def _pair(shift: int, e1: tuple[str, Any], h1: int, e2: tuple[str, Any], h2: int) -> Any:
    """A subtree holding two entries whose hashes agree below ``shift``."""
    if shift >= _HASH_BITS:
        return _Collision(h1, (e1, e2))
    i1 = (h1 >> shift) & _MASK
    i2 = (h2 >> shift) & _MASK
    if i1 == i2:
        return _Node(1 << i1, (_pair(shift + _BITS, e1, h1, e2, h2),))
    if i1 < i2:
        return _Node((1 << i1) | (1 << i2), (e1, e2))
    return _Node((1 << i1) | (1 << i2), (e2, e1))


def _set(node: Any, key: str, value: Any, h: int, shift: int) -> tuple[Any, bool]:
    """Return (new node, added) — ``node`` itself when the key already maps to ``value``."""
    if type(node) is _Collision:
        for i, (k, v) in enumerate(node.entries):
            if k == key:
                if v is value:
                    return node, False
                entries = (*node.entries[:i], (key, value), *node.entries[i + 1 :])
                return _Collision(node.hash, entries), False
        return _Collision(node.hash, (*node.entries, (key, value))), True
    bit = 1 << ((h >> shift) & _MASK)
    idx = (node.bitmap & (bit - 1)).bit_count()
    arr = node.array
    if not node.bitmap & bit:
        return _Node(node.bitmap | bit, (*arr[:idx], (key, value), *arr[idx:])), True
    child = arr[idx]
    if type(child) is tuple:
        if child[0] == key:
            if child[1] is value:
                return node, False
            new_child: Any = (key, value)
            added = False
        else:
            new_child = _pair(shift + _BITS, child, _hash(child[0]), (key, value), h)
            added = True
    else:
        new_child, added = _set(child, key, value, h, shift + _BITS)
        if new_child is child:
            return node, False
    return _Node(node.bitmap, (*arr[:idx], new_child, *arr[idx + 1 :])), added


def _delete(node: Any, key: str, h: int, shift: int) -> Any:
    """Return the node without ``key`` (``node`` itself when absent, None when it empties)."""
    if type(node) is _Collision:
        entries = tuple(e for e in node.entries if e[0] != key)
        if len(entries) == len(node.entries):
            return node
        if len(entries) == 1:
            return entries[0]
        return _Collision(node.hash, entries)
    bit = 1 << ((h >> shift) & _MASK)
    if not node.bitmap & bit:
        return node
    idx = (node.bitmap & (bit - 1)).bit_count()
    arr = node.array
    child = arr[idx]
    if type(child) is tuple:
        if child[0] != key:
            return node
        new_child: Any = None
    else:
        new_child = _delete(child, key, h, shift + _BITS)
        if new_child is child:
            return node
        # A child left with a single entry collapses into that entry.
        if type(new_child) is _Node and len(new_child.array) == 1 and type(new_child.array[0]) is tuple:
            new_child = new_child.array[0]
    if new_child is None:
        if node.bitmap == bit:
            return None
        return _Node(node.bitmap & ~bit, (*arr[:idx], *arr[idx + 1 :]))
    return _Node(node.bitmap, (*arr[:idx], new_child, *arr[idx + 1 :]))


def _items(node: Any) -> Iterator[tuple[str, Any]]:
    if type(node) is _Collision:
        yield from node.entries
        return
    for child in node.array:
        if type(child) is tuple:
            yield child
        else:
            yield from _items(child)


def _entries(node: Any) -> Iterator[tuple[str, Any]]:
    """The entries under an array slot: a single entry, a child node or a collision."""
    if type(node) is tuple:
        yield node
    else:
        yield from _items(node)


def _diff(a: Any, b: Any) -> Iterator[tuple[str, Any, Any]]:
    """(key, value in a or _MISSING, value in b or _MISSING) for every key whose value is not the
    same object; subtrees the two versions share are skipped without being read."""
    if a is b:
        return
    if type(a) is _Node and type(b) is _Node:
        for i in range(1 << _BITS):
            bit = 1 << i
            in_a, in_b = a.bitmap & bit, b.bitmap & bit
            if not (in_a or in_b):
                continue
            ca = a.array[(a.bitmap & (bit - 1)).bit_count()] if in_a else None
            cb = b.array[(b.bitmap & (bit - 1)).bit_count()] if in_b else None
            if ca is cb:
                continue
            if ca is None:
                for k, v in _entries(cb):
                    yield k, _MISSING, v
            elif cb is None:
                for k, v in _entries(ca):
                    yield k, v, _MISSING
            elif type(ca) is _Node and type(cb) is _Node:
                yield from _diff(ca, cb)
            else:
                yield from _diff_flat(_entries(ca), _entries(cb))
        return
    yield from _diff_flat(_entries(a), _entries(b))


def _diff_flat(a: Iterable[tuple[str, Any]], b: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, Any, Any]]:
    old, new = dict(a), dict(b)
    for k, v in old.items():
        w = new.get(k, _MISSING)
        if w is not v:
            yield k, v, w
    for k, w in new.items():
        if k not in old:
            yield k, _MISSING, w


class PMap(Generic[V]):
    """Immutable ``str -> V`` mapping with cheap updates. Compare with ``==``; iterate in a fixed order."""

    __slots__ = ("_hash", "_len", "_root")

    def __init__(self, root: Any = _EMPTY, length: int = 0) -> None:
        self._root = root
        self._len = length
        self._hash: int | None = None

    @classmethod
    def of(cls, items: Mapping[str, V] | Iterable[tuple[str, V]] = ()) -> PMap[V]:
        pairs = items.items() if isinstance(items, Mapping) else items
        out: PMap[V] = _EMPTY_MAP
        for k, v in pairs:
            out = out.set(k, v)
        return out

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and _get(self._root, key, _hash(key), 0) is not _MISSING

    def __getitem__(self, key: str) -> V:
        v = _get(self._root, key, _hash(key), 0)
        if v is _MISSING:
            raise KeyError(key)
        return v  # type: ignore[no-any-return]

    @overload
    def get(self, key: str) -> V | None: ...
    @overload
    def get(self, key: str, default: D) -> V | D: ...
    def get(self, key: str, default: Any = None) -> Any:
        v = _get(self._root, key, _hash(key), 0)
        return default if v is _MISSING else v

    def set(self, key: str, value: V) -> PMap[V]:
        root, added = _set(self._root, key, value, _hash(key), 0)
        if root is self._root:
            return self
        return PMap(root, self._len + 1 if added else self._len)

    def set_if_changed(self, key: str, value: V) -> PMap[V]:
        """This map with ``key`` set to ``value``, or this map itself when ``key`` already maps to a value
        equal (``==``) to ``value``.

        Performance (issue 15, P5): a watch event replaces a value held under its key; one walk down
        finds and compares the held value and the path back up is copied (``get`` then ``set`` walked
        and hashed twice, and ``set`` recursed). Anything else (a new key, a collision) takes ``set``."""
        h = _hash(key)
        node = self._root
        shift = 0
        path: list[tuple[_Node, int]] = []
        while type(node) is _Node:
            bit = 1 << ((h >> shift) & _MASK)
            bitmap = node.bitmap
            if not bitmap & bit:
                break
            idx = (bitmap & (bit - 1)).bit_count()
            child = node.array[idx]
            if type(child) is not tuple:
                path.append((node, idx))
                node = child
                shift += _BITS
                continue
            if child[0] != key:
                break
            held = child[1]
            if held is value or held == value:
                return self
            new: Any = (key, value)
            path.append((node, idx))
            for parent, i in reversed(path):
                array = list(parent.array)
                array[i] = new
                new = _Node(parent.bitmap, tuple(array))
            return PMap(new, self._len)
        held = _get(self._root, key, h, 0)
        if held is not _MISSING and (held is value or held == value):
            return self
        return self.set(key, value)

    def delete(self, key: str) -> PMap[V]:
        root = _delete(self._root, key, _hash(key), 0)
        if root is self._root:
            return self
        if root is None:
            return _EMPTY_MAP
        return PMap(root, self._len - 1)

    def update(self, items: Mapping[str, V] | Iterable[tuple[str, V]]) -> PMap[V]:
        pairs = items.items() if isinstance(items, Mapping) else items
        out = self
        for k, v in pairs:
            out = out.set(k, v)
        return out

    def __iter__(self) -> Iterator[str]:
        for k, _ in _items(self._root):
            yield k

    def keys(self) -> Iterator[str]:
        return iter(self)

    def values(self) -> Iterator[V]:
        for _, v in _items(self._root):
            yield v

    def items(self) -> Iterator[tuple[str, V]]:
        return _items(self._root)

    def changes(self, newer: PMap[V]) -> Iterator[tuple[str, V | None, V | None]]:
        """(key, value here or None, value in ``newer`` or None) for each key whose value is not the
        same object in both. Costs what differs, not the size of the map, when ``newer`` was made from
        this one by ``set``/``delete`` (their shared subtrees are skipped)."""
        for k, a, b in _diff(self._root, newer._root):
            yield k, None if a is _MISSING else a, None if b is _MISSING else b

    def to_dict(self) -> dict[str, V]:
        return dict(_items(self._root))

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, PMap):
            return NotImplemented
        if self._len != other._len:
            return False
        for k, v in _items(self._root):
            ov = other.get(k, _MISSING)
            if ov is _MISSING or not (ov is v or ov == v):
                return False
        return True

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(_items(self._root)))
        return self._hash

    def __repr__(self) -> str:
        body = ", ".join(f"{k!r}: {v!r}" for k, v in sorted(_items(self._root), key=lambda kv: kv[0]))
        return f"PMap({{{body}}})"


_EMPTY_MAP: PMap[Any] = PMap()


def empty() -> PMap[Any]:
    return _EMPTY_MAP
