"""The shape every fault scenario shares: inject, hold (a change arrives meanwhile), heal, measure the
recovery, then judge every invariant and record the outcome (before failing the test, so a failure is
in the results too)."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from tests.faults import results
from tests.faults.results import Outcome
from tests.faults.stage import Snapshot, Stage


@attrs.define
class Samples:
    """What was visible during a fault, sampled: catalog hashes, a record's states, readiness."""

    hashes: list[str] = attrs.field(factory=list)
    models: list[tuple[str, ...]] = attrs.field(factory=list)
    records: list[str] = attrs.field(factory=list)
    ready: list[bool] = attrs.field(factory=list)

    def take(self, stage: Stage, change: tuple[str, str] | None) -> None:
        try:
            self.hashes.append(stage.catalog_hash())
            self.models.append(tuple(stage.catalog_models()))
            if change is not None:
                record = stage.record(*change)
                self.records.append(f"{record['state']}/{record['reason']}" if record else "no record")
            live = stage.running()
            self.ready.append(bool(live) and all(c.ready() for c in live))
        except Exception:  # the API server itself may be what is down
            self.hashes.append("?")

    @property
    def catalog_kept(self) -> bool:
        seen = [h for h in self.hashes if h != "?"]
        return len(set(seen)) <= 1

    def last_record(self) -> str:
        """The last routes.json state/reason sampled for the change (what a user saw at the heal)."""
        seen = [r for r in self.records if r != "no record"]
        return seen[-1] if seen else "no record yet"


def hold(seconds: float, stage: Stage, samples: Samples, change: tuple[str, str] | None = None) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        samples.take(stage, change)
        time.sleep(min(0.5, max(0.0, end - time.monotonic())))


@contextmanager
def scenario(
    stage: Stage, outcome: Outcome, *, before: Snapshot | None = None, alive: bool = True
) -> Iterator[Outcome]:
    """Run the body (inject, hold, heal, measure); then judge the invariants and record the outcome.

    The body sets ``outcome.recovery_s`` and ``outcome.user_sees``. Afterwards: a final change must
    propagate, the world must equal render's, foreign rows must be unchanged, no duplicates, every
    rollout justified, the controller alive and healthy throughout, and no secret anywhere.
    """
    results.record(outcome)
    snapshot = before if before is not None else stage.snapshot()
    watchdog_failures = len(stage.watchdog.failures)
    try:
        yield outcome
    except Exception as exc:
        outcome.error = f"{type(exc).__name__}: {exc}"[:600]
        traceback.print_exc()
    judge(stage, outcome, snapshot, watchdog_failures, alive=alive)
    problems = outcome.failed()
    assert not problems, f"{outcome.id}: " + " | ".join(problems)


def judge(stage: Stage, outcome: Outcome, snapshot: Snapshot, watchdog_from: int, *, alive: bool) -> None:
    bound = outcome.bound_s or 30.0
    if alive:
        try:
            outcome.measured["final_change_s"] = round(stage.propagates(bound), 2)
            outcome.check("a final change propagates", True)
        except AssertionError as exc:
            outcome.check("a final change propagates", str(exc)[:300])
    try:
        stage.wait_converged(bound)
        outcome.check("converged to render(final inputs)", True)
    except AssertionError as exc:
        outcome.check("converged to render(final inputs)", str(exc)[:400])
    outcome.check("foreign rows byte-identical", stage.foreign_rows_kept(snapshot))
    outcome.check("no duplicate ids", stage.no_duplicates())
    outcome.check("no rollout without a catalog hash change", stage.rollouts_justified())
    if alive:
        problems = list(stage.watchdog.failures[watchdog_from:])
        for controller in stage.running():
            if controller.get("/healthz").status_code != 200:
                problems.append(f"{controller.name} /healthz not ok at the end")
        outcome.check("never crashed, /healthz ok", problems)
    outcome.check("no secret leaked", stage.leaks())
    outcome.check("canary reaches LiteLLM (scan not vacuous)", stage.canary_reaches_litellm())


def timed(fn: Callable[[], Any]) -> float:
    began = time.monotonic()
    fn()
    return time.monotonic() - began
