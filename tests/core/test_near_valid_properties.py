"""Issue 12 item 3, near valid: a well-formed object of each kind with any value at the fields its
constructor reads (or the field removed) is parsed into a value or a reason, never an exception, and
the fold plans over it only what can be sent: every command and the rendered catalog encode.

``test_hostile_input_properties`` feeds arbitrary shapes; these objects pass every check a constructor
makes before the field that holds the odd value, so the deep paths run too.
"""

from __future__ import annotations

import copy
import json
import traceback
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core import ingest
from catalog_core.events import (
    LiteLLMRowsObserved,
    ObjectDeleted,
    ObjectUpserted,
    SourceKind,
    SourceListed,
    Ticked,
)
from catalog_core.fold import step
from catalog_core.plan import catalog_inputs_known, rendered_catalog
from catalog_core.redact import redact_for_source
from catalog_core.sources.catalog_configmap import ObservedCatalog
from catalog_core.sources.external import ExternalModelsDocument
from catalog_core.sources.litellm_row import LiteLLMRow, whitelist_row
from catalog_core.state import CatalogState
from contracts import eventlog as wire
from tests.core import builders as b
from tests.core import strategies as gen
from tests.core.harness import Cluster

NS = "ai"
# Every field the constructors read, with a valid value: the seeds the mutations start from.
LIMITS = {"ai-appliance.io/context-window": "8192", "ai-appliance.io/max-output-tokens": "1024"}
ITEM: dict[str, Any] = {
    "name": "ext",
    "enabled": True,
    "litellm": {
        "model": "openai/ext",
        "apiBase": "https://api.example/v1",
        "api_base": "https://api.example/v1",
        "apiVersion": "2024-06-01",
        "customLlmProvider": "openai",
        "tpm": 1000,
        "rpm": 10,
    },
    "model": "openai/ext",
    "apiBase": "https://api.example/v1",
    "api_base": "https://api.example/v1",
    "apiKeySecretRef": {"name": "ai-model-provider-x", "key": "apiKey", "namespace": NS},
    "apiVersion": "2024-06-01",
    "api_version": "2024-06-01",
    "customLlmProvider": "openai",
    "custom_llm_provider": "openai",
    "tpm": 1000,
    "rpm": "10",
    "type": "chat",
    "modelType": "chat",
    "contextWindow": 8192,
    "context_window": "8192",
    "max_input_tokens": 8192,
    "maxOutputTokens": 1024,
    "max_output_tokens": "1024",
}
INLINE_ITEM = {"name": "inline", "model": "openai/inline", "apiKey": "sk-inline", "api_key": "sk-inline"}
CONSUMER = {
    "app": "anything-llm",
    "app.kubernetes.io/instance": "openclaw",
    "app.kubernetes.io/name": "openclaw",
    "ai-appliance.io/model-catalog-consumer": "true",
}


