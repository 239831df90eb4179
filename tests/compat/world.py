"""A controller in namespaces of its own on the real peers, set up from ``deploy/`` as on the appliance.

Shared by the consumer-manifest check and the upgrade test: the namespaces, the CRDs, the RBAC and
bootstrap ConfigMaps of ``deploy/`` (moved to those namespaces), a ServiceAccount token bound by them,
and ``model-catalog run`` processes started with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.harness import (
    FAST_CONTROLLER_ENV,
    REPO,
    Controller,
    deploy_base,
    kubectl,
    service_account_kubeconfig,
)

CRDS = ("models.kubeai.org", "modelactivations.appliance.magicstick.dev", "agenttemplates.kubeopencode.io")


class World:
    def __init__(self, admin: Path, work: Path, ns: str, app_ns: str, litellm: Any) -> None:
        self.admin, self.work, self.ns, self.app_ns, self.litellm = admin, work, ns, app_ns, litellm
        self.controllers: list[Controller] = []

    def setup(self) -> World:
        for namespace in (self.ns, self.app_ns):
            kubectl(self.admin, "create", "namespace", namespace, check=False)
        for crd in sorted((REPO / "contracts" / "crds").glob("*.yaml")):
            kubectl(self.admin, "apply", "-f", str(crd))
        for crd in CRDS:
            kubectl(self.admin, "wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
        kubectl(self.admin, "apply", "-f", "-", input_text=deploy_base(self.admin, self.ns, self.app_ns)[0])
        self.sa_kubeconfig = service_account_kubeconfig(
            self.admin, self.ns, self.work / f"{self.ns}.kubeconfig"
        )
        return self

    def moved(self, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Manifests written for ``ai`` / ``ai-system``, in this world's namespaces."""
        text = json.dumps(docs)
        text = text.replace('"namespace": "ai-system"', f'"namespace": "{self.app_ns}"')
        text = text.replace('"namespace": "ai"', f'"namespace": "{self.ns}"')
        return list(json.loads(text))

    def apply(self, *docs: dict[str, Any]) -> None:
        kubectl(self.admin, "apply", "-f", "-", input_text=yaml.safe_dump_all(self.moved(list(docs))))

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        out = kubectl(self.admin, "get", kind, name, "-n", namespace or self.ns, "-o", "json")
        return dict(json.loads(out))

    def catalog(self) -> dict[str, str]:
        return dict(self.get("configmap", "ai-model-catalog").get("data") or {})

    def controller(self, name: str, **env: str) -> Controller:
        full = {
            "KUBECONFIG": str(self.sa_kubeconfig),
            "NAMESPACE": self.ns,
            "APPLIANCE_NAMESPACE": self.app_ns,
            "LITELLM_BASE_URL": self.litellm.base_url,
            "LITELLM_MASTER_KEY": self.litellm.master_key,
            # what apps use, as on the appliance (the admin URL above is the test peer on loopback)
            "LITELLM_API_BASE": "http://litellm.ai.svc.cluster.local:4000/v1",
            **FAST_CONTROLLER_ENV,
            "LOG_LEVEL": "INFO",
            **env,
        }
        controller = Controller(f"{self.ns}-{name}", full, self.work)
        self.controllers.append(controller)
        return controller.start()

    def close(self) -> None:
        for controller in self.controllers:
            if controller.process is not None and controller.process.poll() is None:
                controller.stop()
        for namespace in (self.ns, self.app_ns):
            kubectl(self.admin, "delete", "namespace", namespace, "--wait=false", check=False)
