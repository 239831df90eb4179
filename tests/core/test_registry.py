"""Exhaustiveness guards: a source or a command missing from any table fails here, not at run time."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from importlib import resources
from typing import get_args

import attrs
import pytest

from catalog_core import commands as cmd
from catalog_core import ingest, registry
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from catalog_core.fold import initial_state
from catalog_core.jsonval import Json
from catalog_core.keys import CommandKey, CommandKind, ItemKey, RefKey, RefKind
from catalog_core.kinds import ROLLOUT_SOURCES
from catalog_core.plan import mark_key
from catalog_core.spec import SourceSpec
from catalog_core.state import STORE
from catalog_core.values import Source
from contracts import source_schema
from contracts.kinds import RESOURCES

CFG = CatalogConfig()


def test_every_route_source_has_one_spec_and_a_missing_one_fails_at_import() -> None:
    assert {spec.source for spec in registry.SPECS} == set(Source)
    with pytest.raises(RuntimeError, match="without exactly one spec"):
        registry.check(registry.SPECS[:-1])
    twin = attrs.evolve(registry.SPECS[0], source=registry.SPECS[1].source)
    with pytest.raises(RuntimeError, match="without exactly one spec"):
        registry.check((twin, *registry.SPECS[1:]))
    same_prefix = attrs.evolve(registry.SPECS[0], item_prefix=registry.SPECS[1].item_prefix)
    with pytest.raises(RuntimeError, match="share an item prefix"):
        registry.check((same_prefix, *registry.SPECS[1:]))
    not_waited_for = attrs.evolve(registry.SPECS[0], kind=SourceKind.PODS)
    with pytest.raises(RuntimeError, match="not a catalog source"):
        registry.check((not_waited_for, *registry.SPECS[1:]))


def test_every_source_module_with_a_spec_is_in_the_registry() -> None:
    """A new source module whose spec was never added to registry.SPECS fails here (and its declared kind
    fails registry.check), instead of its objects being silently ignored."""
    import catalog_core.sources

    for module in pkgutil.iter_modules(catalog_core.sources.__path__):
        spec = getattr(importlib.import_module(f"catalog_core.sources.{module.name}"), "SPEC", None)
        if isinstance(spec, SourceSpec):
            assert spec in registry.SPECS, (
                f"catalog_core/sources/{module.name}.py: add its SPEC to registry.SPECS"
            )
    registry.check(registry.SPECS)


def test_bare_health_keys_are_declared_by_one_gated_source_whatever_the_order_of_the_specs() -> None:
    freetoken = registry.BY_SOURCE[Source.FREETOKEN]
    assert [s.source for s in registry.SPECS if s.bare_health_keys] == [Source.FREETOKEN]
    assert registry.health_key(freetoken.item("phi-4-mini")) == "phi-4-mini"  # the event log's format
    with pytest.raises(RuntimeError, match="bare health keys"):
        registry.check(tuple(attrs.evolve(s, bare_health_keys=s.health_gated or s is registry.SPECS[0])
                             for s in registry.SPECS))  # fmt: skip
    # A new gated source listed before FreeToken does not take FreeToken's key format.
    Source.declare("other-runtime")
    SourceKind.declare("other-runtime-deployments")
    other = attrs.evolve(
        freetoken,
        source=Source("other-runtime"),
        item_prefix="other-runtime",
        kind=SourceKind("other-runtime-deployments"),
        id_family="other",
        bare_health_keys=False,
    )
    before = registry.SPECS
    try:
        registry.install((other, *before))
        assert registry.health_key(freetoken.item("phi-4-mini")) == "phi-4-mini"
        assert registry.health_key(other.item("phi-4-mini")) == "other-runtime/phi-4-mini"
        assert registry.health_item("other-runtime/phi-4-mini") == other.item("phi-4-mini")
        assert registry.health_item("phi-4-mini") == freetoken.item("phi-4-mini")
    finally:
        Source.withdraw("other-runtime")
        SourceKind.withdraw("other-runtime-deployments")
        registry.install(before)


def test_a_source_kind_declared_without_a_spec_fails_the_registry_check() -> None:
    SourceKind.declare("orphan-deployments")
    try:
        with pytest.raises(RuntimeError, match="declared without a spec"):
            registry.check(registry.SPECS)
    finally:
        SourceKind.withdraw("orphan-deployments")
    with pytest.raises(ValueError, match="is not a SourceKind"):
        SourceKind("orphan-deployments")  # reading one back accepts only declared kinds, like an enum


def test_every_source_kind_is_watched_trimmed_and_stored() -> None:
    documents = set(ingest.DOCUMENT_NAMES)  # one named ConfigMap each
    for kind in SourceKind:
        assert kind in RESOURCES, kind
        assert registry.trim_spec(kind), kind
        assert kind in registry.CATALOG_KINDS or kind in ROLLOUT_SOURCES or kind is SourceKind.AGENT_TEMPLATES
        spec = registry.BY_KIND.get(kind)
        assert kind in documents or kind in STORE or (spec is not None and spec.parse is not None), kind


@pytest.mark.parametrize("spec", registry.SPECS, ids=lambda s: s.source.value)
def test_a_warning_event_about_an_item_lands_on_an_object_of_its_source(spec: registry.SourceSpec) -> None:
    state = initial_state(CFG)
    ref = registry.warning_target(state, spec.item("llama").text)
    assert ref is not None
    resource = RESOURCES[spec.kind]
    assert (ref.api_version, ref.kind) == (resource.api_version, resource.kind)


@pytest.mark.parametrize("spec", registry.SPECS, ids=lambda s: s.source.value)
def test_item_keys_and_health_keys_round_trip(spec: registry.SourceSpec) -> None:
    key = spec.item("phi-4-mini")
    assert ItemKey.parse(key.text) == key
    assert registry.spec_of(key.text) is spec
    assert spec.route_id("Phi 4") == f"ai-appliance-{spec.id_family}-phi-4"
    if spec.health_gated:
        assert registry.health_item(registry.health_key(key)) == key
        state = mark_key(
            initial_state(CFG), cmd.ProbeRuntime(registry.health_key(key), "http://x/health").key
        )
        assert key.text in state.pending.items


def test_ref_keys_round_trip() -> None:
    for kind in RefKind:
        assert RefKey.parse(RefKey(kind, "a-b.c").text) == RefKey(kind, "a-b.c")
    assert RefKey.parse("nonsense/x") is None
    assert RefKey.parse("secret") is None


def _one_of_each() -> list[cmd.Command]:
    body = ("ai-appliance-kubeai-x/y", "x", Json.of({}), Json.of({}), None)
    ref = cmd.ObjectRef("v1", "ConfigMap", "ai", "cm", "u")
    return [
        cmd.CreateLiteLLMModel(*body),
        cmd.UpdateLiteLLMModel(*body),
        cmd.RecreateLiteLLMModel(*body),
        cmd.DeleteLiteLLMModel("ai-appliance-kubeai-x/y"),
        cmd.WriteCatalog("ai", "ai-model-catalog", (), "h", "f"),
        cmd.CreateCatalogPlaceholder("ai", "ai-model-catalog", (), "bootstrap", "f"),
        cmd.PatchAgentTemplate("ai", "t", "1", Json.of({})),
        cmd.RollWorkload("ai", "Deployment", "app", "h"),
        cmd.EvictPod("ai", "pod", "uid", "h"),
        cmd.ProbeRuntime("rt", "http://rt.ai.svc:8080/health"),
        cmd.EmitKubernetesEvent(ref, "InvalidField", "m"),
        cmd.WatchSecrets("ai", ()),
        cmd.ObserveLiteLLM(cmd.ReadReason.AFTER_WRITES),
    ]


def test_every_command_key_parses_back_to_what_it_names() -> None:
    made = _one_of_each()
    assert {type(c) for c in made} == set(get_args(cmd.Command))  # a new command type must be added here
    kinds = set()
    for command in made:
        parsed = CommandKey.parse(command.key)
        assert parsed is not None and parsed.text == command.key, command.key
        kinds.add(parsed.kind)
    assert kinds == set(CommandKind)
    # a model id with a slash stays one part
    assert CommandKey.parse("litellm/ai-appliance-kubeai-x/y") == CommandKey(
        CommandKind.LITELLM, ("ai-appliance-kubeai-x/y",)
    )
    assert CommandKey.parse("rollout/ai/Deployment/app") == CommandKey(
        CommandKind.ROLLOUT, ("ai", "Deployment", "app")
    )
    assert CommandKey.parse("nonsense/x") is None


def test_mark_key_marks_the_target_of_every_write() -> None:
    state = initial_state(CFG)
    pending = {c.key: mark_key(state, c.key).pending for c in _one_of_each()}
    assert pending["litellm/ai-appliance-kubeai-x/y"].ids
    assert pending["catalog/ai/ai-model-catalog"].catalog
    assert pending["agenttemplate/ai/t"].templates
    assert pending["rollout/ai/Deployment/app"].rollouts
    assert pending["evict/ai/pod"].rollouts
    assert pending["probe/rt"].items


def _schema(name: str) -> dict:
    return json.loads(resources.files("contracts").joinpath("schemas", name).read_text())


def test_the_schemas_name_every_source_and_no_other() -> None:
    """The published schemas list the sources by value, in one file generated from the registry: a source
    added to the registry alone would write records, ids and event-log lines that its own schemas reject."""
    committed = resources.files("contracts").joinpath("schemas", "sources.schema.json").read_text()
    assert committed == source_schema.text(), (
        "contracts/schemas/sources.schema.json is stale: run `just generate`"
    )
    generated = source_schema.sources_schema()["$defs"]
    assert generated["Source"]["enum"] == [s.value for s in Source]
    assert generated["SourceKind"]["enum"] == [k.value for k in SourceKind]
    families = re.fullmatch(r"\^ai-appliance-\(([a-z|]+)\)-", generated["RouteId"]["pattern"])
    assert families is not None and set(families.group(1).split("|")) == {s.id_family for s in registry.SPECS}
    # the other schemas refer to it instead of listing sources themselves
    routes = _schema("routes.schema.json")["items"]["properties"]["source"]
    assert routes == {"$ref": "sources.schema.json#/$defs/Source"}
    model_info = _schema("render-output.schema.json")["$defs"]["deployment"]["properties"]["model_info"]
    assert model_info["properties"]["id"] == {"$ref": "sources.schema.json#/$defs/RouteId"}
