"""deploy/controller/networkpolicy.yaml: the controller's pods take traffic on their HTTP port only, and
reach only DNS, the API server, LiteLLM and the FreeToken runtimes (issue 12). Checked by evaluating the
policy's rules the way the NetworkPolicy API defines them, and against the real API server."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
import pytest
import yaml

from catalog_core.sources.common import RUNTIME_LABEL
from catalog_core.sources.freetoken import FREETOKEN
from tests.unavailable import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "controller"
NS_NAME = "kubernetes.io/metadata.name"


def one(name: str) -> dict[str, Any]:
    (doc,) = [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]
    return dict(doc)


POLICY = one("networkpolicy.yaml")
DEPLOYMENT = one("deployment.yaml")
CONTAINER = DEPLOYMENT["spec"]["template"]["spec"]["containers"][0]
ENV = {e["name"]: e.get("value") for e in CONTAINER["env"]}


@attrs.frozen
class Dest:
    """Where a connection goes: a pod (its namespace and labels), or an address that is no pod."""

    namespace: str | None
    pod_labels: dict[str, str] = attrs.field(factory=dict)

    @property
    def namespace_labels(self) -> dict[str, str]:
        return {NS_NAME: self.namespace} if self.namespace else {}


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, f"this evaluator knows matchLabels only: {selector}"
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def port_matches(ports: list[dict[str, Any]] | None, port: int, protocol: str) -> bool:
    if not ports:
        return True  # no ports: every port
    for entry in ports:
        assert isinstance(entry.get("port"), int), f"named ports are not evaluated here: {entry}"
        if entry.get("protocol", "TCP") == protocol and entry["port"] == port:
            return True
    return False


def egress_allows(dest: Dest, port: int, protocol: str = "TCP") -> bool:
    own = POLICY["metadata"]["namespace"]
    for rule in POLICY["spec"].get("egress") or []:
        if not port_matches(rule.get("ports"), port, protocol):
            continue
        if not rule.get("to"):
            return True  # no `to`: every destination
        for peer in rule["to"]:
            assert "ipBlock" not in peer, "ipBlock peers are not evaluated here"
            if dest.namespace is None:
                continue  # selectors name pods only
            ns_selector = peer.get("namespaceSelector")
            in_namespace = (
                selects(ns_selector, dest.namespace_labels)
                if ns_selector is not None
                else dest.namespace == own
            )
            if in_namespace and selects(peer.get("podSelector") or {}, dest.pod_labels):
                return True
    return False


LITELLM = urlsplit(ENV["LITELLM_BASE_URL"])
LITELLM_NS = (LITELLM.hostname or "").split(".")[1]  # <service>.<namespace>.svc.cluster.local
RUNTIME = {RUNTIME_LABEL: FREETOKEN, "app": "phi-4-mini-freetoken"}
KUBE_DNS = Dest("kube-system", {"k8s-app": "kube-dns"})


def test_the_policy_applies_to_exactly_the_controller_pods():
    assert POLICY["apiVersion"] == "networking.k8s.io/v1" and POLICY["kind"] == "NetworkPolicy"
    assert POLICY["metadata"]["namespace"] == DEPLOYMENT["metadata"]["namespace"] == ENV["NAMESPACE"]
    selector = POLICY["spec"]["podSelector"]["matchLabels"]
    assert selector == DEPLOYMENT["spec"]["selector"]["matchLabels"]
    assert selector.items() <= DEPLOYMENT["spec"]["template"]["metadata"]["labels"].items()
    assert "networkpolicy.yaml" in yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]


def test_ingress_is_the_http_port_only():
    assert POLICY["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert POLICY["spec"]["ingress"] == [{"ports": [{"port": 8080, "protocol": "TCP"}]}]
    # the port the probes and /metrics use
    assert CONTAINER["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert ENV["CATALOG_HTTP_PORT"] == "8080"
    assert DEPLOYMENT["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "8080"


@pytest.mark.parametrize(
    ("what", "dest", "port", "protocol"),
    [
        ("DNS over UDP", KUBE_DNS, 53, "UDP"),
        ("DNS over TCP", KUBE_DNS, 53, "TCP"),
        ("the API server through the kubernetes Service", Dest(None), 443, "TCP"),
        ("the API server's own port", Dest(None), 6443, "TCP"),
        ("LiteLLM's admin API", Dest(LITELLM_NS, {"app.kubernetes.io/name": "litellm"}), LITELLM.port, "TCP"),
        ("a FreeToken runtime's /health", Dest(LITELLM_NS, RUNTIME), 8080, "TCP"),
        ("a FreeToken runtime on another port", Dest(LITELLM_NS, RUNTIME), 8000, "TCP"),
    ],
)
def test_egress_reaches_what_the_controller_calls(what, dest, port, protocol):
    assert LITELLM.port == 4000 and ENV["NAMESPACE"] == LITELLM_NS
    assert egress_allows(dest, port, protocol), what


@pytest.mark.parametrize(
    ("what", "dest", "port", "protocol"),
    [
        ("a consumer pod beside it", Dest("ai", {"app": "anything-llm"}), 3001, "TCP"),
        ("a pod beside it on the runtimes' port", Dest("ai", {"app": "anything-llm"}), 8080, "TCP"),
        ("LiteLLM's port in another namespace", Dest("tenant", {"app": "litellm"}), 4000, "TCP"),
        ("a FreeToken-labelled pod in another namespace", Dest("tenant", RUNTIME), 8080, "TCP"),
        ("a resolver that is not the cluster's", Dest("ai", {"app": "dnsmasq"}), 53, "UDP"),
        ("kube-system's other pods", Dest("kube-system", {"k8s-app": "metrics-server"}), 53, "UDP"),
        ("plain HTTP to the internet", Dest(None), 80, "TCP"),
        ("an OTLP collector (opened by an overlay only when traces are on)", Dest(None), 4318, "TCP"),
    ],
)
def test_egress_refuses_what_the_controller_never_calls(what, dest, port, protocol):
    assert not egress_allows(dest, port, protocol), what


def kubectl(kubeconfig: Path | None, *args: str, stdin: str | None = None) -> str:
    config = [f"--kubeconfig={kubeconfig}"] if kubeconfig else []
    out = subprocess.run(
        ["kubectl", *config, *args], input=stdin, capture_output=True, text=True, check=False, timeout=120
    )
    assert out.returncode == 0, f"kubectl {' '.join(args)}: {out.stderr.strip()}"
    return out.stdout


def test_kustomize_keeps_the_pod_selector_while_labelling_the_policy():
    if shutil.which("kubectl") is None:
        skip_or_fail("kubectl is not installed (it renders the kustomize base)")
    docs = [d for d in yaml.safe_load_all(kubectl(None, "kustomize", str(DEPLOY))) if d]
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    assert policy["spec"] == POLICY["spec"]
    assert policy["metadata"]["labels"]["app.kubernetes.io/name"] == "ai-model-catalog"


@pytest.mark.kube
def test_the_deploy_base_with_its_network_policy_passes_a_server_side_dry_run(kube_peer: Any):
    if shutil.which("kubectl") is None:
        skip_or_fail("kubectl is not installed (it renders the kustomize base)")
    from tests.e2e.harness import deploy_base

    admin = Path(kube_peer.kubeconfig)
    ns = f"np-{uuid.uuid4().hex[:8]}"
    for namespace in (ns, f"{ns}-sys"):
        kubectl(admin, "create", "namespace", namespace)
    manifests, skipped = deploy_base(admin, ns, f"{ns}-sys")
    assert set(skipped) <= {
        "policy/v1/PodDisruptionBudget"
    }  # the peer is v1.20; NetworkPolicy is v1 since 1.7
    answer = json.loads(kubectl(admin, "apply", "--dry-run=server", "-o", "json", "-f", "-", stdin=manifests))
    objects = answer["items"] if answer.get("kind") == "List" else [answer]
    (policy,) = [o for o in objects if o["kind"] == "NetworkPolicy"]
    assert policy["metadata"]["namespace"] == ns
    assert policy["spec"] == POLICY["spec"]  # the API server kept every field as written
    assert any(o["kind"] == "Deployment" for o in objects)
