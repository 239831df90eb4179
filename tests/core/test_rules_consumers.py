"""AgentTemplates (behaviour §9, §9.1) and consumer rollouts (behaviour §9.2)."""

import json

from catalog_core.commands import EvictPod, PatchAgentTemplate, RollWorkload
from catalog_core.events import SourceKind, SourceUnavailable, Unavailability
from tests.core import builders as b
from tests.core.harness import Cluster

OPENCLAW = {"app.kubernetes.io/instance": "openclaw", "app.kubernetes.io/name": "openclaw"}
HERMES = {"app.kubernetes.io/instance": "hermes", "app.kubernetes.io/name": "hermes-agent"}


def _templates(c):
    return {n: t["spec"]["config"] for n, t in c.world.templates.items()}


# --- AgentTemplates
def test_models_replaced_exactly_and_a_chosen_model_kept():
    c = Cluster()
    c.start(
        b.kubeai_model("llama", args=["--max-model-len=20000"]),
        b.kubeai_model("qwen"),
        b.kubeai_model("embed", features=["TextEmbedding"]),
        b.agent_template(
            "litellm-default",
            models={
                "retired": {"name": "retired"},
                "qwen": {"name": "qwen", "limit": {"context": 1, "output": 1}, "x": 1},
            },
            model="litellm/qwen",
            small_model="anthropic/other",
        ),
    )
    config = _templates(c)["litellm-default"]
    assert config["provider"]["litellm"]["models"] == {
        "llama": {"name": "llama", "limit": {"context": 20000, "output": 8192}},
        "qwen": {"name": "qwen", "limit": {"context": 131072, "output": 8192}},
    }
    assert config["provider"]["litellm"]["npm"] == "@ai-sdk/openai-compatible"  # foreign keys untouched
    assert config["model"] == "litellm/qwen"  # in the catalog: kept (behaviour §9.1)
    assert config["small_model"] == "litellm/llama"  # not in the catalog: the default chat model
    patch = next(x for x in c.commands if isinstance(x, PatchAgentTemplate))
    assert patch.patch.value()["metadata"] == {"resourceVersion": "1"}  # guarded by resourceVersion
    # a removed model disappears; nothing else is rewritten
    c.apply(b.kubeai_model("qwen", ready=0))
    assert set(_templates(c)["litellm-default"]["provider"]["litellm"]["models"]) == {"llama"}
    assert _templates(c)["litellm-default"]["model"] == "litellm/llama"


def test_steady_templates_are_not_patched_again():
    c = Cluster()
    c.start(b.kubeai_model("llama"), b.agent_template("litellm-default"))
    patches = sum(isinstance(x, PatchAgentTemplate) for x in c.world.writes)
    c.apply(b.kubeai_model("other", ready=0))
    c.run()
    assert sum(isinstance(x, PatchAgentTemplate) for x in c.world.writes) == patches == 1


def test_targets_are_named_or_labelled_templates():
    c = Cluster()
    c.start(
        b.kubeai_model("llama"),
        b.agent_template("litellm-default"),
        b.agent_template("app-1", labels={"appliance.magicstick.dev/appinstance": "hermes"}),
        b.agent_template("unrelated"),
    )
    patched = {x.name for x in c.world.writes if isinstance(x, PatchAgentTemplate)}
    assert patched == {"litellm-default", "app-1"}


def test_no_chat_model_no_patch_and_missing_templates_are_fine():
    c = Cluster()
    c.start(b.kubeai_model("embed", features=["TextEmbedding"]), b.agent_template("litellm-default"))
    assert not any(isinstance(x, PatchAgentTemplate) for x in c.world.writes)
    d = Cluster()
    d.start(b.kubeai_model("llama"))
    d.run(SourceUnavailable(SourceKind.AGENT_TEMPLATES, Unavailability.NOT_INSTALLED))
    assert d.model_ids() == ["llama"]


def test_sync_can_be_disabled():
    c = Cluster(AGENT_TEMPLATE_SYNC_ENABLED="false")
    c.start(b.kubeai_model("llama"), b.agent_template("litellm-default"))
    assert not any(isinstance(x, PatchAgentTemplate) for x in c.world.writes)


