"""ARCHITECTURE.md's "How to add a new source", held by a test: a source built from a spec alone.

A throwaway health-gated runtime source (its own item prefix, id family and rank) takes the place of the
FreeToken spec in the registry; nothing else changes. It must be published once healthy, withheld while
its probe fails, announced on its Deployment, rendered by ``render``, and its run must replay identically
from the event log. If any module still recognised the FreeToken source by name or prefix, the throwaway
source would stay HealthCheckPending, lose its Warning Events, or get FreeToken's ids, and this fails.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import attrs
import pytest

from adapters.eventlog.recorder import Recorder, RecorderSettings
from app import explain, replay
from app.render import render
from catalog_core import registry
from catalog_core.commands import EmitKubernetesEvent
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind, Ticked
from catalog_core.rules import candidates as claims
from catalog_core.values import Source
from contracts.kinds import sources_of
from tests.core import builders as b
from tests.core.harness import Cluster
from tests.simulation import SimulatedShell

THROWAWAY = attrs.evolve(
    registry.BY_SOURCE[Source.FREETOKEN],
    item_prefix="walkthrough",
    id_family="walkthrough",
    rank=7,
    health_gated=True,
    claim=claims.runtime_claim,
)


@pytest.fixture(autouse=True)
def throwaway_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    specs = tuple(THROWAWAY if s.source is Source.FREETOKEN else s for s in registry.SPECS)
    registry.check(specs)  # what the registry checks at import holds for it too
    monkeypatch.setattr(registry, "SPECS", specs)
    monkeypatch.setattr(registry, "BY_SOURCE", {s.source: s for s in specs})
    monkeypatch.setattr(registry, "BY_PREFIX", {s.item_prefix: s for s in specs})
    monkeypatch.setattr(registry, "BY_KIND", {s.kind: s for s in specs})


def _cluster_objects() -> list[dict]:
    return [
        b.activation("walk-model", kind="local"),
        b.freetoken_deployment("walk-rt", activation_name="walk-model"),
        b.service("walk-rt"),
        b.kubeai_model("walk-model", ready=1),  # the same name, a lower rank: the new source wins
        # one whose endpoint is not a Service of the namespace: an error, announced on its Deployment
        b.activation("stray-model", kind="local"),
        b.freetoken_deployment("stray-rt", activation_name="stray-model", endpoint="http://evil.example/v1"),
    ]


HEALTH_KEY = "walkthrough/walk-rt"  # a gated source other than the first is keyed by its whole item key
ROW_ID = "ai-appliance-walkthrough-walk-model"


def test_fold_and_plan_publish_withhold_gate_and_announce_the_new_source() -> None:
    c = Cluster()
    c.start(*_cluster_objects())  # the runtime never answers its probe
    c.settle_health()
    assert registry.health_item(HEALTH_KEY) == THROWAWAY.item("walk-rt")
    record = c.record("walk-model", "freetoken")
    assert record["state"] == "withheld" and record["reason"] == "HealthCheckFailed", record
    assert ROW_ID not in c.world.rows  # gated: KubeAI's route serves the name meanwhile
    stray = c.record("stray-model", "freetoken")
    assert stray["state"] == "error" and stray["reason"] == "UntrustedEndpoint", stray
    warnings = [x for x in c.commands if isinstance(x, EmitKubernetesEvent)]
    assert [(w.involved.kind, w.involved.name, w.reason) for w in warnings] == [
        ("Deployment", "stray-rt", "UntrustedEndpoint")
    ]

    c.world.healthy = frozenset({HEALTH_KEY})
    c.run(Ticked(c.state.health[HEALTH_KEY].next_probe_at))  # the next probe succeeds
    record = c.record("walk-model", "freetoken")
    assert record["state"] == "published", record
    assert ROW_ID in c.world.rows
    assert c.record("walk-model", "kubeai")["state"] == "conflict"  # outranked by the new source
    assert c.entry("walk-model")["source"] == "walkthrough"  # the catalog names the new id family


def test_render_shows_the_new_source() -> None:
    out = render(_cluster_objects(), CatalogConfig(), healthy=("walk-model",)).output
    assert ROW_ID in [d["model_info"]["id"] for d in out["litellm"]]
    withheld = render(_cluster_objects(), CatalogConfig()).output
    records = {(r["source"], r["name"]): r for r in withheld["routes"]}
    assert records[("freetoken", "walk-model")]["reason"] == "HealthCheckFailed"


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
