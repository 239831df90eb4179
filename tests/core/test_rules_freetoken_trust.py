"""Issue 12 (low): which Service a FreeToken runtime's endpoint may be. Trust used to look at the Service's
name only: an ExternalName Service (a DNS alias to anywhere, e.g. metadata.google.internal) was probed and
published as api_base, and so was LiteLLM's own Service."""

from __future__ import annotations

import json
from typing import Any

import pytest

from catalog_core.commands import ProbeRuntime
from catalog_core.events import Ticked
from tests.core import builders as b
from tests.core.harness import Cluster


def _typed(service: dict[str, Any], kind: str, **spec: Any) -> dict[str, Any]:
    service["spec"] = {**service["spec"], "type": kind, **spec}
    return service


def _runtime(c: Cluster, name: str, *, endpoint: str | None = None, service: dict[str, Any] | None = None):
    c.world.healthy = frozenset({f"{name}-rt"})
    objs = [
        b.activation(name, kind="local", model_type="chat"),
        b.freetoken_deployment(f"{name}-rt", activation_name=name, endpoint=endpoint),
    ]
    if service is not None:
        objs.append(service)
    c.start(*objs)


def _probed(c: Cluster) -> list[str]:
    return [x.url for x in c.commands if isinstance(x, ProbeRuntime)]


@pytest.mark.parametrize(
    ("kind", "spec"),
    [("ExternalName", {"externalName": "metadata.google.internal"}), ("NodePort", {}), ("LoadBalancer", {})],
)
def test_only_a_clusterip_service_of_the_runtimes_name_is_probed_and_published(kind, spec):
    c = Cluster()
    _runtime(c, "phi", service=_typed(b.service("phi-rt"), kind, **spec))
    rec = c.record("phi")
    assert (rec["state"], rec["reason"]) == ("error", "UntrustedEndpoint")
    assert f"of type {kind}" in rec["message"]
    assert _probed(c) == [] and c.world.rows == {}


def test_an_endpoint_annotation_naming_an_externalname_service_is_refused():
    c = Cluster()
    meta = _typed(b.service("metadata"), "ExternalName", externalName="metadata.google.internal")
    _runtime(c, "phi", endpoint="http://metadata.ai.svc.cluster.local:80/v1", service=meta)
    rec = c.record("phi")
    assert rec["reason"] == "UntrustedEndpoint" and "ExternalName" in rec["message"]
    assert _probed(c) == [] and "metadata" not in json.dumps(c.world.rows)


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://litellm.ai.svc.cluster.local:4000/v1",
        "http://litellm.ai.svc:4000/v1",
        "http://litellm.ai:4000/v1",
    ],
)
def test_litellms_own_service_is_never_a_runtime(endpoint):
    c = Cluster()
    _runtime(c, "loop", endpoint=endpoint, service=b.service("litellm", 4000))
    rec = c.record("loop")
    assert rec["reason"] == "UntrustedEndpoint" and "LiteLLM's own" in rec["message"]
    assert _probed(c) == [] and c.world.rows == {}


def test_a_runtime_named_like_litellms_service_is_refused_too():
    c = Cluster(LITELLM_BASE_URL="http://model-gw.ai.svc.cluster.local:4000")
    c.world.healthy = frozenset({"model-gw"})
    c.start(
        b.activation("gw", kind="local", model_type="chat"),
        b.freetoken_deployment("model-gw", activation_name="gw"),
        b.service("model-gw"),
    )
    assert c.record("gw")["reason"] == "UntrustedEndpoint"


@pytest.mark.parametrize("spec", [{}, {"type": "ClusterIP"}, {"type": "ClusterIP", "clusterIP": "None"}])
def test_a_clusterip_service_stays_trusted(spec):
    c = Cluster()
    service = b.service("phi-rt")
    service["spec"].update(spec)
    _runtime(c, "phi", service=service)
    assert c.record("phi")["reason"] == "Published"
    assert "ai-appliance-freetoken-phi" in c.world.rows


