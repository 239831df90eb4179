"""Generate ``examples/event-log.jsonl``: a realistic recorded run of the controller.

    .venv/bin/python examples/make_event_log.py [OUT]      # default: examples/event-log.jsonl

The run is produced by the real fold and the real recorder; the core's simulated
world carries out the commands (LiteLLM rows, the catalog ConfigMap, the
AgentTemplate, rollouts, health probes). It starts from the cluster of
``examples/cluster.yaml`` with LiteLLM holding a hand-made row, a legacy row of
ours and a stale row of ours, and then:

1. the controller starts: every source is listed, LiteLLM is observed, and the
   first ticks publish the routes, the catalog, the AgentTemplate and the
   openclaw rollout; the FreeToken runtime ``phi-4-mini`` passes its first probe;
2. KubeAI Model ``qwen2.5-coder-7b`` finishes pulling (ready 0 -> 1) and is published; ``gemma-3-4b``,
   which scales from zero (published while scaled to zero), is started by a request, serves it and is
   scaled back to zero by KubeAI: nothing is written;
3. someone edits ``ConfigMap/ai-external-models`` with a typo (invalid JSON:
   the last good models stay, routes.json says InvalidJSON, a Warning Event is
   emitted), then fixes it, adding ``gpt-4.1-mini``;
4. the Private Mesh adds a fallback row for ``llama-3.1-8b`` (owner
   private-mesh, order 1, same model_name) plus its ``mesh/`` alias: the
   catalog entry gains the route and the alias; the row itself is never touched;
5. the FreeToken runtime fails its health probe twice: ``phi-4-mini`` is withdrawn
   (HealthCheckFailed).

Secrets in the cluster (the OpenAI and Mistral keys) are redacted before the
core sees them: the log holds fingerprints only. The output is deterministic:
record timestamps follow the simulated clock (2026-01-01 onwards), so the same
code writes the same bytes. Try:

    .venv/bin/model-catalog replay examples/event-log.jsonl --verify
    .venv/bin/model-catalog explain examples/event-log.jsonl phi-4-mini
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# This checkout's code first, whatever the interpreter has installed (another checkout's editable install,
# a wheel): the example is what this code writes. The simulated shell is test scaffolding
# (tests/simulation.py), not part of the installed packages.
sys.path.insert(0, str(HERE.parent))

from adapters.eventlog.recorder import Recorder, RecorderSettings
from app.inputs import read_model_info, read_objects
from catalog_core import raw
from catalog_core.commands import Command, ProbeRuntime
from catalog_core.config import CatalogConfig
from catalog_core.events import Event, RuntimeProbed, SourceKind
from catalog_core.fold import initial_state
from catalog_core.gates import Gate
from catalog_core.registry import CATALOG_KINDS
from contracts.kinds import sources_of
from tests.simulation import SimulatedShell

START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
RUN_ID = "example-0001"
# The sources this run lists (every one but Secrets, which the core asks for by name): exactly the ones
# the recorded controller watched, so a source added later changes neither the run nor what it waits for.
LISTED = (
    SourceKind.KUBEAI_MODELS,
    SourceKind.EXTERNAL_MODELS,
    SourceKind.MODEL_ACTIVATIONS,
    SourceKind.FREETOKEN_DEPLOYMENTS,
    SourceKind.SERVICES,
    SourceKind.AGENT_TEMPLATES,
    SourceKind.PODS,
    SourceKind.REPLICASETS,
    SourceKind.DEPLOYMENTS,
    SourceKind.STATEFULSETS,
    SourceKind.DAEMONSETS,
    SourceKind.CATALOG_CONFIGMAP,
)
MESH_ROWS = ("private-mesh-llama-3.1-8b-peer-a", "private-mesh-alias-mesh-llama-3.1-8b")


def _by_source(config: CatalogConfig) -> dict[SourceKind, list[dict[str, Any]]]:
    grouped: dict[SourceKind, list[dict[str, Any]]] = {kind: [] for kind in (*LISTED, SourceKind.SECRETS)}
    for obj in read_objects([str(HERE / "cluster.yaml")]):
        for source in sources_of(obj, config):
            if source in grouped:
                grouped[source].append(obj)
    return grouped


def _find(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return copy.deepcopy(next(o for o in objects if raw.name_of(o) == name))


def generate(out: Path, config: CatalogConfig | None = None) -> Recorder:
    config = config if config is not None else CatalogConfig()
    settings = RecorderSettings(out, max_bytes=64 * 1024 * 1024, max_files=1, snapshot_every=38, ring_size=0)
    shell = SimulatedShell(config, now=START)
    world = shell.world
    world.reads_after_writes = Gate.PLANNED_LITELLM_READS not in config.gates

    def execute(command: Command) -> list[Event]:
        # The simulated world answers probes of unhealthy runtimes vaguely; say what a real probe would.
        if isinstance(command, ProbeRuntime) and command.runtime not in world.healthy:
            return [RuntimeProbed(command.runtime, command.url, False, "HTTP 503 Service Unavailable")]
        return world.execute(command)

    shell = SimulatedShell(config, world=world, now=START, executor=execute)
    shell.state = initial_state(config, [k for k in (*LISTED, SourceKind.SECRETS) if k in CATALOG_KINDS])
    recorder = Recorder(
        settings, config, writer="inline", state=shell.state, clock=lambda: shell.now, run_id=RUN_ID
    )
    shell.recorder = recorder
    grouped = _by_source(config)
    info = {
        str(raw.string(r, "model_info", "id")): r for r in read_model_info(str(HERE / "litellm-info.json"))
    }

    # The simulated cluster: what a Secret watch would find, templates, workloads, healthy runtimes.
    shell.secrets(grouped.pop(SourceKind.SECRETS))
    world.templates = {raw.name_of(t): copy.deepcopy(t) for t in grouped[SourceKind.AGENT_TEMPLATES]}
    for source, kind in ((SourceKind.DEPLOYMENTS, "Deployment"), (SourceKind.STATEFULSETS, "StatefulSet")):
        for w in grouped[source]:
            world.workloads[f"{kind}/{raw.name_of(w)}"] = copy.deepcopy(w)
    world.healthy = frozenset({"phi-4-mini-freetoken"})
    # LiteLLM before the controller starts: a hand-made row, a legacy row of ours, a stale row of ours.
    for rid in ("b3a9f0c2d1e4", "ai-appliance-kubeai-nomic-embed-text", "ai-appliance-kubeai-mixtral-8x7b"):
        world.rows[rid] = copy.deepcopy(info[rid])

    # 1. Start: every source listed, LiteLLM observed, then plan until nothing is left to do.
    for source in LISTED:
        shell.listed(source, grouped[source])
    shell.rows_observed()
    shell.settle()

    # 2. qwen2.5-coder-7b finishes pulling.
    shell.advance(20)
    qwen = _find(grouped[SourceKind.KUBEAI_MODELS], "qwen2.5-coder-7b")
    qwen["metadata"]["resourceVersion"] = "6101"
    shell.upsert(SourceKind.KUBEAI_MODELS, qwen)
    shell.settle()
    qwen = copy.deepcopy(qwen)
    qwen["metadata"]["resourceVersion"] = "6102"
    qwen["status"]["replicas"]["ready"] = 1
    shell.upsert(SourceKind.KUBEAI_MODELS, qwen)
    shell.settle()
    gemma = _find(grouped[SourceKind.KUBEAI_MODELS], "gemma-3-4b")
    for version, pods, ready in (("6201", 1, 0), ("6202", 1, 1), ("6203", 0, 0)):
        shell.advance(5)
        gemma = copy.deepcopy(gemma)
        gemma["metadata"]["resourceVersion"] = version
        gemma["status"]["replicas"] = {"all": pods, "ready": ready}
        shell.upsert(SourceKind.KUBEAI_MODELS, gemma)
        shell.settle()

    # 3. Someone adds gpt-4.1-mini to ai-external-models but forgets a comma; then fixes it.
    shell.advance(20)
    external = _find(grouped[SourceKind.EXTERNAL_MODELS], "ai-external-models")
    doc = json.loads(external["data"]["models.json"])
    doc["models"].append(
        {
            "name": "gpt-4.1-mini",
            "model": "openai/gpt-4.1-mini",
            "apiKeySecretRef": {"name": "openai-credentials", "key": "apiKey"},
            "contextWindow": 1047576,
            "maxOutputTokens": 32768,
        }
    )
    text = json.dumps(doc, indent=2) + "\n"
    typo = text.replace('},\n    {\n      "name": "gpt-4.1-mini"', '}\n    {\n      "name": "gpt-4.1-mini"')
    assert typo != text
    for version, content in (("7001", typo), ("7002", text)):
        edited = copy.deepcopy(external)
        edited["metadata"]["resourceVersion"] = version
        edited["data"]["models.json"] = content
        shell.upsert(SourceKind.EXTERNAL_MODELS, edited)
        shell.settle()
        shell.advance(20)

    # 4. The Private Mesh adds a fallback for llama-3.1-8b (order 1) and its mesh/ alias.
    shell.advance(20)
    for rid in MESH_ROWS:
        world.rows[rid] = copy.deepcopy(info[rid])
    shell.rows_observed()
    shell.settle()

    # 5. phi-4-mini's runtime stops answering /health: two failed probes withdraw it.
    world.healthy = frozenset()
    for _ in range(3):
        shell.advance(15)
        shell.settle()
    shell.advance(15)
    shell.rows_observed()
    shell.settle()
    recorder.close()
    return recorder


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else HERE / "event-log.jsonl"
    recorder = generate(out)
    stats = recorder.stats
    print(f"wrote {out}: {stats.records_written} records, {stats.bytes_written} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
