"""The appliance's consumers against the real kube-apiserver (issue 11): every ConfigMap key their manifests
reference exists in the bootstrap placeholder of ``deploy/`` and in the catalog the running controller
writes, and AnythingLLM's init container, which waits for READY=true in defaults.env, gets through."""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.compat.world import World
from tests.e2e.harness import LiteLLMAdmin, wait_for

pytestmark = [pytest.mark.kube, pytest.mark.litellm, pytest.mark.slow]

CATALOG = "ai-model-catalog"
MANIFESTS = Path(__file__).parent / "manifests" / "consumers.yaml"


def _consumers() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFESTS.read_text()) if d]


def _pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    return dict(workload["spec"]["template"]["spec"])


def referenced_keys(workload: dict[str, Any]) -> tuple[set[str], bool]:
    """The catalog keys a workload reads by name, and whether it also reads the whole ConfigMap."""
    spec = _pod_spec(workload)
    keys: set[str] = set()
    whole = False
    for container in spec.get("initContainers", []) + spec["containers"]:
        for env in container.get("env", []):
            ref = env.get("valueFrom", {}).get("configMapKeyRef")
            if ref and ref["name"] == CATALOG:
                assert ref.get("optional") is not True  # the appliance's refs are not optional
                keys.add(ref["key"])
        for source in container.get("envFrom", []):
            whole |= source.get("configMapRef", {}).get("name") == CATALOG
    for volume in spec.get("volumes", []):
        cm = volume.get("configMap")
        if cm and cm["name"] == CATALOG:
            if "items" in cm:
                keys |= {item["key"] for item in cm["items"]}
            else:
                whole = True
    return keys, whole


def init_condition(workload: dict[str, Any], data: dict[str, str], tmp: Path) -> int:
    """Run the init container's own shell command once against ``data`` mounted as its volume says;
    its exit status (124 when it is still waiting after a few seconds)."""
    spec = _pod_spec(workload)
    (init,) = spec["initContainers"]
    (mount,) = init["volumeMounts"]
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    root = tmp / mount["name"]
    root.mkdir(parents=True, exist_ok=True)
    for item in volume["configMap"]["items"]:
        if item["key"] in data:
            (root / item["path"]).write_text(data[item["key"]])
        else:
            (root / item["path"]).unlink(missing_ok=True)
    command = init["command"][-1].replace(mount["mountPath"], str(root))
    return subprocess.run(["timeout", "3", "sh", "-c", command], capture_output=True, check=False).returncode


@pytest.fixture(scope="module")
def world(kube_peer: Any, litellm_peer: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    admin = LiteLLMAdmin(litellm_peer.base_url, litellm_peer.master_key)
    admin.delete_where(lambda row: False)  # a clean LiteLLM: this test publishes two models of its own
    w = World(
        Path(kube_peer.kubeconfig),
        tmp_path_factory.mktemp("consumers"),
        "compat-ai",
        "compat-sys",
        litellm_peer,
    )
    w.setup()
    w.apply(*_consumers())
    yield w
    w.close()
    admin.delete_where(lambda row: False)


def test_every_referenced_key_exists_in_the_placeholder_and_in_the_written_catalog(
    world: World, tmp_path: Path
) -> None:
    consumers = _consumers()
    assert {c["metadata"]["name"] for c in consumers} >= {"anything-llm", "openclaw", "hermes", "paperclip"}
    # what the API server holds is the manifest we meant (it accepted every consumer)
    for c in consumers:
        live = world.get(c["kind"].lower(), c["metadata"]["name"])
        assert referenced_keys(live) == referenced_keys(c)

    placeholder = world.catalog()
    anything = next(c for c in consumers if c["metadata"]["name"] == "anything-llm")
    for c in consumers:
        keys, _ = referenced_keys(c)
        assert keys <= set(placeholder), (c["metadata"]["name"], keys - set(placeholder))
    assert init_condition(anything, placeholder, tmp_path) != 0  # not ready before the first catalog

    world.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "ai-external-models", "namespace": "ai"},
            "data": {
                "models.json": json.dumps(
                    {
                        "models": [
                            {"name": "mct-chat", "model": "openai/mct-chat", "apiKey": "sk-compat-chat"},
                            # a model LiteLLM knows: its limits come from LiteLLM's model map (behaviour §5.2)
                            {"name": "mct-mini", "model": "openai/gpt-4o-mini", "apiKey": "sk-compat-mini"},
                            {
                                "name": "mct-embed",
                                "type": "embedding",
                                "model": "openai/mct-embed",
                                "apiKey": "sk-compat-embed",
                            },
                        ]
                    }
                )
            },
        }
    )
    controller = world.controller("a")
    controller.wait_ready()
    written = wait_for(
        lambda: (
            (d := world.catalog()).get("AI_APPLIANCE_MODEL_CATALOG_READY") == "true"
            and d.get("AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL") == "mct-embed"
            and d
        ),
        timeout=60,
        what="the controller's catalog with both models",
    )
    for c in consumers:
        keys, whole = referenced_keys(c)
        assert keys <= set(written), (c["metadata"]["name"], keys - set(written))
        if whole:  # a tool that reads catalog.json ids and names
            models = json.loads(written["catalog.json"])["models"]
            assert {(m["id"], m["name"]) for m in models} == {
                ("mct-chat", "mct-chat"),
                ("mct-embed", "mct-embed"),
                ("mct-mini", "mct-mini"),
            }
    assert written["AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL"] == "mct-embed"
    # issue 11, item 4: limits LiteLLM reports for a model it knows reach the agent fragments
    mini = next(m for m in json.loads(written["catalog.json"])["models"] if m["id"] == "mct-mini")
    assert (mini["contextWindow"], mini["maxOutputTokens"]) == (128000, 16384)
    paperclip = json.loads(written["paperclip-opencode-providers.json"])["litellm"]["models"]["mct-mini"]
    assert paperclip["limit"] == {"context": 123904, "output": 4096}
    assert written["AI_APPLIANCE_DEFAULT_OPENCODE_MODEL"] == "litellm/mct-chat"
    assert init_condition(anything, written, tmp_path) == 0, shlex.join(
        anything["spec"]["template"]["spec"]["initContainers"][0]["command"]
    )