def test_unexpected_shape_is_reported_not_overwritten():
    c = Cluster()
    c.start(b.kubeai_model("llama"), b.agent_template("litellm-default", config={"provider": "litellm"}))
    assert not any(isinstance(x, PatchAgentTemplate) for x in c.world.writes)
    assert any(e.reason == "UnexpectedShape" and e.involved.kind == "AgentTemplate" for e in c.world.events)


# --- rollouts
def _consumers():
    return [
        b.deployment("openclaw", labels=OPENCLAW),
        b.replicaset("openclaw-abc", "openclaw"),
        b.pod("openclaw-abc-1", labels=OPENCLAW, owner=("ReplicaSet", "openclaw-abc")),
        b.pod("openclaw-abc-2", labels=OPENCLAW, owner=("ReplicaSet", "openclaw-abc")),
        b.statefulset("hermes", labels=HERMES),
        b.pod("hermes-0", labels=HERMES, owner=("StatefulSet", "hermes")),
        b.pod("anything", labels={"app": "anything-llm"}),
        b.pod("not-a-consumer", labels={"app": "web"}, owner=("ReplicaSet", "openclaw-abc")),
    ]


def test_hash_change_rolls_owning_workloads_and_evicts_ownerless_pods():
    c = Cluster()
    c.start(b.kubeai_model("llama"), *_consumers())
    rolls = sorted((x.kind, x.name) for x in c.world.writes if isinstance(x, RollWorkload))
    assert rolls == [
        ("Deployment", "openclaw"),
        ("StatefulSet", "hermes"),
    ]  # once per workload, via the ReplicaSet
    assert c.world.evicted == ["anything"]
    current = c.catalog()["hash"]
    ann = c.world.workloads["Deployment/openclaw"]["spec"]["template"]["metadata"]["annotations"]
    assert ann["ai-appliance.io/catalog-hash"] == current
    # the rollout is written after the catalog it announces
    kinds = [type(x).__name__ for x in c.world.writes]
    assert kinds.index("WriteCatalog") < kinds.index("RollWorkload")


def test_no_rollout_without_a_hash_change():
    c = Cluster()
    c.start(b.kubeai_model("llama"), b.kubeai_model("qwen", ready=0), *_consumers())
    before = len([x for x in c.world.writes if isinstance(x, RollWorkload | EvictPod)])
    c.apply(b.external_configmap([{"name": "bad", "model": "x", "apiBase": "ftp://x"}]))  # routes.json only
    c.apply(b.kubeai_model("llama", ready=2))
    after = len([x for x in c.world.writes if isinstance(x, RollWorkload | EvictPod)])
    assert after == before
    c.apply(b.kubeai_model("qwen"))  # a real change: roll again
    assert len([x for x in c.world.writes if isinstance(x, RollWorkload)]) == 4


def test_restart_disabled():
    c = Cluster(CONSUMER_RESTART_ENABLED="false")
    c.start(b.kubeai_model("llama"), *_consumers())
    assert not any(isinstance(x, RollWorkload | EvictPod) for x in c.world.writes)


def test_pod_started_on_the_current_catalog_is_not_evicted():
    c = Cluster()
    c.start(b.kubeai_model("llama"))
    c.apply(b.pod("fresh", labels={"app": "anything-llm"}))
    assert c.world.evicted == []


def test_rollout_is_level_triggered_after_a_lost_restart():
    """behaviour §9.2: a crash between the catalog write and the rollout must not lose the restart."""
    c = Cluster()
    c.start(b.kubeai_model("llama"))
    written = c.world.catalog
    # a new controller starts: the catalog is already current, the workload still carries an old hash
    d = Cluster()
    d.start(
        b.kubeai_model("llama"),
        written,
        b.deployment("openclaw", labels=OPENCLAW, template_hash="old"),
        b.replicaset("rs", "openclaw"),
        b.pod("p", labels=OPENCLAW, owner=("ReplicaSet", "rs")),
    )
    assert not any(type(x).__name__ == "WriteCatalog" for x in d.world.writes)
    assert [(x.name, x.catalog_hash) for x in d.world.writes if isinstance(x, RollWorkload)] == [
        ("openclaw", json.loads(written["data"]["catalog.json"])["hash"])
    ]


