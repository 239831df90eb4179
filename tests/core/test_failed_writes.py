"""A failed write is neither final nor silent (issue 33, item 2; issue 32, item 11).

The executors answer what the target can mend without a new command (a 403, a 409, a 422, a 5xx, a
timeout, an immutable ConfigMap, LiteLLM refusing its key) with ``retry`` and a reason code; the core
retries on the executor's backoff, forever, retries at once when the target changes, and reports a write
that failed twice in a row where the operator looks: the routes.json records of a LiteLLM row's items, a
Warning Event on any other target (and a Normal ``WriteRecovered`` one when it is over), and
``control.failing``, which ``model_catalog_failing_writes`` counts.
"""

from __future__ import annotations

from catalog_core.commands import Command, EmitKubernetesEvent, PatchAgentTemplate, WriteCatalog
from catalog_core.events import ObjectDeleted, SourceKind, Ticked
from catalog_core.fold import step
from catalog_core.plan import next_deadline
from catalog_core.redact import redact_for_source
from catalog_core.simulate import SimulatedWorld
from tests.core import builders as b
from tests.core.harness import Cluster, RefusingWorld, when_due

TEMPLATE_KEY = "agenttemplate/ai/litellm-default"
CATALOG_KEY = "catalog/ai/ai-model-catalog"
FORBIDDEN = (
    "forbidden: patch agenttemplates/litellm-default in ai: HTTP 403 Forbidden: "
    'agenttemplates.kubeopencode.io "litellm-default" is forbidden: User '
    '"system:serviceaccount:ai:ai-model-catalog-controller" cannot patch'
)


def _cluster() -> tuple[Cluster, RefusingWorld]:
    c = Cluster()
    world = RefusingWorld()
    c.world = world
    return c, world


def _events(world: SimulatedWorld, reason: str) -> list[EmitKubernetesEvent]:
    return [e for e in world.events if e.reason == reason]


def test_a_forbidden_template_patch_is_announced_retried_and_recovers_without_a_restart() -> None:
    c, world = _cluster()
    world.refuse["agenttemplate/"] = ("Forbidden", FORBIDDEN)
    c.start(b.agent_template("litellm-default"), b.kubeai_model("llama"))
    assert [type(x) for x in world.refused] == [PatchAgentTemplate]
    assert not _events(world, "Forbidden")  # one failed attempt: logged, not yet announced
    when_due(c)
    assert len(world.refused) == 2
    [warning] = _events(world, "Forbidden")
    assert (warning.involved.kind, warning.involved.name, warning.event_type) == (
        "AgentTemplate",
        "litellm-default",
        "Warning",
    )
    assert warning.involved.uid == "uid-ai-litellm-default"
    assert warning.message == FORBIDDEN + " (retried with backoff until it succeeds)"
    failure = c.state.control.failing[TEMPLATE_KEY]
    assert (failure.kind, failure.reason.value, failure.attempts, failure.reported) == (
        "PatchAgentTemplate",
        "Forbidden",
        2,
        True,
    )
    for _ in range(3):  # more attempts fail the same way: no more Events, still retried
        when_due(c)
    assert len(world.refused) == 5 and len(_events(world, "Forbidden")) == 1
    # The Role is fixed: the next retry patches, the failure is over, and a Normal Event says so.
    del world.refuse["agenttemplate/"]
    when_due(c)
    assert "llama" in world.templates["litellm-default"]["spec"]["config"]["provider"]["litellm"]["models"]
    assert TEMPLATE_KEY not in c.state.control.failing and not c.state.control.retries
    [recovered] = _events(world, "WriteRecovered")
    assert (recovered.involved.name, recovered.event_type) == ("litellm-default", "Normal")
    assert next_deadline(c.state) is None  # nothing left to retry


def test_one_failed_attempt_that_the_next_one_mends_is_not_announced() -> None:
    c, world = _cluster()
    world.refuse["agenttemplate/"] = ("WriteRejected", "patch agenttemplates/litellm-default in ai: HTTP 409")
    c.start(b.agent_template("litellm-default"), b.kubeai_model("llama"))
    del world.refuse["agenttemplate/"]
    when_due(c)
    assert len(world.refused) == 1 and "llama" in str(world.templates["litellm-default"])
    assert not world.events and not c.state.control.failing


