"""Every name the contract states literally (labels, annotations, ConfigMap and Secret names, data keys and
their fields, ``model_info`` keys, id prefixes, settings and their defaults) against the contract's text
(``tests/compat/contract_text.py``): what the controller reads, writes and is configured by."""

from __future__ import annotations

import json
import re

from catalog_core import catalog_files, registry, values
from catalog_core.config import CatalogConfig
from catalog_core.kinds import KINDS
from catalog_core.rules.routes import SPEC_HASH_KEY
from catalog_core.sources import common
from catalog_core.sources.agent_template import API_VERSION as AGENT_TEMPLATE_API_VERSION
from catalog_core.sources.freetoken import RUNTIME_MATCH
from tests.compat.contract_text import CONTRACT, QUOTES, assignments, fields, literals
from tests.core import builders as b
from tests.core.harness import Cluster
from tests.unavailable import skip_or_fail


def test_every_quote_is_the_contracts_text():
    if not CONTRACT.exists():
        skip_or_fail(f"{CONTRACT} is not here to compare the quotes with")
    text = " ".join(CONTRACT.read_text().split())
    stale = [section for section, quote in QUOTES.items() if " ".join(quote.split()) not in text]
    assert stale == [], f"quoted passages no longer in the contract: {stale}"


def test_annotations_the_sources_read_are_the_contracts():
    a1, b2 = literals("A.1"), literals("B.2")
    assert a1[0] == common.CONTEXT_WINDOW_ANNOTATION
    assert a1[-1] == common.MAX_OUTPUT_ANNOTATION
    assert next(s for s in b2 if s.endswith("/engine")) == common.ENGINE_ANNOTATION
    assert next(s for s in b2 if s.endswith("/compute-target")) == common.COMPUTE_TARGET_ANNOTATION
    assert set(values.COMPUTE_TARGETS) == set(next(s for s in b2 if s.startswith("cpu |")).split(" | "))
    assert literals("B.3 endpoint")[0] == common.ENDPOINT_ANNOTATION
    assert literals("A.5 hash")[-1] == common.CATALOG_HASH_ANNOTATION


def test_labels_and_secret_names_are_the_contracts():
    runtime = assignments("B.3 source")
    assert {RUNTIME_MATCH.key: RUNTIME_MATCH.value} == {
        k: v for k, v in runtime.items() if k.endswith("/runtime")
    }
    assert next(k for k in runtime if k.endswith("/modelactivation")) == common.ACTIVATION_LABEL
    assert literals("A.6 templates")[-1] == common.APPINSTANCE_LABEL
    provider = literals("C.8")
    assert assignments("C.8") == {common.PROVIDER_SECRET_LABEL: "true"}
    assert provider[-1] == common.PROVIDER_SECRET_PREFIX + "*"


def test_consumers_are_recognised_by_the_contracts_labels():
    quoted = literals("A.6 consumers")[1:]  # after `NAMESPACE`
    mark = quoted[0].split(":")[0]
    assert mark == common.CONSUMER_MARK
    pairs = [dict([s.split("=", 1)]) for s in quoted[1:]]
    prefix = "app.kubernetes.io"
    pairs = [{k.replace("...", prefix): v for k, v in p.items()} for p in pairs]
    apps = [pairs[0], pairs[1] | pairs[2], pairs[3] | pairs[4], pairs[5] | pairs[6]]
    declared = {
        catalog_files.ANYTHING_LLM,
        catalog_files.HERMES,
        catalog_files.OPENCLAW,
        catalog_files.PAPERCLIP,
    }
    assert {catalog_files.labels(app) for app in apps} == declared


def test_the_kinds_the_controller_watches_are_the_contracts():
    def resource(section: str) -> tuple[str, str]:
        quoted = literals(section)
        return quoted[1], quoted[2]  # apiVersion, plural

    resources = [k.resource for k in KINDS] + [spec.resource for spec in registry.SPECS]
    kinds = {(f"{r.group}/{r.version}", r.plural) for r in resources}
    assert resource("A.1 kind") in kinds
    assert resource("A.3") in kinds
    assert literals("A.6 templates")[0] == AGENT_TEMPLATE_API_VERSION


