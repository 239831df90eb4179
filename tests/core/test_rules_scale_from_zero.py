"""KubeAI Models that scale from zero (behaviour §1.1): published with no ready replica, the same claim
whether 0 or N replicas are ready (so flapping writes nothing), reported when a start outlasts its
deadline, and the rule of ready Models kept for those that cannot scale from zero or when it is off."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core.commands import EmitKubernetesEvent
from catalog_core.config import CatalogConfig
from catalog_core.events import Ticked
from catalog_core.gates import ALL_GATES, Gate
from catalog_core.plan import next_deadline
from tests.core import builders as b
from tests.core.harness import Cluster

DEADLINE = CatalogConfig().kubeai_start_deadline_seconds
OPENCLAW = {"app.kubernetes.io/instance": "openclaw", "app.kubernetes.io/name": "openclaw"}


def cold(name: str = "gemma", *, ready: int = 0, pods: int = 0, **extra: Any) -> dict[str, Any]:
    """A Model KubeAI scales from zero (``minReplicas: 0``), with ``pods`` pods of which ``ready`` ready."""
    extra.setdefault("min_replicas", 0)
    return b.kubeai_model(name, ready=ready, pods=pods, **extra)


def consumers() -> list[dict[str, Any]]:
    """A consumer Deployment with a pod, an ownerless consumer pod and an AgentTemplate: what a catalog
    change would roll or patch."""
    return [
        b.deployment("openclaw", labels=OPENCLAW),
        b.replicaset("openclaw-abc", "openclaw"),
        b.pod("openclaw-abc-1", labels=OPENCLAW, owner=("ReplicaSet", "openclaw-abc")),
        b.pod("anything", labels={"app": "anything-llm"}),
        b.agent_template("litellm-default"),
    ]


def downstream(c: Cluster) -> list[str]:
    """Every write the world has seen: LiteLLM rows, the catalog, templates, rollouts, evictions, Events."""
    return [type(x).__name__ for x in c.world.writes]


def test_a_model_that_scales_from_zero_is_published_with_no_ready_replica():
    c = Cluster()
    c.start(cold("gemma"))
    row = c.world.rows["ai-appliance-kubeai-gemma"]
    assert row["litellm_params"]["api_base"] == "http://kubeai.ai.svc.cluster.local/openai/v1"
    assert row["litellm_params"]["model"] == "openai/gemma"
    assert c.model_ids() == ["gemma"]
    record = c.record("gemma")
    assert (record["state"], record["reason"], record["id"]) == (
        "published",
        "ScalesFromZero",
        "ai-appliance-kubeai-gemma",
    )
    assert "KubeAI starts one when a request arrives" in record["message"]
    assert "cold start" in record["message"]


def test_a_model_without_min_replicas_scales_from_zero_as_kubeai_reads_it():
    c = Cluster()
    c.start(cold("gemma", min_replicas=None, max_replicas=2))
    assert c.record("gemma")["reason"] == "ScalesFromZero"
    assert "ai-appliance-kubeai-gemma" in c.world.rows


def test_models_that_cannot_scale_from_zero_are_published_only_while_ready():
    c = Cluster()
    c.start(
        cold("always-on", min_replicas=1),
        cold("manual", autoscaling_disabled=True),
        cold("capped", max_replicas=0),  # KubeAI refuses it: dropped with a warning, read as not scaling
        cold("kept-up", min_replicas=1, ready=1, pods=1),
    )
    assert c.model_ids() == ["kept-up"]
    for name in ("always-on", "manual", "capped"):
        assert (c.record(name)["state"], c.record(name)["reason"]) == ("withheld", "NotReady"), name
    assert c.record("kept-up")["reason"] == "Published"
    assert c.record("capped")["warnings"][0]["field"] == "spec.maxReplicas"


def test_readiness_of_a_model_that_scales_from_zero_never_writes():
    """0 -> N -> 0 ready replicas, through starting pods: no LiteLLM write, no catalog write, no rollout,
    no template patch, no Event."""
    c = Cluster()
    c.start(cold("gemma"), b.kubeai_model("llama"), *consumers())
    data, writes = c.data, downstream(c)
    assert "RollWorkload" in writes and "PatchAgentTemplate" in writes  # the first catalog rolled them
    for ready, pods in ((0, 1), (1, 1), (3, 3), (1, 3), (0, 1), (0, 0), (0, 2), (2, 2), (0, 0)):
        assert c.apply(cold("gemma", ready=ready, pods=pods)) == [], (ready, pods)
    c.run(Ticked(c.now + DEADLINE / 2))
    assert downstream(c) == writes
    assert c.data == data


def test_a_start_that_outlasts_the_deadline_is_reported_and_keeps_its_route():
    c = Cluster()
    c.start(cold("gemma"), *consumers())
    writes, row = downstream(c), c.world.rows["ai-appliance-kubeai-gemma"]
    catalog_hash = c.catalog()["hash"]
    c.apply(cold("gemma", pods=1))  # a request arrived: KubeAI starts a pod
    started = c.state.starts["kubeai/gemma"].since
    assert next_deadline(c.state) == started + DEADLINE  # the loop wakes for it, with no event
    assert c.run(Ticked(started + DEADLINE - 1)) == []
    assert c.record("gemma")["reason"] == "ScalesFromZero"

    commands = c.run(Ticked(started + DEADLINE))
    record = c.record("gemma")
    assert (record["state"], record["reason"]) == ("error", "StartDeadlineExceeded")
    assert record["servingLastGood"] is True and record["id"] == "ai-appliance-kubeai-gemma"
    assert "starting for more than 600 s and none is ready" in record["message"]
    (event,) = [x for x in commands if isinstance(x, EmitKubernetesEvent)]
    assert (event.involved.kind, event.involved.name, event.reason) == (
        "Model",
        "gemma",
        "StartDeadlineExceeded",
    )
    # reported, not withdrawn: the row is untouched, the entry stays, the hash (routes.json is outside it) too
    assert c.world.rows["ai-appliance-kubeai-gemma"] == row
    assert c.model_ids() == ["gemma"] and c.catalog()["hash"] == catalog_hash
    new = [w for w in downstream(c)[len(writes) :] if w != "EmitKubernetesEvent"]
    assert new == ["WriteCatalog"]  # routes.json says so; nobody is rolled, no LiteLLM write
    assert c.run(Ticked(started + 2 * DEADLINE)) == []  # reported once

    c.apply(cold("gemma", ready=1, pods=1))  # it started after all
    assert c.record("gemma")["reason"] == "ScalesFromZero"
    assert "kubeai/gemma" not in c.state.starts and next_deadline(c.state) is None


def test_scaling_back_to_zero_ends_the_report_and_a_new_start_gets_a_new_deadline():
    c = Cluster()
    c.start(cold("gemma", pods=1))
    since = c.state.starts["kubeai/gemma"].since
    c.run(Ticked(since + DEADLINE))
    assert c.record("gemma")["reason"] == "StartDeadlineExceeded"
    c.apply(cold("gemma", pods=0))  # KubeAI gave up and scaled it to zero: nothing is starting
    assert c.record("gemma")["reason"] == "ScalesFromZero"
    c.apply(cold("gemma", pods=1))
    again = c.state.starts["kubeai/gemma"]
    assert not again.overdue and again.since > since
    c.run(Ticked(again.since + DEADLINE - 1))
    assert c.record("gemma")["reason"] == "ScalesFromZero"


def test_the_deadline_is_a_setting():
    c = Cluster(CATALOG_KUBEAI_START_DEADLINE_SECONDS="30")
    c.start(cold("gemma", pods=1))
    since = c.state.starts["kubeai/gemma"].since
    c.run(Ticked(since + 30))
    assert c.record("gemma")["reason"] == "StartDeadlineExceeded"
    assert "more than 30 s" in c.record("gemma")["message"]


def test_turned_off_every_model_is_published_only_while_ready():
    c = Cluster(CATALOG_KUBEAI_SCALE_FROM_ZERO="false")
    c.start(cold("gemma", pods=1), cold("warm", ready=1, pods=1))
    assert c.model_ids() == ["warm"]
    assert c.record("gemma")["reason"] == "NotReady"
    assert c.record("warm")["reason"] == "Published"
    assert c.state.starts == type(c.state.starts)()  # no start is watched
    c.apply(cold("warm"))
    assert c.model_ids() == []


def test_a_log_planned_without_the_gate_publishes_every_model_only_while_ready():
    """A replay of a log recorded before the rule (its header without ``scale-from-zero``) plans as that
    run did, whatever the setting says: no cold route, no start watched, no deadline."""
    c = Cluster(CatalogConfig(gates=ALL_GATES - {Gate.SCALE_FROM_ZERO}))
    assert c.config.kubeai_scale_from_zero
    c.start(cold("gemma", pods=1), cold("warm", ready=1, pods=1))
    assert c.model_ids() == ["warm"]
    assert c.record("gemma")["reason"] == "NotReady"
    assert c.record("warm")["reason"] == "Published"
    assert c.state.starts == type(c.state.starts)() and next_deadline(c.state) is None
    c.run(Ticked(c.state.now + DEADLINE + 1))
    assert c.record("gemma")["reason"] == "NotReady"
    c.apply(cold("warm"))
    assert c.model_ids() == []


def test_a_model_that_stops_scaling_from_zero_is_withdrawn_while_not_ready():
    c = Cluster()
    c.start(cold("gemma"))
    assert c.model_ids() == ["gemma"]
    c.apply(cold("gemma", min_replicas=1))  # someone wants it always on: the ready rule applies
    assert c.model_ids() == [] and "ai-appliance-kubeai-gemma" not in c.world.rows
    assert c.record("gemma")["reason"] == "NotReady"


def test_a_local_activation_with_min_replicas_zero_reaches_litellm_through_its_kubeai_model():
    """The activation claims nothing itself; the KubeAI Model its operator creates (minReplicas copied
    from the activation) is published with no ready replica."""
    activation = b.activation("qwen", kind="local", engine="vllm", model_type="chat")
    activation["spec"]["minReplicas"] = 0
    model = cold("qwen", min_replicas=0)
    model["metadata"]["labels"] = {"appliance.magicstick.dev/modelactivation": "qwen"}
    c = Cluster()
    c.start(activation, model)
    assert c.world.rows["ai-appliance-kubeai-qwen"]["model_name"] == "qwen"
    assert c.entry("qwen")["source"] == "kubeai"
    assert [(r["source"], r["reason"]) for r in c.routes()] == [("kubeai", "ScalesFromZero")]


def test_freetoken_runtimes_are_unchanged():
    c = Cluster()
    c.start(
        b.activation("phi", kind="local", model_type="chat"),
        b.freetoken_deployment("phi-rt", activation_name="phi", ready=False),
        b.service("phi-rt"),
    )
    assert c.record("phi")["reason"] == "NotReady"
    assert c.model_ids() == []


# Observations of one Model's replicas over time: (ready, pods, seconds since the previous one).
replica_steps = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 3), st.floats(0.0, DEADLINE / 4)), min_size=1, max_size=12
)


@settings(max_examples=40, deadline=None)
@given(steps=replica_steps)
def test_any_readiness_history_shorter_than_the_deadline_writes_nothing(steps):
    """Whatever the ready and pod counts do, no start lasting less than the deadline writes anything
    downstream, and the state ends as a fresh start on the last observation would have it."""
    c = Cluster()
    c.start(cold("gemma"), b.kubeai_model("llama"), *consumers())
    writes, data, planned = downstream(c), c.data, len(c.commands)
    starting_since: float | None = None
    for ready, pods, wait in steps:
        now = c.now + wait
        starting = pods > 0 and ready == 0
        if starting and starting_since is not None and now - starting_since >= DEADLINE - 1:
            break  # that start would outlast the deadline: reported, tested above
        c.run(Ticked(now), *c.upserts(cold("gemma", ready=ready, pods=pods)))
        starting_since = (starting_since if starting_since is not None else c.state.now) if starting else None
    assert c.commands[planned:] == []  # nothing planned at all: no write, rollout, patch or Event
    assert downstream(c) == writes
    assert c.data == data


def test_the_settings_are_checked_and_read_back():
    from catalog_core.config import ConfigError

    for env in (
        {"CATALOG_KUBEAI_SCALE_FROM_ZERO": "maybe"},
        {"CATALOG_KUBEAI_START_DEADLINE_SECONDS": "0"},
        {"CATALOG_KUBEAI_START_DEADLINE_SECONDS": "soon"},
        {"CATALOG_KUBEAI_START_DEADLINE_SECONDS": "90000"},
    ):
        assert isinstance(CatalogConfig.from_env(env), ConfigError), env
    config = CatalogConfig.from_env(
        {"CATALOG_KUBEAI_SCALE_FROM_ZERO": "off", "CATALOG_KUBEAI_START_DEADLINE_SECONDS": "1800"}
    )
    assert isinstance(config, CatalogConfig)
    assert (config.kubeai_scale_from_zero, config.kubeai_start_deadline_seconds) == (False, 1800.0)
    assert CatalogConfig.from_env(config.as_env()) == config  # the event log header replays the same
    assert CatalogConfig().kubeai_scale_from_zero is True  # on by default
