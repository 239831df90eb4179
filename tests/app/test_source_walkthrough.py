"""ARCHITECTURE.md's "How to add a new source", held by a test: a source built from a spec alone.

A throwaway health-gated runtime source is declared exactly as the walkthrough says a new source is: one
``SourceSpec`` with its own SourceKind, Source, watched resource (Deployments with their own runtime
label), parser, trim spec, item prefix, id family and rank, added to the registry and nothing else. It
must be published once healthy, withheld while its probe fails, announced on its Deployment, rendered
by ``render``, and its run must replay identically from the event log and be told by ``explain``. If
any module still recognised a source by its name or prefix, the throwaway source would stay
HealthCheckPending, lose its Warning Events, not be watched, or get another source's ids, and this fails.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.eventlog.recorder import Recorder, RecorderSettings
from app import explain, replay
from app.render import render
from catalog_core import registry
from catalog_core.commands import EmitKubernetesEvent
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind, Ticked
from catalog_core.rules import candidates as claims
from catalog_core.sources.common import RUNTIME_LABEL, LabelMatch
from catalog_core.sources.freetoken import FreeTokenRuntime
from catalog_core.spec import SourceSpec, deployment_target, runtime_deployments, runtime_model_name
from catalog_core.trim import RUNTIME_DEPLOYMENT
from catalog_core.values import Source
from contracts import source_schema
from contracts.kinds import RESOURCES, sources_of
from tests.core import builders as b
from tests.core.harness import Cluster
from tests.core.throwaway_source import installed
from tests.simulation import SimulatedShell

WALKTHROUGH_MATCH = LabelMatch(RUNTIME_LABEL, "walkthrough")


def _spec() -> SourceSpec:
    # What a new source module declares (ARCHITECTURE.md): this one is served like FreeToken runtimes.
    return SourceSpec(
        Source.declare("walkthrough"),
        "walkthrough",
        SourceKind.declare("walkthrough-deployments"),
        runtime_deployments(WALKTHROUGH_MATCH),
        RUNTIME_DEPLOYMENT,
        rank=7,
        id_family="walkthrough",
        health_gated=True,
        claim=claims.runtime_claim,
        warning_target=deployment_target,
        parse=lambda state, obj: FreeTokenRuntime.from_k8s(obj, WALKTHROUGH_MATCH),
        value_type=FreeTokenRuntime,
        published_name=runtime_model_name,
    )


@pytest.fixture(autouse=True)
def throwaway_source() -> Iterator[SourceSpec]:
    spec = _spec()
    with installed(spec):  # the one line a new source adds to the registry's list
        yield spec
    assert "walkthrough-deployments" not in [k.value for k in SourceKind]  # withdrawn again


def _runtime(name: str, activation: str, **kw: object) -> dict:
    obj = b.freetoken_deployment(name, activation_name=activation, **kw)
    obj["metadata"]["labels"][RUNTIME_LABEL] = "walkthrough"
    return obj


def _cluster_objects() -> list[dict]:
    return [
        b.activation("walk-model", kind="local"),
        _runtime("walk-rt", "walk-model"),
        b.service("walk-rt"),
        b.kubeai_model("walk-model", ready=1),  # the same name, a lower rank: the new source wins
        # one whose endpoint is not a Service of the namespace: an error, announced on its Deployment
        b.activation("stray-model", kind="local"),
        _runtime("stray-rt", "stray-model", endpoint="http://evil.example/v1"),
    ]


HEALTH_KEY = "walkthrough/walk-rt"  # a gated source other than the first is keyed by its whole item key
ROW_ID = "ai-appliance-walkthrough-walk-model"


def test_fold_and_plan_publish_withhold_gate_and_announce_the_new_source() -> None:
    c = Cluster()
    c.start(*_cluster_objects())  # the runtime never answers its probe
    c.settle_health()
    assert registry.health_item(HEALTH_KEY) == registry.BY_SOURCE[Source("walkthrough")].item("walk-rt")
    record = c.record("walk-model", "walkthrough")
    assert record["state"] == "withheld" and record["reason"] == "HealthCheckFailed", record
    assert ROW_ID not in c.world.rows  # gated: KubeAI's route serves the name meanwhile
    stray = c.record("stray-model", "walkthrough")
    assert stray["state"] == "error" and stray["reason"] == "UntrustedEndpoint", stray
    warnings = [x for x in c.commands if isinstance(x, EmitKubernetesEvent)]
    assert [(w.involved.kind, w.involved.name, w.reason) for w in warnings] == [
        ("Deployment", "stray-rt", "UntrustedEndpoint")
    ]

    c.world.healthy = frozenset({HEALTH_KEY})
    c.run(Ticked(c.state.health[HEALTH_KEY].next_probe_at))  # the next probe succeeds
    record = c.record("walk-model", "walkthrough")
    assert record["state"] == "published", record
    assert ROW_ID in c.world.rows
    assert c.record("walk-model", "kubeai")["state"] == "conflict"  # outranked by the new source
    assert c.entry("walk-model")["source"] == "walkthrough"  # the catalog names the new id family


def test_render_shows_the_new_source() -> None:
    out = render(_cluster_objects(), CatalogConfig(), healthy=("walk-model",)).output
    assert ROW_ID in [d["model_info"]["id"] for d in out["litellm"]]
    withheld = render(_cluster_objects(), CatalogConfig()).output
    records = {(r["source"], r["name"]): r for r in withheld["routes"]}
    assert records[("walkthrough", "walk-model")]["reason"] == "HealthCheckFailed"


def test_a_run_of_the_new_source_replays_identically_from_the_event_log(tmp_path: Path) -> None:
    config = CatalogConfig()
    shell = SimulatedShell(config, now=1_767_225_600.0)
    settings = RecorderSettings(tmp_path / "events.jsonl", snapshot_every=5)
    shell.recorder = Recorder(settings, config, writer="inline", clock=lambda: shell.now, run_id="walk")
    objects = _cluster_objects()
    grouped: dict[SourceKind, list[dict]] = {s: [] for s in SourceKind if s is not SourceKind.SECRETS}
    for obj in objects:
        for source in sources_of(obj, config):
            grouped[source].append(obj)
    for source, objs in grouped.items():
        shell.listed(source, objs)
    shell.rows_observed()
    shell.settle()
    shell.world.healthy = frozenset({HEALTH_KEY})
    shell.advance(float(config.runtime_health_seconds) + 1)
    shell.settle()
    shell.recorder.close()
    assert ROW_ID in shell.world.rows

    out, err = io.StringIO(), io.StringIO()
    assert replay.run(str(settings.path), verify=True, out=out, err=err) == 0, err.getvalue()
    assert "replay identically" in out.getvalue()
    assert json.loads(settings.path.read_text().splitlines()[0])["k"] == "header"

    # explain tells the model's story from the new source's probes and claims
    out, err = io.StringIO(), io.StringIO()
    assert explain.run(str(settings.path), "walk-model", out=out, err=err) == 0, err.getvalue()
    story = out.getvalue()
    assert "claim walkthrough/walk-rt" in story and "HealthCheckPending" in story, story
    assert "final state" in story and "published" in story.split("final state", 1)[1], story


def test_the_new_source_is_watched_by_its_label_and_named_by_the_generated_schema(
    throwaway_source: SourceSpec,
) -> None:
    kind = throwaway_source.kind
    resource = RESOURCES[kind]
    assert (resource.api_version, resource.kind, resource.label) == (
        "apps/v1",
        "Deployment",
        WALKTHROUGH_MATCH,
    )
    assert kind in registry.CATALOG_KINDS  # planning waits for its first listing
    assert set(sources_of(_runtime("walk-rt", "walk-model"), CatalogConfig())) == {
        kind,
        SourceKind.DEPLOYMENTS,
    }
    defs = source_schema.sources_schema()["$defs"]  # what `just generate` would write
    assert "walkthrough-deployments" in defs["SourceKind"]["enum"] and "walkthrough" in defs["Source"]["enum"]
    assert "walkthrough" in defs["RouteId"]["pattern"]