def test_the_settings_and_their_defaults_are_the_contracts():
    quoted = assignments("A.7")
    env = CatalogConfig().as_env()
    base = quoted.pop("LITELLM_BASE_URL")
    quoted["LITELLM_API_BASE"] = quoted["LITELLM_API_BASE"].replace("<LITELLM_BASE_URL>", base)
    quoted["LITELLM_BASE_URL"] = base
    health = re.search(r"`(\w+)` \((\d+)\)", QUOTES["B.3 health"])
    assert health is not None
    quoted[health.group(1)] = health.group(2)
    assert {k: env.get(k) for k in quoted} == quoted


def _cluster() -> tuple[Cluster, dict[str, dict]]:
    a1 = literals("A.1")
    b2 = literals("B.2")
    model = b.kubeai_model(
        "llama",
        annotations={
            a1[0]: "20000",
            a1[-1]: "1000",
            next(s for s in b2 if s.endswith("/compute-target")): "nvidia-gpu",
        },
    )
    external_name, external_key = literals("A.2")[0].split("/", 1)[1], literals("A.2")[1]
    external = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": external_name, "namespace": b.NS, "uid": "uid-external"},
        "data": {
            external_key: json.dumps(
                [{"name": "gpt", "model": "openai/gpt", "apiBase": "https://api.example"}]
            )
        },
    }
    activation = b.activation("tok", kind="local", engine="freetoken")
    runtime = b.freetoken_deployment("tok-rt", activation_name="tok")
    runtime["metadata"]["labels"] = {
        k.replace("<name>", ""): v.replace("<name>", "tok") for k, v in assignments("B.3 source").items()
    }
    cluster = Cluster()
    cluster.world.healthy = frozenset({"tok-rt"})
    cluster.start(model, external, activation, runtime, b.service("tok-rt"))
    cluster.settle_health()
    return cluster, cluster.world.rows


def test_routes_carry_the_contracts_ids_and_model_info_keys():
    _, rows = _cluster()
    prefixes = [s.replace("<slug>", "") for s in (*literals("A.4"), literals("B.3 route")[1])]
    assert sorted(rows) == sorted(p + n for p, n in zip(prefixes, ("llama", "gpt", "tok"), strict=True))
    owner_key, owner = literals("B.1")[0].split(".", 1)[1].split(": ")
    managed_key, managed = literals("B.1")[1].split(": ")
    for row in rows.values():
        info = row["model_info"]
        assert info[owner_key] == json.loads(owner)
        assert info[managed_key] is json.loads(managed)
        assert literals("C.2")[0].split(".", 1)[1] == SPEC_HASH_KEY and SPEC_HASH_KEY in info
    kubeai = rows["ai-appliance-kubeai-llama"]
    a1_info = fields(literals("A.1 route")[1].removeprefix("model_info "))
    assert {k.rstrip("?") for k in a1_info} - {"max_input_tokens", "max_output_tokens"} <= set(
        kubeai["model_info"]
    )
    assert kubeai["model_info"]["ai_appliance_source"] == kubeai["model_info"]["source"] == "kubeai"
    scheduler_key = literals("B.2")[1].split(": ", 1)[0].split(".", 1)[1]
    scheduler = kubeai["model_info"][scheduler_key]
    quoted = fields(literals("B.2")[1].split(": ", 1)[1])
    assert {"trusted", "locality", "engine", "computeTarget"} <= set(scheduler) <= quoted
    assert (scheduler["trusted"], scheduler["locality"], scheduler["computeTarget"]) == (
        True,
        "local",
        "nvidia-gpu",
    )
    assert json.loads(literals("B.1")[3].split(": ")[1]) == values.MESH_OWNER


def test_the_catalog_files_have_the_contracts_fields():
    cluster, _ = _cluster()
    data = cluster.data
    catalog_json, lists = literals("A.5 catalog.json")[1], literals("A.5 catalog.json")[4]
    assert set(json.loads(data["catalog.json"])) == fields(catalog_json)
    for key in literals("A.5 catalog.json")[2:4]:
        assert set(json.loads(data[key])) == fields(lists)
    adapter = json.loads(data[literals("A.5 paperclip")[0]])
    assert list(adapter) == ["opencode_local"] and adapter["opencode_local"]
    assert {frozenset(e) for e in adapter["opencode_local"]} == {frozenset({"id", "label"})}
    record_fields = fields(literals("B.5")[0])
    assert all(record_fields <= set(r) for r in cluster.routes())
