"""The README's install and upgrade commands, run as written on a real API server, never change what a user
or the controller owns: the user's ``ai-external-models`` and the catalog the controller wrote. Applied again,
client-side and server-side, on a live appliance, they leave both byte-identical (same resourceVersion), and
the controller creates the bootstrap placeholder itself when the catalog is missing, never over one.

Every command the docs give that applies manifests of this repository is checked too: none of them holds
either ConfigMap (``deploy/`` with its create-once ConfigMaps is for Flux, which honours
``kustomize.toolkit.fluxcd.io/ssa: IfNotPresent``; kubectl has no such thing).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalog_core.config import CatalogConfig
from catalog_core.rules.render import bootstrap_data
from tests.deploy.appliance import (
    CATALOG,
    EXTERNAL,
    MASTER_KEY,
    NS,
    Appliance,
    readme_commands,
    server_side,
)
from tests.e2e.harness import REPO, wait_for
from tests.faults.peers import OwnKubePeer, ServedFake
from tests.unavailable import skip_or_fail

INSTALL = "### In a cluster"
UPGRADE = "**Upgrade**"
# What the README of the previous release installed and upgraded with (the whole of deploy/, with both
# ConfigMaps): the state an upgrade starts from.
PREVIOUS_RELEASE = "kubectl apply -k deploy/"
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
OWNED_BY_OTHERS = {EXTERNAL, CATALOG}


def _need_kubectl() -> None:
    if shutil.which("kubectl") is None:
        skip_or_fail("kubectl is not installed (the documented commands are kubectl's)")


def _rendered(path: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        ["kubectl", "kustomize", str(path)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _manifest_commands() -> list[tuple[str, str]]:
    """(doc, command) for every kubectl command in the docs that applies this repository's manifests."""
    found = []
    for doc in DOCS:
        for found_text in re.findall(r"kubectl (?:apply|replace)[^`\n]*", doc.read_text()):
            command = found_text.split(" #", 1)[0].strip()
            words = shlex.split(command)
            for flag in ("-k", "-f", "--kustomize", "--filename"):
                if flag in words and words.index(flag) + 1 < len(words):
                    target = words[words.index(flag) + 1]
                    if (REPO / target).exists():
                        found.append((doc.name, command))
    return found


def test_no_documented_manifest_command_holds_an_object_the_user_or_the_controller_writes() -> None:
    _need_kubectl()
    commands = _manifest_commands()
    assert commands, "the docs give no command that applies deploy/"
    # the ones the tests below run on a real API server, twice each way
    proven = {shlex.join(shlex.split(c)) for c in (*readme_commands(INSTALL), *readme_commands(UPGRADE))}
    for doc, command in commands:
        words = shlex.split(command)
        flag = next(f for f in ("-k", "--kustomize", "-f", "--filename") if f in words)
        target = REPO / words[words.index(flag) + 1]
        if target.resolve().is_relative_to(REPO / "deploy"):
            assert shlex.join(words) in proven, f"{doc}: `{command}` is not a command the install test runs"
        docs = (
            _rendered(target)
            if flag in ("-k", "--kustomize")
            else [d for d in yaml.safe_load_all(target.read_text()) if d]
        )
        held = sorted(
            d["metadata"]["name"]
            for d in docs
            if d["kind"] == "ConfigMap" and d["metadata"]["name"] in OWNED_BY_OTHERS
        )
        assert not held, f"{doc}: `{command}` would reset {held} on every run"
    # the overlays the README shows are applied with kubectl too
    for overlay in sorted((REPO / "examples" / "overlays").iterdir()):
        names = {d["metadata"]["name"] for d in _rendered(overlay) if d["kind"] == "ConfigMap"}
        assert not names & OWNED_BY_OTHERS, f"{overlay.name} holds {names & OWNED_BY_OTHERS}"


