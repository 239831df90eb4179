"""An appliance on the deploy tests' own API server, driven the way its operator drives it: kubectl run
from the repository's root with the operator's KUBECONFIG, the commands taken verbatim from the README,
and a ``model-catalog run`` process as the controller (authenticated as the ServiceAccount the manifests
create) talking to the LiteLLM fake served on loopback."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.harness import FAST_CONTROLLER_ENV, REPO, Controller, service_account_kubeconfig, wait_for
from tests.faults.peers import OwnKubePeer, ServedFake

NS, APP_NS = "ai", "ai-system"
CATALOG, EXTERNAL = "ai-model-catalog", "ai-external-models"
README = REPO / "README.md"
MASTER_KEY = "sk-deploy-test-master"
PROVIDER_SECRET = "ai-model-provider-acme"

# The one error a v1.20 API server (the test peer) gives for the base: policy/v1 PodDisruptionBudgets
# arrived in Kubernetes 1.21. kubectl reports it and applies everything else.
_NO_PDB = 'no matches for kind "PodDisruptionBudget" in version "policy/v1"'
_NO_PDB_HINT = "ensure CRDs are installed first"

# Kinds the README's commands or the controller create in the two namespaces (a reset deletes them).
_KINDS = (
    "deployments.apps",
    "configmaps",
    "secrets",
    "serviceaccounts",
    "roles.rbac.authorization.k8s.io",
    "rolebindings.rbac.authorization.k8s.io",
    "networkpolicies.networking.k8s.io",
    "leases.coordination.k8s.io",
    "events",
    "pods",
    "agenttemplates.kubeopencode.io",
)


def readme_commands(section: str) -> list[str]:
    """The commands of the first ``sh`` block after the line ``section`` in README.md (comments dropped)."""
    text = README.read_text()
    start = text.index(f"\n{section}\n")
    end = re.compile(r"^#{1,3} ", re.M).search(text, start + len(section) + 2)
    body = text[start : end.start() if end else len(text)]
    block = re.search(r"```sh\n(.*?)```", body, re.S)
    assert block is not None, f"README.md: no sh block under {section!r}"
    commands = []
    for line in block.group(1).splitlines():
        command = line.split(" #", 1)[0].strip()
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


def server_side(command: str) -> str:
    """The same command as a server-side apply (``kubectl apply --server-side ...``)."""
    words = shlex.split(command)
    assert words[:2] == ["kubectl", "apply"], f"not a kubectl apply: {command}"
    return shlex.join([*words[:2], "--server-side", *words[2:]])


class Appliance:
    def __init__(self, peer: OwnKubePeer, workdir: Path) -> None:
        self.peer = peer
        self.workdir = workdir
        self.env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        self.env["KUBECONFIG"] = str(peer.kubeconfig)

    # --- as the operator
    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        """One documented command, as written, from the repository's root."""
        return subprocess.run(
            shlex.split(command),
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def run_applied(self, command: str) -> str:
        """``command`` must apply everything it holds (but the PodDisruptionBudget this v1.20 server cannot
        serve); its output."""
        done = self.run(command)
        errors = [
            line
            for line in done.stderr.splitlines()
            if line.strip()
            and not line.startswith("Warning:")
            and _NO_PDB not in line
            and line != _NO_PDB_HINT
        ]
        assert not errors and (done.returncode == 0 or _NO_PDB in done.stderr), (
            f"`{command}` exited {done.returncode}:\n{done.stderr}"
        )
        return done.stdout

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["kubectl", *args],
            cwd=REPO,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr.strip()}"
        return done.stdout

    def apply(self, *docs: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def get(self, kind: str, name: str, namespace: str = NS) -> dict[str, Any]:
        return dict(
            json.loads(
                self.kubectl("get", kind, name, "-n", namespace, "-o", "json", "--show-managed-fields")
            )
        )

    def catalog(self) -> dict[str, str]:
        return dict(self.get("configmap", CATALOG).get("data") or {})

    # --- set-up
    def reset(self) -> None:
        """Empty ``ai`` and ``ai-system`` of everything a scenario made (a namespace never finishes deleting
        on this server: no namespace controller), with the CRDs the controller watches installed."""
        for ns in (NS, APP_NS):
            if self.run(f"kubectl get namespace {ns}").returncode != 0:
                self.kubectl("create", "namespace", ns)
        for crd in sorted((REPO / "contracts" / "crds").glob("*.yaml")):
            self.kubectl("apply", "-f", str(crd))
        for crd in (
            "models.kubeai.org",
            "modelactivations.appliance.magicstick.dev",
            "agenttemplates.kubeopencode.io",
        ):
            self.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
        for ns in (NS, APP_NS):
            self.kubectl("delete", ",".join(_KINDS), "--all", "-n", ns, "--wait=true", "--grace-period=0")

    def user_models(self) -> dict[str, Any]:
        """What a user keeps in ``ai-external-models`` (one model, its key in a provider Secret)."""
        models = [
            {
                "name": "team-gpt",
                "model": "openai/gpt-4o-mini",
                "apiKeySecretRef": {"name": PROVIDER_SECRET, "key": "apiKey"},
                "contextWindow": 128000,
            }
        ]
        return {"models": models}

    def provider_secret(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": PROVIDER_SECRET,
                "namespace": NS,
                "labels": {"appliance.magicstick.dev/model-provider-secret": "true"},
            },
            "stringData": {"apiKey": "sk-user-provider-key"},
        }

    # --- what must never change
    def protected(self) -> dict[str, dict[str, Any]]:
        """The objects the user and the controller own, as the API server holds them."""
        out = {}
        for name in (EXTERNAL, CATALOG):
            obj = self.get("configmap", name)
            meta = obj["metadata"]
            out[name] = {
                "resourceVersion": meta["resourceVersion"],
                "labels": meta.get("labels", {}),
                "annotations": meta.get("annotations", {}),
                "data": obj.get("data", {}),
            }
        return out

    # --- the controller
    def controller_env(self, litellm_url: str) -> dict[str, str]:
        kubeconfig = service_account_kubeconfig(self.peer.kubeconfig, NS, self.workdir / "sa.kubeconfig")
        return {
            "KUBECONFIG": str(kubeconfig),
            "NAMESPACE": NS,
            "APPLIANCE_NAMESPACE": APP_NS,
            "LITELLM_BASE_URL": litellm_url,
            "LITELLM_MASTER_KEY": MASTER_KEY,
            **FAST_CONTROLLER_ENV,
            "LOG_LEVEL": "INFO",
        }

    @contextmanager
    def controller(self, name: str, litellm: ServedFake | None) -> Iterator[Controller]:
        """A leading controller (``litellm`` None: LiteLLM unreachable, a closed port)."""
        url = litellm.url if litellm is not None else f"http://127.0.0.1:{_closed_port()}"
        controller = Controller(name, self.controller_env(url), self.workdir).start()
        try:
            if litellm is not None:  # ready means LiteLLM was read: never, while it is unreachable
                controller.wait_ready(120)
            wait_for(controller.leading, 120, what=f"{name} to lead")
            yield controller
        finally:
            controller.stop()

    def wait_catalog_with(self, names: Sequence[str]) -> dict[str, str]:
        def published() -> dict[str, str] | None:
            data = self.catalog()
            if data.get("AI_APPLIANCE_MODEL_CATALOG_READY") != "true":
                return None
            ids = {m["id"] for m in json.loads(data["catalog.json"])["models"]}
            return data if set(names) <= ids else None

        # a bound only, wide for a loaded machine
        result: dict[str, str] = wait_for(published, 120, what=f"a written catalog with {list(names)}")
        return result


def _closed_port() -> int:
    from tests.e2e.harness import free_port

    return free_port()
