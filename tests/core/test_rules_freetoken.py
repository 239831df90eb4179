"""FreeToken runtimes (behaviour §1.4): ready gate, health gate, trusted endpoints."""

from catalog_core.commands import ProbeRuntime
from catalog_core.events import RuntimeProbed, Ticked
from tests.core import builders as b
from tests.core.harness import Cluster

URL = "http://phi-rt.ai.svc.cluster.local:8080/health"


def _start(c: Cluster, healthy: bool = True, **kw):
    if healthy:
        c.world.healthy = frozenset({"phi-rt"})
    return c.start(
        b.activation("phi", kind="local", model_type="chat"),
        b.freetoken_deployment("phi-rt", activation_name="phi", **kw),
        b.service("phi-rt"),
    )


def test_ready_and_healthy_runtime_is_published_with_order_0():
    c = Cluster()
    commands = _start(c)
    probe = next(x for x in commands if isinstance(x, ProbeRuntime))
    assert probe.url == URL
    body = c.world.rows["ai-appliance-freetoken-phi"]
    assert body["model_name"] == "phi"
    assert body["litellm_params"] == {
        "model": "openai/phi",
        "api_base": "http://phi-rt.ai.svc.cluster.local:8080/v1",
        "order": 0,
    }
    assert body["model_info"]["ai_appliance_source"] == "freetoken"
    assert body["model_info"]["ai_appliance_scheduler"]["engine"] == "freetoken"
    assert body["model_info"]["ai_appliance_scheduler"]["computeTarget"] == "nvidia-gpu"
    assert c.record("phi")["state"] == "published"


def test_not_published_before_a_successful_probe():
    c = Cluster()
    _start(c, healthy=False)
    assert c.world.rows == {}
    assert c.record("phi")["reason"] == "HealthCheckPending"


def test_withdrawn_after_two_consecutive_failures_not_one():
    c = Cluster()
    _start(c)
    c.world.healthy = frozenset()
    c.run(Ticked(c.now + 15))  # first failure: still published
    assert "ai-appliance-freetoken-phi" in c.world.rows
    c.run(Ticked(c.now + 15))  # second failure: withdrawn
    assert "ai-appliance-freetoken-phi" not in c.world.rows
    assert c.record("phi")["reason"] == "HealthCheckFailed"
    c.world.healthy = frozenset({"phi-rt"})
    c.run(Ticked(c.now + 15))  # one success publishes again
    assert "ai-appliance-freetoken-phi" in c.world.rows


def test_probes_follow_the_interval():
    c = Cluster(CATALOG_RUNTIME_HEALTH_SECONDS="30")
    _start(c)
    assert c.run(Ticked(c.now + 10)) == []
    assert [type(x) for x in c.run(Ticked(c.now + 30))] == [ProbeRuntime]


def test_ready_gate_failure_withdraws_at_once_and_needs_a_fresh_success():
    c = Cluster()
    _start(c)
    c.apply(b.freetoken_deployment("phi-rt", activation_name="phi", ready=False))
    assert c.world.rows == {}
    assert c.record("phi")["reason"] == "NotReady"
    c.world.healthy = frozenset()
    c.apply(b.freetoken_deployment("phi-rt", activation_name="phi"))
    assert c.world.rows == {}  # ready again, but no success since
    assert c.record("phi")["reason"] == "HealthCheckPending"


def test_stale_probe_results_are_ignored():
    c = Cluster()
    _start(c)
    c.run(
        RuntimeProbed("phi-rt", "http://elsewhere/health", False, "x"),
        RuntimeProbed("phi-rt", "http://elsewhere/health", False, "x"),
    )
    assert "ai-appliance-freetoken-phi" in c.world.rows


def test_endpoint_annotation_must_be_a_service_in_the_namespace():
    c = Cluster()
    c.world.healthy = frozenset({"rt"})
    c.start(
        b.activation("a", kind="local"),
        b.activation("bad", kind="local"),
        b.activation("far", kind="local"),
        b.freetoken_deployment("rt", activation_name="a", endpoint="http://svc-a.ai.svc:9000/v1"),
        b.freetoken_deployment("rt-bad", activation_name="bad", endpoint="http://169.254.169.254/v1"),
        b.freetoken_deployment(
            "rt-far", activation_name="far", endpoint="http://svc-a.other.svc.cluster.local/v1"
        ),
        b.service("svc-a"),
    )
    assert (
        c.world.rows["ai-appliance-freetoken-a"]["litellm_params"]["api_base"]
        == "http://svc-a.ai.svc:9000/v1"
    )
    assert c.record("bad")["reason"] == "UntrustedEndpoint"
    assert c.record("far")["reason"] == "UntrustedEndpoint"
    probes = [x.url for x in c.commands if isinstance(x, ProbeRuntime)]
    assert probes == ["http://svc-a.ai.svc:9000/health"]  # never an arbitrary host


def test_runtime_needs_an_active_activation_and_an_endpoint():
    c = Cluster()
    c.start(
        b.freetoken_deployment("orphan", activation_name="missing"),
        b.freetoken_deployment("nolabel", activation_name=None),
        b.activation("off", kind="local", enabled=False),
        b.freetoken_deployment("rt-off", activation_name="off"),
        b.activation("nosvc", kind="local"),
        b.freetoken_deployment("rt-nosvc", activation_name="nosvc"),
    )
    assert c.record("missing")["reason"] == "ActivationNotFound"
    assert c.record("nolabel")["reason"] == "ActivationNotFound"
    assert c.record("off")["reason"] == "ActivationDisabled"
    assert c.record("nosvc")["reason"] == "EndpointNotFound"
    assert c.world.rows == {}