def _upgrade(previous_data, previous_hash):
    """A cluster as the previous controller leaves it: its catalog, consumers it restarted by deleting pods
    (so their pod templates carry no catalog hash), and the same models."""
    c = Cluster()
    c.start(
        b.kubeai_model("llama"),
        b.catalog_configmap(previous_hash, ready=True, data=previous_data),
        *_consumers(),
    )
    return [x for x in c.world.writes if isinstance(x, RollWorkload | EvictPod)]


def test_upgrade_rolls_nobody_when_the_catalog_is_unchanged():
    """Issue 11: consumers the old controller started are rolled only if the catalog they read changes."""
    first = Cluster()
    first.start(b.kubeai_model("llama"))
    same = _upgrade(first.data, first.catalog()["hash"])
    assert same == []


def test_upgrade_rolls_each_consumer_once_when_the_catalog_changed():
    rolls = _upgrade({"AI_APPLIANCE_MODEL_CATALOG_READY": "true"}, "0123456789abcdef")
    assert sorted((type(x).__name__, getattr(x, "kind", "Pod"), x.name) for x in rolls) == [
        ("EvictPod", "Pod", "anything"),
        ("RollWorkload", "Deployment", "openclaw"),
        ("RollWorkload", "StatefulSet", "hermes"),
    ]


def test_a_rollout_cut_short_by_a_restart_is_finished_after_it():
    """The controller wrote its first catalog over today's and stopped before rolling: after the restart the
    catalog says which one it replaced, so consumers that never got our annotation are still rolled."""
    first = Cluster()
    first.start(b.kubeai_model("llama"))
    written = b.catalog_configmap(first.catalog()["hash"], ready=True, data=first.data)
    written["metadata"]["annotations"]["ai-appliance.io/previous-catalog-hash"] = "0123456789abcdef"
    c = Cluster()
    c.start(b.kubeai_model("llama"), written, *_consumers())
    rolled = sorted(
        (type(x).__name__, x.name) for x in c.world.writes if isinstance(x, RollWorkload | EvictPod)
    )
    assert rolled == [("EvictPod", "anything"), ("RollWorkload", "hermes"), ("RollWorkload", "openclaw")]


def test_a_consumer_started_after_the_catalog_was_written_is_not_rolled():
    c = Cluster()
    c.start(b.kubeai_model("llama"))
    c.apply(b.deployment("openclaw", labels=OPENCLAW))
    c.apply(b.replicaset("openclaw-abc", "openclaw"))
    c.apply(b.pod("openclaw-abc-1", labels=OPENCLAW, owner=("ReplicaSet", "openclaw-abc")))
    assert not [x for x in c.world.writes if isinstance(x, RollWorkload)]
    c.apply(b.kubeai_model("qwen"))  # the catalog changes: now it is rolled
    assert [x.name for x in c.world.writes if isinstance(x, RollWorkload)] == ["openclaw"]


# --- forged owners (issue 32 #4): only a verified chain to a workload that is a consumer itself is rolled
LITELLM = {"app": "litellm"}
CONSUMER = {"ai-appliance.io/model-catalog-consumer": "true"}


def _litellm_and_its_replicaset():
    return [b.deployment("litellm", labels=LITELLM), b.replicaset("litellm-6f7", "litellm")]


def _rolled(c):
    return sorted((x.kind, x.name) for x in c.world.writes if isinstance(x, RollWorkload))


def _catalog_changes(c):
    c.apply(b.kubeai_model("qwen"))


