"""Drop-in compatibility, offline: the catalog keys, the bootstrap placeholder and deploy/ names are the
ones the appliance's consumers and manifests read (behaviour §5.1, §5.2), compared with the contract's
literal text in ``tests/compat/contract.py`` — never with a golden file made from our own output. Every key of
the contract is written; a key beyond it is one ``catalog_core/catalog_files.py`` declares (a file for an
app the contract does not name yet)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from app.placeholder import placeholder_yaml
from catalog_core.catalog_files import KEYS
from catalog_core.config import CatalogConfig
from tests.compat import contract as c
from tests.core import builders as b
from tests.core.harness import Cluster
from tests.unavailable import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _defaults_env(text: str) -> list[tuple[str, str]]:
    assert text.endswith("\n") and not text.endswith("\n\n")
    return [tuple(line.split("=", 1)) for line in text[:-1].split("\n")]


def _catalog() -> Cluster:
    cluster = Cluster()
    cluster.start(
        b.kubeai_model("llama", args=["--max-model-len=20000"]),
        b.kubeai_model("embed", features=["TextEmbedding"]),
    )
    return cluster


def _contract_keys_and_the_declared_ones(keys: set[str]) -> None:
    assert keys >= c.ALL_DATA_KEYS, f"the contract's keys {sorted(c.ALL_DATA_KEYS - keys)} are not written"
    assert keys == KEYS, f"not declared in catalog_core/catalog_files.py: {sorted(keys - KEYS)}"


def test_the_written_catalog_has_the_contract_keys_and_only_declared_ones():
    _contract_keys_and_the_declared_ones(set(_catalog().data))


def test_defaults_env_has_todays_names_in_todays_order():
    data = _catalog().data
    lines = _defaults_env(data[c.DEFAULTS_ENV])
    assert [name for name, _ in lines] == list(c.DEFAULTS_ENV_NAMES)
    values = dict(lines)
    assert values["AI_APPLIANCE_MODEL_CATALOG_READY"] == "true"
    assert values["AI_APPLIANCE_DEFAULT_CHAT_MODEL"] == "llama"
    assert values["AI_APPLIANCE_DEFAULT_OPENCODE_MODEL"] == "litellm/llama"
    assert values["AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL"] == "embed"
    assert (
        values["AI_APPLIANCE_MODEL_COUNT"],
        values["AI_APPLIANCE_CHAT_MODEL_COUNT"],
        values["AI_APPLIANCE_EMBEDDING_MODEL_COUNT"],
    ) == ("2", "1", "1")
    for key in c.SCALAR_KEYS:  # each scalar key says what its defaults.env line says
        assert data[key] == values[key], key


def test_agent_fragments_keep_their_literal_placeholders():
    data = _catalog().data
    openclaw = json.loads(data["openclaw.json"])["models"]["providers"]["litellm"]
    assert openclaw["apiKey"] == c.OPENCLAW_API_KEY
    assert openclaw["baseUrl"] == c.LITELLM_API_BASE
    for key in ("opencode-providers.json", "paperclip-opencode-providers.json"):
        provider = json.loads(data[key])["litellm"]
        assert provider["npm"] == c.OPENCODE_NPM
        assert provider["options"] == {"baseURL": c.LITELLM_API_BASE, "apiKey": c.OPENCODE_API_KEY}
    assert json.loads(data["hermes.yaml"])["providers"]["litellm"]["key_env"] == c.HERMES_KEY_ENV
    entry = json.loads(data["catalog.json"])["models"][0]
    assert c.ENTRY_FIELDS - {"contextWindow", "maxOutputTokens"} <= set(entry)


def test_the_bootstrap_placeholder_ships_every_key_with_empty_values():
    """Issue 11, item 3: OpenClaw and Paperclip mount their keys and cannot start without them."""
    (cm,) = _docs(DEPLOY / "bootstrap" / "configmap-ai-model-catalog.yaml")
    data = cm["data"]
    _contract_keys_and_the_declared_ones(set(data))
    assert cm["metadata"]["annotations"][c.CATALOG_HASH_ANNOTATION] == c.BOOTSTRAP_HASH
    lines = _defaults_env(data[c.DEFAULTS_ENV])
    assert [name for name, _ in lines] == list(c.DEFAULTS_ENV_NAMES)
    assert dict(lines)["AI_APPLIANCE_MODEL_CATALOG_READY"] == "false"
    assert dict(lines)["AI_APPLIANCE_MODEL_CATALOG_HASH"] == c.BOOTSTRAP_HASH
    assert data["AI_APPLIANCE_MODEL_CATALOG_READY"] == "false"
    assert data["AI_APPLIANCE_MODEL_CATALOG_HASH"] == c.BOOTSTRAP_HASH
    for key in ("AI_APPLIANCE_DEFAULT_CHAT_MODEL", "AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL"):
        assert data[key] == ""
    assert json.loads(data["catalog.json"])["models"] == []
    assert json.loads(data["chat-models.json"])["models"] == []
    assert json.loads(data["paperclip-adapter-models.json"]) == {"opencode_local": []}
    assert (
        json.loads(data["openclaw.json"])["models"]["providers"]["litellm"]["baseUrl"] == c.LITELLM_API_BASE
    )
    assert json.loads(data["routes.json"]) == []


def test_the_placeholder_file_is_what_the_placeholder_command_prints():
    assert (DEPLOY / "bootstrap" / "configmap-ai-model-catalog.yaml").read_text() == placeholder_yaml(
        CatalogConfig()
    ), "deploy/bootstrap/configmap-ai-model-catalog.yaml is stale: run `just generate`"
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "placeholder"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "NAMESPACE": "tenant"},
        check=True,
    )
    assert yaml.safe_load(out.stdout)["metadata"]["namespace"] == "tenant"


def test_deploy_keeps_todays_object_names_and_the_appliances_master_key_secret():
    """Issue 11, item 2: on the appliance the master key is litellm-masterkey-secret/LITELLM_MASTER_KEY."""
    (deployment,) = _docs(DEPLOY / "controller" / "deployment.yaml")
    (account,) = _docs(DEPLOY / "controller" / "serviceaccount.yaml")
    assert deployment["metadata"]["name"] == account["metadata"]["name"] == c.CONTROLLER_NAME
    assert deployment["metadata"]["namespace"] == account["metadata"]["namespace"] == "ai"
    spec = deployment["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == c.CONTROLLER_NAME
    env = {e["name"]: e for e in spec["containers"][0]["env"]}
    assert env["LITELLM_MASTER_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": c.MASTER_KEY_SECRET,
        "key": c.MASTER_KEY_KEY,
    }


def test_the_pod_disruption_budget_is_policy_v1():
    """Issue 11, item 9: policy/v1beta1 was removed in Kubernetes 1.25."""
    (pdb,) = _docs(DEPLOY / "controller" / "poddisruptionbudget.yaml")
    assert pdb["apiVersion"] == "policy/v1"


def test_the_master_key_overlay_example_points_at_another_secret():
    if shutil.which("kubectl") is None:
        skip_or_fail("kubectl is not installed (it renders the kustomize overlay)")
    out = subprocess.run(
        ["kubectl", "kustomize", str(REPO / "examples/overlays/master-key-secret")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    deployment = next(d for d in yaml.safe_load_all(out) if d and d["kind"] == "Deployment")
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["LITELLM_MASTER_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "my-litellm-admin",
        "key": "masterKey",
    }
    assert len(env) == len(deployment["spec"]["template"]["spec"]["containers"][0]["env"])


def test_render_of_the_examples_shows_todays_key_names():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "render",
            "-f",
            "examples/cluster.yaml",
            "--litellm-info",
            "examples/litellm-info.json",
            "--healthy",
            "phi-4-mini",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    )
    catalog = json.loads(out.stdout)["catalog"]
    _contract_keys_and_the_declared_ones(set(catalog))
    assert [name for name, _ in _defaults_env(catalog[c.DEFAULTS_ENV])] == list(c.DEFAULTS_ENV_NAMES)
