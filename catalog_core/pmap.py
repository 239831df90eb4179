"""A persistent (immutable, structurally shared) map from strings to values.

The fold keeps thousands of items per source and must not copy them on every
event: a ``PMap`` is a hash array mapped trie, so ``set``/``delete`` copy only
the few small nodes on the path to the key (O(log32 n)) and share the rest.

Keys are hashed with functions of the key alone, never ``hash()``: the trie's
shape, and so its iteration order, is the same in every process, which keeps
replay byte-for-byte deterministic regardless of ``PYTHONHASHSEED``.

The first seven levels read the key's CRC-32: fast, and the order every event
log and snapshot was recorded in. CRC-32 is linear, so anyone who may choose
names can give thousands of them one CRC-32 (valid DNS labels, in seconds),
which one flat list searched key by key would make quadratic. Keys whose CRC-32
are equal go on into a second trie of thirteen levels that reads a 64-bit
BLAKE2b of the key, and keys equal in both (to put k keys there takes about
2**(64*(k-1)/k) BLAKE2b evaluations) share a bucket kept sorted by key and
searched by bisection. Whatever the keys, an operation walks at most twenty
nodes of at most 32 slots and then bisects one bucket: a flood of colliding
names costs what as many ordinary names cost, not the square of it.

The order is the one recorded logs hold: by CRC-32, read five bits at a time
from the low end, and keys whose CRC-32 are equal in the order they were added
(a replaced value keeps its place). Entries of the second trie carry the number
of their arrival for that; iterating it sorts them by it.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from hashlib import blake2b
from operator import itemgetter
from typing import Any, Generic, TypeVar, overload
from zlib import crc32

V = TypeVar("V")
D = TypeVar("D")

_BITS = 5
_MASK = (1 << _BITS) - 1
_HASH_BITS = 32  # the CRC-32 levels: shifts 0..30
_DEEP_HASH_BITS = 64  # the BLAKE2b levels below them: shifts 0..60
_MISSING: Any = object()
_KEY = itemgetter(0)
_ARRIVAL = itemgetter(2)


def _hash(key: str) -> int:
    return crc32(key.encode("utf-8", "surrogatepass"))


def _deep_hash(key: str) -> int:
    """64 bits of BLAKE2b: collisions cost brute force, unlike CRC-32's (a fixed personalisation, not a
    secret key: the core has no randomness, and the trie must be the same in every process)."""
    digest = blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8, person=b"model-catalog").digest()
    return int.from_bytes(digest, "little")


class _Node:
    """Bitmap-indexed node: ``array`` holds, per set bit, an entry or a child. An entry is ``(key, value)``,
    in a ``_Deep`` trie ``(key, value, arrival)``."""

    __slots__ = ("array", "bitmap")

    def __init__(self, bitmap: int, array: tuple[Any, ...]) -> None:
        self.bitmap = bitmap
        self.array = array


class _Deep:
    """Keys whose CRC-32 are equal (two or more): a trie indexed by ``_deep_hash`` (``root``, a ``_Node``)
    whose entries carry their arrival; ``arrivals`` numbers the next one."""

    __slots__ = ("arrivals", "root")

    def __init__(self, root: _Node, arrivals: int) -> None:
        self.root = root
        self.arrivals = arrivals


class _Bucket:
    """Keys whose CRC-32 and ``_deep_hash`` are both equal (two or more): entries sorted by key."""

    __slots__ = ("entries",)

    def __init__(self, entries: tuple[tuple[str, Any, int], ...]) -> None:
        self.entries = entries

    def index(self, key: str) -> int:
        """The position of ``key``, or where it would go."""
        return bisect_left(self.entries, key, key=_KEY)

    def get(self, key: str) -> Any:
        entries = self.entries
        i = self.index(key)
        return entries[i][1] if i < len(entries) and entries[i][0] == key else _MISSING

    def set(self, key: str, value: Any, arrival: int) -> tuple[Any, bool]:
        entries = self.entries
        i = self.index(key)
        if i < len(entries) and entries[i][0] == key:
            if entries[i][1] is value:
                return self, False
            return _Bucket((*entries[:i], (key, value, entries[i][2]), *entries[i + 1 :])), False
        return _Bucket((*entries[:i], (key, value, arrival), *entries[i:])), True

    def delete(self, key: str) -> Any:
        entries = self.entries
        i = self.index(key)
        if i == len(entries) or entries[i][0] != key:
            return self
        rest = (*entries[:i], *entries[i + 1 :])
        return rest[0] if len(rest) == 1 else _Bucket(rest)


_EMPTY = _Node(0, ())


def _get(node: Any, key: str, h: int, shift: int) -> Any:
    while True:
        if type(node) is not _Node:
            if type(node) is _Deep:
                node, h, shift = node.root, _deep_hash(key), 0
                continue
            return node.get(key)
        bit = 1 << ((h >> shift) & _MASK)
        if not node.bitmap & bit:
            return _MISSING
        child = node.array[(node.bitmap & (bit - 1)).bit_count()]
        if type(child) is tuple:
            return child[1] if child[0] == key else _MISSING
        node = child
        shift += _BITS


def _pair(shift: int, e1: tuple[Any, ...], h1: int, e2: tuple[Any, ...], h2: int, *, deep: bool) -> Any:
    """A subtree holding two entries whose hashes agree below ``shift`` (``deep``: in a ``_Deep`` trie)."""
    if shift >= (_DEEP_HASH_BITS if deep else _HASH_BITS):
        if deep:
            return _Bucket((e1, e2) if e1[0] < e2[0] else (e2, e1))
        # e1 was here first: the order of a flat list of colliding keys, which recorded logs hold
        first, second = (*e1, 0), (*e2, 1)
        return _Deep(_pair(0, first, _deep_hash(e1[0]), second, _deep_hash(e2[0]), deep=True), 2)
    i1 = (h1 >> shift) & _MASK
    i2 = (h2 >> shift) & _MASK
    if i1 == i2:
        return _Node(1 << i1, (_pair(shift + _BITS, e1, h1, e2, h2, deep=deep),))
    if i1 < i2:
        return _Node((1 << i1) | (1 << i2), (e1, e2))
    return _Node((1 << i1) | (1 << i2), (e2, e1))


def _set(node: Any, key: str, value: Any, h: int, shift: int) -> tuple[Any, bool]:
    """Return (new node, added) — ``node`` itself when the key already maps to ``value``."""
    if type(node) is _Deep:
        root, added = _deep_set(node.root, key, value, _deep_hash(key), 0, arrival=node.arrivals)
        if root is node.root:
            return node, False
        return _Deep(root, node.arrivals + 1 if added else node.arrivals), added
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
            new_child = _pair(shift + _BITS, child, _hash(child[0]), (key, value), h, deep=False)
            added = True
    else:
        new_child, added = _set(child, key, value, h, shift + _BITS)
        if new_child is child:
            return node, False
    return _Node(node.bitmap, (*arr[:idx], new_child, *arr[idx + 1 :])), added


def _deep_set(node: Any, key: str, value: Any, h: int, shift: int, *, arrival: int) -> tuple[Any, bool]:
    """``_set`` in a ``_Deep`` trie: a new entry carries ``arrival``, a replaced one keeps its own."""
    if type(node) is _Bucket:
        return node.set(key, value, arrival)
    bit = 1 << ((h >> shift) & _MASK)
    idx = (node.bitmap & (bit - 1)).bit_count()
    arr = node.array
    if not node.bitmap & bit:
        return _Node(node.bitmap | bit, (*arr[:idx], (key, value, arrival), *arr[idx:])), True
    child = arr[idx]
    if type(child) is tuple:
        if child[0] == key:
            if child[1] is value:
                return node, False
            new_child: Any = (key, value, child[2])
            added = False
        else:
            new_child = _pair(shift + _BITS, child, _deep_hash(child[0]), (key, value, arrival), h, deep=True)
            added = True
    else:
        new_child, added = _deep_set(child, key, value, h, shift + _BITS, arrival=arrival)
        if new_child is child:
            return node, False
    return _Node(node.bitmap, (*arr[:idx], new_child, *arr[idx + 1 :])), added


def _single(node: Any) -> Any:
    """The entry of a node left holding just one (it takes the node's place), else the node."""
    if type(node) is _Node and len(node.array) == 1 and type(node.array[0]) is tuple:
        return node.array[0]
    return node


def _delete(node: Any, key: str, h: int, shift: int) -> Any:
    """Return the node without ``key`` (``node`` itself when absent, None when it empties; a ``_Deep`` or
    ``_Bucket`` left with one entry returns that entry)."""
    if type(node) is not _Node:
        if type(node) is _Deep:
            root = _delete(node.root, key, _deep_hash(key), 0)
            if root is node.root:
                return node
            single = _single(root)
            # the last key of a _Deep leaves it as an ordinary entry, without its arrival
            return (single[0], single[1]) if single is not root else _Deep(root, node.arrivals)
        return node.delete(key)
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
        new_child = _single(new_child)
    if new_child is None:
        if node.bitmap == bit:
            return None
        return _Node(node.bitmap & ~bit, (*arr[:idx], *arr[idx + 1 :]))
    return _Node(node.bitmap, (*arr[:idx], new_child, *arr[idx + 1 :]))


def _items(node: Any) -> Iterator[tuple[str, Any]]:
    if type(node) is _Deep:
        for key, value, _ in sorted(_arrived(node.root), key=_ARRIVAL):
            yield key, value
        return
    for child in node.array:
        if type(child) is tuple:
            yield child
        else:
            yield from _items(child)


def _arrived(node: Any) -> Iterator[tuple[str, Any, int]]:
    """The entries of a ``_Deep`` trie (or of a bucket in it), with their arrival, in no useful order."""
    if type(node) is _Bucket:
        yield from node.entries
        return
    for child in node.array:
        if type(child) is tuple:
            yield child
        else:
            yield from _arrived(child)


def _entries(node: Any) -> Iterator[tuple[str, Any]]:
    """The (key, value) pairs under an array slot: an entry, a child node, a ``_Deep`` trie or a bucket."""
    if type(node) is tuple:
        yield (node[0], node[1]) if len(node) == 3 else node
    elif type(node) is _Deep:
        yield from _items(node)
    elif type(node) is _Bucket:
        for key, value, _ in node.entries:
            yield key, value
    else:
        for child in node.array:
            if type(child) is not tuple:
                yield from _entries(child)
            elif len(child) == 2:
                yield child
            else:
                yield child[0], child[1]


def _diff(a: Any, b: Any) -> Iterator[tuple[str, Any, Any]]:
    """(key, value in a or _MISSING, value in b or _MISSING) for every key whose value is not the
    same object; subtrees the two versions share are skipped without being read."""
    if a is b:
        return
    if type(a) is _Deep and type(b) is _Deep:
        yield from _diff(a.root, b.root)
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
            elif type(ca) is not tuple and type(ca) is type(cb):
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
        return isinstance(key, str) and self.get(key, _MISSING) is not _MISSING

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
        # Performance (bench P6: the fold looks keys up a few times per event): ``_get``'s walk through
        # the CRC-32 levels, inlined with ``_hash``; a ``_Deep`` subtree takes ``_get``.
        node = self._root
        h = crc32(key.encode("utf-8", "surrogatepass"))  # _hash(key)
        shift = 0
        while type(node) is _Node:
            bit = 1 << ((h >> shift) & _MASK)
            bitmap = node.bitmap
            if not bitmap & bit:
                return default
            child = node.array[(bitmap & (bit - 1)).bit_count()]
            if type(child) is tuple:
                return child[1] if child[0] == key else default
            node = child
            shift += _BITS
        v = _get(node, key, h, shift)
        return default if v is _MISSING else v

    def set(self, key: str, value: V) -> PMap[V]:
        root, added = _set(self._root, key, value, _hash(key), 0)
        if root is self._root:
            return self
        return PMap(root, self._len + 1 if added else self._len)

    def set_if_changed(self, key: str, value: V) -> PMap[V]:
        """This map with ``key`` set to ``value``, or this map itself when ``key`` already maps to a value
        equal (``==``) to ``value``.

        Performance (bench P5): a watch event replaces a value held under its key; one walk down
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
