"""The controller SIGKILLed at chosen points — before its writes, between them, after them — and
restarted (same pod name, as a container restart), round after round.

Each round changes the inputs so that several writes follow (a LiteLLM create, a delete, an update of
an external model, the catalog ConfigMap, a consumer rollout); LiteLLM answers writes after 0.3 s (the
real proxy takes ~0.17 s) so kills land between writes. After each kill, the killed run's event log
must replay (``model-catalog replay --verify``), and after each restart the world must converge to
render's answer. After the last round every invariant is judged.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable

import pytest

from tests.e2e.harness import REPO, Controller
from tests.fakes.litellm import DELETE, NEW, PATCH, UPDATE, Fault
from tests.faults.conftest import PROFILE, Suite
from tests.faults.results import Outcome
from tests.faults.scenario import scenario
from tests.faults.stage import EXTERNAL, Stage, wait_until

pytestmark = [pytest.mark.faults]

NAME = "kill-a"
WRITES = frozenset({NEW, UPDATE, PATCH, DELETE})


def _issued(controller: Controller) -> int:
    try:
        return controller.log_path.read_text(errors="replace").count('"msg":"command issued"')
    except OSError:
        return 0


def _more_issued(controller: Controller, issued: int) -> Callable[[], bool]:
    return lambda: _issued(controller) > issued


def _more_writes(stage: Stage, writes: int) -> Callable[[], bool]:
    return lambda: stage.litellm.writes() > writes


def _change(stage: Stage, round_no: int) -> None:
    """A burst of input changes that needs several writes."""
    stage.add_kubeai(f"k{round_no}")
    if round_no > 0:
        stage.admin.delete("kubeai.org/v1", "Model", stage.ns, f"k{round_no - 1}")
    cm = stage.admin.get("v1", "ConfigMap", stage.ns, EXTERNAL)
    assert cm is not None
    models = json.loads(cm["data"]["models.json"])["models"]
    for model in models:
        if model["name"] == "ext-plain":
            model["contextWindow"] = 4096 * (round_no + 1)
    cm["data"]["models.json"] = json.dumps({"models": models})
    stage.admin.replace(cm)


def _replays(event_log: str) -> tuple[bool, str]:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "replay", event_log, "--verify"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode == 0, lines[-1][:300] if lines else ""


def test_sigkill_at_random_points_and_restart(suite: Suite) -> None:
    rng = random.Random(8)
    stage = Stage(suite, "kill").start()
    outcome = Outcome(
        "sigkill-loop",
        "fault",
        f"controller SIGKILLed {PROFILE.kill_rounds} times (before, between and after its writes), "
        "restarted each time",
        PROFILE.name,
        bound_s=PROFILE.kube_bound,
    )
    try:
        assert stage.served is not None
        stage.served.call(stage.served.fake.inject, Fault(delay=0.3, endpoints=WRITES))
        stage.launch(NAME)
        stage.watchdog.start()
        stage.wait_converged(60)
        with scenario(stage, outcome):
            landed: Counter[str] = Counter()
            recoveries: list[float] = []
            replay_failures: list[str] = []
            idle_restart_writes: list[int] = []
            for round_no in range(PROFILE.kill_rounds):
                mode = (
                    ("before", "between", "after")[round_no % 3]
                    if round_no < 3
                    else rng.choice(("before", "between", "after", "random"))
                )
                controller = stage.running()[0]
                issued, writes = _issued(controller), stage.litellm.writes()
                _change(stage, round_no)
                if mode == "before":  # the first command is planned: kill before it is carried out
                    wait_until(_more_issued(controller, issued), 20, 0.01, "a command issued")
                elif mode == "between":  # some LiteLLM writes landed, others not yet
                    wait_until(_more_writes(stage, writes), 20, 0.01, "a LiteLLM write")
                elif mode == "after":
                    stage.wait_converged(PROFILE.kube_bound)
                else:
                    time.sleep(rng.uniform(0.0, 2.0))
                stage.watchdog.paused = True
                controller.kill()
                converged_at_kill = not stage.divergence()
                wrote = stage.litellm.writes() > writes
                landed["after" if converged_at_kill else "between" if wrote else "before"] += 1
                ok, why = _replays(str(controller.event_log))
                if not ok:
                    replay_failures.append(f"round {round_no}: {why}")
                before_restart = stage.litellm.writes()
                began = time.monotonic()
                stage.launch(NAME)
                stage.watchdog.paused = False
                stage.wait_converged(PROFILE.kube_bound)
                recoveries.append(time.monotonic() - began)
                if converged_at_kill:
                    idle_restart_writes.append(stage.litellm.writes() - before_restart)
            outcome.recovery_s = round(max(recoveries), 2)
            outcome.measured.update(
                {
                    "kills_landed": dict(landed),
                    "restart_to_converged_s_median": round(sorted(recoveries)[len(recoveries) // 2], 2),
                    "restart_to_converged_s_max": round(max(recoveries), 2),
                    "writes_after_restart_in_steady_state": idle_restart_writes,
                }
            )
            outcome.check("each killed run's event log replays (--verify)", replay_failures)
            outcome.check(
                "a restart in steady state writes nothing",
                [f"{n} LiteLLM writes" for n in idle_restart_writes if n],
            )
            outcome.user_sees = (
                f"kills landed {dict(landed)}; after each restart the world converges within "
                f"{max(recoveries):.1f} s (median {sorted(recoveries)[len(recoveries) // 2]:.1f} s, "
                "start-up included); no duplicate rows, no extra rollout"
            )
    finally:
        stage.close()
