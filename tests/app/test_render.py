"""``model-catalog render``: output, golden example, errors, redaction, plans that spare foreign rows."""

from __future__ import annotations

import itertools
import json
import os
import resource
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
    *args: str,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    memory: int | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``memory``: the bytes of address space the process may use (it fails past them, not the machine)."""
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
        preexec_fn=(lambda: resource.setrlimit(resource.RLIMIT_AS, (memory, memory))) if memory else None,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def example():
    out = render(*EXAMPLE)
    assert out.returncode == 0, out.stderr
    return out


def test_golden_output_for_the_bundled_example(example):
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(example.stdout)
    stale = (
        "`render` of examples/ is not tests/golden/render-example.json: if the change is meant (a new "
        "catalog file), rewrite it with UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/app/test_render.py"
        " -k golden and review its diff"
    )
    assert json.loads(example.stdout) == json.loads(GOLDEN.read_text()), stale
    assert example.stdout == GOLDEN.read_text(), stale  # keys sorted, stable formatting


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
    assert routes["groq-llama"]["reason"] == "SecretNotAllowed"  # missing, or not on the allow-list
    assert "kubectl label secret -n ai groq-credentials" in routes["groq-llama"]["message"]
    assert "master key" in routes["borrowed-key"]["message"]
    # tpm "lots" is dropped with a warning (behaviour §5.2); the missing Secret is what withholds it
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


def test_api_base_credentials_are_redacted_unless_asked(tmp_path):
    """Issue 12: an apiBase's user:password@ and query are secrets like an API key (the provider's row in
    LiteLLM gets them; render shows them only with --show-secrets)."""
    api_base = "https://me:pw-render-1@api.example.com/v1?api-key=sk-render-2"
    models = {"models": [{"name": "q", "model": "openai/q", "apiBase": api_base}]}
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ai-external-models", "namespace": "ai"},
        "data": {"models.json": json.dumps(models)},
    }
    path = tmp_path / "cm.json"
    path.write_text(json.dumps(cm))
    info = tmp_path / "info.json"
    info.write_text(json.dumps({"data": []}))
    out = render("-f", str(path), "--litellm-info", str(info))
    assert out.returncode == 0, out.stderr
    for secret in ("pw-render-1", "sk-render-2"):
        assert secret not in out.stdout + out.stderr
    [row] = json.loads(out.stdout)["litellm"]
    assert row["litellm_params"]["api_base"] == "https://<redacted>@api.example.com/v1?<redacted>"
    shown = render("-f", str(path), "--litellm-info", str(info), "--show-secrets")
    assert json.loads(shown.stdout)["litellm"][0]["litellm_params"]["api_base"] == api_base


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


@pytest.mark.parametrize(
    "variable",
    [
        "OPENCODE_DEFAULT_CONTEXT_TOKENS",
        "CATALOG_RUNTIME_HEALTH_SECONDS",
        "CATALOG_LITELLM_BURST_ROWS",
        "CATALOG_LITELLM_SETTLE_SECONDS",
        "NAMESPACE",
    ],
)
def test_a_configuration_value_of_5000_digits_is_one_line_exit_2(variable):
    """int() refuses strings past 4,300 digits with an exception of its own: that was a traceback."""
    out = render("-f", str(ROOT / "examples/cluster.yaml"), env={variable: "1" * 5000})
    assert out.returncode == 2, out.stderr[-500:]
    assert "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(f"model-catalog: invalid configuration: {variable}: ")
    assert "(5,000 characters)" in line and len(line) < 300  # quoted, cut short


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


# --- Input no parser or later stage can take is one line and exit 2, never a traceback (issue 12)


def nested(levels: int, leaf: object = "x") -> object:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def model_with_spec(extra: object) -> dict[str, object]:
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": "deep", "namespace": "ai"},
        "spec": {"features": ["TextGeneration"], "engine": "VLLM", "extra": extra},
        "status": {"replicas": {"ready": 1}},
    }


def assert_one_line_exit_2(out: subprocess.CompletedProcess[str], path: Path, needle: str) -> None:
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [out.stderr.strip()]
    assert out.stderr.startswith(f"model-catalog: {path}") and needle in out.stderr, out.stderr
    assert out.stdout == ""


def test_json_nested_100000_lists_deep_is_one_line_exit_2(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert_one_line_exit_2(render("-f", str(deep)), deep, "nested more than 100 levels deep")


def test_yaml_nested_100000_lists_deep_is_one_line_exit_2(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("spec: " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert_one_line_exit_2(render("-f", str(deep)), deep, "document 1 is nested more than 100 levels deep")


@pytest.mark.parametrize(
    ("name", "text"),
    [
        # parses, then PyYAML's composer runs out of stack from ~330 levels
        (
            "model.yaml",
            "apiVersion: kubeai.org/v1\nkind: Model\nmetadata: {name: deep}\n"
            "spec:\n  extra: " + "{a: " * 400 + "x" + "}" * 400 + "\n",
        ),
        # parses, then copying the object for redaction runs out of stack from ~490 levels
        ("model.json", json.dumps(model_with_spec(nested(600)))),
        # a YAML anchor that contains itself is nested without end
        ("cycle.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: &d {d: *d}\n"),
    ],
)
def test_an_object_nested_past_what_render_can_follow_is_one_line_exit_2(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    assert_one_line_exit_2(render("-f", str(path)), path, "nested more than 100 levels deep")


def test_an_object_nested_100_levels_deep_is_still_read(tmp_path):
    """The limit is generous: kubectl's objects nest a few dozen levels at most."""
    doc = model_with_spec(nested(100 - 2))  # the object and its spec are two levels
    path = tmp_path / "limit.json"
    path.write_text(json.dumps(doc))
    out = render("-f", str(path))
    assert out.returncode == 0, out.stderr
    assert "deep" in {d["model_name"] for d in json.loads(out.stdout)["litellm"]}
    path.write_text(json.dumps(model_with_spec(nested(100 - 1))))
    assert_one_line_exit_2(render("-f", str(path)), path, "nested more than 100 levels deep")


