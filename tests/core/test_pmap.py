"""The persistent map behaves like a dict and never mutates an old version."""

import math
from zlib import crc32

from hypothesis import given
from hypothesis import strategies as st

from catalog_core import pmap
from catalog_core.pmap import PMap
from tests.core.crc_collisions import same_crc32_names

keys = st.one_of(st.text(max_size=6), st.sampled_from(["a", "b", "c", "Aa", "BB"]))
ops = st.lists(st.tuples(st.booleans(), keys, st.integers()), max_size=300)


@given(ops)
def test_pmap_matches_dict(operations):
    d: dict[str, int] = {}
    m: PMap[int] = PMap()
    versions = []
    for is_set, key, value in operations:
        versions.append((m, dict(d)))
        if is_set:
            d[key] = value
            m = m.set(key, value)
        else:
            d.pop(key, None)
            m = m.delete(key)
        assert len(m) == len(d)
    assert m.to_dict() == d
    assert sorted(m) == sorted(d)
    for old, snapshot in versions:  # structural sharing never changes an older version
        assert old.to_dict() == snapshot


@given(st.dictionaries(keys, st.integers()))
def test_equality_and_hash_ignore_insertion_order(d):
    a = PMap.of(d)
    b = PMap.of(reversed(list(d.items())))
    assert a == b
    assert hash(a) == hash(b)


def test_iteration_order_is_independent_of_the_process_hash_seed():
    # CRC-32 hashing: the same keys always give the same order (replay determinism).
    m = PMap.of({f"k{i}": i for i in range(100)})
    assert list(m)[:5] == list(PMap.of({f"k{i}": i for i in reversed(range(100))}))[:5]


def test_setting_the_same_value_returns_the_same_map():
    v = object()
    m = PMap().set("a", v)
    assert m.set("a", v) is m
    assert m.delete("missing") is m


@given(st.dictionaries(keys, st.integers()), ops)
def test_changes_lists_exactly_the_keys_whose_values_differ(start, operations):
    """The structural diff (issue 7) against a plain comparison of two versions."""
    old = PMap.of(start)
    new = old
    for is_set, key, value in operations:
        new = new.set(key, value) if is_set else new.delete(key)
    a, b = old.to_dict(), new.to_dict()
    expected = {
        k: (a.get(k), b.get(k)) for k in a.keys() | b.keys() if a.get(k, object()) is not b.get(k, object())
    }
    got = {k: (x, y) for k, x, y in old.changes(new)}
    assert got == expected
    assert list(new.changes(new)) == []


# Enough keys for a trie several levels deep (collisions: the test after this one).
deep_keys = st.one_of(keys, st.integers(0, 3000).map(lambda i: f"model-{i:05d}"))


@given(
    st.dictionaries(deep_keys, st.integers(0, 5), max_size=400),
    st.lists(st.tuples(deep_keys, st.integers(0, 5))),
)
def test_set_if_changed_is_set_except_that_an_equal_value_keeps_the_map(start, operations):
    m = PMap.of(start)
    d = dict(start)
    for key, value in operations:
        before = m.to_dict()
        new = m.set_if_changed(key, value)
        if key in d and d[key] == value:
            assert new is m
        else:
            d[key] = value
            assert new.to_dict() == d and len(new) == len(d)
            assert new == m.set(key, value)
            assert m.to_dict() == before  # the older version is untouched
        m = new


def test_set_if_changed_in_a_collision_node():
    # "plumless" and "buckeroo" have the same CRC-32: they share a collision node.
    assert crc32(b"plumless") == crc32(b"buckeroo")
    m = PMap.of({"plumless": 1, "buckeroo": 2})
    assert m.set_if_changed("plumless", 1) is m
    assert m.set_if_changed("buckeroo", 3).to_dict() == {"plumless": 1, "buckeroo": 3}
    assert m.set_if_changed("other", 4).to_dict() == {"plumless": 1, "buckeroo": 2, "other": 4}
    held = PMap.of({"plumless": [1.0], "buckeroo": 2})
    assert held.set_if_changed("plumless", [1.0]) is held  # compared with ==, not identity


# --- hash flooding: names chosen to share one CRC-32 ------------------------------------------------------

FLOOD = same_crc32_names(2_000)


