"""Write economy under churn (issue 14): a flapping model costs few writes, a burst rolls consumers once.

The fold is driven as the service drives it: each input event at its time, a tick, the commands carried
out by the simulated world and their outcomes folded, and a tick at every deadline the core names.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.render import render
from catalog_core.commands import (
    Command,
    CreateLiteLLMModel,
    DeleteLiteLLMModel,
    EvictPod,
    LiteLLMCommand,
    PatchAgentTemplate,
    RollWorkload,
    WriteCatalog,
)
from catalog_core.config import CatalogConfig
from catalog_core.damping import Windows, damped
from catalog_core.events import Event, Ticked
from catalog_core.fold import step
from catalog_core.plan import next_deadline, rendered_catalog
from catalog_core.state import CatalogState
from tests.core import builders as b
from tests.core.harness import Cluster

OPENCLAW = {"app.kubernetes.io/instance": "openclaw", "app.kubernetes.io/name": "openclaw"}


class Driver:
    """The fold at a given clock: events at their times, every deadline in between ticked."""

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        self.commands: list[Command] = []
        self.at: list[float] = []  # when each command was emitted
        self.waiting: list[bool] = []

    @property
    def state(self) -> CatalogState:
        return self.c.state

    def tick(self, now: float, *, busy: float = 0.0) -> None:
        """One instant: tick at ``now`` (after the loop was ``busy`` folding) and carry out what it emits,
        until it emits nothing."""
        for _ in range(50):
            result = step(self.c.state, Ticked(now, busy=busy))
            busy = 0.0
            self.c.state = result.state
            if not result.commands:
                return
            self.commands.extend(result.commands)
            self.at.extend([now] * len(result.commands))
            # whether LiteLLM writes were waiting for their rows to settle when the command was planned
            self.waiting.extend([bool(result.state.damping.waiting)] * len(result.commands))
            for command in result.commands:
                for event in self.c.world.execute(command):
                    self.c.state = step(self.c.state, event).state
        raise AssertionError("no fixed point at one instant")

    def until(self, now: float) -> None:
        """Tick at every deadline up to ``now``, then at ``now``."""
        for _ in range(10_000):
            due = next_deadline(self.c.state)
            if due is None or due > now:
                break
            self.tick(max(due, self.c.state.now))
        self.tick(now)

    def send(self, now: float, events: list[Event], *, busy: float = 0.0) -> None:
        self.until(now)
        for event in events:
            self.c.state = step(self.c.state, event).state
        self.tick(now, busy=busy)


def _writes(commands: list[Command]) -> list[LiteLLMCommand]:
    return [c for c in commands if isinstance(c, LiteLLMCommand)]


def _started(names: list[str], **env: str) -> tuple[Cluster, Driver]:
    c = Cluster(**env)
    c.start(*(b.kubeai_model(n) for n in names))
    d = Driver(c)
    d.until(c.now + 100.0)  # long still: every key settled
    return c, d


def _ready(c: Cluster, name: str, ready: bool) -> list[Event]:
    return c.upserts(b.kubeai_model(name, ready=1 if ready else 0))


def _rid(c: Cluster, name: str) -> str:
    return next(rid for rid, row in c.world.rows.items() if row["model_name"] == name)


def test_the_first_change_of_a_still_key_goes_out_once_the_burst_probe_passes():
    c, d = _started(["llama"])
    rid = _rid(c, "llama")
    probe = Windows.of(c.config).burst_probe
    assert probe == 0.01
    t = c.state.now + 1.0
    d.send(t, _ready(c, "llama", False))
    assert _writes(d.commands) == []  # held for the probe: other rows changing now would be a burst
    assert next_deadline(c.state) == t + probe
    d.until(t + probe)
    assert [type(x) for x in _writes(d.commands)] == [DeleteLiteLLMModel]
    assert rid not in c.world.rows
    assert c.state.damping.deferred_total == 0


def test_a_flap_back_to_what_litellm_holds_cancels_the_deferred_write():
    c, d = _started(["llama"])
    t = c.state.now + 1.0
    d.send(t, _ready(c, "llama", False))  # written once the probe passed
    d.send(t + 0.3, _ready(c, "llama", True))  # soon after: deferred
    assert len(_writes(d.commands)) == 1
    assert c.state.damping.deferred_total == 1
    assert list(c.state.damping.waiting) == ["litellm/ai-appliance-kubeai-llama"]
    d.send(t + 0.6, _ready(c, "llama", False))  # back to what LiteLLM holds
    assert c.state.damping.cancelled_total == 1
    d.until(t + 30.0)
    assert len(_writes(d.commands)) == 1
    windows = Windows.of(c.config)
    assert damped(c.state.damping, c.state.now, windows) == 0  # settled: no longer damped
    assert not c.state.damping.waiting


def test_a_deferred_write_goes_once_the_key_is_still_for_the_settle_window():
    c, d = _started(["llama"])
    t = c.state.now + 1.0
    d.send(t, _ready(c, "llama", False))
    d.send(t + 0.5, _ready(c, "llama", True))
    d.until(t + 0.5 + 1.9)
    assert len(_writes(d.commands)) == 1
    d.until(t + 0.5 + 2.0)
    writes = _writes(d.commands)
    assert [type(x) for x in writes] == [DeleteLiteLLMModel, CreateLiteLLMModel]


def test_a_key_that_never_settles_is_written_at_the_cap():
    c, d = _started(["llama"], CATALOG_LITELLM_SETTLE_SECONDS="2", CATALOG_LITELLM_SETTLE_CAP_SECONDS="5")
    t = c.state.now + 1.0
    for k in range(40):  # a change every 0.25 s for 10 s, each different from what LiteLLM holds then
        ready = k % 2 == 1
        d.send(t + 0.25 * k, _ready(c, "llama", ready))
    times = [w for w in d.commands if isinstance(w, LiteLLMCommand)]
    assert 2 <= len(times) <= 10 / 2 + 1


def test_settle_zero_turns_damping_off():
    c, d = _started(["llama"], CATALOG_LITELLM_SETTLE_SECONDS="0", CATALOG_LITELLM_SETTLE_CAP_SECONDS="0")
    t = c.state.now + 1.0
    for k in range(6):
        d.send(t + 0.1 * k, _ready(c, "llama", k % 2 == 1))
    assert len(_writes(d.commands)) == 6
    assert not c.state.damping.keys and not c.state.damping.waiting


def _consumers() -> list[dict[str, Any]]:
    return [
        b.deployment("openclaw", labels=OPENCLAW),
        b.replicaset("openclaw-abc", "openclaw"),
        b.pod("openclaw-abc-1", labels=OPENCLAW, owner=("ReplicaSet", "openclaw-abc")),
        b.pod("anything", labels={"app": "anything-llm"}),
        b.agent_template("litellm-default"),
    ]


def _rollouts(commands: list[Command]) -> list[Command]:
    return [x for x in commands if isinstance(x, RollWorkload | EvictPod)]


def test_a_catalog_that_goes_a_b_a_within_the_window_rolls_nothing():
    c = Cluster()
    c.start(b.kubeai_model("llama"), b.kubeai_model("qwen"), *_consumers())
    d = Driver(c)
    d.until(c.now + 100.0)
    t = c.state.now + 1.0
    d.send(t, _ready(c, "qwen", False))
    d.until(t + c.config.litellm_burst_probe_seconds)  # catalog B written once the probe passed
    assert any(isinstance(x, WriteCatalog) for x in d.commands)
    d.until(t + 3.0)  # the key settled: the write back to A goes (2 s), within the rollout window
    d.send(t + 3.0, _ready(c, "qwen", True))
    d.until(t + 60.0)
    assert sum(isinstance(x, WriteCatalog) for x in d.commands) == 2
    assert _rollouts(d.commands) == []
    assert not any(isinstance(x, PatchAgentTemplate) for x in d.commands)


def test_a_burst_rolls_each_consumer_once_and_patches_the_template_once():
    c = Cluster()
    names = [f"m{i}" for i in range(6)]
    c.start(*(b.kubeai_model(n) for n in names), *_consumers())
    d = Driver(c)
    d.until(c.now + 100.0)
    t = c.state.now + 1.0
    for k in range(8):
        for i, name in enumerate(names):
            d.send(t + 0.4 * k + 0.01 * i, _ready(c, name, (k + i) % 2 == 1 if i % 2 else k % 2 == 1))
    d.until(t + 60.0)
    rolls = _rollouts(d.commands)
    assert sorted(x.key for x in rolls) == sorted({x.key for x in rolls})  # at most once each
    assert len(rolls) == 2  # the Deployment and the ownerless pod
    assert sum(isinstance(x, PatchAgentTemplate) for x in d.commands) <= 1
    # the catalog is not written while LiteLLM writes wait for their rows to settle (within the cap)
    catalog_writes = [w for x, w in zip(d.commands, d.waiting, strict=True) if isinstance(x, WriteCatalog)]
    assert catalog_writes and not any(catalog_writes)


# --- properties


@st.composite
def _flaps(draw: Any) -> tuple[int, list[tuple[float, int, bool]], float, float]:
    models = draw(st.integers(1, 4))
    settle = draw(st.sampled_from([0.5, 2.0]))
    cap = settle * draw(st.sampled_from([1.0, 2.5, 5.0]))
    steps = draw(
        st.lists(
            st.tuples(st.floats(0.0, 3.0), st.integers(0, models - 1), st.booleans()), min_size=1, max_size=30
        )
    )
    return models, steps, settle, cap


def check_flaps(models: int, steps: list[tuple[float, int, bool]], env: dict[str, str]) -> None:
    """Send ``steps`` (gap, model, ready) to a started cluster, wait out the cap: LiteLLM's rows and the
    catalog are ``render``'s of the final inputs (and of the catalog written last, whose default model stays
    while it is published: behaviour §5.1), and each row was written at most once per change of its desired
    value and once per settle window."""
    names = [f"m{i}" for i in range(models)]
    c, d = _started(names, **env)
    windows = Windows.of(c.config)
    rid = {n: _rid(c, n) for n in names}
    ready = dict.fromkeys(names, True)
    changes = dict.fromkeys(names, 0)
    start = now = c.state.now + 1.0
    for gap, i, value in steps:
        now += gap
        name = names[i]
        if ready[name] != value:
            changes[name] += 1
        ready[name] = value
        d.send(now, _ready(c, name, value))
    end = now + windows.cap
    d.until(end)
    final = [b.kubeai_model(n, ready=1 if ready[n] else 0) for n in names]
    assert c.world.catalog is not None
    rendered = render([*final, c.world.catalog], c.config)
    want_rows = {row["model_info"]["id"]: row["model_name"] for row in rendered.output["litellm"]}
    assert {k: v["model_name"] for k, v in c.world.rows.items()} == want_rows
    assert rendered_catalog(c.state).as_dict() == rendered.output["catalog"]
    assert c.world.catalog is not None and c.world.catalog["data"] == dict(rendered_catalog(c.state).data)
    for name in names:
        writes = [w for w in _writes(d.commands) if w.model_id == rid[name]]
        assert len(writes) <= changes[name]
        assert len(writes) <= (end - start) / windows.settle + 1


@settings(max_examples=200, deadline=None)
@given(_flaps())
def test_any_flaps_end_where_render_does_with_few_writes(flaps):
    models, steps, settle, cap = flaps
    env = {"CATALOG_LITELLM_SETTLE_SECONDS": str(settle), "CATALOG_LITELLM_SETTLE_CAP_SECONDS": str(cap)}
    check_flaps(models, steps, env)


@settings(max_examples=30, deadline=None)
@given(_flaps())
def test_replay_of_the_same_flaps_decides_the_same(flaps):
    models, steps, settle, cap = flaps
    names = [f"m{i}" for i in range(models)]
    env = {"CATALOG_LITELLM_SETTLE_SECONDS": str(settle), "CATALOG_LITELLM_SETTLE_CAP_SECONDS": str(cap)}
    runs = []
    for _ in range(2):
        c, d = _started(names, **env)
        now = c.state.now + 1.0
        for gap, i, value in steps:
            now += gap
            d.send(now, _ready(c, names[i], value))
        d.until(now + cap)
        runs.append(([x.id for x in d.commands], c.state))
    assert runs[0] == runs[1]


def test_settings_are_read_checked_and_recorded():
    cfg = CatalogConfig.from_env(
        {"CATALOG_LITELLM_SETTLE_SECONDS": "1.5", "CATALOG_LITELLM_SETTLE_CAP_SECONDS": "12"}
    )
    assert isinstance(cfg, CatalogConfig)
    assert (cfg.litellm_settle_seconds, cfg.litellm_settle_cap_seconds, cfg.rollout_settle_seconds) == (
        1.5,
        12.0,
        5.0,
    )
    assert CatalogConfig.from_env(cfg.as_env()) == cfg  # the event log header replays the same
    for env in (
        {"CATALOG_LITELLM_SETTLE_SECONDS": "-1"},
        {"CATALOG_LITELLM_SETTLE_SECONDS": "nan"},
        {"CATALOG_ROLLOUT_SETTLE_SECONDS": "soon"},
        {"CATALOG_LITELLM_SETTLE_SECONDS": "5", "CATALOG_LITELLM_SETTLE_CAP_SECONDS": "4"},
    ):
        assert not isinstance(CatalogConfig.from_env(env), CatalogConfig), env


def test_a_workload_is_rolled_at_most_once_per_window():
    c = Cluster()
    c.start(b.kubeai_model("llama"), b.kubeai_model("qwen"), *_consumers())
    d = Driver(c)
    d.until(c.now + 100.0)
    t = c.state.now + 1.0
    d.send(t, _ready(c, "qwen", False))
    d.until(t + 4.9)
    assert _rollouts(d.commands) == []  # catalog B not stable for the 5 s window yet
    d.until(t + 5.5)
    rolled = [x for x in _rollouts(d.commands) if isinstance(x, RollWorkload)]
    assert len(rolled) == 1
    at = c.state.damping.last_done[rolled[0].key]
    # someone rolls the Deployment back onto the old catalog: rolled again, but a window after the last
    d.send(at + 1.0, c.upserts(b.deployment("openclaw", labels=OPENCLAW, template_hash="old")))
    d.until(at + 4.9)
    assert len([x for x in _rollouts(d.commands) if isinstance(x, RollWorkload)]) == 1
    d.until(at + 5.0)
    assert len([x for x in _rollouts(d.commands) if isinstance(x, RollWorkload)]) == 2