def test_the_same_failure_after_a_recovery_is_announced_again() -> None:
    c, world = _cluster()
    world.refuse["agenttemplate/"] = ("Forbidden", FORBIDDEN)
    c.start(b.agent_template("litellm-default"), b.kubeai_model("llama"))
    when_due(c)
    del world.refuse["agenttemplate/"]
    when_due(c)
    world.refuse["agenttemplate/"] = ("Forbidden", FORBIDDEN)
    c.apply(b.kubeai_model("qwen"))
    when_due(c)
    reasons = [e.reason for e in world.events if e.involved.kind == "AgentTemplate"]
    assert reasons == ["Forbidden", "WriteRecovered", "Forbidden"]


def test_a_write_retried_at_its_deadline_leaves_no_deadline_in_the_past_while_it_runs() -> None:
    """The loop sleeps until ``next_deadline``: a retry still recorded while its command runs would be a
    deadline in the past, and the loop would tick without pause until the write answers."""
    c, world = _cluster()
    world.refuse["agenttemplate/"] = ("Forbidden", FORBIDDEN)
    c.start(b.agent_template("litellm-default"), b.kubeai_model("llama"))
    due = next_deadline(c.state)
    assert due is not None
    result = step(c.state, Ticked(due))
    assert [type(x) for x in result.commands] == [PatchAgentTemplate]  # the retry, now in flight
    after = next_deadline(result.state)
    assert after is None or after > due


def test_an_immutable_catalog_is_announced_and_written_as_soon_as_it_is_deleted() -> None:
    """Issue 32, item 11: the writer reads an immutable catalog ConfigMap back and answers
    ``CatalogImmutable``; the core says so on the ConfigMap and, once the watch sees the forgery deleted,
    writes at once instead of waiting out a backoff that may have grown to minutes."""
    c, world = _cluster()
    mend = "update configmaps/ai-model-catalog in ai: the ConfigMap is immutable (immutable: true), ..."
    world.refuse["catalog/"] = ("CatalogImmutable", mend)
    c.start(b.kubeai_model("llama"))
    when_due(c)
    [warning] = _events(world, "CatalogImmutable")
    assert (warning.involved.kind, warning.involved.name) == ("ConfigMap", "ai-model-catalog")
    assert c.state.control.failing[CATALOG_KEY].reason.value == "CatalogImmutable"
    due = next_deadline(c.state)
    assert due is not None
    del world.refuse["catalog/"]
    forged = redact_for_source(SourceKind.CATALOG_CONFIGMAP, b.catalog_configmap()).obj
    written = c.run(ObjectDeleted(SourceKind.CATALOG_CONFIGMAP, forged))
    assert any(isinstance(x, WriteCatalog) for x in written)
    assert c.state.now < due  # at once, not at the backoff's end
    assert world.catalog is not None and "llama" in world.catalog["data"]["catalog.json"]
    assert CATALOG_KEY not in c.state.control.failing
    assert [e.reason for e in world.events if e.involved.kind == "ConfigMap"] == [
        "CatalogImmutable",
        "WriteRecovered",
    ]


def test_a_litellm_write_refused_for_its_key_is_in_routes_json_and_on_its_item_until_it_succeeds() -> None:
    c, world = _cluster()
    refused = (
        "create: HTTP 403: User does not have permission to make this model call. Your role=internal_user."
    )
    world.refuse["litellm/"] = ("LiteLLMUnauthorized", refused)
    c.start(b.kubeai_model("llama"))
    when_due(c)
    record = next(r for r in c.all_records() if r["name"] == "llama")
    assert (record["state"], record["reason"]) == ("error", "LiteLLMUnauthorized")
    assert record["message"] == refused + " (retried with backoff until it succeeds)"
    assert c.record("llama")["reason"] == "LiteLLMUnauthorized"  # in the written catalog's routes.json
    [warning] = _events(world, "LiteLLMUnauthorized")
    assert (warning.involved.kind, warning.involved.name) == ("Model", "llama")
    failure = c.state.control.failing["litellm/ai-appliance-kubeai-llama"]
    assert (failure.kind, failure.reported) == ("CreateLiteLLMModel", True)
    del world.refuse["litellm/"]
    when_due(c)
    assert (c.record("llama")["state"], c.record("llama")["reason"]) == ("published", "Published")
    assert not c.state.control.failing


