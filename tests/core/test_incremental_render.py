"""The incremental catalog render (issue 15) against its oracle, a render of the whole state from scratch.

The live path (``plan.rendered_catalog``) keeps one catalog warm and moves only the entries and records
that changed since the state it saw last; ``plan.full_catalog`` renders every part afresh and takes the
fingerprint over the data itself. After any sequence of events, in any order of states, both agree byte
for byte: data, catalog hash and fingerprint.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core import catalog_files
from catalog_core.config import CatalogConfig
from catalog_core.jsonval import Fragment, Run, pretty
from catalog_core.plan import catalog_within, full_catalog, rendered_catalog
from catalog_core.rules import render
from catalog_core.sources.catalog_configmap import configmap_data_size, data_fingerprint
from catalog_core.state import CatalogState
from tests.core import builders as b
from tests.core import strategies as core_gen
from tests.core.harness import Cluster
from tests.eventlog import strategies as gen
from tests.eventlog.harness import record_run


def _agree(state: CatalogState) -> None:
    fresh = full_catalog(state)
    kept = rendered_catalog(state)
    assert kept.data == fresh.data
    assert kept.catalog_hash == fresh.catalog_hash
    assert kept.fingerprint == fresh.fingerprint == data_fingerprint(dict(fresh.data))
    _within_agrees(state, fresh)


def _within_agrees(state: CatalogState, fresh: render.RenderedCatalog) -> None:
    """Under a size limit a catalog is oversized exactly when its data is larger (rendered or not, as
    the warm cache allows), with the same hash; else it is the full render."""
    size = configmap_data_size(fresh.data)
    for limit in (0, 1, size // 2, size - 1, size, size + 1):
        within = catalog_within(state, limit)
        if size > limit:
            assert isinstance(within, render.OversizedCatalog)
            assert limit < within.data_size_at_least <= size
            assert within.catalog_hash == fresh.catalog_hash
        else:
            assert within == fresh


@settings(max_examples=60, deadline=None)
@given(scn=gen.scenario(), order=st.randoms(use_true_random=False))
def test_the_incremental_catalog_equals_a_full_render_after_any_event_sequence(
    scn: dict[str, Any], order: Any, tmp_path_factory: Any
) -> None:
    run = record_run(scn, tmp_path_factory.mktemp("run"))
    states = [transition.state for _, transition in run.history]
    for state in states:  # in the order the fold made them: each render moves what one step changed
        _agree(state)
    shuffled = list(states)
    order.shuffle(shuffled)
    for state in shuffled:  # and between any two of them (the warm catalog goes back and forth)
        _agree(state)


@settings(max_examples=30, deadline=None)
@given(core_gen.cluster(), st.lists(st.integers(0, 3), max_size=6))
def test_a_converged_cluster_renders_the_same_either_way_while_models_come_and_go(world, removals):
    objs, rows = world
    c = Cluster()
    c.start(*objs, rows=rows)
    _agree(c.state)
    for index in removals:
        models = [o for o in objs if o.get("kind") == "Model"]
        if not models:
            break
        c.delete(models[index % len(models)])
        c.run()
        _agree(c.state)


def test_a_warm_catalog_dropped_midway_is_rebuilt() -> None:
    """A render that raised leaves no half-updated catalog behind: the next one starts afresh."""
    render._WARM.clear()
    objs = [
        {
            "apiVersion": "kubeai.org/v1",
            "kind": "Model",
            "metadata": {"name": "llama", "namespace": "ai", "uid": "u1"},
            "spec": {"features": ["TextGeneration"], "engine": "VLLM", "url": "hf://x/llama"},
            "status": {"replicas": {"ready": 1}},
        }
    ]
    c = Cluster()
    c.start(*objs)
    render._WARM.append(_Exploding(c.config))
    with pytest.raises(RuntimeError, match="boom"):
        rendered_catalog(c.state)
    assert not any(isinstance(w, _Exploding) for w in render._WARM)
    _agree(c.state)


def test_the_warm_catalog_keeps_its_last_render_only_while_a_configmap_may_hold_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kept, a render answers the next ticks until a member changes; one too large to write (a metrics
    scrape renders it at any size) is not kept: ~17 MiB at 10,000 models, held for nothing."""
    render._WARM.clear()
    c = Cluster()
    c.start(*_LLAMA)
    first = rendered_catalog(c.state)
    (warm,) = render._WARM
    assert warm.rendered is first
    assert rendered_catalog(c.state) is first  # nothing changed: the kept render
    monkeypatch.setattr(render, "CONFIGMAP_DATA_LIMIT", 10)
    render._WARM.clear()
    again = rendered_catalog(c.state)
    assert again == first == full_catalog(c.state)
    (warm,) = render._WARM
    assert warm.rendered is None
    assert rendered_catalog(c.state) is not again  # rendered anew each time


