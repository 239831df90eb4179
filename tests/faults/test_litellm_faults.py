"""LiteLLM faults against a running controller process: stopped, 5xx, slow (10 s), 401, lost answers.

Fast profile: the LiteLLM fake served on a loopback port (its answers are pinned to the real proxy's by
``tests/adapters/litellm/test_contract.py``), so a stop and start take milliseconds. The real LiteLLM
peer stopped for 60 s (stop/start ~70 s) runs in the full profile (``just faults``):
``test_real_litellm_stopped_for_60s``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from tests.fakes.litellm import DELETE, INFO, NEW, PATCH, UPDATE, Fault
from tests.faults.conftest import PROFILE, Suite
from tests.faults.peers import RealLiteLLMRestarter
from tests.faults.results import Outcome
from tests.faults.scenario import Samples, hold, scenario
from tests.faults.stage import Stage

pytestmark = [pytest.mark.faults]

WRITES = frozenset({NEW, UPDATE, PATCH, DELETE})


@pytest.fixture
def stage(shared_stage: Stage) -> Stage:
    return shared_stage


@attrs.frozen
class LiteLLMFault:
    id: str
    fault: str
    inject: Callable[[Stage], Any]
    heal: Callable[[Stage], Any]
    hold: float


def _inject(*faults: Fault) -> Callable[[Stage], Any]:
    def inject(stage: Stage) -> None:
        assert stage.served is not None
        for fault in faults:
            stage.served.call(stage.served.fake.inject, fault)

    return inject


def _clear(stage: Stage) -> None:
    assert stage.served is not None
    stage.served.call(stage.served.fake.clear_faults)


def _stop(stage: Stage) -> None:
    assert stage.served is not None
    stage.served.stop()


def _start(stage: Stage) -> None:
    assert stage.served is not None
    stage.served.start()


FAULTS = [
    LiteLLMFault(
        "litellm-stopped",
        "LiteLLM stopped: its port closed (connection refused), then started again (fake)",
        _stop,
        _start,
        PROFILE.hold,
    ),
    LiteLLMFault(
        "litellm-5xx",
        "LiteLLM answers 503 to every request (fake)",
        _inject(Fault(status=503)),
        _clear,
        PROFILE.hold,
    ),
    LiteLLMFault(
        "litellm-500",
        "LiteLLM answers 500 to every request, /model/info included (fake)",
        _inject(Fault(status=500)),
        _clear,
        PROFILE.hold,
    ),
    LiteLLMFault(
        "litellm-slow",
        "LiteLLM answers every request after 10 s (the client's read timeout) (fake)",
        _inject(Fault(delay=10.0)),
        _clear,
        PROFILE.slow_hold,
    ),
    LiteLLMFault(
        "litellm-401",
        "LiteLLM rejects the master key: 401 on every request (fake)",
        _inject(Fault(status=401)),
        _clear,
        PROFILE.hold,
    ),
    LiteLLMFault(
        "litellm-lost-answers",
        "LiteLLM carries every write out, then the connection drops before the answer (fake)",
        _inject(Fault(refuse=True, apply_first=True, endpoints=WRITES)),
        _clear,
        PROFILE.hold,
    ),
    LiteLLMFault(
        "litellm-info-fails",
        "GET /model/info fails (503) while writes still work (fake)",
        _inject(Fault(status=503, endpoints=frozenset({INFO}))),
        _clear,
        PROFILE.hold,
    ),
]


def user_sees(samples: Samples, recovery: float | None) -> str:
    kept = "catalog kept as it was" if samples.catalog_kept else "catalog kept up to date"
    ready = "ready" if all(samples.ready) else "not ready at times"
    back = f", published {recovery:.1f} s after the heal" if recovery is not None else ""
    return (
        f"{kept}; a model added meanwhile shows {samples.last_record()} in routes.json{back}; /readyz {ready}"
    )


@pytest.mark.parametrize("spec", FAULTS, ids=[f.id for f in FAULTS])
def test_litellm_fault(stage: Stage, spec: LiteLLMFault) -> None:
    outcome = Outcome(
        spec.id, "fault", spec.fault, PROFILE.name, hold_s=spec.hold, bound_s=PROFILE.litellm_bound
    )
    with scenario(stage, outcome):
        spec.inject(stage)
        name = stage.change()
        samples = Samples()
        hold(spec.hold, stage, samples, ("kubeai", name))
        spec.heal(stage)
        outcome.recovery_s = round(stage.wait_converged(PROFILE.litellm_bound), 2)
        outcome.user_sees = user_sees(samples, outcome.recovery_s)
        outcome.measured["litellm_writes_total"] = stage.litellm.writes()


@pytest.mark.faults_full
@pytest.mark.litellm
def test_real_litellm_stopped_for_60s(suite: Suite, litellm_peer: Any) -> None:
    """The real proxy stopped (its process and database) for 60 s, then started on the same ROOT."""
    if litellm_peer.root is None:
        pytest.skip("LITELLM_BASE_URL points at a proxy this suite did not start: it cannot stop it")
    restarter = RealLiteLLMRestarter(litellm_peer.root, litellm_peer.base_url, litellm_peer.start_env)
    stage = Stage(suite, "real-llm", litellm=(litellm_peer.base_url, litellm_peer.master_key, None))
    stage.extra_secrets.append(litellm_peer.master_key)  # the real master key must not leak either
    stage.start()
    outcome = Outcome(
        "real-litellm-stopped",
        "fault",
        "the real LiteLLM proxy and its database stopped for 60 s, then started again",
        PROFILE.name,
        hold_s=60.0,
        bound_s=PROFILE.litellm_bound,
    )
    try:
        stage.launch()
        stage.watchdog.start()
        stage.wait_converged(90)
        with scenario(stage, outcome):
            began = restarter.stop()
            name = stage.change()
            samples = Samples()
            hold(max(0.0, 60.0 - began), stage, samples, ("kubeai", name))
            outcome.measured["litellm_start_s"] = round(restarter.start(), 1)
            outcome.recovery_s = round(stage.wait_converged(PROFILE.litellm_bound), 2)
            outcome.user_sees = user_sees(samples, outcome.recovery_s)
    finally:
        stage.close()
