"""``SmallKeyMemo``: a bounded memo of a pure function of strings that never holds a large key; ``LastCall``:
a pure function's result for the last argument it was called with.

The parse of a watch event reads the same few values again and again (a Model's args, its features,
its resource profile), so their results are memoized. A memo keeps its keys, and whoever may edit a
Model can make those values megabytes long: such a key is computed every time but never kept. The size
is checked only on a miss, so a hit costs one dictionary look-up (bench P5).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
A = TypeVar("A")
V = TypeVar("V")

_MISSING = object()


class SmallKeyMemo(Generic[K, V]):
    def __init__(self, fn: Callable[[K], V], *, max_entries: int, max_key_chars: int = 1024) -> None:
        self._fn = fn
        self._max_entries = max_entries
        self._max_key_chars = max_key_chars
        self._memo: dict[K, V] = {}

    def __call__(self, key: K) -> V:
        """``fn(key)``; raises TypeError for an unhashable key, as ``fn`` would not be memoized then."""
        hit = self._memo.get(key, _MISSING)
        if hit is not _MISSING:
            return hit  # type: ignore[return-value]
        value = self._fn(key)
        if _chars(key) <= self._max_key_chars:
            if len(self._memo) >= self._max_entries:
                self._memo.clear()  # bounded; the working set refills it at once
            self._memo[key] = value
        return value

    def __len__(self) -> int:
        return len(self._memo)

    def clear(self) -> None:
        self._memo.clear()


class LastCall(Generic[A, V]):
    """``fn(arg)``, kept for the last ``arg``: for a value asked for again and again with one argument (a
    run's configuration), or with the argument just used (the data just rendered, then its echo).
    ``same`` tells the last argument from a new one (identity by default; an argument compared by value
    must not change after the call). The pair is replaced whole, so a thread that reads it (a blocking
    host's view) never sees the result of another argument."""

    def __init__(self, fn: Callable[[A], V], *, same: Callable[[Any, Any], bool] = operator.is_) -> None:
        self._fn = fn
        self._same = same
        self._last: tuple[A, V] | None = None

    def __call__(self, arg: A) -> V:
        last = self._last  # one read
        if last is not None and self._same(last[0], arg):
            return last[1]
        value = self._fn(arg)
        self._last = (arg, value)
        return value


def _chars(key: object) -> int:
    """The characters a key holds: a string's length, or the sum over a tuple of strings."""
    if type(key) is str:
        return len(key)
    if type(key) is tuple and all(type(part) is str for part in key):
        return sum(map(len, key))
    return 1 << 62  # anything else is never kept
