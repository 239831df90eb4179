"""``SmallKeyMemo``: bounded, and never holding a large key (a hostile Model's megabyte values)."""

from __future__ import annotations

import operator

import pytest

from catalog_core.memo import LastCall, SmallKeyMemo


def test_it_remembers_small_keys_up_to_its_bound() -> None:
    calls: list[object] = []

    def upper(key: str) -> str:
        calls.append(key)
        return key.upper()

    memo = SmallKeyMemo(upper, max_entries=3)
    assert [memo("a"), memo("a"), memo("b")] == ["A", "A", "B"]
    assert calls == ["a", "b"]
    for key in ("c", "d", "e"):
        memo(key)
    assert 0 < len(memo) <= 3


def test_large_keys_and_keys_of_other_types_are_computed_but_never_kept() -> None:
    memo = SmallKeyMemo(len, max_entries=10, max_key_chars=8)
    assert memo("x" * 9) == 9 and memo(("abcd", "efgh", "i")) == 3 and memo((1, 2)) == 2
    assert len(memo) == 0
    assert memo(("abcd", "efgh")) == 2 and len(memo) == 1


def test_an_unhashable_key_raises_type_error() -> None:
    memo = SmallKeyMemo(len, max_entries=10)
    with pytest.raises(TypeError):
        memo(([],))  # type: ignore[arg-type]


def test_last_call_keeps_the_result_for_the_last_argument_only() -> None:
    calls: list[object] = []

    def fn(arg: object) -> object:
        calls.append(arg)
        return ("result", arg)

    by_identity = LastCall(fn)
    a, b = [1], [1]
    assert by_identity(a) == ("result", a) and by_identity(a) == ("result", a)
    assert len(calls) == 1
    by_identity(b)  # equal, not the same object: computed again
    assert len(calls) == 2
    by_value = LastCall(fn, same=operator.eq)
    by_value({"k": "v"})
    by_value({"k": "v"})
    assert len(calls) == 3
    by_value({"k": "w"})
    by_value({"k": "v"})  # only the last argument is kept
    assert len(calls) == 5
