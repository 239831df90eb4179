"""The leader's health report: the core's conditions plus the watches that are not streaming, each with
the wall-clock time this replica first saw it, as the Lease annotation ``model-catalog status`` reads
(``contracts/controller_status.py``). Computed when the Lease is renewed, from the loop's latest state (an
immutable value): no request and no write of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from catalog_core.conditions import Condition, ConditionType, conditions
from catalog_core.state import CatalogState
from contracts.controller_status import ANNOTATION, ReportedCondition, encode


def _rfc3339(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


class HealthReport:
    """``annotations()`` for the LeaderElector. ``stale``: watch name -> since (wall-clock seconds), as
    ``KubeStats.stale`` keeps it; ``clock``: wall-clock seconds (a test's fake)."""

    def __init__(
        self,
        state: Callable[[], CatalogState],
        stale: Mapping[str, float],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._state = state
        self._stale = stale
        self._clock = clock
        self._first_seen: dict[tuple[str, str], float] = {}

    def current(self) -> tuple[ReportedCondition, ...]:
        now = self._clock()
        found: list[tuple[Condition, float | None]] = [(c, None) for c in conditions(self._state())]
        for watch, stale_since in sorted(dict(self._stale).items()):
            stale = Condition(ConditionType.WATCH_STALE, watch, "not streaming; reconnecting")
            found.append((stale, stale_since))
        seen: dict[tuple[str, str], float] = {}
        out = []
        for condition, since in found:
            key = (condition.type.value, condition.subject)
            first = self._first_seen.get(key, now) if since is None else since
            seen[key] = first
            out.append(ReportedCondition(key[0], key[1], condition.message, _rfc3339(first)))
        self._first_seen = seen  # a condition that cleared and comes back starts a new since
        return tuple(out)

    def annotations(self) -> dict[str, str]:
        return {ANNOTATION: encode(self.current())}
