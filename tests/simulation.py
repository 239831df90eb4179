"""Testing: a simulated shell that records what it does (the real fold and recorder, the core's simulated
world) and a busy appliance to drive it. Test and benchmark scaffolding, kept out of the product packages;
its objects come from the one set of builders, ``tests/core/builders.py``.

It plays the controller's part without a cluster: raw objects are redacted as
the adapters redact them (secret values go to a vault, never into events), each
event is folded with ``step`` and recorded, ticks plan, and the commands are
carried out by ``SimulatedWorld`` whose outcomes are fed back as events. The
example log (``examples/make_event_log.py``), the big benchmark log
(``bench/make_big_log.py``) and the event-log tests are produced with it.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from adapters.eventlog.recorder import Recorder
from app.stepping import guarded_step, log_step_failure
from catalog_core.commands import (
    Command,
    CreateLiteLLMModel,
    ProbeRuntime,
    RecreateLiteLLMModel,
    UpdateLiteLLMModel,
)
from catalog_core.config import CatalogConfig
from catalog_core.events import (
    CommandCompleted,
    Event,
    ObjectDeleted,
    ObjectUpserted,
    Outcome,
    RuntimeProbed,
    SourceKind,
    SourceListed,
    SourceUnavailable,
    Ticked,
    Unavailability,
)
from catalog_core.fold import Transition, initial_state
from catalog_core.redact import redact_for_source
from catalog_core.simulate import SimulatedWorld
from catalog_core.state import CatalogState
from tests.core import builders as b


class SimulatedShell:
    """Feeds events to the fold (recording every step) and carries out the commands in a simulated world."""

    def __init__(
        self,
        config: CatalogConfig,
        *,
        recorder: Recorder | None = None,
        world: SimulatedWorld | None = None,
        now: float = 0.0,
        executor: Callable[[Command], list[Event]] | None = None,
        keep_history: bool = False,
    ) -> None:
        self.config = config
        self.state: CatalogState = initial_state(config)
        self.recorder = recorder
        self.world = world if world is not None else SimulatedWorld()
        self.now = now
        self.vault: dict[str, str] = {}
        self.commands: list[Command] = []  # every command emitted, in order
        self.steps = 0
        self.history: list[tuple[Event, Transition]] | None = [] if keep_history else None
        self.executor = executor if executor is not None else self.world.execute

    # --- events in -----------------------------------------------------------------------------

    def feed(self, event: Event) -> Transition:
        result, error = guarded_step(self.state, event)
        if error is not None:
            log_step_failure(event, error)
        if self.recorder is not None:
            self.recorder.record(event, result)
        self.state = result.state
        self.commands.extend(result.commands)
        self.steps += 1
        if self.history is not None:
            self.history.append((event, result))
        return result

    def redact(self, source: SourceKind, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        redacted = redact_for_source(source, obj)
        self.vault.update(redacted.secrets)
        return redacted.obj

    def upsert(self, source: SourceKind, obj: Mapping[str, Any]) -> Transition:
        return self.feed(ObjectUpserted(source, self.redact(source, obj)))

    def delete(self, source: SourceKind, obj: Mapping[str, Any]) -> Transition:
        return self.feed(ObjectDeleted(source, self.redact(source, obj)))

    def listed(self, source: SourceKind, objects: Iterable[Mapping[str, Any]]) -> Transition:
        return self.feed(SourceListed(source, tuple(self.redact(source, o) for o in objects)))

    def not_installed(self, source: SourceKind) -> Transition:
        return self.feed(SourceUnavailable(source, Unavailability.NOT_INSTALLED))

    def secrets(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Secrets the simulated cluster holds: redacted for the world, values into the vault."""
        for obj in objects:
            redacted = self.redact(SourceKind.SECRETS, obj)
            self.world.secrets[str(redacted["metadata"]["name"])] = redacted

    def rows_observed(self) -> Transition:
        return self.feed(self.world.rows_event())

    # --- planning and commands out -------------------------------------------------------------

    def tick(self) -> tuple[Command, ...]:
        return self.feed(Ticked(self.now)).commands

    def execute(self, commands: Iterable[Command]) -> None:
        for command in commands:
            for event in self.executor(command):
                self.feed(event)

    def settle(self, *, rounds: int = 60, seconds_per_round: float = 1.0) -> int:
        """Tick and carry out the commands until a tick emits nothing and no LiteLLM write waits (a probed
        or damped one: the clock jumps to when it is due); returns the rounds taken."""
        for n in range(rounds):
            commands = self.tick()
            if not commands:
                due = min(self.state.damping.waiting.values(), default=None)
                if due is None or due <= self.now:
                    return n
                self.now = due
                continue
            self.execute(commands)
            self.now += seconds_per_round
        raise RuntimeError(f"no fixed point after {rounds} rounds")

    def advance(self, seconds: float) -> None:
        self.now += seconds


