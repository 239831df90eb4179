"""Events are aggregated and bounded (issue 32, item 9): N bad items of one document were N Warning
Events, queued with the route writes. Now the items of one object with one reason are one Event that
counts them and names the first few (the adapter keeps one Kubernetes Event per object and reason, its
count raised by each repeat, as the Kubernetes event recorder does), so one input causes at most one
Event per reason code however many items it holds."""

from __future__ import annotations

from catalog_core.plan import GROUPED_MESSAGES_SHOWN
from catalog_core.reasons import Reason
from tests.core import builders as b
from tests.core.harness import Cluster

ITEMS = 5000


def _flood(suffix: str = "") -> list[dict[str, object]]:
    half = ITEMS // 2
    no_model = [{"name": f"missing-{i}{suffix}"} for i in range(half)]
    borrowed = [
        {
            "name": f"borrowed-{i}{suffix}",
            "model": "openai/x",
            "apiKeySecretRef": {"name": "nope", "key": "k"},
        }
        for i in range(half)
    ]
    return [*no_model, *borrowed]


def test_five_thousand_bad_items_of_one_document_make_one_event_per_reason() -> None:
    c = Cluster()
    c.start(b.external_configmap(_flood()), b.kubeai_model("llama"))
    assert len(c.all_records()) == ITEMS + 1
    # (5,000 records no longer fit in the catalog ConfigMap: CatalogTooLarge is announced on it, once.)
    events = [e for e in c.world.events if e.involved.name == "ai-external-models"]
    assert sorted(e.reason for e in events) == [Reason.MISSING_FIELD.value, Reason.SECRET_NOT_ALLOWED.value]
    for event in events:
        assert event.message.startswith(f"{ITEMS // 2} items: ")
        assert event.message.endswith(f" (and {ITEMS // 2 - GROUPED_MESSAGES_SHOWN} more)")
        assert len(event.message) < 1024  # what an Event holds: the first items are named, the rest counted
    assert "ai-appliance-kubeai-llama" in c.world.rows  # the good model is routed all the same


def test_an_edit_of_every_bad_item_is_again_one_event_per_reason() -> None:
    c = Cluster()
    c.start(b.external_configmap(_flood()))
    before = len(c.world.events)
    c.apply(b.external_configmap(_flood("-renamed")))
    new = c.world.events[before:]
    assert sorted(e.reason for e in new) == [Reason.MISSING_FIELD.value, Reason.SECRET_NOT_ALLOWED.value]


def test_one_item_alone_is_announced_as_it_always_was() -> None:
    c = Cluster()
    c.start(b.external_configmap([{"name": "alone"}]))
    [event] = c.world.events
    assert event.message == "alone: litellm.model (or model) is required"
