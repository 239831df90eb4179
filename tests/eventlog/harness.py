"""Runs a generated scenario the way the controller would, recording it; returns what the live run did."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from adapters.eventlog.recorder import Recorder, RecorderSettings
from app.replayer import Replayer, Step
from catalog_core.commands import Command, ObserveLiteLLM, ProbeRuntime
from catalog_core.config import CatalogConfig
from catalog_core.events import (
    CommandCompleted,
    Event,
    LiteLLMRowsObserved,
    LiteLLMUnreachable,
    Outcome,
    RuntimeProbed,
    SourceKind,
    SourceUnavailable,
)
from catalog_core.fold import Transition
from catalog_core.state import CatalogState
from tests.eventlog import strategies as gen
from tests.simulation import SimulatedShell

START = 1_767_225_600.0
CRDS = (SourceKind.KUBEAI_MODELS, SourceKind.MODEL_ACTIVATIONS, SourceKind.AGENT_TEMPLATES)


@attrs.define
class Run:
    path: Path
    recorder: Recorder
    history: list[tuple[Event, Transition]]
    final: CatalogState
    shell: SimulatedShell


class _Outcomes:
    """Carries out commands with the outcomes a tick action chose (then: applied)."""

    def __init__(self, shell: SimulatedShell) -> None:
        self.shell = shell
        self.queue: list[str] = []

    def __call__(self, command: Command) -> list[Event]:
        if isinstance(command, ProbeRuntime | ObserveLiteLLM):  # reads: answered by what they observe
            return self.shell.world.execute(command)
        outcome = self.queue.pop(0) if self.queue else "applied"
        if outcome == "retry":
            return [CommandCompleted(command.key, command.id, Outcome.RETRY, 2.0, "", "HTTP 500")]
        if outcome == "terminal":
            return [
                CommandCompleted(command.key, command.id, Outcome.TERMINAL, 0.0, "LiteLLMRejected", "400")
            ]
        if outcome == "gone":
            return [CommandCompleted(command.key, command.id, Outcome.GONE)]
        return self.shell.world.execute(command)


def record_run(
    scn: dict[str, Any],
    directory: Path,
    *,
    snapshot_every: int = 10_000,
    max_bytes: int = 1 << 40,
    max_files: int = 1,
    ring_size: int = 0,
) -> Run:
    config = CatalogConfig()
    shell = SimulatedShell(config, now=START, keep_history=True)
    outcomes = _Outcomes(shell)
    shell.executor = outcomes
    settings = RecorderSettings(
        directory / "events.jsonl",
        max_bytes=max_bytes,
        max_files=max_files,
        snapshot_every=snapshot_every,
        ring_size=ring_size,
    )
    recorder = Recorder(settings, config, writer="inline", clock=lambda: shell.now, run_id="test-run")
    shell.recorder = recorder
    world = shell.world
    shell.secrets(scn["secrets"])
    world.rows = {r["model_info"]["id"]: r for r in scn["rows"]}
    world.healthy = scn["healthy"]
    world.templates = {"litellm-default": gen.agent_template()}
    initial = {
        SourceKind.KUBEAI_MODELS: scn["kubeai"],
        SourceKind.EXTERNAL_MODELS: scn["external"],
        SourceKind.MODEL_ACTIVATIONS: scn["activations"],
        SourceKind.FREETOKEN_DEPLOYMENTS: scn["runtimes"],
        SourceKind.SERVICES: scn["services"],
        SourceKind.AGENT_TEMPLATES: [gen.agent_template()],
    }
    for source in SourceKind:
        if source is SourceKind.SECRETS:
            continue
        if scn["not_installed"] and source in CRDS and not initial.get(source):
            shell.not_installed(source)
        else:
            shell.listed(source, initial.get(source, []))
    shell.rows_observed()
    for act in scn["actions"]:
        perform(shell, outcomes, act)
    shell.execute(shell.tick())
    recorder.close()
    assert shell.history is not None
    return Run(settings.path, recorder, shell.history, shell.state, shell)


def perform(shell: SimulatedShell, outcomes: _Outcomes, act: tuple[Any, ...]) -> None:
    kind = act[0]
    if kind == "upsert":
        shell.upsert(act[1], act[2])
    elif kind == "delete":
        shell.delete(act[1], act[2])
    elif kind == "list":
        shell.listed(act[1], act[2])
    elif kind == "unavailable":
        shell.feed(SourceUnavailable(act[1], act[2], "simulated"))
    elif kind == "rows":
        for row in act[1]:
            shell.world.rows[row["model_info"]["id"]] = row
        shell.feed(LiteLLMRowsObserved(shell.world.rows_event().rows))
    elif kind == "unreachable":
        shell.feed(LiteLLMUnreachable(act[1], "simulated"))
    elif kind == "probe":
        health = shell.state.health.get(act[1])
        url = health.url if health is not None else f"http://{act[1]}.ai.svc.cluster.local:8080/health"
        shell.feed(RuntimeProbed(act[1], url, act[2], "" if act[2] else "HTTP 503"))
    elif kind == "secrets":
        shell.secrets(act[1])
        for obj in act[1]:
            shell.upsert(SourceKind.SECRETS, obj)
    else:
        shell.advance(act[1])
        outcomes.queue = list(act[2])
        shell.execute(shell.tick())


def steps(path: Path, **kwargs: Any) -> Iterator[Step]:
    for item in Replayer(path, **kwargs):
        if isinstance(item, Step):
            yield item