def _with(obj: dict[str, Any], *path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    target = out
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    return out


def _deployment(kind: str) -> dict[str, Any]:
    return _with(b.deployment("dep", labels=CONSUMER, template_hash="abc"), "kind", value=kind)


SEEDS: dict[SourceKind, dict[str, Any]] = {
    SourceKind.KUBEAI_MODELS: b.kubeai_model(
        "good",
        annotations=LIMITS,
        args=["--max-model-len=4096", "--max-num-seqs", "8"],
        features=["TextGeneration"],
    ),
    SourceKind.MODEL_ACTIVATIONS: b.activation(
        "act", external={k: v for k, v in ITEM.items() if k != "name"}, enabled=True, model_type="chat"
    ),
    SourceKind.FREETOKEN_DEPLOYMENTS: b.freetoken_deployment(
        "rt",
        activation_name="act-local",
        endpoint="http://rt.ai.svc.cluster.local:8080/v1",
        annotations={
            **LIMITS,
            "ai-appliance.io/engine": "freetoken",
            "ai-appliance.io/compute-target": "cpu",
            "ai-appliance.io/max-num-seqs": "4",
        },
    ),
    SourceKind.SERVICES: _with(b.service("rt"), "spec", "type", value="ClusterIP"),
    SourceKind.SECRETS: _with(
        b.secret("ai-model-provider-x", {"apiKey": "sk-provider"}, api_bases="https://api.example"),
        "stringData",
        value={"other": "v"},
    ),
    SourceKind.AGENT_TEMPLATES: b.agent_template(
        "litellm-default",
        models={"good": {"name": "good", "limit": {"context": 8192, "output": 1024}}},
        model="litellm/good",
        small_model="litellm/good",
        labels={"appliance.magicstick.dev/appinstance": "app-1"},
    ),
    SourceKind.PODS: b.pod("dep-1-a", labels=CONSUMER, owner=("ReplicaSet", "dep-1"), annotations=CONSUMER),
    SourceKind.REPLICASETS: b.replicaset("dep-1", "dep"),
    SourceKind.DEPLOYMENTS: _deployment("Deployment"),
    SourceKind.STATEFULSETS: _deployment("StatefulSet"),
    SourceKind.DAEMONSETS: _deployment("DaemonSet"),
    SourceKind.CATALOG_CONFIGMAP: _with(
        b.catalog_configmap("abc", ready=True),
        "metadata",
        "annotations",
        "ai-appliance.io/previous-catalog-hash",
        value="def",
    ),
}
DOCUMENT: dict[str, Any] = {"models": [ITEM, INLINE_ITEM]}


def _configmap(document: Any, *, dump: bool) -> dict[str, Any]:
    # json.dumps writes a lone surrogate as the six characters \ud800, as an editor would.
    text = json.dumps(document) if dump else document
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ai-external-models", "namespace": NS, "uid": "uid-ext", "resourceVersion": "1"},
        "data": {"models.json": text},
    }


@st.composite
def near_valid(draw: st.DrawFn) -> tuple[SourceKind, dict[str, Any]]:
    """(source, an object of that source's kind with a few fields holding anything)."""
    source = draw(st.sampled_from([*SEEDS, SourceKind.EXTERNAL_MODELS]))
    if source is not SourceKind.EXTERNAL_MODELS:
        return source, draw(gen.mutated(SEEDS[source]))
    if draw(st.booleans()):  # inside models.json: what people edit
        return source, _configmap(draw(gen.mutated(DOCUMENT)), dump=True)
    return source, draw(gen.mutated(_configmap(DOCUMENT, dump=True)))  # around it: the ConfigMap


def _parse(state: CatalogState, source: SourceKind, obj: dict[str, Any]) -> object:
    """What ingest makes of one object of ``source`` (the SourceKind -> constructor mapping)."""
    if source is SourceKind.EXTERNAL_MODELS:
        return ExternalModelsDocument.from_configmap(obj, state.config.namespace)
    if source is SourceKind.CATALOG_CONFIGMAP:
        return ObservedCatalog.from_k8s(obj)
    return ingest._parse(state, source, obj)


_BASE = Cluster()
_BASE.start(
    *SEEDS.values(),
    _configmap(DOCUMENT, dump=True),
    b.activation("act-local", kind="local"),
    b.secret("ai-model-provider-x", {"apiKey": "sk-provider"}, api_bases="https://api.example"),
    rows=[b.row("good", "ai-appliance-kubeai-good", owner="model-catalog")],
)
STATE = _BASE.state
NOW = _BASE.now


def test_the_seeds_are_valid_and_published():
    """The mutations start from objects that are read whole: the fields they edit are really read."""
    assert catalog_inputs_known(STATE)
    published = {r.name: r.state.value for r in STATE.derived.records.values()}
    assert published.get("good") == "published"
    assert published.get("ext") == "published"
    assert published.get("inline") == "published"
    assert published.get("act") == "published"
    for source, seed in SEEDS.items():
        value = _parse(STATE, source, redact_for_source(source, seed).obj)
        assert value is not None and getattr(value, "problem", None) is None, (source, value)


# One odd value of each sort, put in every field of every seed in turn (a deterministic sweep: it includes
# what Hypothesis cannot draw, an integer str() refuses).
ODD_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    10**5000,
    float("nan"),
    float("inf"),
    "",
    "\ud800",
    "a\nb",
    "x" * 300,
    [],
    {},
    [None],
    {"": None},
]


