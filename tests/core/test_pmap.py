"""The persistent map behaves like a dict and never mutates an old version."""

from hypothesis import given
from hypothesis import strategies as st

from catalog_core.pmap import PMap

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
    from zlib import crc32

    assert crc32(b"plumless") == crc32(b"buckeroo")
    m = PMap.of({"plumless": 1, "buckeroo": 2})
    assert m.set_if_changed("plumless", 1) is m
    assert m.set_if_changed("buckeroo", 3).to_dict() == {"plumless": 1, "buckeroo": 3}
    assert m.set_if_changed("other", 4).to_dict() == {"plumless": 1, "buckeroo": 2, "other": 4}
    held = PMap.of({"plumless": [1.0], "buckeroo": 2})
    assert held.set_if_changed("plumless", [1.0]) is held  # compared with ==, not identity
