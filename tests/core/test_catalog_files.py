"""Every declaration of ``catalog_core/catalog_files.py`` does what it says, read from the declarations
themselves, so a file added there is held to it with no test of its own: it is written (and in the
placeholder, with no model), it lists the models of its types and only those, the data's size bound counts
it, and the pods of every app that reads it are rolled when the catalog changes. Each failure names the
declaration."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
import yaml

from catalog_core import catalog_files
from catalog_core.catalog_files import FILES, Format, Models, RouteRecords
from catalog_core.commands import RollWorkload
from catalog_core.config import CatalogConfig
from catalog_core.plan import all_records
from catalog_core.rules import render
from catalog_core.values import ModelType
from tests.core import builders as b
from tests.core.harness import Cluster

REPO = Path(__file__).resolve().parents[2]
PLACEHOLDER = REPO / "deploy" / "bootstrap" / "configmap-ai-model-catalog.yaml"
REGENERATE = "regenerate it: run `just generate`"
# One model of each type, named after it.
MODELS = {
    ModelType.CHAT: b.kubeai_model("m-chat"),
    ModelType.EMBEDDING: b.kubeai_model("m-embedding", features=["TextEmbedding"]),
    ModelType.RERANK: b.kubeai_model("m-rerank", features=["Reranking"]),
    ModelType.AUDIO: b.kubeai_model("m-audio", features=["SpeechToText"]),
}


def _name(f: catalog_files.CatalogFile) -> str:
    return next(k for k, v in vars(catalog_files).items() if v is f)


def _catalog() -> dict[str, str]:
    c = Cluster()
    c.start(*MODELS.values())
    return c.data


def _document(f: catalog_files.CatalogFile, text: str) -> object:
    return yaml.safe_load(text) if f.format is Format.YAML else json.loads(text)


def test_every_declared_catalog_file_is_listed_in_files():
    declared = {k for k, v in vars(catalog_files).items() if isinstance(v, catalog_files.CatalogFile)}
    listed = {_name(f) for f in FILES}
    assert declared == listed, (
        f"declared in catalog_core/catalog_files.py but not in FILES: {declared - listed}"
    )


def test_the_catalog_holds_exactly_the_declared_files():
    data = _catalog()
    assert set(data) == catalog_files.KEYS, (
        f"written but not declared: {set(data) - catalog_files.KEYS}; "
        f"declared but not written: {catalog_files.KEYS - set(data)}"
    )


@pytest.mark.parametrize("f", [f for f in FILES if isinstance(f.members, Models)], ids=lambda f: f.key)
def test_a_listing_file_lists_the_models_of_its_types_and_only_those(f):
    assert isinstance(f.members, Models)
    data = _catalog()
    text = data[f.key]
    _document(f, text)  # it parses
    for model_type in ModelType:
        listed = f'"m-{model_type.value}"' in text or f"m-{model_type.value}:" in text
        assert listed == (model_type in f.members.types), (
            f"{_name(f)} ({f.key}) declares the types {sorted(t.value for t in f.members.types)}, "
            f"and lists m-{model_type.value}: {listed}"
        )


def test_the_route_records_file_lists_every_record():
    (f,) = [f for f in FILES if isinstance(f.members, RouteRecords)]
    records = json.loads(_catalog()[f.key])
    assert sorted(r["name"] for r in records) == sorted(f"m-{t.value}" for t in ModelType)


def test_the_size_bound_counts_every_listing_file_but_the_yaml_ones():
    parts = render.CatalogParts(CatalogConfig())
    counted = {f.key for f in render._LISTING if render._LISTING.index(f) in render._BOUNDED_RUNS}
    expected = {f.key for f in FILES if f.members is not None and f.format is not Format.YAML}
    assert counted == expected
    assert len(parts.runs) == sum(f.members is not None for f in FILES)


@pytest.mark.parametrize("f", FILES, ids=lambda f: f.key)
def test_a_file_the_configuration_does_not_render_is_not_written_bounded_or_in_the_placeholder(f):
    """A replay of a log recorded before a file was declared renders only the keys its run did
    (``CatalogConfig.catalog_keys``, from the log's header); every other file, and the hash, as before."""
    every = CatalogConfig()
    assert every.catalog_keys == catalog_files.KEYS  # a running controller renders every declared file
    fewer = attrs.evolve(every, catalog_keys=catalog_files.KEYS - {f.key})
    full, without = Cluster(every), Cluster(fewer)
    full.start(*MODELS.values())
    without.start(*MODELS.values())
    assert without.data == {k: v for k, v in full.data.items() if k != f.key}, (
        f"{_name(f)} ({f.key}) is written"
    )
    assert render.bootstrap_data(fewer) == {
        k: v for k, v in render.bootstrap_data(every).items() if k != f.key
    }, f"{_name(f)} ({f.key}) is in the placeholder"
    entries, records = list(full.state.derived.entries.values()), list(all_records(full.state))
    counted, left = (render.CatalogParts.of(entries, records, config) for config in (every, fewer))
    counted.render(), left.render()  # a run knows its length once rendered
    bounded = f.members is not None and f.format is not Format.YAML
    sizes = left.data_size_at_least(), counted.data_size_at_least()
    assert (sizes[0] < sizes[1]) == bounded, f"{_name(f)} ({f.key}) counted by the size bound: {sizes}"


def test_the_placeholder_holds_every_declared_file_with_no_model():
    data = render.bootstrap_data(CatalogConfig())
    assert set(data) == catalog_files.KEYS
    for f in FILES:
        if f.members is not None:
            assert "m-chat" not in data[f.key]
            _document(f, data[f.key])


def test_the_shipped_placeholder_holds_every_declared_file():
    try:
        (shipped,) = [d for d in yaml.safe_load_all(PLACEHOLDER.read_text()) if d]
    except yaml.YAMLError as exc:
        pytest.fail(f"{PLACEHOLDER.relative_to(REPO)} is not YAML ({exc}): {REGENERATE}")
    missing = catalog_files.KEYS - set(shipped["data"])
    extra = set(shipped["data"]) - catalog_files.KEYS
    assert not missing, f"{PLACEHOLDER.relative_to(REPO)} lacks {sorted(missing)}: {REGENERATE}"
    assert not extra, f"{PLACEHOLDER.relative_to(REPO)} holds undeclared {sorted(extra)}: {REGENERATE}"
    assert shipped["data"] == render.bootstrap_data(CatalogConfig()), (
        f"{PLACEHOLDER.relative_to(REPO)} is not the placeholder of the declared files: {REGENERATE}"
    )


@pytest.mark.parametrize("app", catalog_files.CONSUMER_LABELS, ids=lambda app: ",".join(v for _, v in app))
def test_the_pods_of_every_app_that_reads_a_file_are_rolled(app):
    labels = dict(app)
    readers = [_name(f) for f in FILES if app in f.consumers]
    c = Cluster()
    c.start(
        b.kubeai_model("llama"),
        b.deployment("app", labels=labels),
        b.replicaset("app-1", "app"),
        b.pod("app-1-a", labels=labels, owner=("ReplicaSet", "app-1")),
    )
    c.apply(b.kubeai_model("qwen"))  # the catalog changes
    rolled = [(x.kind, x.name) for x in c.world.writes if isinstance(x, RollWorkload)]
    assert ("Deployment", "app") in rolled, f"pods labelled {labels} (readers of {readers}) never roll"