_LLAMA = (
    {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": "llama", "namespace": "ai", "uid": "u1"},
        "spec": {"features": ["TextGeneration"], "engine": "VLLM", "url": "hf://x/llama"},
        "status": {"replicas": {"ready": 1}},
    },
)


class _Exploding(render.IncrementalCatalog):
    def update(self, *args: Any) -> None:
        raise RuntimeError("boom")


members = st.dictionaries(
    st.text(max_size=6),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
        max_leaves=6,
    ),
    max_size=6,
)


@settings(max_examples=100, deadline=None)
@given(members, st.lists(st.text(max_size=6), max_size=4), st.booleans(), st.integers(0, 3))
def test_a_run_renders_as_the_array_or_object_it_stands_for(values, removed, is_object, depth):
    run = Run(is_object=is_object)
    for key in sorted(values, reverse=True):  # inserted out of order: the run keeps its keys sorted
        run.put(key, Fragment(values[key], hashed=True), key)
    for key in removed:
        if key in values:
            run.remove(key)
            del values[key]
    plain = values if is_object else [values[k] for k in sorted(values)]
    doc: Any = {"a": 1, "z": run}
    expected_doc: Any = {"a": 1, "z": plain}
    for _ in range(depth):
        doc, expected_doc = {"x": [doc]}, {"x": [expected_doc]}
    text = pretty(doc)
    assert text == json.dumps(expected_doc, indent=2, sort_keys=True) + "\n"
    assert json.loads(run.canonical_text()) == plain


def test_the_placeholder_and_an_empty_catalog_render_as_before() -> None:
    config = CatalogConfig()
    empty = render.render_catalog((), (), config)
    assert render.CatalogParts(config).render().data == empty.data
    boot = render.bootstrap_data(config)
    assert boot[catalog_files.HASH_KEY] == "bootstrap" and json.loads(boot["catalog.json"])["models"] == []


class _NoCache(list):  # type: ignore[type-arg]
    """A warm-catalog slot that never keeps one: every render starts cold."""

    def append(self, _: object) -> None:
        return None


def _too_large_run() -> Cluster:
    c = Cluster()
    c.start(b.external_configmap([{"name": "small", "model": "openai/small"}]))
    c.apply(b.external_configmap([{"name": f"many-{i}", "model": f"openai/many-{i}"} for i in range(900)]))
    c.apply(b.external_configmap([{"name": f"many-{i}", "model": f"openai/many-{i}"} for i in range(901)]))
    return c


def test_a_too_large_catalog_decides_the_same_whatever_the_render_cache_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whether its data was rendered (a cold cache) or only hashed (a warm one knows it is too large),
    a catalog too large to write leaves the same state and commands: replay must not depend on it."""
    warm = _too_large_run()
    assert warm.state.derived.desired_catalog_fingerprint == render.OversizedCatalog.fingerprint
    monkeypatch.setattr(render, "_WARM", _NoCache())
    cold = _too_large_run()
    assert cold.state == warm.state
    assert cold.commands == warm.commands
