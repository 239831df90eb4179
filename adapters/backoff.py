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
    """One Backoff per key (controller-runtime's per-item rate limiter), forgotten on success.

    ``next(key, ident)``: ``ident`` names what is being retried (a command id); another one under the same
    key is a new input, whose retries start again from ``base``. At most ``max_keys`` keys are kept (the
    oldest forgotten first): a key whose write is never retried again must not be kept for ever."""

    def __init__(
        self, base: float = 0.2, cap: float = 300.0, rng: random.Random | None = None, max_keys: int = 10_000
    ) -> None:
        self._base, self._cap = base, cap
        self._rng = rng or random.Random()
        self._max_keys = max_keys
        self._by_key: dict[str, tuple[str, Backoff]] = {}

    @property
    def cap(self) -> float:
        return self._cap

    def next(self, key: str, ident: str = "") -> float:
        held = self._by_key.pop(key, None)  # re-inserted: the dict's order is the order of last use
        if held is None or held[0] != ident:
            held = (ident, Backoff(self._base, self._cap, rng=self._rng))
        self._by_key[key] = held
        if len(self._by_key) > self._max_keys:
            del self._by_key[next(iter(self._by_key))]
        return held[1].next()

    def forget(self, key: str) -> None:
        self._by_key.pop(key, None)

    @property
    def keys(self) -> int:
        """How many keys are held."""
        return len(self._by_key)