@pytest.mark.parametrize("text", ['{"data": ' + "[" * 100_000 + "]" * 100_000 + "}", None])
def test_a_deeply_nested_litellm_info_is_one_line_exit_2(tmp_path, text):
    info = tmp_path / "info.json"
    if text is None:  # parses, but nests past the limit
        row = {"model_name": "m", "litellm_params": {"model": "openai/m"}, "model_info": {"id": "x"}}
        row["model_info"]["deep"] = nested(600)
        text = json.dumps({"data": [row]})
    info.write_text(text)
    out = render("-f", str(ROOT / "examples/cluster.yaml"), "--litellm-info", str(info))
    assert_one_line_exit_2(out, info, "nested more than 100 levels deep")


@pytest.mark.parametrize(("name", "number"), [("big.yaml", "9" * 5000), ("big.json", "9" * 5000)])
def test_an_integer_of_5000_digits_is_one_line_exit_2(tmp_path, name, number):
    path = tmp_path / name
    if name.endswith(".yaml"):
        path.write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\nreplicas: {number}\n")
    else:
        path.write_text(f'{{"apiVersion": "v1", "kind": "ConfigMap", "replicas": {number}}}')
    out = render("-f", str(path))
    assert_one_line_exit_2(out, path, "Exceeds the limit (4300 digits) for integer string conversion")
    assert "set_int_max_str_digits" not in out.stderr  # Python's advice is not the user's


def test_an_impossible_yaml_date_is_one_line_exit_2(tmp_path):
    path = tmp_path / "date.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {since: 2001-02-30}\n")
    assert_one_line_exit_2(render("-f", str(path)), path, "day is out of range for month")


def test_flow_style_yaml_starting_with_a_brace_is_read_as_yaml(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("{apiVersion: v1, kind: List, items: []}\n")
    out = render("-f", str(empty))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["litellm"] == []
    # the bundled example as one flow-style List renders exactly like the example itself
    docs = list(yaml.safe_load_all((ROOT / "examples/cluster.yaml").read_text()))
    flow = tmp_path / "flow.yaml"
    flow.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs}, default_flow_style=True)
    )
    assert flow.read_text().startswith("{") and not flow.read_text().startswith('{"')
    out = render("-f", str(flow), *EXAMPLE[2:])
    assert out.returncode == 0, out.stderr
    assert out.stdout == GOLDEN.read_text()


