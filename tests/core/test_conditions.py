"""The conditions that stop or limit publishing, read from the state (what the leader reports on its Lease
for ``model-catalog status``): each one appears when the state holds it and goes when it clears."""

from __future__ import annotations

from catalog_core.conditions import CONSEQUENCE, Condition, ConditionType, conditions
from catalog_core.events import (
    LiteLLMUnreachable,
    SourceKind,
    SourceListed,
    SourceUnavailable,
    Unavailability,
)
from catalog_core.fold import initial_state
from catalog_core.registry import CATALOG_KINDS
from tests.core import builders as b
from tests.core.harness import Cluster, RefusingWorld, when_due


def _types(c: Cluster) -> list[tuple[str, str]]:
    return [(x.type.value, x.subject) for x in conditions(c.state)]


def test_every_condition_type_says_what_it_means_for_publishing() -> None:
    assert set(CONSEQUENCE) == set(ConditionType)
    assert all(text.strip() for text in CONSEQUENCE.values())


def test_before_the_first_sync_every_source_and_litellm_are_waited_for() -> None:
    c = Cluster()
    found = conditions(initial_state(c.config))
    waited = {x.subject for x in found if x.type is ConditionType.WAITING_FOR_SOURCES}
    assert waited == {str(k) for k in CATALOG_KINDS if k is not SourceKind.SECRETS} | {"litellm"}
    assert {x.type for x in found} == {ConditionType.WAITING_FOR_SOURCES}


def test_a_converged_catalog_has_no_condition() -> None:
    c = Cluster()
    c.start(b.external_configmap([{"name": "gpt", "model": "openai/gpt"}]))
    assert conditions(c.state) == ()


def test_litellm_unreachable_is_reported_until_it_answers_again() -> None:
    c = Cluster()
    c.start()
    c.feed(LiteLLMUnreachable("unreachable", "connect: GET /model/info: connection refused"))
    assert conditions(c.state) == (
        Condition(
            ConditionType.LITELLM_UNREACHABLE,
            "litellm",
            "unreachable: connect: GET /model/info: connection refused",
        ),
    )
    c.rows_changed()  # a /model/info answer
    assert conditions(c.state) == ()


def test_a_missing_crd_a_forbidden_and_a_failing_source_are_each_named() -> None:
    c = Cluster()
    c.start()
    c.feed(
        SourceUnavailable(
            SourceKind.KUBEAI_MODELS,
            Unavailability.NOT_INSTALLED,
            "CustomResourceDefinition models.kubeai.org/v1 is not installed",
        ),
        SourceUnavailable(SourceKind.EXTERNAL_MODELS, Unavailability.FORBIDDEN, "forbidden: list configmaps"),
        SourceUnavailable(SourceKind.PODS, Unavailability.FAILING, "HTTP 500 InternalError"),
    )
    assert _types(c) == [
        ("SourceForbidden", "external-models"),
        ("CRDNotInstalled", "kubeai-models"),
        ("SourceFailing", "pods"),
    ]
    assert "models.kubeai.org/v1" in conditions(c.state)[1].message


def test_a_source_listed_again_clears_its_condition() -> None:
    c = Cluster()
    c.start()
    c.feed(
        SourceUnavailable(SourceKind.EXTERNAL_MODELS, Unavailability.FORBIDDEN, "forbidden: list configmaps")
    )
    assert _types(c) == [("SourceForbidden", "external-models")]
    c.apply(b.external_configmap([{"name": "gpt", "model": "openai/gpt"}]))  # an event is not a listing
    assert _types(c) == [("SourceForbidden", "external-models")]
    c.run(SourceListed(SourceKind.EXTERNAL_MODELS, ()))
    assert _types(c) == []


def test_a_catalog_too_large_for_a_configmap_is_reported_until_it_fits() -> None:
    c = Cluster()
    c.start(b.external_configmap([{"name": "small", "model": "openai/small"}]))
    many = [{"name": f"many-{i}", "model": f"openai/many-{i}"} for i in range(900)]
    c.apply(b.external_configmap(many))
    assert _types(c) == [("CatalogTooLarge", "catalog")]
    c.apply(b.external_configmap(many[:10]))
    assert _types(c) == []


def test_a_write_that_keeps_failing_is_a_condition_until_it_goes_through() -> None:
    """Issue 33, item 2: a write failed twice in a row is reported (one condition per object written;
    LiteLLM's rows and Events each counted in one), and goes away once the write succeeds."""
    c = Cluster()
    world = RefusingWorld()
    c.world = world
    forbidden = "forbidden: patch agenttemplates/litellm-default in ai: HTTP 403 Forbidden"
    world.refuse["agenttemplate/"] = ("Forbidden", forbidden)
    world.refuse["litellm/"] = ("LiteLLMUnauthorized", "create: HTTP 403: not a proxy admin")
    c.start(b.agent_template("litellm-default"), b.kubeai_model("llama"), b.kubeai_model("qwen"))

    def failing() -> list[tuple[str, str]]:
        return [(x.subject, x.message) for x in conditions(c.state) if x.type is ConditionType.WRITE_FAILING]

    assert failing() == []  # one failed attempt is a blip
    when_due(c)
    [(subject, message)] = failing()
    assert subject == "litellm"
    assert message.startswith("2 LiteLLM rows cannot be written; the first: create: HTTP 403")
    del world.refuse["litellm/"]
    for _ in range(6):  # the rows go through, then the template is patched (and refused twice)
        when_due(c)
        if failing() and failing()[0][0] != "litellm":
            break
    assert failing() == [
        ("AgentTemplate/litellm-default", forbidden + " (retried with backoff until it succeeds)")
    ]
    del world.refuse["agenttemplate/"]
    when_due(c)
    assert conditions(c.state) == ()
