"""Start deadline (behaviour §1.1): a route published before its runtime is ready (a KubeAI Model that
scales from zero) is reported once the runtime has had pods for longer than its deadline with none of
them ready. Time arrives as a value, so the rule is tested without sleeping."""

from __future__ import annotations

from catalog_core.evolve import evolve
from catalog_core.state import StartWatch


def track(current: StartWatch | None, deadline: float | None, now: float) -> StartWatch | None:
    """The start watch of an item whose claim gives ``deadline`` (None: not starting, forget it)."""
    if deadline is None:
        return None
    if current is not None:
        return current
    return StartWatch(since=now, due=now + deadline)


def falls_due(watch: StartWatch, now: float) -> bool:
    """The deadline has just passed: the item is to be re-derived, and reported."""
    return not watch.overdue and now >= watch.due


def overdue(watch: StartWatch) -> StartWatch:
    return evolve(watch, overdue=True)
