"""FreeToken health gate (behaviour §4): publish after one success, withdraw after two failures."""

from __future__ import annotations

from catalog_core.evolve import evolver
from catalog_core.state import RuntimeHealth

FAILURES_TO_WITHDRAW = 2
PROBE_STUCK_SECONDS = 30.0  # a probe result lost in transit must not stop probing forever

_evolve = evolver(RuntimeHealth)  # twice per probe


def track(current: RuntimeHealth | None, url: str | None, now: float) -> RuntimeHealth | None:
    """The health record for a runtime whose other gates give ``url`` (None: not eligible, forget it)."""
    if url is None:
        return None
    if current is not None and current.url == url:
        return current
    return RuntimeHealth(url=url, next_probe_at=now)


def probe_due(health: RuntimeHealth, now: float) -> bool:
    if health.probing_since is not None:
        return now - health.probing_since >= PROBE_STUCK_SECONDS
    return now >= health.next_probe_at


def started(health: RuntimeHealth, now: float) -> RuntimeHealth:
    return _evolve(health, probing_since=now)


def observe(health: RuntimeHealth, healthy: bool, detail: str, now: float, interval: float) -> RuntimeHealth:
    if healthy:
        return _evolve(
            health, healthy=True, failures=0, probing_since=None, next_probe_at=now + interval, detail=""
        )
    failures = health.failures + 1
    return _evolve(
        health,
        healthy=health.healthy and failures < FAILURES_TO_WITHDRAW,
        failures=failures,
        probing_since=None,
        next_probe_at=now + interval,
        detail=detail,
    )
