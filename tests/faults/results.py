"""What each fault scenario and bad-input case measured, kept for the results JSON and the README table.

The suite appends one ``Outcome`` per scenario (also when an invariant failed: the failure is recorded,
then the test fails). With ``MODEL_CATALOG_FAULT_RESULTS=<path>`` the session writes them as JSON
(``just faults`` does; ``python -m tests.faults.report`` turns that file into the README table).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from pathlib import Path
from typing import Any

import attrs

RESULTS_ENV = "MODEL_CATALOG_FAULT_RESULTS"
OK = "ok"


@attrs.define
class Outcome:
    id: str
    group: str  # "fault" | "bad-input"
    fault: str  # what was done to the controller
    profile: str  # "fast" (just test) | "full" (just faults)
    user_sees: str = ""  # what a user of the catalog sees while it lasts (measured)
    hold_s: float | None = None
    bound_s: float | None = None  # the stated convergence bound after the fault heals
    recovery_s: float | None = None  # measured: heal -> converged (None: never)
    invariants: dict[str, str] = attrs.field(factory=dict)  # name -> "ok" or what broke
    measured: dict[str, Any] = attrs.field(factory=dict)  # other numbers worth keeping
    error: str = ""  # the scenario itself failed (an assertion or an exception)

    @property
    def survived(self) -> bool:
        return not self.error and all(v == OK for v in self.invariants.values())

    def check(self, name: str, problems: list[str] | str | bool) -> None:
        """Record one invariant: a list of problems (empty = kept), a problem text, or a boolean."""
        if isinstance(problems, bool):
            self.invariants[name] = OK if problems else "failed"
        elif isinstance(problems, str):
            self.invariants[name] = problems or OK
        else:
            self.invariants[name] = "; ".join(problems[:5]) if problems else OK

    def failed(self) -> list[str]:
        return [f"{k}: {v}" for k, v in self.invariants.items() if v != OK] + (
            [f"error: {self.error}"] if self.error else []
        )

    def as_json(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        out["survived"] = self.survived
        return out


RESULTS: list[Outcome] = []
SUITE: dict[str, str] = {}  # checks of the whole suite (the final canary scan)


def record(outcome: Outcome) -> Outcome:
    RESULTS.append(outcome)
    return outcome


def write(path: Path, seconds: float, profile: str) -> None:
    doc = {
        "generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "profile": profile,
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs",
        "suite_seconds": round(seconds, 1),
        "results": [o.as_json() for o in RESULTS],
        "suite_checks": dict(SUITE),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
