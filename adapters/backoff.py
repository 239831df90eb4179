"""Capped exponential backoff with "equal jitter" (every retry in the adapters goes through here).

A delay is drawn from the upper half of the ceiling, [c/2, c], not from [0, c] ("full jitter"): a retry
is never immediate, so a failing peer is not hit again at once, and the draws still spread apart.
"""

from __future__ import annotations

import random

import attrs


@attrs.define
class Backoff:
    """``next()``: a delay uniform in [c/2, c], c = min(cap, base*2^n); ``reset()`` after a success."""

    base: float = 0.2
    cap: float = 60.0
    attempts: int = 0
    rng: random.Random = attrs.field(factory=random.Random)

    def next(self) -> float:
        ceiling = min(self.cap, self.base * (2**self.attempts))
        self.attempts = min(self.attempts + 1, 64)
        return self.rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.attempts = 0


class KeyedBackoff:
    """One Backoff per key (controller-runtime's per-item rate limiter), forgotten on success."""

    def __init__(self, base: float = 0.2, cap: float = 300.0, rng: random.Random | None = None) -> None:
        self._base, self._cap = base, cap
        self._rng = rng or random.Random()
        self._by_key: dict[str, Backoff] = {}

    def next(self, key: str) -> float:
        backoff = self._by_key.setdefault(key, Backoff(self._base, self._cap, rng=self._rng))
        return backoff.next()

    def forget(self, key: str) -> None:
        self._by_key.pop(key, None)