# --- a busy appliance ------------------------------------------------------------------------------

FEATURES = (["TextGeneration"], ["TextEmbedding"], ["TextGeneration"], ["Reranking"], ["SpeechToText"])


def _at(obj: dict[str, Any], rv: int, uid: str | None = None) -> dict[str, Any]:
    """``obj`` at resourceVersion ``rv`` (the busy appliance's objects change version as they change)."""
    obj["metadata"]["resourceVersion"] = str(rv)
    if uid is not None:
        obj["metadata"]["uid"] = uid
    return obj


def kubeai_model(i: int, ready: bool, rv: int) -> dict[str, Any]:
    model = b.kubeai_model(
        f"model-{i:02d}",
        ready=1 if ready else 0,
        features=list(FEATURES[i % len(FEATURES)]),
        args=[f"--max-model-len={4096 * (1 + i % 8)}", "--max-num-seqs=16"],
        annotations={"ai-appliance.io/max-output-tokens": str(1024 * (1 + i % 8))},
        engine="VLLM" if i % 3 else "OLlama",
        profile=("nvidia-gpu-l4:1", "cpu:2", "amd-gpu-mi210:1")[i % 3],
    )
    return _at(model, rv, uid=f"00000000-0000-4000-8000-{i:012d}")


def external_configmap(version: int, broken: bool) -> dict[str, Any]:
    models = [
        {
            "name": f"cloud-{i:02d}",
            "model": f"openai/cloud-{i:02d}",
            "apiKeySecretRef": {"name": "openai-credentials", "key": "apiKey"},
            "contextWindow": 8192 * (1 + (i + version) % 16),
        }
        for i in range(8)
    ]
    text = json.dumps({"models": models}, indent=2)
    if broken:
        text = text.replace("},\n    {", "}\n    {", 1)
    return _at(b.external_configmap(None, raw_text=text), version, uid="cm-ext")


def secret() -> dict[str, Any]:
    # not labelled as a provider Secret: the external models' references are refused (SecretNotAllowed)
    return b.secret("openai-credentials", {"apiKey": "sk-bench-not-a-real-key"}, labels={})


def activation(i: int) -> dict[str, Any]:
    return b.activation(f"ft-{i}", kind="local", model_type="chat")


def runtime(i: int, rv: int) -> dict[str, Any]:
    deployment = b.freetoken_deployment(
        f"ft-{i}-runtime", activation_name=f"ft-{i}", annotations={"ai-appliance.io/context-window": "16384"}
    )
    return _at(deployment, rv)


def service(i: int) -> dict[str, Any]:
    return b.service(f"ft-{i}-runtime")


def mesh_row(i: int) -> dict[str, Any]:
    name = f"model-{i:02d}"
    return b.row(
        name,
        f"private-mesh-{name}-peer",
        owner="private-mesh",
        order=1,
        api_base="http://mesh-bridge.ai.svc:8080/v1",
        ai_appliance_logical_name=name,
        ai_appliance_scheduler={"locality": "mesh"},
    )