def test_the_flux_base_still_creates_both_configmaps_once() -> None:
    """deploy/ stays what Flux applies: dropping the ConfigMaps from it would make Flux's garbage collection
    delete the user's models (IfNotPresent objects stay in its inventory)."""
    _need_kubectl()
    docs = {(d["kind"], d["metadata"]["name"]): d for d in _rendered(REPO / "deploy")}
    for name in OWNED_BY_OTHERS:
        annotations = docs[("ConfigMap", name)]["metadata"]["annotations"]
        assert annotations["kustomize.toolkit.fluxcd.io/ssa"] == "IfNotPresent"
    assert ("Deployment", "ai-model-catalog-controller") in docs


@pytest.fixture
def appliance(appliance_peer: OwnKubePeer, tmp_path: Path) -> Appliance:
    _need_kubectl()
    appliance = Appliance(appliance_peer, tmp_path)
    appliance.reset()
    return appliance


def _reapply_changes_nothing(appliance: Appliance, commands: list[str]) -> None:
    """``commands`` twice as written (client-side), then twice server-side: both objects stay as they were."""
    before = appliance.protected()
    runs = [*commands, *commands, *map(server_side, commands), *map(server_side, commands)]
    for command in runs:
        appliance.run_applied(command)
        assert appliance.protected() == before, f"`{command}` changed an object it does not own"
    deployment = appliance.get("deployment", "ai-model-catalog-controller")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "ai-model-catalog-controller"


@pytest.mark.kube
def test_the_install_command_again_changes_neither_the_users_models_nor_the_written_catalog(
    appliance: Appliance,
) -> None:
    install = readme_commands(INSTALL)
    for command in install:
        appliance.run_applied(command)
    # the user's models, kept in the user's own manifest
    models = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": EXTERNAL, "namespace": NS},
        "data": {"models.json": json.dumps(appliance.user_models())},
    }
    appliance.apply(appliance.provider_secret(), models)
    served = ServedFake(MASTER_KEY)
    try:
        with appliance.controller("replica-a", served):
            appliance.wait_catalog_with(["team-gpt"])
            _reapply_changes_nothing(appliance, install)
    finally:
        served.close()


@pytest.mark.kube
def test_the_upgrade_command_again_changes_neither_the_users_models_nor_the_written_catalog(
    appliance: Appliance,
) -> None:
    # the previous release, installed as its README said; then the user edits the ConfigMap it shipped
    appliance.run_applied(PREVIOUS_RELEASE)
    appliance.apply(appliance.provider_secret())
    patch = {"data": {"models.json": json.dumps(appliance.user_models())}}
    appliance.kubectl("patch", "configmap", EXTERNAL, "-n", NS, "--type=merge", "-p", json.dumps(patch))
    served = ServedFake(MASTER_KEY)
    try:
        with appliance.controller("replica-a", served):
            appliance.wait_catalog_with(["team-gpt"])
            _reapply_changes_nothing(appliance, readme_commands(UPGRADE))
    finally:
        served.close()


@pytest.mark.kube
def test_the_controller_creates_the_missing_placeholder_then_writes_the_catalog_over_it(
    appliance: Appliance,
) -> None:
    """Installed with kubectl there is no placeholder: the controller creates it while it cannot write a
    catalog (LiteLLM unreachable), so consumers start as they do under Flux, and replaces it once it can."""
    for command in readme_commands(INSTALL):
        appliance.run_applied(command)
    with appliance.controller("replica-a", None) as controller:
        get = f"kubectl get configmap {CATALOG} -n {NS}"
        assert wait_for(lambda: appliance.run(get).returncode == 0, 120, what="the placeholder")
        config = CatalogConfig.from_env(controller.env)
        assert isinstance(config, CatalogConfig)
        assert appliance.catalog() == bootstrap_data(config), "the placeholder deploy/ ships for Flux"
        annotations = appliance.get("configmap", CATALOG)["metadata"]["annotations"]
        assert annotations["ai-appliance.io/catalog-hash"] == "bootstrap"
    served = ServedFake(MASTER_KEY)
    try:
        with appliance.controller("replica-b", served):
            written = wait_for(
                lambda: appliance.catalog().get("AI_APPLIANCE_MODEL_CATALOG_READY") == "true", 120
            )
            assert written
    finally:
        served.close()