def test_a_pod_claiming_litellms_deployment_never_rolls_it():
    """A consumer-labelled pod whose ownerReferences claim Deployment/litellm (anyone who may create pods
    can write that) made the controller patch LiteLLM's pod template."""
    c = Cluster()
    c.start(b.kubeai_model("llama"), *_litellm_and_its_replicaset())
    for forged in (
        b.pod("forged-uid", labels=CONSUMER, owner=("Deployment", "litellm"), owner_uid="made-up"),
        # the true uid is readable by anyone who may get Deployments: a Deployment still never owns a pod
        b.pod("true-uid", labels=CONSUMER, owner=("Deployment", "litellm")),
    ):
        c.apply(forged)
    _catalog_changes(c)
    assert _rolled(c) == []
    assert (
        "ai-appliance.io/catalog-hash"
        not in (c.world.workloads["Deployment/litellm"]["spec"]["template"]["metadata"]["annotations"])
    )
    assert c.world.evicted == []  # a pod with a controller is not ownerless


def test_a_true_chain_to_a_workload_that_is_no_consumer_rolls_nothing():
    """Pod -> LiteLLM's own ReplicaSet -> Deployment/litellm, every uid true: the chain holds, but LiteLLM's
    pod template carries no consumer mark, so it is not a consumer and is never rolled."""
    c = Cluster()
    c.start(
        b.kubeai_model("llama"),
        *_litellm_and_its_replicaset(),
        b.pod("litellm-6f7-x", labels=CONSUMER, owner=("ReplicaSet", "litellm-6f7")),
    )
    _catalog_changes(c)
    assert _rolled(c) == []
    assert c.world.evicted == []


def test_every_link_of_the_chain_must_name_the_object_by_its_uid():
    c = Cluster()
    c.start(
        b.kubeai_model("llama"),
        # a consumer Deployment with a ReplicaSet that names it by a uid it does not have
        b.deployment("openclaw", labels=OPENCLAW),
        b.replicaset("openclaw-abc", "openclaw", deployment_uid="uid-of-another-openclaw"),
        b.pod("openclaw-abc-1", labels=OPENCLAW, owner=("ReplicaSet", "openclaw-abc")),
        # a pod naming a true ReplicaSet by a uid that is not its own
        b.deployment("anything", labels={"app": "anything-llm"}),
        b.replicaset("anything-1", "anything"),
        b.pod(
            "anything-1-a", labels={"app": "anything-llm"}, owner=("ReplicaSet", "anything-1"), owner_uid="x"
        ),
        # StatefulSet and DaemonSet owners, each named by a wrong uid
        b.statefulset("hermes", labels=HERMES),
        b.pod("hermes-0", labels=HERMES, owner=("StatefulSet", "hermes"), owner_uid="x"),
        b.daemonset("agent", labels=CONSUMER),
        b.pod("agent-x", labels=CONSUMER, owner=("DaemonSet", "agent"), owner_uid="x"),
    )
    _catalog_changes(c)
    assert _rolled(c) == []
    assert c.world.evicted == []


def test_a_verified_chain_to_a_consumer_workload_of_each_kind_is_rolled():
    c = Cluster()
    c.start(
        b.kubeai_model("llama"),
        b.deployment("openclaw", labels=OPENCLAW),
        b.replicaset("openclaw-abc", "openclaw"),
        b.pod("openclaw-abc-1", labels=OPENCLAW, owner=("ReplicaSet", "openclaw-abc")),
        b.statefulset("hermes", labels=HERMES),
        b.pod("hermes-0", labels=HERMES, owner=("StatefulSet", "hermes")),
        b.daemonset("agent", labels=CONSUMER),
        b.pod("agent-x", labels=CONSUMER, owner=("DaemonSet", "agent")),
    )
    first = _rolled(c)
    assert first == [("DaemonSet", "agent"), ("Deployment", "openclaw"), ("StatefulSet", "hermes")]
    _catalog_changes(c)
    assert _rolled(c) == sorted(first * 2)  # each rolled again onto the new catalog


def test_a_workload_marked_a_consumer_by_its_own_annotation_is_one():
    """The mark may be on the workload's pod template (what its pods carry) or on the workload itself."""
    marked = b.deployment("web")
    marked["metadata"]["annotations"] = dict(CONSUMER)
    c = Cluster()
    c.start(
        b.kubeai_model("llama"),
        marked,
        b.replicaset("web-1", "web"),
        b.pod("web-1-a", annotations=CONSUMER, owner=("ReplicaSet", "web-1")),
    )
    _catalog_changes(c)
    assert ("Deployment", "web") in _rolled(c)
