"""``model-catalog render``: output, golden example, errors, redaction, plans that spare foreign rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.contracts.schemas import errors

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = [
    "-f",
    str(ROOT / "examples/cluster.yaml"),
    "--litellm-info",
    str(ROOT / "examples/litellm-info.json"),
    "--healthy",
    "phi-4-mini",
]
GOLDEN = ROOT / "tests/golden/render-example.json"


def render(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NAMESPACE", "AI_APPLIANCE", "OPENCODE", "LITELLM"))
    }
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "render", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=full_env,
        check=False,
    )


@pytest.fixture(scope="module")
def example():
    out = render(*EXAMPLE)
    assert out.returncode == 0, out.stderr
    return out


def test_golden_output_for_the_bundled_example(example):
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(example.stdout)
    assert json.loads(example.stdout) == json.loads(GOLDEN.read_text())
    assert example.stdout == GOLDEN.read_text()  # keys sorted, stable formatting


def test_output_matches_its_schema(example):
    output = json.loads(example.stdout)
    assert errors("render-output.schema.json", output) == []
    assert errors("catalog.schema.json", json.loads(output["catalog"]["catalog.json"])) == []
    assert errors("routes.schema.json", json.loads(output["catalog"]["routes.json"])) == []


def test_example_models_json_items_match_their_schema():
    docs = list(yaml.safe_load_all((ROOT / "examples/cluster.yaml").read_text()))
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "ai-external-models")
    items = json.loads(cm["data"]["models.json"])["models"]
    assert [bool(errors("models-json-item.schema.json", i)) for i in items] == [
        False,
        False,
        False,
        True,
    ]  # tpm "lots"


def test_rejected_items_warn_but_succeed(example):
    assert "SecretNotAllowed" in example.stderr
    assert "InvalidField: groq-llama" in example.stderr
    routes = {r["name"]: r for r in json.loads(example.stdout)["routes"]}
    assert routes["borrowed-key"]["state"] == "error"
    assert routes["groq-llama"]["reason"] == "SecretNotFound"
    # tpm "lots" is dropped with a warning (contracts A.8); the missing Secret is what withholds it
    assert [w["field"] for w in routes["groq-llama"]["warnings"]] == ["tpm"]


def test_plan_never_touches_rows_the_catalog_does_not_own(example):
    output = json.loads(example.stdout)
    info = json.loads((ROOT / "examples/litellm-info.json").read_text())["data"]
    foreign = {
        r["model_info"]["id"]
        for r in info
        if r["model_info"].get("ai_appliance_owner") != "model-catalog"
        and not (
            r["model_info"].get("ai_appliance_managed") and r["model_info"]["id"].startswith("ai-appliance-")
        )
    }
    planned = {step["id"] for step in output["plan"]}
    assert planned
    assert not planned & foreign
    ops = {(s["op"], s["id"]) for s in output["plan"]}
    assert ("delete", "ai-appliance-kubeai-mixtral-8x7b") in ops  # owned, no longer desired
    assert ("update", "ai-appliance-kubeai-nomic-embed-text") in ops  # legacy row adopted
    assert ("create", "ai-appliance-kubeai-llama-3.1-8b") in ops


def test_secrets_are_redacted_unless_asked(example):
    assert "sk-example-do-not-use-0000" not in example.stdout + example.stderr
    assert "<redacted: Secret ai/openai-credentials key apiKey>" in example.stdout
    shown = render(*EXAMPLE, "--show-secrets")
    assert shown.returncode == 0
    assert "sk-example-do-not-use-0000" in shown.stdout


def test_without_litellm_info_there_is_no_plan_and_everything_is_desired():
    out = render("-f", str(ROOT / "examples/cluster.yaml"))
    assert out.returncode == 0, out.stderr
    output = json.loads(out.stdout)
    assert "plan" not in output
    ids = [d["model_info"]["id"] for d in output["litellm"]]
    assert ids == sorted(ids)
    assert "ai-appliance-freetoken-phi-4-mini" not in ids  # render never probes: not healthy unless --healthy


def test_stdin_json_list_and_multiple_files(tmp_path):
    docs = list(yaml.safe_load_all((ROOT / "examples/cluster.yaml").read_text()))
    models = [d for d in docs if d["kind"] == "Model"]
    rest = [d for d in docs if d["kind"] != "Model"]
    (tmp_path / "rest.yaml").write_text(yaml.safe_dump_all(rest))
    out = render(
        "-f",
        "-",
        "-f",
        str(tmp_path / "rest.yaml"),
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": models}),
    )
    assert out.returncode == 0, out.stderr
    assert {"llama-3.1-8b", "nomic-embed-text"} <= {
        d["model_name"] for d in json.loads(out.stdout)["litellm"]
    }


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("kind: [unclosed", "invalid YAML"),
        ("just a string\n", "not a Kubernetes object"),
        ("apiVersion: v1\nkind: ConfigMap\n", "not a Kubernetes object"),
        ('{"kind": "Model",', "invalid JSON"),
    ],
)
def test_unreadable_input_exits_2_naming_the_file(tmp_path, content, needle):
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    out = render("-f", str(bad))
    assert out.returncode == 2
    assert str(bad) in out.stderr and needle in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_invalid_configuration_is_one_line_exit_2():
    out = render("-f", str(ROOT / "examples/cluster.yaml"), env={"OPENCODE_DEFAULT_CONTEXT_TOKENS": "lots"})
    assert out.returncode == 2
    expected = "invalid configuration: OPENCODE_DEFAULT_CONTEXT_TOKENS: must be an integer >= 1, got 'lots'"
    assert out.stderr.strip().splitlines() == [f"model-catalog: {expected}"]


def test_configuration_from_the_environment_changes_the_output():
    out = render(
        "-f", str(ROOT / "examples/cluster.yaml"), env={"KUBEAI_API_BASE": "http://kubeai.example/v1"}
    )
    bases = {d["litellm_params"].get("api_base") for d in json.loads(out.stdout)["litellm"]}
    assert "http://kubeai.example/v1" in bases


@pytest.mark.parametrize("interval", ["1", "15"])
def test_a_runtime_failing_its_probes_renders_as_withheld_whatever_the_probe_interval(interval):
    """Regression (fault suite): with CATALOG_RUNTIME_HEALTH_SECONDS=1 render never reached a fixed
    point and crashed with a traceback; with 15 it showed HealthCheckPending where a running controller
    settles on HealthCheckFailed (after the second failed probe)."""
    out = render("-f", str(ROOT / "examples/cluster.yaml"), env={"CATALOG_RUNTIME_HEALTH_SECONDS": interval})
    assert out.returncode == 0, out.stderr
    records = {(r["source"], r["name"]): r for r in json.loads(out.stdout)["routes"]}
    assert records[("freetoken", "phi-4-mini")]["reason"] == "HealthCheckFailed"
    healthy = render(*EXAMPLE, env={"CATALOG_RUNTIME_HEALTH_SECONDS": interval})
    assert healthy.returncode == 0, healthy.stderr
    records = {(r["source"], r["name"]): r for r in json.loads(healthy.stdout)["routes"]}
    assert records[("freetoken", "phi-4-mini")]["reason"] == "Published"