class BusyAppliance:
    """A day in the life of an appliance, second by second (the workload of the big benchmark log and
    of the recorder tests): what arrives, what the shell ticks for, and what its executors report."""

    def __init__(
        self, shell: SimulatedShell, rng: random.Random, kubeai: int = 12, runtimes: int = 3
    ) -> None:
        self.shell = shell
        self.rng = rng
        self.ready = {i: i % 5 != 4 for i in range(kubeai)}
        self.rv = 1000
        self.cm_version = 1
        self.runtimes = runtimes
        self.unhealthy_until: dict[str, float] = {}

    def execute(self, command: Command) -> list[Event]:
        if isinstance(command, ProbeRuntime):
            healthy = self.unhealthy_until.get(command.runtime, 0.0) <= self.shell.now
            return [RuntimeProbed(command.runtime, command.url, healthy, "" if healthy else "HTTP 503")]
        writes = CreateLiteLLMModel | UpdateLiteLLMModel | RecreateLiteLLMModel
        if isinstance(command, writes) and self.rng.random() < 0.05:
            return [CommandCompleted(command.key, command.id, Outcome.RETRY, 2.0, "", "HTTP 500")]
        return self.shell.world.execute(command)

    def start(self) -> None:
        shell = self.shell
        shell.secrets([secret()])
        for source in SourceKind:
            if source is SourceKind.KUBEAI_MODELS:
                shell.listed(source, [kubeai_model(i, r, self.rv) for i, r in self.ready.items()])
            elif source is SourceKind.EXTERNAL_MODELS:
                shell.listed(source, [external_configmap(self.cm_version, broken=False)])
            elif source is SourceKind.MODEL_ACTIVATIONS:
                shell.listed(source, [activation(i) for i in range(self.runtimes)])
            elif source is SourceKind.FREETOKEN_DEPLOYMENTS:
                shell.listed(source, [runtime(i, self.rv) for i in range(self.runtimes)])
            elif source is SourceKind.SERVICES:
                shell.listed(source, [service(i) for i in range(self.runtimes)])
            elif source is not SourceKind.SECRETS:
                shell.listed(source, [])
        shell.rows_observed()
        shell.settle()

    def deadline_due(self) -> bool:
        """Whether the shell would tick without new events: a health probe or a retry falls due."""
        state, now = self.shell.state, self.shell.now
        return any(h.probing_since is None and h.next_probe_at <= now for h in state.health.values()) or any(
            r.not_before <= now for r in state.control.retries.values()
        )

    def second(self) -> None:
        """One second of the appliance's life, as the shell sees it: the events that arrive, then a
        tick when there were events or a deadline fell due, and the outcomes of its commands."""
        shell, rng = self.shell, self.rng
        shell.advance(1.0)
        steps = shell.steps
        self.rv += 1
        roll = rng.random()
        if roll < 0.15:
            # A status-only update or a relist: the parsed object does not change.
            i = rng.randrange(len(self.ready))
            shell.upsert(SourceKind.KUBEAI_MODELS, kubeai_model(i, self.ready[i], self.rv))
        elif roll < 0.25:
            shell.upsert(SourceKind.FREETOKEN_DEPLOYMENTS, runtime(rng.randrange(self.runtimes), self.rv))
        elif roll < 0.25 + 1 / 600:
            # A model restarts or finishes pulling (about every ten minutes).
            i = rng.randrange(len(self.ready))
            self.ready[i] = not self.ready[i]
            shell.upsert(SourceKind.KUBEAI_MODELS, kubeai_model(i, self.ready[i], self.rv))
        elif roll < 0.25 + 1 / 600 + 1 / 3600:
            # Someone edits the external models (about hourly), sometimes with a typo.
            self.cm_version += 1
            shell.upsert(SourceKind.EXTERNAL_MODELS, external_configmap(self.cm_version, rng.random() < 0.3))
        elif roll < 0.25 + 1 / 600 + 2 / 3600:
            # The Private Mesh adds or drops a fallback.
            row = mesh_row(rng.randrange(len(self.ready)))
            rid = row["model_info"]["id"]
            if shell.world.rows.pop(rid, None) is None:
                shell.world.rows[rid] = copy.deepcopy(row)
        elif roll < 0.25 + 1 / 600 + 3 / 3600:
            # A FreeToken runtime stops answering /health for a while.
            name = f"ft-{rng.randrange(self.runtimes)}-runtime"
            self.unhealthy_until[name] = shell.now + rng.choice((20.0, 45.0, 120.0))
        if int(shell.now) % 30 == 0:
            shell.rows_observed()
        if shell.steps == steps and not self.deadline_due():
            return
        for _ in range(10):
            before = shell.steps
            shell.execute(shell.tick())
            if shell.steps == before + 1:
                return  # the tick was all: nothing came back