class Counted(str):
    """A key that counts how often it is compared (equality or order)."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        Counted.comparisons += 1
        return str.__eq__(self, other)

    def __lt__(self, other: str) -> bool:
        Counted.comparisons += 1
        return str.__lt__(self, other)

    def __gt__(self, other: str) -> bool:
        Counted.comparisons += 1
        return str.__gt__(self, other)

    __hash__ = str.__hash__


def _comparisons_per_operation(keys: list[str]) -> dict[str, float]:
    counted = [Counted(k) for k in keys]
    out = {}
    Counted.comparisons = 0
    m: PMap[int] = PMap.of((k, i) for i, k in enumerate(counted))
    out["set (new key)"] = Counted.comparisons / len(keys)
    for name, operation in (
        ("get", m.get),
        ("set (replace)", lambda k: m.set(k, -1)),
        ("set_if_changed", lambda k: m.set_if_changed(k, -1)),
        ("delete", m.delete),
        ("get (absent)", lambda k: m.get(Counted(k + "-"))),
    ):
        Counted.comparisons = 0
        for k in counted:
            operation(k)
        out[name] = Counted.comparisons / len(keys)
    return out


def test_keys_sharing_one_crc32_cost_what_ordinary_keys_cost():
    """CRC-32 is linear: 2,000 DNS labels with one CRC-32 took a flat collision list searched key by key
    (the first tick of 10,000 such names took 98 s instead of 4). Every operation compares a bounded
    number of keys, whatever the names."""
    assert len({crc32(k.encode()) for k in FLOOD}) == 1
    flooded = _comparisons_per_operation(FLOOD)
    ordinary = _comparisons_per_operation([f"model-{i:05d}" for i in range(len(FLOOD))])
    assert max(flooded.values()) <= 2, flooded
    assert max(ordinary.values()) <= 2, ordinary


def test_keys_equal_in_both_hashes_are_bisected(monkeypatch):
    """Keys equal in CRC-32 and in the 64-bit hash below it (which no one can produce in numbers) share a
    sorted bucket: a lookup bisects it."""
    monkeypatch.setattr(pmap, "_deep_hash", lambda key: 0)
    keys = [f"k{i:04d}" for i in range(512)] + FLOOD[:512]
    counts = _comparisons_per_operation(keys)
    assert max(counts.values()) <= 2 * math.log2(len(keys)) + 2, counts
    m = PMap.of((k, i) for i, k in enumerate(keys))
    assert m.to_dict() == {k: i for i, k in enumerate(keys)}
    bucket = set(FLOOD[:512])
    assert [k for k in m if k in bucket] == FLOOD[:512]  # in the order they came


colliding = st.sampled_from(FLOOD[:40])
any_keys = st.one_of(keys, colliding)
colliding_ops = st.lists(st.tuples(st.integers(0, 2), any_keys, st.integers(0, 3)), max_size=300)


@given(colliding_ops)
def test_pmap_with_colliding_keys_matches_dict(operations):
    d: dict[str, int] = {}
    m: PMap[int] = PMap()
    versions = []
    for op, key, value in operations:
        versions.append((m, dict(d)))
        if op == 0:
            d[key] = value
            m = m.set(key, value)
        elif op == 1:
            new = m.set_if_changed(key, value)
            assert (new is m) == (key in d and d[key] == value)
            d[key] = value
            m = new
        else:
            d.pop(key, None)
            m = m.delete(key)
        assert len(m) == len(d) and m.to_dict() == d
        assert all(m[k] == v for k, v in d.items()) and all(k in m for k in d)
    for old, snapshot in versions:
        assert old.to_dict() == snapshot
        got = {k: (x, y) for k, x, y in old.changes(m)}
        assert got == {
            k: (snapshot.get(k), d.get(k))
            for k in snapshot.keys() | d.keys()
            if snapshot.get(k, object()) is not d.get(k, object())
        }


def _recorded_order(key: str) -> tuple[int, ...]:
    h = crc32(key.encode())
    return tuple((h >> shift) & 31 for shift in range(0, 35, 5))


@given(colliding_ops)
def test_iteration_is_in_the_order_every_recorded_log_holds(operations):
    """Event logs and snapshots were recorded in the order of the CRC-32 trie, which kept keys of equal
    CRC-32 in a flat list in the order they were added: by CRC-32 read five bits at a time from the low
    end, ties in order of arrival (a replaced value keeps its place; a deleted key that comes back comes
    last). The map iterates exactly so, whatever the operations, so those logs still verify byte for byte
    (and a snapshot read back iterates as the live map did)."""
    arrived: dict[str, int] = {}  # a dict keeps the order of arrival, as that list did
    m: PMap[int] = PMap()
    for op, key, value in operations:
        if op == 2:
            arrived.pop(key, None)
            m = m.delete(key)
        else:
            arrived[key] = value
            m = m.set(key, value) if op == 0 else m.set_if_changed(key, value)
    expected = sorted(arrived.items(), key=lambda kv: _recorded_order(kv[0]))  # stable: ties keep arrival
    assert list(m.items()) == expected
    assert list(PMap.of(expected).items()) == expected  # what reading a snapshot back rebuilds