DELETE = object()
ROW = b.row(
    "good",
    "ai-appliance-kubeai-good",
    owner="model-catalog",
    api_base="http://kubeai/openai/v1",
    order=1,
    max_input_tokens=8192,
    max_output_tokens=1024,
    ai_appliance_type="chat",
    mode="chat",
    features=["TextGeneration"],
)


def _where(exc: Exception) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    return f"{frame.filename.rpartition('/')[2]}:{frame.lineno} {frame.name}"


def _sweep() -> list[tuple[SourceKind, dict[str, Any]]]:
    cases = []
    seeds = [*SEEDS.items(), (SourceKind.EXTERNAL_MODELS, _configmap(DOCUMENT, dump=True))]
    for source, seed in seeds:
        for path in gen.paths(seed):
            cases.extend((source, gen.edited(seed, path, v)) for v in ODD_VALUES)
            cases.append((source, gen.edited(seed, path, None, delete=True)))
    writable = [v for v in ODD_VALUES if not (isinstance(v, int) and v > 10**4000)]  # json.dumps refuses it
    for path in gen.paths(DOCUMENT):
        for v in writable:
            cases.append((SourceKind.EXTERNAL_MODELS, _configmap(gen.edited(DOCUMENT, path, v), dump=True)))
    # ... but an editor can write one, and json.loads refuses to read it
    huge = '{"models": [{"name": "x", "model": "a/b", "tpm": 1' + "0" * 5000 + "}]}"
    cases.append((SourceKind.EXTERNAL_MODELS, _configmap(huge, dump=False)))
    return cases


def test_every_field_of_every_kind_holding_an_odd_value():
    cases = _sweep()
    assert len(cases) > 2000
    crashes = set()
    for source, obj in cases:
        try:
            for candidate in (obj, redact_for_source(source, obj).obj):
                _parse(STATE, source, candidate)
        except Exception as exc:  # collected, so that one run names every crash
            crashes.add(f"{source.value}: {type(exc).__name__} at {_where(exc)}")
    assert not crashes, sorted(crashes)


def test_every_field_of_a_litellm_row_holding_an_odd_value():
    crashes = set()
    for path in gen.paths(ROW):
        for value in [*ODD_VALUES, DELETE]:
            row = (
                gen.edited(ROW, path, None, delete=True) if value is DELETE else gen.edited(ROW, path, value)
            )
            try:
                LiteLLMRow.from_info(row)
                state = step(STATE, LiteLLMRowsObserved((whitelist_row(row),))).state
                step(state, Ticked(NOW + 1))
            except Exception as exc:
                crashes.add(f"{path}: {type(exc).__name__} at {_where(exc)}")
    assert not crashes, sorted(crashes)


@settings(max_examples=1500)
@given(near_valid())
def test_every_constructor_makes_a_value_or_a_reason(case):
    source, obj = case
    for candidate in (obj, redact_for_source(source, obj).obj):  # as the adapters deliver it, and raw
        _parse(STATE, source, candidate)


@settings(max_examples=1000)
@given(near_valid(), st.sampled_from(["upsert", "delete", "list"]))
def test_the_fold_plans_only_what_can_be_sent(case, how):
    """Never raises; and over what a watch delivers, every command and the catalog can be sent. (An
    embedding host could hand over a name holding a lone surrogate, which nothing can send.)"""
    source, hostile = case
    for obj, delivered in ((hostile, False), (gen.as_delivered(hostile), True)):
        redacted = redact_for_source(source, obj).obj
        if how == "upsert":
            event: Any = ObjectUpserted(source, redacted)
        elif how == "delete":
            event = ObjectDeleted(source, redacted)
        else:
            event = SourceListed(source, (redacted,))
        state = step(STATE, event).state
        first = step(state, Ticked(NOW + 1))
        later = step(first.state, Ticked(NOW + 120))  # retries and probes due
        if not delivered:
            continue
        for commands in (first.commands, later.commands):
            wire.dumps(wire.unstructure_commands(commands))  # what executors send and the log records
        for key, value in rendered_catalog(later.state).data:
            (key + value).encode("utf-8")  # what the ConfigMap writer sends
