"""The fold reuses the value held for a route source's object when a watch event repeats the object it
was parsed from, resourceVersion aside (``ingest._parsed_item``). Reuse must never change the result: the
items held after any sequence of events are those a fresh state makes of each object's last event alone,
equal and of the same types (True is not 1 to a parse that checks ``type(x) is int``)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core import ingest, registry
from catalog_core.config import CatalogConfig
from catalog_core.events import ObjectDeleted, ObjectUpserted, SourceKind
from catalog_core.fold import initial_state, step
from catalog_core.sources.kubeai import KubeAIModel
from catalog_core.state import CatalogState
from tests.core.builders import activation, freetoken_deployment, kubeai_model

# Values equal in Python but not the same JSON (1, 1.0, True), so a reuse keyed by equality rather than by
# exact text would keep the wrong value.
_ODD = st.sampled_from([1, 1.0, True, 0, False, None, "1", 2, 2.0])


@st.composite
def _object(draw: st.DrawFn) -> tuple[SourceKind, dict[str, Any]]:
    n = draw(st.integers(0, 2))
    which = draw(st.sampled_from(["kubeai", "freetoken", "activation"]))
    if which == "kubeai":
        obj = kubeai_model(
            f"m{n}",
            ready=draw(_ODD),
            pods=draw(_ODD),
            min_replicas=draw(_ODD),
            args=draw(st.sampled_from([[], ["--max-model-len=4096"], ["--max-model-len=4096.0"]])),
        )
        kind = SourceKind.KUBEAI_MODELS
    elif which == "freetoken":
        obj = freetoken_deployment(f"rt{n}", activation_name=f"a{n}", ready=draw(st.booleans()))
        obj["metadata"]["generation"] = draw(_ODD)
        kind = SourceKind.FREETOKEN_DEPLOYMENTS
    else:
        obj = activation(f"a{n}", enabled=draw(_ODD), external={"model": "gpt-4o", "provider": "openai"})
        kind = SourceKind.MODEL_ACTIVATIONS
    if draw(st.booleans()):
        obj["metadata"]["resourceVersion"] = str(draw(st.integers(1, 3)))
    return kind, obj


def _items(state: CatalogState) -> dict[tuple[SourceKind, str], str]:
    out = {}
    for spec in registry.SPECS:
        if spec.parse is not None:
            for name, value in state.observed.stores.get(spec.kind, {}).items():
                out[(spec.kind, name)] = repr(value)
    return out


@settings(max_examples=300)
@given(st.lists(st.tuples(_object(), st.booleans()), min_size=1, max_size=12))
def test_items_held_after_any_events_are_those_of_each_objects_last_event(
    events: list[tuple[tuple[SourceKind, dict[str, Any]], bool]],
) -> None:
    config = CatalogConfig()
    state = initial_state(config)
    last: dict[tuple[SourceKind, str], dict[str, Any] | None] = {}
    for (kind, obj), deleted in events:
        event = ObjectDeleted(kind, obj) if deleted else ObjectUpserted(kind, obj)
        state = step(state, event).state
        last[(kind, obj["metadata"]["name"])] = None if deleted else obj
    fresh = initial_state(config)
    for (kind, _), obj in last.items():
        if obj is not None:
            fresh = step(fresh, ObjectUpserted(kind, obj)).state
    # repr, not ==: the same values by type, not only by equality
    assert _items(state) == _items(fresh)


def test_an_event_that_changes_only_the_resource_version_keeps_the_held_value_and_the_state() -> None:
    state = step(initial_state(CatalogConfig()), ObjectUpserted(SourceKind.KUBEAI_MODELS, _model("1"))).state
    held = state.observed.stores[SourceKind.KUBEAI_MODELS]["m"]
    again = step(state, ObjectUpserted(SourceKind.KUBEAI_MODELS, _model("2"))).state
    assert again is state
    assert again.observed.stores[SourceKind.KUBEAI_MODELS]["m"] is held


def test_a_value_of_another_type_is_parsed_again() -> None:
    state = step(initial_state(CatalogConfig()), ObjectUpserted(SourceKind.KUBEAI_MODELS, _model("1"))).state
    flipped = _model("2")
    flipped["status"]["replicas"]["ready"] = True  # equal to 1 in Python, not a replica count
    after = step(state, ObjectUpserted(SourceKind.KUBEAI_MODELS, flipped)).state
    fresh = step(initial_state(CatalogConfig()), ObjectUpserted(SourceKind.KUBEAI_MODELS, flipped)).state
    assert repr(after.observed.stores[SourceKind.KUBEAI_MODELS]["m"]) == repr(
        fresh.observed.stores[SourceKind.KUBEAI_MODELS]["m"]
    )
    assert after.observed.stores[SourceKind.KUBEAI_MODELS]["m"].ready is False


def _model(resource_version: str) -> dict[str, Any]:
    obj = kubeai_model("m", ready=1)
    obj["metadata"]["resourceVersion"] = resource_version
    return obj


# One object of each route source. The reuse rests on their parse never reading the resourceVersion: a
# route source added later without an entry here fails the test below until it is checked.
_SAMPLES = {
    SourceKind.KUBEAI_MODELS: lambda: kubeai_model(
        "m", annotations={"ai-appliance.io/max-output-tokens": "7"}
    ),
    SourceKind.FREETOKEN_DEPLOYMENTS: lambda: freetoken_deployment("rt", activation_name="a"),
    SourceKind.MODEL_ACTIVATIONS: lambda: activation("a", external={"model": "gpt-4o", "provider": "openai"}),
}


def test_no_route_source_parse_reads_the_resource_version() -> None:
    assert {spec.kind for spec in registry.SPECS if spec.parse is not None} == set(_SAMPLES)
    state = initial_state(CatalogConfig())
    for kind, make in _SAMPLES.items():
        parse = registry.BY_KIND[kind].parse
        assert parse is not None
        one, two = make(), make()
        one["metadata"]["resourceVersion"] = "1"
        two["metadata"]["resourceVersion"] = "2"
        assert repr(parse(state, one)) == repr(parse(state, two)), kind


def test_a_megabyte_object_is_parsed_again_not_kept() -> None:
    big = _model("1")
    big["metadata"]["annotations"] = {"example.com/padding": "x" * (1 << 20)}
    state = step(initial_state(CatalogConfig()), ObjectUpserted(SourceKind.KUBEAI_MODELS, big)).state
    held = state.observed.stores[SourceKind.KUBEAI_MODELS]["m"]
    assert ingest._ITEM_TEXT.get(held) is None  # its text is not kept
    again = _model("2")
    again["metadata"]["annotations"] = big["metadata"]["annotations"]
    after = step(state, ObjectUpserted(SourceKind.KUBEAI_MODELS, again)).state
    assert after.observed.stores[SourceKind.KUBEAI_MODELS]["m"] == held


def test_an_object_too_deep_to_marshal_is_parsed() -> None:
    deep: dict[str, object] = {}
    node = deep
    for _ in range(5000):
        node["x"] = {}
        node = node["x"]  # type: ignore[assignment]
    obj = _model("1")
    obj["metadata"]["annotations"] = {"example.com/deep": deep}
    state = step(initial_state(CatalogConfig()), ObjectUpserted(SourceKind.KUBEAI_MODELS, obj)).state
    fresh = KubeAIModel.from_k8s(obj)
    assert repr(state.observed.stores[SourceKind.KUBEAI_MODELS]["m"]) == repr(fresh)