def test_an_event_whose_write_failed_is_sent_again_when_its_backoff_ends() -> None:
    """Nothing plans an Event again (it is announced once per problem): a failed one is kept with its
    retry and sent again as it was, until it is written."""
    c, world = _cluster()
    world.refuse["event/"] = ("Forbidden", "forbidden: create events in ai: HTTP 403 Forbidden")
    c.start(
        b.external_configmap(
            [{"name": "bad", "model": "x/y", "apiKeySecretRef": {"name": "nope", "key": "k"}}]
        )
    )
    [lost] = world.refused
    assert isinstance(lost, EmitKubernetesEvent) and lost.reason == "SecretNotAllowed"
    when_due(c)
    assert world.refused == [lost, lost] and not world.events
    assert c.state.control.failing[lost.key].kind == "EmitKubernetesEvent"  # the metric's only witness
    del world.refuse["event/"]
    when_due(c)
    assert world.events == [lost]
    assert not c.state.control.failing and next_deadline(c.state) is None


def test_a_replica_that_stops_leading_reports_no_failing_write() -> None:
    from catalog_core.events import LeadershipChanged

    c, world = _cluster()
    world.refuse["agenttemplate/"] = ("Forbidden", FORBIDDEN)
    c.start(b.agent_template("litellm-default"), b.kubeai_model("llama"))
    when_due(c)
    assert c.state.control.failing
    c.feed(LeadershipChanged(False))
    assert not c.state.control.failing and not c.state.control.retries


def test_a_due_retry_the_plan_cannot_act_on_yet_leaves_no_deadline_in_the_past() -> None:
    """The catalog's retry falls due while a LiteLLM write is in flight (the catalog waits for it): the
    next deadline is a later moment, not the past one, or the loop would tick without pause until the
    LiteLLM answer arrives (an outage: its whole timeout)."""
    c, world = _cluster()
    world.refuse["catalog/"] = ("Forbidden", "forbidden: update configmaps/ai-model-catalog in ai: HTTP 403")
    c.start(b.kubeai_model("llama"))
    due = next_deadline(c.state)
    assert due is not None and CATALOG_KEY in c.state.control.retries
    state = c.state
    for event in c.upserts(b.kubeai_model("qwen")):
        state = step(state, event).state
    commands: list[Command] = []
    for moment in (due, due + 0.05):  # the burst probe of the new row passes: its create goes out
        result = step(state, Ticked(moment))
        state, commands = result.state, [*commands, *result.commands]
    assert any(x.key == "litellm/ai-appliance-kubeai-qwen" for x in commands)
    assert not any(isinstance(x, WriteCatalog) for x in commands)  # it waits for the LiteLLM answer
    after = next_deadline(state)
    assert after is None or after > state.now


def test_an_input_change_retries_at_once_whatever_the_backoff() -> None:
    """A changed desired value is a new command: it goes at once, not when the failed one's backoff ends."""
    c, world = _cluster()
    world.refuse["agenttemplate/"] = ("Forbidden", FORBIDDEN)
    c.start(b.agent_template("litellm-default"), b.kubeai_model("llama"))
    due = next_deadline(c.state)
    assert due is not None
    del world.refuse["agenttemplate/"]
    c.apply(b.kubeai_model("qwen"))  # a new chat model: a new patch
    assert c.state.now < due
    models = world.templates["litellm-default"]["spec"]["config"]["provider"]["litellm"]["models"]
    assert {"llama", "qwen"} <= set(models)