def test_credentials_in_an_api_base_query_are_not_published_in_the_catalog():
    """Issue 12 (low): ``apiBase: https://host/v1?api-key=...`` was published in catalog.json."""
    c = Cluster()
    c.start(
        b.external_configmap(
            [
                {
                    "name": "q",
                    "model": "openai/q",
                    "apiBase": "https://api.example.com/v1?api-key=sk-query-canary",
                },
                {
                    "name": "f",
                    "model": "openai/f",
                    "apiBase": "https://u:pw-canary@api.example.com/v1#frag-canary",
                },
            ]
        )
    )
    assert c.entry("q")["litellm"]["apiBase"] == "https://api.example.com/v1"
    assert c.entry("f")["litellm"]["apiBase"] == "https://api.example.com/v1"
    for canary in ("sk-query-canary", "pw-canary", "frag-canary"):
        assert canary not in json.dumps(c.data)
    # LiteLLM gets the URL as written: the provider may need it
    assert "sk-query-canary" in c.world.rows["ai-appliance-external-q"]["litellm_params"]["api_base"]


def test_litellms_service_named_by_litellm_api_base_is_refused_too():
    """LiteLLM is reached through LITELLM_API_BASE as well as LITELLM_BASE_URL; they may name two Services."""
    c = Cluster(
        LITELLM_BASE_URL="http://litellm-admin.ai.svc:4000",
        LITELLM_API_BASE="http://litellm.ai.svc.cluster.local:4000/v1",
    )
    _runtime(c, "loop", endpoint="http://litellm.ai.svc:4000/v1", service=b.service("litellm", 4000))
    rec = c.record("loop")
    assert rec["reason"] == "UntrustedEndpoint" and "LiteLLM's own" in rec["message"]
    assert _probed(c) == [] and c.world.rows == {}


@pytest.mark.parametrize(
    "base_url",
    [
        "http://litellm.ai.svc.cluster.local.:4000",  # an absolute name (trailing dot)
        "http://litellm.ai.svc.corp.example:4000",  # a cluster domain other than cluster.local
        "http://LiteLLM.AI.SVC:4000",  # DNS is case-insensitive
        "http://litellm:4000",  # the short name: the controller's own namespace (NAMESPACE)
        "http://litellm.ai",
    ],
)
def test_litellms_service_is_recognised_however_its_url_spells_the_host(base_url):
    c = Cluster(LITELLM_BASE_URL=base_url)
    _runtime(c, "loop", endpoint="http://litellm.ai.svc:4000/v1", service=b.service("litellm", 4000))
    assert c.record("loop")["reason"] == "UntrustedEndpoint"
    assert _probed(c) == [] and c.world.rows == {}


def test_a_service_of_the_same_name_in_another_namespace_is_not_litellms():
    c = Cluster(LITELLM_BASE_URL="http://litellm.other.svc.cluster.local:4000")
    _runtime(c, "phi", endpoint="http://litellm.ai.svc:4000/v1", service=b.service("litellm", 4000))
    assert c.record("phi")["reason"] == "Published"


@pytest.mark.parametrize("annotated", [False, True])
def test_a_service_turned_externalname_withdraws_the_route_it_served(annotated):
    """The route names the Service by DNS: kept as "last good", LiteLLM would follow the alias."""
    c = Cluster()
    endpoint = "http://phi-rt.ai.svc.cluster.local:8080/v1" if annotated else None
    _runtime(c, "phi", endpoint=endpoint, service=b.service("phi-rt"))
    assert "ai-appliance-freetoken-phi" in c.world.rows
    probes = len(_probed(c))
    c.apply(_typed(b.service("phi-rt"), "ExternalName", externalName="metadata.google.internal"))
    c.run(Ticked(c.now + 60))
    rec = c.record("phi")
    assert (rec["state"], rec["reason"]) == ("error", "UntrustedEndpoint")
    assert "ExternalName" in rec["message"] and not rec.get("servingLastGood")
    assert c.world.rows == {}
    assert len(_probed(c)) == probes  # never probed again


def test_a_last_good_route_is_dropped_when_its_own_service_turns_untrusted():
    """The annotation turns bad (the last good route stays), then the Service of that route is changed."""
    c = Cluster()
    _runtime(c, "phi", endpoint="http://svc-a.ai.svc:8080/v1", service=b.service("svc-a"))
    c.apply(b.freetoken_deployment("phi-rt", activation_name="phi", endpoint="http://elsewhere.example/v1"))
    assert c.record("phi")["servingLastGood"] is True
    assert "ai-appliance-freetoken-phi" in c.world.rows
    c.apply(_typed(b.service("svc-a"), "ExternalName", externalName="metadata.google.internal"))
    assert not c.record("phi").get("servingLastGood")
    assert c.world.rows == {}
