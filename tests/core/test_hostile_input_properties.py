"""Issue 12 item 3, as a property: no input value, however odd, makes a source constructor or ``step`` raise.

Arbitrary JSON values (huge integers, NaN, lone surrogates, control characters, deep-ish nesting) go in
where each constructor reads, in the shape the API server would deliver them (after the adapters' trim and
redaction, as in production), and the fold and its planning run over them. Bad input must come out as a
reason code, never as an exception (an exception used to end the process on both replicas).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core.config import CatalogConfig
from catalog_core.events import (
    LiteLLMRowsObserved,
    ObjectDeleted,
    ObjectUpserted,
    SourceKind,
    SourceListed,
    Ticked,
)
from catalog_core.fold import step
from catalog_core.redact import redact_for_source
from catalog_core.sources.activation import ModelActivation
from catalog_core.sources.agent_template import AgentTemplateInfo
from catalog_core.sources.catalog_configmap import ObservedCatalog
from catalog_core.sources.consumers import ConsumerPod, ReplicaSetOwner, Workload
from catalog_core.sources.external import ExternalModelsDocument, parse_definition
from catalog_core.sources.freetoken import FreeTokenRuntime, ServicePort
from catalog_core.sources.kubeai import KubeAIModel
from catalog_core.sources.litellm_row import LiteLLMRow, whitelist_row
from catalog_core.sources.secret import SecretInfo
from tests.core import builders as b
from tests.core.harness import Cluster
from tests.core.strategies import hostile_text, json_values

text = hostile_text
string_maps = st.dictionaries(
    text
    | st.sampled_from(
        [
            "ai-appliance.io/context-window",
            "ai-appliance.io/max-output-tokens",
            "ai-appliance.io/endpoint",
            "ai-appliance.io/engine",
            "ai-appliance.io/compute-target",
            "ai-appliance.io/max-num-seqs",
            "appliance.magicstick.dev/runtime",
            "appliance.magicstick.dev/modelactivation",
            "appliance.magicstick.dev/model-provider-secret",
            "appliance.magicstick.dev/appinstance",
            "ai-appliance.io/model-catalog-consumer",
        ]
    ),
    json_values,
    max_size=4,
)


@st.composite
def k8s_objects(draw: st.DrawFn) -> dict[str, Any]:
    """Kubernetes-shaped: the fields the constructors read exist, holding anything."""
    meta = {
        "name": draw(
            st.sampled_from(["m", "freetoken-rt", "ai-external-models", "ai-model-catalog"])
            | text
            | json_values
        ),
        "namespace": draw(st.sampled_from(["ai", "ai-system"]) | json_values),
        "uid": draw(st.just("uid-1") | json_values),
        "resourceVersion": draw(st.just("1") | json_values),
        "labels": draw(string_maps | json_values),
        "annotations": draw(string_maps | json_values),
        "ownerReferences": draw(json_values),
        "deletionTimestamp": draw(st.none() | json_values),
        "generation": draw(json_values),
    }
    return {
        "apiVersion": draw(st.just("v1") | json_values),
        "kind": draw(st.sampled_from(["Model", "ConfigMap", "Secret", "Deployment", "Pod"]) | json_values),
        "metadata": draw(st.just(meta) | json_values),
        "spec": draw(json_values),
        "status": draw(json_values),
        "data": draw(
            st.dictionaries(st.sampled_from(["models.json", "apiKey", "k"]) | text, json_values, max_size=3)
            | json_values
        ),
        "type": draw(st.sampled_from(["Opaque", "kubernetes.io/service-account-token"]) | json_values),
    }


def _rows() -> st.SearchStrategy[dict[str, Any]]:
    """A /model/info row whose fields hold anything."""
    return st.fixed_dictionaries(
        {
            "model_name": text | json_values,
            "litellm_params": st.dictionaries(
                st.sampled_from(["model", "api_base", "order", "api_key"]) | text, json_values, max_size=4
            )
            | json_values,
            "model_info": st.dictionaries(
                st.sampled_from(
                    ["id", "ai_appliance_owner", "ai_appliance_managed", "max_input_tokens", "mode"]
                )
                | text,
                json_values | st.sampled_from(["model-catalog", "ai-appliance-kubeai-good"]),
                max_size=5,
            )
            | json_values,
        }
    )


def _every_constructor(obj: Any) -> None:
    KubeAIModel.from_k8s(obj)
    ModelActivation.from_k8s(obj, "ai")
    FreeTokenRuntime.from_k8s(obj)
    ServicePort.from_k8s(obj)
    SecretInfo.from_k8s(obj)
    AgentTemplateInfo.from_k8s(obj)
    ObservedCatalog.from_k8s(obj)
    ConsumerPod.from_k8s(obj)
    ReplicaSetOwner.from_k8s(obj)
    Workload.from_k8s(obj, "Deployment")
    ExternalModelsDocument.from_configmap(obj, "ai")
    LiteLLMRow.from_info(obj)
    whitelist_row(obj)


@settings(max_examples=150)
@given(k8s_objects())
def test_no_constructor_raises_on_any_object(obj):
    _every_constructor(obj)
    for source in SourceKind:
        _every_constructor(redact_for_source(source, obj).obj)


@settings(max_examples=150)
@given(json_values)
def test_no_models_json_document_or_definition_raises(value):
    text_ = json.dumps(value)  # lone surrogates become the six characters \ud800, as an editor would write
    ExternalModelsDocument.from_text(text_, "ai")
    ExternalModelsDocument.from_text(json.dumps({"models": [value]}), "ai")
    parse_definition(value, None, inline_keys_allowed=True, namespace="ai")
    parse_definition(value, "x", inline_keys_allowed=False, namespace="ai")


_BASE = Cluster()
_BASE.start(
    b.kubeai_model("good"),
    b.external_configmap([{"name": "ext", "model": "openai/ext"}]),
    b.activation("act", external={"model": "openai/act"}),
)
_STATE = _BASE.state
_NOW = _BASE.now


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(list(SourceKind)), k8s_objects(), st.sampled_from(["upsert", "delete", "list"]))
def test_step_never_raises_on_any_object_of_any_source(source, obj, how):
    """The whole fold and plan, over a cluster that already publishes: the event, then a tick."""
    redacted = redact_for_source(source, obj).obj
    if how == "upsert":
        event: Any = ObjectUpserted(source, redacted)
    elif how == "delete":
        event = ObjectDeleted(source, redacted)
    else:
        event = SourceListed(source, (redacted,))
    state = step(_STATE, event).state
    state = step(state, Ticked(_NOW + 1)).state
    step(state, Ticked(_NOW + 100))


@settings(max_examples=80, deadline=None)
@given(json_values)
def test_a_models_json_of_any_value_never_stops_the_fold(value):
    cm = b.external_configmap(
        None, raw_text=json.dumps({"models": [value, {"name": "ok", "model": "openai/y"}]})
    )
    state = step(
        _STATE,
        ObjectUpserted(SourceKind.EXTERNAL_MODELS, redact_for_source(SourceKind.EXTERNAL_MODELS, cm).obj),
    ).state
    step(state, Ticked(_NOW + 1))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.dictionaries(text, json_values, max_size=4) | k8s_objects() | _rows(), max_size=3))
def test_litellm_rows_of_any_shape_never_stop_the_fold(rows):
    clean = tuple(whitelist_row(r) for r in rows)  # what the observer sends (it drops non-objects)
    state = step(_STATE, LiteLLMRowsObserved(clean)).state  # type: ignore[arg-type]
    step(state, Ticked(_NOW + 1))


def test_config_defaults_are_used():
    assert _STATE.config == CatalogConfig()