def test_text_that_is_neither_json_nor_flow_yaml_names_both_reasons(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("{apiVersion: v1, kind: [\n")
    out = render("-f", str(bad))
    assert_one_line_exit_2(out, bad, "invalid JSON: Expecting property name enclosed in double quotes")
    assert "read as YAML: expected the node content" in out.stderr


def _laughs(levels: int) -> str:
    """A KubeAI Model whose args are YAML aliases nested ``levels`` deep, each naming the one before nine
    times: 9**levels strings."""
    names = "abcdefghijklm"[:levels]
    lines = [f"    {names[0]}: &{names[0]} [{', '.join(['lol'] * 9)}]"]
    for before, name in itertools.pairwise(names):
        lines.append(f"    {name}: &{name} [{', '.join(['*' + before] * 9)}]")
    return (
        "apiVersion: kubeai.org/v1\nkind: Model\nmetadata: {name: lol, namespace: ai}\n"
        "status: {replicas: {all: 1, ready: 1}}\n"
        "spec:\n  features: [TextGeneration]\n  engine: VLLM\n  url: hf://x/lol\n  resourceProfile: cpu:1\n"
        "  laughs:\n" + "\n".join(lines) + f"\n  args: *{names[-1]}\n"
    )


def test_yaml_aliases_that_expand_without_bound_are_one_line_exit_2(tmp_path):
    """ "Billion laughs": a Model of 613 bytes whose args expand to 43 million strings (the issue's
    646-byte file, to more than 2.4 GB) kept render busy for minutes. Refused before anything is built."""
    bomb = tmp_path / "laughs.yaml"
    bomb.write_text(_laughs(8))
    assert len(bomb.read_bytes()) < 646
    out = render("-f", str(bomb), memory=1 << 30, timeout=60)
    assert_one_line_exit_2(out, bomb, "document 1: its aliases (*name) expand it by more than 1,000,000")


def test_yaml_anchors_that_share_parts_of_objects_are_still_read(tmp_path):
    """Anchors and merge keys within bounds are ordinary YAML: two Models sharing one spec render."""
    shared = tmp_path / "anchors.yaml"
    shared.write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: kubeai.org/v1, kind: Model, metadata: {name: m1, namespace: ai},\n"
        "   spec: &spec {features: [TextGeneration], engine: VLLM, url: 'hf://x/m1',\n"
        "                resourceProfile: 'cpu:1'},\n"
        "   status: &status {replicas: {all: 1, ready: 1}}}\n"
        "- {apiVersion: kubeai.org/v1, kind: Model, metadata: {name: m2, namespace: ai},\n"
        "   spec: {<<: *spec, url: 'hf://x/m2'}, status: *status}\n"
    )
    out = render("-f", str(shared))
    assert out.returncode == 0, out.stderr
    assert sorted(d["model_name"] for d in json.loads(out.stdout)["litellm"]) == ["m1", "m2"]
    small = tmp_path / "small-laughs.yaml"
    small.write_text(_laughs(5))  # 59,049 strings: within the bound
    out = render("-f", str(small))
    assert out.returncode == 0, out.stderr
    assert [d["model_name"] for d in json.loads(out.stdout)["litellm"]] == ["lol"]


def _scaling_model(name: str, ready: int, pods: int, **scaling: object) -> dict[str, object]:
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": name, "namespace": "ai", "uid": f"uid-{name}"},
        "spec": {"features": ["TextGeneration"], "engine": "VLLM", "url": f"hf://x/{name}", **scaling},
        "status": {"replicas": {"all": pods, "ready": ready}},
    }


SCALING_MODELS = [
    _scaling_model("cold", 0, 0, minReplicas=0),  # scaled to zero
    _scaling_model("waking", 0, 1),  # no minReplicas (KubeAI reads 0), its first pod starting
    _scaling_model("always-on", 0, 1, minReplicas=1),
    _scaling_model("manual", 0, 1, minReplicas=0, autoscalingDisabled=True),
]


def test_render_publishes_a_model_that_scales_from_zero_and_withholds_the_others(tmp_path):
    """Behaviour §1.1: minReplicas 0 and no ready replica: its LiteLLM row, its catalog entry and a
    published/ScalesFromZero record; minReplicas 1 or autoscalingDisabled and none ready: withheld."""
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": SCALING_MODELS}))
    out = render("-f", str(path))
    assert out.returncode == 0, out.stderr
    output = json.loads(out.stdout)
    rows = {r["model_name"]: r for r in output["litellm"]}
    assert set(rows) == {"cold", "waking"}
    assert rows["cold"]["litellm_params"]["api_base"] == "http://kubeai.ai.svc.cluster.local/openai/v1"
    entries = {m["id"] for m in json.loads(output["catalog"]["catalog.json"])["models"]}
    assert entries == {"cold", "waking"}
    routes = {r["name"]: (r["state"], r["reason"]) for r in output["routes"]}
    assert routes == {
        "cold": ("published", "ScalesFromZero"),
        "waking": ("published", "ScalesFromZero"),
        "always-on": ("withheld", "NotReady"),
        "manual": ("withheld", "NotReady"),
    }
    record = next(r for r in json.loads(output["catalog"]["routes.json"]) if r["name"] == "cold")
    assert "cold start" in record["message"] and record["id"] == "ai-appliance-kubeai-cold"
    assert errors("routes.schema.json", json.loads(output["catalog"]["routes.json"])) == []

    # the setting off: the previous rule, every Model published only while ready
    off = render("-f", str(path), env={"CATALOG_KUBEAI_SCALE_FROM_ZERO": "false"})
    assert off.returncode == 0, off.stderr
    output = json.loads(off.stdout)
    assert output["litellm"] == []
    assert {r["reason"] for r in output["routes"]} == {"NotReady"}
