"""Bad input, one table: each case names the input, the routes.json record it must produce (state and
reason code), and checks that the good routes stay published, foreign LiteLLM rows stay untouched, a
Kubernetes Event reports errors and conflicts, and no secret value shows up anywhere.

Most cases are decided by the pure core: they run in milliseconds through ``tests/core/harness.Cluster``
(the real fold against the simulated world). The cases that depend on adapters — a 1 MiB models.json
through the API server, a health endpoint that hangs or answers garbage, CRDs deleted while running,
a restart with a poisonous ConfigMap present — run against the real API server and a controller
process (``test_bad_input_through_the_adapters``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

from catalog_core.commands import EmitKubernetesEvent, LiteralKey, PatchAgentTemplate
from catalog_core.events import SourceKind, SourceUnavailable, Ticked, Unavailability
from tests.core import builders as b
from tests.core.harness import Cluster
from tests.faults import results
from tests.faults.conftest import PROFILE, Suite, install_crds
from tests.faults.results import Outcome
from tests.faults.runtimes import HealthEndpoint, ready_runtime, runtime_objects
from tests.faults.scenario import judge
from tests.faults.stage import (
    CATALOG,
    EXTERNAL,
    PROVIDER_SECRET,
    Stage,
    agent_template,
    external_configmap,
    wait_until,
)

CANARY = f"sk-bad-input-canary-{uuid.uuid4().hex}"
MASTER = f"sk-master-{uuid.uuid4().hex}"
INLINE = f"sk-inline-{uuid.uuid4().hex}"
URL_PASSWORD = f"url-password-{uuid.uuid4().hex}"
PROVIDER = {"appliance.magicstick.dev/model-provider-secret": "true"}
ACME = {"name": "ai-model-provider-acme", "key": "k"}
GOOD_EXT = {"name": "good-ext", "model": "openai/good-ext", "apiKeySecretRef": ACME, "contextWindow": 32768}
GOOD = {  # name -> LiteLLM id: the routes every case must leave published
    "good-kube": "ai-appliance-kubeai-good-kube",
    "good-ext": "ai-appliance-external-good-ext",
    "good-act": "ai-appliance-external-good-act",
}
FOREIGN = [
    b.row("good-kube", "mesh-good-kube", owner="private-mesh", order=1, api_base="http://mesh:8080/v1"),
    b.row("good-ext", "hand-made-good-ext"),
    b.row("squat", "ai-appliance-external-squat", owner="someone-else"),
]


def baseline() -> Cluster:
    c = Cluster()
    c.start(
        b.kubeai_model("good-kube", args=["--max-model-len=8192"]),
        b.external_configmap([GOOD_EXT]),
        b.secret("ai-model-provider-acme", {"k": CANARY}, labels=PROVIDER),
        # the master key Secret, labelled by mistake: still never handed out (behaviour §1.5)
        b.secret("litellm-masterkey-secret", {"k": MASTER}, labels=PROVIDER),
        b.secret("plain-secret", {"k": CANARY}, labels={}),
        b.activation("good-act", external={"model": "openai/good-act", "apiKeySecretRef": ACME}),
        rows=[json.loads(json.dumps(r)) for r in FOREIGN],
    )
    for name, rid in GOOD.items():
        assert rid in c.world.rows and name in c.model_ids(), name
    return c


def ext(*items: Any) -> Callable[[Cluster], Any]:
    """models.json with the good item first, then ``items``."""
    return lambda c: c.apply(b.external_configmap([GOOD_EXT, *items]))


def ext_text(text: str) -> Callable[[Cluster], Any]:
    return lambda c: c.apply(b.external_configmap(None, raw_text=text))


def act(name: str, **kw: Any) -> Callable[[Cluster], Any]:
    return lambda c: c.apply(b.activation(name, **kw))


def kube(name: str, **kw: Any) -> Callable[[Cluster], Any]:
    return lambda c: c.apply(b.kubeai_model(name, **kw))


def freetoken(name: str, *, endpoint: str | None = None, service: bool = True) -> Callable[[Cluster], Any]:
    def apply(c: Cluster) -> None:
        c.world.healthy = frozenset({f"{name}-rt"})
        c.apply(b.activation(name, kind="local", model_type="chat"))
        if service:
            c.apply(b.service(f"{name}-rt"))
        c.apply(b.freetoken_deployment(f"{name}-rt", activation_name=name, endpoint=endpoint))

    return apply


def runtimes_at_once(name: str, *deployments: str) -> Callable[[Cluster], Any]:
    """An activation ``name`` and FreeToken runtimes for it, all learned in one tick: none holds the name."""

    def apply(c: Cluster) -> None:
        c.world.healthy = frozenset(deployments)
        objs = [b.activation(name, kind="local", model_type="chat")]
        for d in deployments:
            objs += [b.service(d), b.freetoken_deployment(d, activation_name=name)]
        c.run(*(e for obj in objs for e in c.upserts(obj)))

    return apply


def second_runtime(name: str, deployment: str) -> Callable[[Cluster], Any]:
    """A runtime of someone else's, labelled with the activation ``name`` a runtime already serves."""

    def apply(c: Cluster) -> None:
        freetoken(name)(c)
        assert c.record(name, "freetoken")["state"] == "published"
        c.world.healthy = c.world.healthy | {deployment}
        c.apply(b.service(deployment))
        c.apply(b.freetoken_deployment(deployment, activation_name=name))

    return apply


def template(config: Any) -> Callable[[Cluster], Any]:
    return lambda c: c.apply(b.agent_template("litellm-default", config=config))


BULK = 260


def one_mib() -> str:
    pad = "x" * 3880
    items = [GOOD_EXT] + [
        {"name": f"bulk-{i}", "model": f"openai/bulk-{i}", "description": pad} for i in range(BULK)
    ]
    text = json.dumps({"models": items})
    assert 1_000_000 < len(text) <= 1_048_576 - 100, len(text)
    return text


def nested(depth: int) -> str:
    return '{"models": ' + "[" * depth + "]" * depth + "}"


@attrs.frozen
class Case:
    id: str
    input: str  # what the user did
    apply: Callable[[Cluster], Any]
    source: str  # the routes.json record expected: (source, name) -> state/reason
    name: str
    state: str
    reason: str
    before: Callable[[Cluster], Any] | None = None  # a good version first: its route must stay (behaviour §8)
    good: tuple[str, ...] = tuple(GOOD)
    check: Callable[[Cluster], Any] | None = None


def _published_with(field: str, value: Any, name: str) -> Callable[[Cluster], Any]:
    def check(c: Cluster) -> None:
        entry = c.entry(name)
        assert entry.get(field) == value, (field, entry.get(field), value)

    return check


def _dropped(
    field: str, name: str, entry_field: str | None = None, source: str = "external"
) -> Callable[[Cluster], Any]:
    """behaviour §5.2: published without the unusable optional field; routes.json and one Event say so."""

    def check(c: Cluster) -> None:
        record = c.record(name, source)
        assert [w["field"] for w in record.get("warnings", [])] == [field], record
        if entry_field is not None:
            assert entry_field not in c.entry(name), c.entry(name)
        assert any(e.reason == "InvalidField" and name in e.message for e in c.world.events)

    return check


def _no_order(c: Cluster) -> None:
    body = c.world.rows["ai-appliance-external-order-sneak"]
    assert "order" not in body["litellm_params"]
    assert "ai_appliance_scheduler" not in body["model_info"]


def _url_password_not_published(c: Cluster) -> None:
    assert URL_PASSWORD not in json.dumps(c.data)  # the catalog strips user:password@ from URLs


def _template_untouched(c: Cluster) -> None:
    assert not any(isinstance(x, PatchAgentTemplate) for x in c.commands[-20:])
    assert any(e.reason == "UnexpectedShape" for e in c.world.events)


def _says(c: Cluster, name: str, text: str) -> None:
    assert text in c.record(name)["message"], c.record(name)
    assert any(text in e.message for e in c.world.events), "no Event says how to allow it"


def _one_ready_line(c: Cluster) -> None:
    lines = c.data["defaults.env"].splitlines()
    assert [line for line in lines if line.startswith("AI_APPLIANCE_MODEL_CATALOG_READY=")] == [
        "AI_APPLIANCE_MODEL_CATALOG_READY=true"
    ], lines


def _published(c: Cluster, name: str) -> None:
    assert c.record(name)["state"] == "published", c.record(name)


def _withdrawn(name: str, rid: str) -> Callable[[Cluster], Any]:
    """Revocation: the route that carried the key is gone from LiteLLM and the catalog."""

    def check(c: Cluster) -> None:
        assert rid not in c.world.rows, rid
        assert name not in c.model_ids(), name
        assert "servingLastGood" not in c.record(name), c.record(name)

    return check


def _explicit_key(rid: str) -> Callable[[Cluster], Any]:
    def check(c: Cluster) -> None:
        writes = [x for x in c.commands if getattr(x, "model_id", None) == rid and hasattr(x, "api_key")]
        assert writes and all(x.api_key == LiteralKey("none") for x in writes), writes

    return check


GW_REF = {"name": "ai-model-provider-gw", "key": "k"}
SA_TOKEN_REF = {"name": "ai-model-provider-token", "key": "token"}
EMPTY_REF = {"name": "ai-model-provider-empty", "key": "k"}
UNDECODABLE_REF = {"name": "ai-model-provider-bytes", "key": "k"}


def _sa_token() -> dict[str, Any]:
    token = b.secret("ai-model-provider-token", {"token": CANARY}, labels=PROVIDER)
    token["type"] = "kubernetes.io/service-account-token"
    return token


def _undecodable() -> dict[str, Any]:
    secret = b.secret("ai-model-provider-bytes", {})
    secret["data"] = {"k": "//79"}  # base64 of bytes that are not UTF-8
    return secret


def _deep(levels: int) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for _ in range(levels):
        node = {"a": node}
    return node


def _deep_kubeai() -> dict[str, Any]:
    model = b.kubeai_model("deep")
    model["spec"]["args"] = [_deep(600)]
    return model


def _start_never_ends(c: Cluster) -> None:
    """Scaled to zero, then asked for: its pod starts and stays unready past the start deadline."""
    c.apply(b.kubeai_model("stuck", ready=0, pods=0, min_replicas=0))
    c.apply(b.kubeai_model("stuck", ready=0, pods=1, min_replicas=0))
    c.run(Ticked(c.state.starts["kubeai/stuck"].due))


def _route_kept(name: str) -> Callable[[Cluster], Any]:
    """Reported, not withdrawn: its row and catalog entry stay."""

    def check(c: Cluster) -> None:
        assert f"ai-appliance-kubeai-{name}" in c.world.rows and name in c.model_ids()
        assert c.record(name, "kubeai")["servingLastGood"] is True

    return check


def _kubeai_absent(c: Cluster) -> None:
    c.run(SourceUnavailable(SourceKind.KUBEAI_MODELS, Unavailability.NOT_INSTALLED, "absent"))
    c.apply(b.activation("needs-kubeai", kind="local", engine="vllm"))


def _bulk(c: Cluster) -> None:
    assert sum(1 for m in c.model_ids() if m.startswith("bulk-")) == BULK


CASES = [
    Case(
        "invalid-json",
        "models.json is not JSON",
        ext_text('{"models": [ {"name": "x",, ]}'),
        "external",
        "ai-external-models",
        "error",
        "InvalidJSON",
    ),
    Case(
        "json-bom",
        "models.json starts with a UTF-8 byte-order mark",
        ext_text("\ufeff" + json.dumps({"models": [GOOD_EXT]})),
        "external",
        "ai-external-models",
        "error",
        "InvalidJSON",
    ),
    Case(
        "models-not-a-list",
        'models.json is {"models": 5}',
        ext_text('{"models": 5}'),
        "external",
        "ai-external-models",
        "error",
        "InvalidJSON",
    ),
    Case(
        "nested-too-deeply",
        "models.json nests 100,000 brackets (200 KB)",
        ext_text(nested(100_000)),
        "external",
        "ai-external-models",
        "error",
        "InvalidJSON",
    ),
    Case(
        "string-number",
        'contextWindow "16384" (a string of digits)',
        ext({"name": "strnum", "model": "openai/strnum", "contextWindow": "16384"}),
        "external",
        "strnum",
        "published",
        "Published",
        check=_published_with("contextWindow", 16384, "strnum"),
    ),
    Case(
        "bool-as-string",
        'enabled "false" (a string: only boolean false disables)',
        ext({"name": "strbool", "model": "openai/strbool", "enabled": "false"}),
        "external",
        "strbool",
        "published",
        "Published",
    ),
    Case(
        "bool-context",
        "contextWindow true",
        ext({"name": "b", "model": "openai/b", "contextWindow": True}),
        "external",
        "b",
        "published",
        "Published",
        check=_dropped("contextWindow", "b", "contextWindow"),
        before=ext({"name": "b", "model": "openai/b", "contextWindow": 4096}),
    ),
    Case(
        "float-context",
        "contextWindow 8192.5",
        ext({"name": "f", "model": "openai/f", "contextWindow": 8192.5}),
        "external",
        "f",
        "published",
        "Published",
        check=_dropped("contextWindow", "f", "contextWindow"),
    ),
    Case(
        "float-integral",
        "maxOutputTokens 4096.0 (a float, even if integral)",
        ext({"name": "fi", "model": "openai/fi", "maxOutputTokens": 4096.0}),
        "external",
        "fi",
        "published",
        "Published",
        check=_dropped("maxOutputTokens", "fi", "maxOutputTokens"),
    ),
    Case(
        "negative-limit",
        "maxOutputTokens -1",
        ext({"name": "n", "model": "openai/n", "maxOutputTokens": -1}),
        "external",
        "n",
        "published",
        "Published",
        check=_dropped("maxOutputTokens", "n", "maxOutputTokens"),
        before=ext({"name": "n", "model": "openai/n", "maxOutputTokens": 1024}),
    ),
    Case(
        "zero-rate",
        "tpm 0",
        ext({"name": "z", "model": "openai/z", "tpm": 0}),
        "external",
        "z",
        "published",
        "Published",
        check=_dropped("tpm", "z", None),
    ),
    Case(
        "string-rate",
        'rpm "lots"',
        ext({"name": "r", "model": "openai/r", "rpm": "lots"}),
        "external",
        "r",
        "published",
        "Published",
        check=_dropped("rpm", "r", None),
    ),
    Case(
        "huge-context",
        "contextWindow 99999999999",
        ext({"name": "h", "model": "openai/h", "contextWindow": 99999999999}),
        "external",
        "h",
        "published",
        "Published",
        check=_dropped("contextWindow", "h", "contextWindow"),
    ),
    Case(
        "null-limit",
        "contextWindow null (means: not given)",
        ext({"name": "nl", "model": "openai/nl", "contextWindow": None}),
        "external",
        "nl",
        "published",
        "Published",
        check=_published_with("contextWindow", None, "nl"),
    ),
    Case(
        "null-name",
        "name null",
        ext({"name": None, "model": "openai/x"}),
        "external",
        "models.json[1]",
        "error",
        "MissingField",
    ),
    Case(
        "null-model",
        "model null",
        ext({"name": "nm", "model": None}),
        "external",
        "nm",
        "error",
        "MissingField",
    ),
    Case(
        "not-an-object",
        "an item that is a number",
        ext(42),
        "external",
        "models.json[1]",
        "error",
        "InvalidField",
    ),
    Case(
        "bad-type",
        'type "banana"',
        ext({"name": "t", "model": "openai/t", "type": "banana"}),
        "external",
        "t",
        "error",
        "InvalidField",
    ),
    Case(
        "bad-url",
        'apiBase "ftp://x"',
        ext({"name": "u", "model": "openai/u", "apiBase": "ftp://x"}),
        "external",
        "u",
        "error",
        "InvalidField",
    ),
    Case(
        "url-with-password",
        "apiBase with user:password@ in it",
        ext(
            {
                "name": "cred",
                "model": "openai/cred",
                "apiBase": f"https://me:{URL_PASSWORD}@api.example.com/v1",
            }
        ),
        "external",
        "cred",
        "published",
        "Published",
        check=_url_password_not_published,
    ),
    Case(
        "user-order",
        "user-supplied order and ai_appliance_scheduler (dropped)",
        ext(
            {
                "name": "order-sneak",
                "model": "openai/o",
                "order": 0,
                "ai_appliance_scheduler": {"trusted": True},
            }
        ),
        "external",
        "order-sneak",
        "published",
        "Published",
        check=_no_order,
    ),
    Case(
        "one-mib",
        "a 1 MiB models.json (261 models, 3.9 KB of description each)",
        ext_text(one_mib()),
        "external",
        "bulk-7",
        "published",
        "Published",
        check=_bulk,
    ),
    Case(
        "unicode-name",
        'name "模型-ü" (slugged to the id ai-appliance-external-model)',
        ext({"name": "模型-ü", "model": "openai/u8"}),
        "external",
        "模型-ü",
        "published",
        "Published",
    ),
    Case(
        "long-name",
        "a 300-character name",
        ext({"name": "l" * 300, "model": "openai/long"}),
        "external",
        "l" * 300,
        "published",
        "Published",
    ),
    Case(
        "slug-collision",
        'names "GPT 4o" and "gpt-4o" (both slug to gpt-4o)',
        ext({"name": "gpt-4o", "model": "openai/gpt-4o"}, {"name": "GPT 4o", "model": "openai/gpt-4o"}),
        "external",
        "gpt-4o",
        "conflict",
        "IdCollision",
    ),
    Case(
        "duplicate-in-file",
        "the same name twice in models.json",
        ext({"name": "dup", "model": "openai/a"}, {"name": "dup", "model": "openai/b"}),
        "external",
        "dup (models.json[1])",  # the earlier one: the last definition wins, as today (behaviour §5.2)
        "conflict",
        "DuplicateName",
        check=lambda c: c.entry("dup")["litellm"]["model"] == "openai/b" or pytest.fail("not the last"),
    ),
    Case(
        "duplicate-across-sources",
        "a ConfigMap model named like a KubeAI Model (the ConfigMap wins)",
        ext({"name": "good-kube", "model": "openai/elsewhere"}),
        "kubeai",
        "good-kube",
        "conflict",
        "Conflict",
        good=("good-ext", "good-act"),
    ),
    Case(
        "id-taken",
        "a name whose id is held by someone else's LiteLLM row",
        ext({"name": "squat", "model": "openai/squat"}),
        "external",
        "squat",
        "conflict",
        "IdTaken",
    ),
    Case(
        "missing-secret",
        "apiKeySecretRef to a Secret that does not exist",
        ext(
            {
                "name": "ms",
                "model": "openai/ms",
                "apiKeySecretRef": {"name": "ai-model-provider-nope", "key": "k"},
            }
        ),
        "external",
        "ms",
        "error",
        "SecretNotFound",
    ),
    Case(
        "unlisted-secret",
        "models.json apiKeySecretRef to a Secret not on the allow-list (no label, no ai-model-provider-)",
        ext({"name": "ul", "model": "openai/ul", "apiKeySecretRef": {"name": "plain-secret", "key": "k"}}),
        "external",
        "ul",
        "error",
        "SecretNotAllowed",
        check=lambda c: _says(c, "ul", "kubectl label secret -n ai plain-secret"),
    ),
    Case(
        "models-json-master-key",
        "models.json apiKeySecretRef to the master key Secret (labelled) with the attacker's apiBase",
        ext(
            {
                "name": "mk-steal",
                "model": "openai/x",
                "apiBase": "https://attacker.example/v1",
                "apiKeySecretRef": {"name": "litellm-masterkey-secret", "key": "k"},
            }
        ),
        "external",
        "mk-steal",
        "error",
        "SecretNotAllowed",
    ),
    Case(
        "secret-to-attacker-api-base",
        "models.json apiKeySecretRef to an allow-listed Secret with the attacker's apiBase",
        ext(
            {
                "name": "sab",
                "model": "openai/sab",
                "apiBase": "https://attacker.example/v1",
                "apiKeySecretRef": ACME,
            }
        ),
        "external",
        "sab",
        "error",
        "SecretApiBaseNotAllowed",
        check=lambda c: _says(
            c,
            "sab",
            "kubectl annotate secret -n ai ai-model-provider-acme --overwrite "
            "appliance.magicstick.dev/model-provider-api-bases=https://attacker.example",
        ),
    ),
    Case(
        "activation-secret-to-attacker-api-base",
        "a ModelActivation naming an allow-listed Secret and the attacker's apiBase",
        act(
            "asab",
            external={"model": "openai/x", "apiBase": "https://attacker.example", "apiKeySecretRef": ACME},
        ),
        "modelactivation",
        "asab",
        "error",
        "SecretApiBaseNotAllowed",
        before=act("asab", external={"model": "openai/x", "apiKeySecretRef": ACME}),
    ),
    Case(
        "secret-un-annotated",
        "the API base removed from the Secret's annotation while a route sends its key there",
        lambda c: (
            c.apply(b.secret("ai-model-provider-gw", {"k": CANARY}, api_bases="https://gw.example.com")),
            ext(
                {
                    "name": "gw",
                    "model": "openai/gw",
                    "apiBase": "https://gw.example.com/v1",
                    "apiKeySecretRef": GW_REF,
                }
            )(c),
            _published(c, "gw"),
            c.apply(b.secret("ai-model-provider-gw", {"k": CANARY}, rv="2")),
        ),
        "external",
        "gw",
        "error",
        "SecretApiBaseNotAllowed",
        check=_withdrawn("gw", "ai-appliance-external-gw"),
    ),
    Case(
        "keyless-azure-api-base",
        "a keyless azure/ item with its own apiBase (LiteLLM would send AZURE_API_KEY there)",
        ext({"name": "amb", "model": "azure/gpt-4o", "apiBase": "https://attacker.example"}),
        "external",
        "amb",
        "error",
        "AmbientCredentialRejected",
    ),
    Case(
        "keyless-guessed-provider",
        "a keyless ModelActivation whose model names no provider, with its own apiBase",
        act("guess", external={"model": "gpt-4o", "apiBase": "https://attacker.example/v1"}),
        "modelactivation",
        "guess",
        "error",
        "AmbientCredentialRejected",
    ),
    Case(
        "keyless-openai-compatible",
        "a keyless openai/ item with its own apiBase (a local server): sent with the key none",
        ext({"name": "local", "model": "openai/local", "apiBase": "http://10.1.2.3:8000/v1"}),
        "external",
        "local",
        "published",
        "Published",
        check=_explicit_key("ai-appliance-external-local"),
    ),
    Case(
        "service-account-token",
        "apiKeySecretRef to a labelled kubernetes.io/service-account-token Secret",
        lambda c: (
            c.apply(_sa_token()),
            c.apply(
                b.external_configmap(
                    [GOOD_EXT, {"name": "sat", "model": "openai/sat", "apiKeySecretRef": SA_TOKEN_REF}]
                )
            ),
        ),
        "external",
        "sat",
        "error",
        "SecretNotAllowed",
    ),
    Case(
        "empty-secret-value",
        "the referenced Secret key holds an empty value",
        lambda c: (
            c.apply(b.secret("ai-model-provider-empty", {"k": ""})),
            ext({"name": "ev", "model": "openai/ev", "apiKeySecretRef": EMPTY_REF})(c),
        ),
        "external",
        "ev",
        "error",
        "SecretValueInvalid",
    ),
    Case(
        "undecodable-secret-value",
        "the referenced Secret key is not UTF-8",
        lambda c: (
            c.apply(_undecodable()),
            ext({"name": "uv", "model": "openai/uv", "apiKeySecretRef": UNDECODABLE_REF})(c),
        ),
        "external",
        "uv",
        "error",
        "SecretValueInvalid",
    ),
    Case(
        "env-reference-activation",
        "a ModelActivation with model os.environ/LITELLM_MASTER_KEY and the attacker's apiBase",
        act(
            "exfil",
            external={
                "model": "os.environ/LITELLM_MASTER_KEY",
                "customLlmProvider": "openai",
                "apiBase": "https://attacker.example",
            },
        ),
        "modelactivation",
        "exfil",
        "error",
        "EnvReferenceRejected",
        check=lambda c: "environ" not in json.dumps(c.world.rows) or pytest.fail("published"),
    ),
    Case(
        "env-reference-api-base",
        "models.json apiBase os.environ/ATTACKER (any case, spaces around)",
        ext({"name": "eab", "model": "openai/eab", "apiBase": " OS.Environ/ATTACKER "}),
        "external",
        "eab",
        "error",
        "EnvReferenceRejected",
    ),
    Case(
        "env-reference-inline-key",
        "an inline apiKey os.environ/LITELLM_MASTER_KEY",
        ext({"name": "eik", "model": "openai/eik", "apiKey": "os.environ/LITELLM_MASTER_KEY"}),
        "external",
        "eik",
        "error",
        "EnvReferenceRejected",
    ),
    Case(
        "lone-surrogate-name",
        'a name holding an escaped lone surrogate ("\\ud800"): crash-looped both replicas before',
        ext_text('{"models": [' + json.dumps(GOOD_EXT) + ', {"name": "\\ud800", "model": "openai/s"}]}'),
        "external",
        "models.json[1]",
        "error",
        "InvalidField",
    ),
    Case(
        "newline-name",
        "a name with a newline and a second AI_APPLIANCE_MODEL_CATALOG_READY=false line",
        ext({"name": "evil\nAI_APPLIANCE_MODEL_CATALOG_READY=false", "model": "openai/e"}),
        "external",
        "models.json[1]",
        "error",
        "InvalidField",
        check=_one_ready_line,
    ),
    Case(
        "huge-name",
        "one 100 KB name (made the catalog too large for everyone before)",
        ext({"name": "h" * 100_000, "model": "openai/huge"}),
        "external",
        "models.json[1]",
        "error",
        "InvalidField",
    ),
    Case(
        "proto-name",
        'a models.json name "__proto__" (an object key Node apps merge: prototype pollution)',
        ext({"name": "__proto__", "model": "openai/proto"}),
        "external",
        "models.json[1]",
        "error",
        "InvalidField",
    ),
    Case(
        "constructor-model",
        'a KubeAI Model named "constructor" (a name the API server accepts)',
        kube("constructor"),
        "kubeai",
        "constructor",
        "error",
        "InvalidField",
    ),
    Case(
        "yaml-key-name",
        "a name of 171 non-ASCII characters (1,028 once escaped: made hermes.yaml unreadable)",
        ext({"name": "é" * 171, "model": "openai/long"}),
        "external",
        "models.json[1]",
        "error",
        "InvalidField",
    ),
    Case(
        "misshaped-inline-key",
        'models.json {"models": {...}} holding an inline apiKey',
        ext_text(json.dumps({"models": {"x": {"name": "x", "apiKey": INLINE}}})),
        "external",
        "ai-external-models",
        "error",
        "InvalidJSON",
    ),
    Case(
        "deep-kubeai-model",
        "a KubeAI Model nested 600 levels deep (~4 KB)",
        lambda c: c.apply(_deep_kubeai()),
        "kubeai",
        "deep",
        "error",
        "NestedTooDeeply",
    ),
    Case(
        "deep-activation",
        "a ModelActivation nested 600 levels deep",
        act("deep-act", external={"model": "openai/d", "extra": _deep(600)}),
        "modelactivation",
        "deep-act",
        "error",
        "NestedTooDeeply",
    ),
    Case(
        "kubeai-not-installed",
        "a vLLM ModelActivation while the KubeAI CRD is not installed (said nothing before)",
        _kubeai_absent,
        "modelactivation",
        "needs-kubeai",
        "error",
        "KubeAINotInstalled",
        good=("good-ext", "good-act"),  # no KubeAI, so no KubeAI route either
    ),
    Case(
        "missing-key",
        "apiKeySecretRef to a key the Secret does not have",
        ext(
            {
                "name": "mk",
                "model": "openai/mk",
                "apiKeySecretRef": {"name": "ai-model-provider-acme", "key": "x"},
            }
        ),
        "external",
        "mk",
        "error",
        "SecretKeyNotFound",
    ),
    Case(
        "foreign-namespace-ref",
        "models.json apiKeySecretRef into another namespace",
        ext({"name": "fns", "model": "openai/fns", "apiKeySecretRef": {**ACME, "namespace": "kube-system"}}),
        "external",
        "fns",
        "error",
        "InvalidField",
    ),
    Case(
        "activation-master-key",
        "a ModelActivation pointing apiKeySecretRef at the LiteLLM master key Secret",
        act(
            "sneaky",
            external={
                "model": "openai/x",
                "apiKeySecretRef": {"name": "litellm-masterkey-secret", "key": "k"},
            },
        ),
        "modelactivation",
        "sneaky",
        "error",
        "SecretNotAllowed",
    ),
    Case(
        "activation-inline-key",
        "an inline apiKey in a ModelActivation",
        act("inline", external={"model": "openai/x", "apiKey": INLINE}),
        "modelactivation",
        "inline",
        "error",
        "InlineKeyRejected",
        before=act("inline", external={"model": "openai/x", "apiKeySecretRef": ACME}),
    ),
    Case(
        "activation-foreign-namespace",
        "a ModelActivation apiKeySecretRef into another namespace",
        act("fact", external={"model": "openai/x", "apiKeySecretRef": {**ACME, "namespace": "kube-system"}}),
        "modelactivation",
        "fact",
        "error",
        "SecretNotAllowed",
    ),
    Case(
        "activation-no-external",
        "a ModelActivation of type external without spec.external",
        act("noext"),
        "modelactivation",
        "noext",
        "error",
        "MissingField",
    ),
    Case(
        "freetoken-outside",
        "a FreeToken endpoint outside the cluster (http://evil.example.com:8080/v1)",
        freetoken("evil", endpoint="http://evil.example.com:8080/v1"),
        "freetoken",
        "evil",
        "error",
        "UntrustedEndpoint",
    ),
    Case(
        "freetoken-other-namespace",
        "a FreeToken endpoint in another namespace's Service",
        freetoken("other", endpoint="http://rt.kube-system.svc.cluster.local:8080/v1"),
        "freetoken",
        "other",
        "error",
        "UntrustedEndpoint",
    ),
    Case(
        "freetoken-ghost-service",
        "a FreeToken endpoint naming a Service that does not exist",
        freetoken("ghost", endpoint="http://ghost.ai.svc.cluster.local:8080/v1"),
        "freetoken",
        "ghost",
        "error",
        "UntrustedEndpoint",
    ),
    Case(
        "freetoken-no-endpoint",
        "a FreeToken runtime with no endpoint and no Service",
        freetoken("lost", service=False),
        "freetoken",
        "lost",
        "withheld",
        "EndpointNotFound",
    ),
    Case(
        "runtime-takes-kubeai-name",
        "a FreeToken Deployment labelled with the name a KubeAI route holds (it won by rank before)",
        freetoken("good-kube"),
        "freetoken",
        "good-kube",
        "conflict",
        "NameHeld",
        check=lambda c: c.record("good-kube", "kubeai")["state"] == "published" or pytest.fail("taken"),
    ),
    Case(
        "runtime-sorts-first",
        "someone's FreeToken Deployment labelled with an activation a runtime serves, named to sort first",
        second_runtime("held", "a-held-rt"),
        "freetoken",
        "held",
        "conflict",
        "NameHeld",
        check=lambda c: (
            c.world.rows["ai-appliance-freetoken-held"]["litellm_params"]["api_base"].startswith(
                "http://held-rt."
            )
            or pytest.fail("taken")
        ),
    ),
    Case(
        "runtime-name-tie",
        "two FreeToken Deployments claim one activation at once, none holds it (the first by name won)",
        runtimes_at_once("twin", "twin-a-rt", "twin-b-rt"),
        "freetoken",
        "twin",
        "conflict",
        "NameContested",
        check=lambda c: (
            (
                "ai-appliance-freetoken-twin" not in c.world.rows
                and [r["reason"] for r in c.routes() if r["name"] == "twin"] == ["NameContested"] * 2
            )
            or pytest.fail("published, or not both contested")
        ),
    ),
    Case(
        "absurd-max-model-len",
        "a KubeAI Model with --max-model-len=999999999999",
        kube("wide", args=["--max-model-len=999999999999"]),
        "kubeai",
        "wide",
        "published",
        "Published",
        check=_dropped("--max-model-len", "wide", "contextWindow", "kubeai"),
        before=kube("wide", args=["--max-model-len=8192"]),
    ),
    Case(
        "garbage-max-model-len",
        "a KubeAI Model with --max-model-len -5",
        kube("neg", args=["--max-model-len", "-5"]),
        "kubeai",
        "neg",
        "published",
        "Published",
        check=_dropped("--max-model-len", "neg", "contextWindow", "kubeai"),
    ),
    Case(
        "ready-as-word",
        'a KubeAI Model with status.replicas.ready "yes"',
        kube("word", ready="yes"),
        "kubeai",
        "word",
        "withheld",
        "NotReady",
    ),
    Case(
        "min-replicas-as-word",
        'a KubeAI Model with spec.minReplicas "lots" and no ready replica (a rule that did not exist before)',
        kube("lots", ready=0, min_replicas="lots"),
        "kubeai",
        "lots",
        "withheld",
        "NotReady",  # read as not scaling from zero, with a warning: only a ready replica publishes it
        check=_dropped("spec.minReplicas", "lots", source="kubeai"),
    ),
    Case(
        "start-never-ends",
        "a KubeAI Model that scales from zero whose pod never becomes ready (it was kept silently at first)",
        _start_never_ends,
        "kubeai",
        "stuck",
        "error",
        "StartDeadlineExceeded",
        check=_route_kept("stuck"),
    ),
    Case(
        "template-not-an-object",
        "an AgentTemplate whose provider.litellm is a string",
        template({"provider": {"litellm": "oops"}}),
        "",
        "",
        "",
        "UnexpectedShape",
        check=_template_untouched,
    ),
    Case(
        "template-models-list",
        "an AgentTemplate whose provider.litellm.models is a list",
        template({"provider": {"litellm": {"models": ["a"]}}}),
        "",
        "",
        "",
        "UnexpectedShape",
        check=_template_untouched,
    ),
]


def _secrets_nowhere(c: Cluster) -> list[str]:
    seen = repr(c.commands) + repr(c.state) + json.dumps(c.world.catalog) + repr(c.world.events)
    return [
        label
        for label, value in (("canary", CANARY), ("master", MASTER), ("inline", INLINE))
        if value in seen
    ]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_in_the_core(case: Case) -> None:
    outcome = results.record(
        Outcome(f"input:{case.id}", "bad-input", case.input, PROFILE.name, measured={"expected": case.reason})
    )
    c = baseline()
    foreign = {
        r["model_info"]["id"]: json.dumps(c.world.rows[r["model_info"]["id"]], sort_keys=True)
        for r in FOREIGN
    }
    kept: tuple[str, str] | None = None
    if case.before is not None:
        case.before(c)
        record = c.record(case.name, case.source)
        assert record["state"] == "published", record
        kept = (case.name, record.get("id", ""))
    began = time.monotonic()
    case.apply(c)
    outcome.measured["core_seconds"] = round(time.monotonic() - began, 3)
    if case.source:
        # runtimes claiming one name each have a record of that name: the case's is one of them
        found = [r for r in c.routes() if (r["source"], r["name"]) == (case.source, case.name)]
        assert found, (case.source, case.name)
        record = next((r for r in found if (r["state"], r["reason"]) == (case.state, case.reason)), found[0])
        outcome.measured["observed"] = f"{record['state']}/{record['reason']}"
        outcome.check(
            "routes.json record",
            [] if (record["state"], record["reason"]) == (case.state, case.reason) else [str(found)],
        )
        if case.state in ("error", "conflict"):
            outcome.check(
                "a Kubernetes Event reports it",
                any(isinstance(e, EmitKubernetesEvent) and e.reason == case.reason for e in c.world.events),
            )
    else:
        outcome.measured["observed"] = ",".join(sorted({e.reason for e in c.world.events}))
    if kept is not None:
        outcome.check("the item's last good route stays", case.name in c.model_ids())
    outcome.check(
        "good routes stay published",
        [n for n in case.good if n not in c.model_ids() or GOOD[n] not in c.world.rows],
    )
    outcome.check(
        "foreign rows untouched",
        [rid for rid, text in foreign.items() if json.dumps(c.world.rows.get(rid), sort_keys=True) != text],
    )
    outcome.check("no secret value in commands, state, catalog or Events", _secrets_nowhere(c))
    if case.check is not None:
        try:
            case.check(c)
            outcome.check("case-specific check", True)
        except AssertionError as exc:
            outcome.check("case-specific check", str(exc)[:300])
    outcome.user_sees = (
        f"routes.json {outcome.measured['observed']}" if case.source else f"Event {case.reason}"
    )
    assert not outcome.failed(), outcome.failed()


# --- through the adapters: the real API server, a controller process, health endpoints on loopback


RUNTIMES = {"ok": "ok", "hang": "hang", "garbage": "garbage"}  # model name -> initial mode


def record_is(stage: Stage, source: str, name: str, state: str, reason: str) -> Callable[[], bool]:
    def check() -> bool:
        record = stage.record(source, name)
        return record is not None and (record["state"], record["reason"]) == (state, reason)

    return check


def event_reasons(stage: Stage) -> set[str]:
    events = stage.admin.objects("v1", "Event", stage.ns) + stage.admin.objects("v1", "Event", stage.app_ns)
    return {e.get("reason", "") for e in events}


STAGE_GOOD = ("kube-good", "ext-good", "act-good", "ok")


def good_published(stage: Stage, names: tuple[str, ...] = STAGE_GOOD) -> list[str]:
    models = stage.catalog_models()
    return [n for n in names if n not in models]


def models_json(stage: Stage) -> list[dict[str, Any]]:
    cm = stage.admin.get("v1", "ConfigMap", stage.ns, EXTERNAL)
    assert cm is not None
    return list(json.loads(cm["data"]["models.json"])["models"])


@pytest.fixture(scope="module")
def input_stage(suite: Suite) -> Iterator[tuple[Stage, dict[str, HealthEndpoint]]]:
    endpoints = {name: HealthEndpoint(mode) for name, mode in RUNTIMES.items()}
    stage = Stage(suite, "input")
    resolve = ",".join(
        f"{name}-rt.{stage.ns}.svc.cluster.local:8080=127.0.0.1:{ep.port}" for name, ep in endpoints.items()
    )
    stage.extra_env["CATALOG_PROBE_RESOLVE"] = resolve
    stage.start()
    try:
        for name in RUNTIMES:
            for obj in runtime_objects(stage, name):
                stage.admin.apply(obj)
            ready_runtime(stage, name)
        stage.healthy_runtimes = {"ok-rt"}
        stage.launch()
        stage.watchdog.start()
        stage.wait_converged(60)
        yield stage, endpoints
    finally:
        stage.close()
        for ep in endpoints.values():
            ep.close()


def _outcome(case_id: str, what: str, expected: str) -> Outcome:
    return results.record(
        Outcome(f"input:{case_id}", "bad-input", what, PROFILE.name, measured={"expected": expected})
    )


@pytest.mark.faults
def test_health_endpoints_that_hang_or_answer_garbage(input_stage: Any) -> None:
    stage, endpoints = input_stage
    for name, what in (("hang", "accepts and never answers"), ("garbage", "answers bytes that are not HTTP")):
        outcome = _outcome(f"health-{name}", f"a FreeToken /health that {what}", "HealthCheckFailed")
        wait_until(
            record_is(stage, "freetoken", name, "withheld", "HealthCheckFailed"), 30, what=f"{name} failed"
        )
        record = stage.record("freetoken", name) or {}
        outcome.measured["observed"] = f"{record.get('state')}/{record.get('reason')}"
        outcome.check("good routes stay published", good_published(stage))
        outcome.check("never published", f"ai-appliance-freetoken-{name}" not in stage.owned_rows())
        outcome.user_sees = f"routes.json {outcome.measured['observed']}: {record.get('message', '')[:80]}"
        assert not outcome.failed(), outcome.failed()
    for name in ("hang", "garbage"):  # healed: one good probe publishes
        endpoints[name].mode = "ok"
    stage.healthy_runtimes = {"ok-rt", "hang-rt", "garbage-rt"}
    stage.wait_converged(30)


@pytest.mark.faults
def test_one_mib_models_json_through_the_api(input_stage: Any) -> None:
    stage, _ = input_stage
    outcome = _outcome("one-mib-api", "a 1 MiB models.json applied through the API server", "Published")
    base = models_json(stage)
    bulk = [
        {"name": f"bulk-{i}", "model": f"openai/bulk-{i}", "description": "x" * 3880} for i in range(BULK)
    ]
    text = json.dumps({"models": [*base, *bulk]})
    outcome.measured["bytes"] = len(text)
    began = time.monotonic()
    stage.admin.apply(external_configmap(stage.ns, text))
    wait_until(
        lambda: sum(1 for m in stage.catalog_models() if m.startswith("bulk-")) == BULK, 120, 0.5, "bulk"
    )
    outcome.measured["seconds_to_publish"] = round(time.monotonic() - began, 1)
    outcome.measured["observed"] = f"{BULK} models published"
    outcome.check("good routes stay published", good_published(stage))
    outcome.check("/healthz ok", stage.running()[0].get("/healthz").status_code == 200)
    # Bigger than a ConfigMap may be: the API server refuses it; the catalog does not change.
    too_big = json.dumps({"models": [*base, *bulk, *bulk[:30]]})
    before = stage.catalog_hash()
    try:
        stage.admin.apply(external_configmap(stage.ns, too_big))
        outcome.check("the API server refuses more than 1 MiB", "accepted")
    except Exception as exc:  # ApiError with the server's status
        outcome.measured["too_big_refused"] = str(exc)[:120]
        outcome.check("the API server refuses more than 1 MiB", True)
    outcome.check("catalog unchanged by the refused write", stage.catalog_hash() == before)
    stage.admin.apply(external_configmap(stage.ns, json.dumps({"models": base})))
    stage.wait_converged(120)
    outcome.user_sees = (
        f"{BULK} models published {outcome.measured['seconds_to_publish']:.0f} s after the apply; "
        "more than 1 MiB is refused by the API server itself"
    )
    assert not outcome.failed(), outcome.failed()


@pytest.mark.faults
def test_deeply_nested_models_json_and_a_restart_with_it_present(input_stage: Any) -> None:
    """Regression: RecursionError out of the redaction made the source restart forever; after a
    restart with the ConfigMap present nothing at all was published."""
    stage, _ = input_stage
    outcome = _outcome(
        "nested-api", "a models.json nesting 100,000 brackets, then a controller restart", "InvalidJSON"
    )
    base = models_json(stage)
    stage.admin.apply(external_configmap(stage.ns, nested(100_000)))
    wait_until(record_is(stage, "external", EXTERNAL, "error", "InvalidJSON"), 30, what="InvalidJSON")
    outcome.check("good routes stay published (last good models.json)", good_published(stage))
    wait_until(lambda: "InvalidJSON" in event_reasons(stage), 30, what="an InvalidJSON Event")
    controller = stage.running()[0]
    stage.watchdog.paused = True
    controller.stop(30)
    began = time.monotonic()
    restarted = stage.launch()
    stage.watchdog.paused = False
    outcome.measured["restart_ready_s"] = round(time.monotonic() - began, 1)
    outcome.check("ready after a restart with it present", restarted.ready())
    name = stage.change()
    wait_until(lambda: name in stage.catalog_models(), 30, what=f"{name} published after the restart")
    record = stage.record("external", EXTERNAL) or {}
    outcome.measured["observed"] = f"{record.get('state')}/{record.get('reason')}"
    stage.admin.apply(external_configmap(stage.ns, json.dumps({"models": base})))
    stage.wait_converged(60)
    outcome.user_sees = (
        f"routes.json {outcome.measured['observed']} and an Event; the restarted controller publishes"
    )
    assert not outcome.failed(), outcome.failed()


@pytest.mark.faults
def test_hostile_objects_through_the_api(input_stage: Any) -> None:
    """Issue 12 items 4 and 5 through the real API server and controller process: a models.json with 2,000
    inline keys (PBKDF2 on the loop stalled it 12.9 s, past the lease deadline) and 100 distinct
    apiKeySecretRef names (one watch each starved the Lease of connections). Each is rejected alone; the
    leader keeps its Lease, stays ready and keeps publishing. (All but the last inline-key item are
    disabled: their keys are still fingerprinted, and LiteLLM is spared 2,000 rows.)"""
    stage, _ = input_stage
    outcome = _outcome(
        "hostile-api",
        "a models.json with 2,000 inline keys and 100 Secret names through the API server",
        "InlineKeyRejected",
    )
    leader = stage.leader
    base = models_json(stage)
    keys = [
        {
            "name": f"inline-{i}",
            "model": f"openai/inline-{i}",
            "apiKey": f"{INLINE}-{i}",
            "enabled": i == 1999,
        }
        for i in range(2000)
    ]
    refs = [
        {"name": f"ref-{i}", "model": f"openai/ref-{i}", "apiKeySecretRef": {"name": f"nope-{i}", "key": "k"}}
        for i in range(100)
    ]
    began = time.monotonic()
    stage.admin.apply(external_configmap(stage.ns, json.dumps({"models": [*base, *keys, *refs]})))
    wait_until(record_is(stage, "external", "inline-0", "withheld", "Disabled"), 120, 0.5, "models.json read")
    outcome.measured["inline_publish_s"] = round(time.monotonic() - began, 1)
    name = stage.change()
    wait_until(lambda: name in stage.catalog_models(), 30, what=f"{name} published meanwhile")
    outcome.check("the same replica still leads", stage.leader.name == leader.name)
    outcome.check("/readyz ok", leader.get("/readyz").status_code == 200)
    outcome.check("good routes stay published", good_published(stage))
    record = stage.record("external", "inline-1999") or {}
    outcome.measured["past_the_bound"] = f"{record.get('state')}/{record.get('reason')}"
    outcome.check("keys past the per-object bound are refused", record.get("reason") == "InlineKeyRejected")
    outcome.check("no inline key in the catalog", INLINE not in json.dumps(stage.catalog_data()))
    outcome.measured["observed"] = "rejected alone; leader kept"
    stage.admin.apply(external_configmap(stage.ns, json.dumps({"models": base})))
    stage.wait_converged(120)
    outcome.user_sees = (
        "routes.json InlineKeyRejected past 256 keys; "
        f"the 2,000-key models.json published in {outcome.measured['inline_publish_s']:.0f} s, leader kept"
    )
    assert not outcome.failed(), outcome.failed()


@pytest.mark.faults
def test_crds_deleted_while_running(input_stage: Any, suite: Suite) -> None:
    stage, _ = input_stage
    outcome = _outcome(
        "crds-deleted",
        "the KubeAI Model, ModelActivation and AgentTemplate CRDs deleted while running",
        "withdrawn",
    )
    for crd in (
        "models.kubeai.org",
        "modelactivations.appliance.magicstick.dev",
        "agenttemplates.kubeopencode.io",
    ):
        stage.admin.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crd)
    gone = ("ai-appliance-kubeai-kube-good", "ai-appliance-external-act-good", "ai-appliance-freetoken-ok")
    wait_until(lambda: not set(gone) & set(stage.owned_rows()), 60, 0.5, "withdrawn")

    def mesh_route_only() -> bool:
        # still listed: the Private Mesh route of the same name remains (the catalog is written once
        # the LiteLLM deletes have landed, so it trails them a little)
        entry = _entry(stage, "kube-good")
        return [r["owner"] for r in entry.get("routes", [])] == ["private-mesh"]

    try:
        wait_until(mesh_route_only, 30, 0.2, "the catalog to list only the Mesh route of kube-good")
        outcome.check("only the Mesh route is left for kube-good", True)
    except AssertionError as exc:
        outcome.check("only the Mesh route is left for kube-good", str(exc))
    outcome.check("other sources stay published", good_published(stage, ("ext-good",)))
    outcome.check("/healthz ok", stage.running()[0].get("/healthz").status_code == 200)
    outcome.measured["observed"] = "routes of the deleted kinds withdrawn; the rest kept"
    began = time.monotonic()
    install_crds(suite.admin)
    stage.baseline()  # the objects went with their CRDs: create them again
    for name in RUNTIMES:
        for obj in runtime_objects(stage, name):
            stage.admin.apply(obj)
        ready_runtime(stage, name)
    wait_until(lambda: not good_published(stage), 60, 0.5, "published again")
    outcome.measured["republished_s"] = round(time.monotonic() - began, 1)
    stage.wait_converged(60)
    outcome.user_sees = (
        "models of the deleted kinds are withdrawn (their objects are gone), the others stay; "
        f"published again {outcome.measured['republished_s']:.0f} s after the CRDs come back"
    )
    assert not outcome.failed(), outcome.failed()


@pytest.mark.faults
def test_agent_template_with_an_unexpected_shape(input_stage: Any) -> None:
    stage, _ = input_stage
    outcome = _outcome(
        "template-shape-api", "an AgentTemplate whose provider.litellm is a string", "UnexpectedShape"
    )
    odd = agent_template(
        stage.ns, "litellm-default", {"config": {"provider": {"litellm": "oops"}, "keep": 1}}
    )
    written = stage.admin.replace({**odd, "metadata": {**odd["metadata"], "resourceVersion": _rv(stage)}})
    wait_until(lambda: "UnexpectedShape" in event_reasons(stage), 30, what="an UnexpectedShape Event")
    name = stage.change()
    wait_until(lambda: name in stage.catalog_models(), 30, what=f"{name} published")
    time.sleep(1.0)
    now = stage.admin.get("kubeopencode.io/v1alpha1", "AgentTemplate", stage.ns, "litellm-default") or {}
    outcome.check("the template is left as it is", now.get("spec") == written.get("spec"))
    outcome.check("good routes stay published", good_published(stage))
    outcome.measured["observed"] = "Event UnexpectedShape"
    stage.admin.replace(
        {
            **agent_template(stage.ns, "litellm-default"),
            "metadata": {**odd["metadata"], "resourceVersion": _rv(stage)},
        }
    )
    stage.wait_converged(30)
    outcome.user_sees = "a Warning Event UnexpectedShape on the template; it is not overwritten"
    assert not outcome.failed(), outcome.failed()


def _entry(stage: Stage, model_id: str) -> dict[str, Any]:
    data = stage.catalog_data()
    models = json.loads(data.get("catalog.json", '{"models": []}'))["models"]
    return next((m for m in models if m["id"] == model_id), {})


def _rv(stage: Stage) -> str:
    got = stage.admin.get("kubeopencode.io/v1alpha1", "AgentTemplate", stage.ns, "litellm-default") or {}
    return str((got.get("metadata") or {}).get("resourceVersion", ""))


@pytest.mark.faults
def test_provider_secret_deleted_while_in_use(input_stage: Any) -> None:
    stage, _ = input_stage
    """Revocation (issue 32 item 3): the routes that carried the deleted Secret's key leave LiteLLM, the
    others stay; the Secret created again publishes them again."""
    outcome = _outcome(
        "secret-deleted", "the provider Secret deleted while two routes use it", "SecretNotFound"
    )
    secret = stage.admin.get("v1", "Secret", stage.ns, PROVIDER_SECRET)
    assert secret is not None
    keyed = {"ext-good": "ai-appliance-external-ext-good", "act-good": "ai-appliance-external-act-good"}
    stage.admin.delete("v1", "Secret", stage.ns, PROVIDER_SECRET)
    wait_until(record_is(stage, "external", "ext-good", "error", "SecretNotFound"), 30, what="SecretNotFound")
    wait_until(lambda: not set(keyed.values()) & set(stage.litellm.rows()), 30, what="the keyed rows deleted")
    outcome.check("the other routes stay published", good_published(stage, ("kube-good", "ok")))

    def ours_in_catalog() -> set[str]:
        # (a hand-made row also named ext-good stays: it is not ours, and it never carried the key)
        models = json.loads(stage.catalog_data().get("catalog.json", '{"models": []}'))["models"]
        return {m["id"] for m in models if m["id"] in keyed and m["managed"]}

    wait_until(lambda: not ours_in_catalog(), 30, what="the keyed routes withdrawn from the catalog")
    record = stage.record("modelactivation", "act-good") or {}
    outcome.measured["observed"] = (
        f"error/SecretNotFound (activation: {record.get('state')}/{record.get('reason')}); "
        "its routes withdrawn"
    )
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
        secret["metadata"].pop(key, None)
    stage.admin.create(secret)
    stage.wait_converged(30)
    outcome.check("published again once the Secret is back", good_published(stage))
    outcome.user_sees = (
        "routes.json error/SecretNotFound and an Event; the routes that carried its key leave LiteLLM"
    )
    assert not outcome.failed(), outcome.failed()


@pytest.mark.faults
def test_a_credential_in_an_api_base_url(input_stage: Any) -> None:
    stage, _ = input_stage
    outcome = _outcome("url-credential-api", "an external apiBase with user:password@ in it", "Published")
    base = models_json(stage)
    cred = {
        "name": "cred",
        "model": "openai/cred",
        "apiBase": f"https://me:{URL_PASSWORD}@api.example.com/v1",
    }
    stage.admin.apply(external_configmap(stage.ns, json.dumps({"models": [*base, cred]})))
    wait_until(lambda: "cred" in stage.catalog_models(), 30, what="cred published")
    outcome.check("the password is not in the catalog", URL_PASSWORD not in json.dumps(stage.catalog_data()))
    # (not counted as a leak: the user wrote it into a ConfigMap; the catalog must not show it)
    leaks = [x for x in stage.leaks((URL_PASSWORD,)) if "extra secret" in x and "ConfigMaps in" not in x]
    outcome.measured["password_also_found_in"] = where = [x.rsplit(" found in ", 1)[1] for x in leaks]
    outcome.measured["observed"] = (
        "published/Published; the catalog strips user:password@, the event log keeps it"
        if any("events" in w for w in where)
        else "published/Published; the password is in no output"
    )
    stage.admin.apply(external_configmap(stage.ns, json.dumps({"models": base})))
    stage.wait_converged(30)
    outcome.user_sees = "published; the catalog shows the URL without user:password@"
    assert not outcome.failed(), outcome.failed()


@pytest.mark.faults
@pytest.mark.faults_full
def test_a_catalog_that_outgrows_one_configmap(input_stage: Any) -> None:
    stage, _ = input_stage
    outcome = _outcome(
        "catalog-too-big",
        "models.json with 800 small models (35 KB): the catalog outgrows a ConfigMap",
        "CatalogTooLarge",
    )
    base = models_json(stage)
    many = [{"name": f"many-{i}", "model": f"openai/many-{i}"} for i in range(800)]
    before = (stage.catalog_hash(), event_reasons(stage))
    stage.admin.apply(external_configmap(stage.ns, json.dumps({"models": [*base, *many]})))
    try:
        wait_until(
            lambda: sum(1 for r in stage.owned_rows() if r.startswith("ai-appliance-external-many-")) == 800,
            120,
            0.5,
            "800 LiteLLM rows",
        )
        expected = stage.expected()["catalog"]
        outcome.measured["catalog_bytes_needed"] = sum(len(k) + len(v) for k, v in expected.items())
        wait_until(lambda: "CatalogTooLarge" in event_reasons(stage), 30, 0.5, "a CatalogTooLarge Event")
        outcome.measured["new_event_reasons"] = sorted(event_reasons(stage) - before[1])
        outcome.measured["catalog_hash_unchanged"] = stage.catalog_hash() == before[0]
        outcome.measured["observed"] = (
            "LiteLLM has the rows; the catalog is not written; Event CatalogTooLarge"
        )
        outcome.user_sees = (
            f"LiteLLM gets all 800 rows; the catalog ({outcome.measured['catalog_bytes_needed'] // 1024} "
            "KiB) "
            "would exceed a ConfigMap's 1 MiB, so it is not written: apps keep the previous catalog, "
            "consumers are not rolled, a Warning Event CatalogTooLarge on ConfigMap/ai-model-catalog says why"
        )
        outcome.check("the last written catalog stays", stage.catalog_hash() == before[0])
        outcome.check("a Kubernetes Event reports it", "CatalogTooLarge" in event_reasons(stage))
    finally:
        stage.admin.apply(external_configmap(stage.ns, json.dumps({"models": base})))
        stage.wait_converged(120)
    assert not outcome.failed(), outcome.failed()


@pytest.mark.faults
@pytest.mark.faults_full
def test_a_forged_immutable_catalog(input_stage: Any) -> None:
    """Issue 32, item 11: whoever may create ConfigMaps in NAMESPACE replaces ai-model-catalog with an
    immutable forgery. It is named (CatalogImmutable, with the command that mends it) and, once deleted,
    written again at once by the same controller."""
    stage, _ = input_stage
    outcome = _outcome(
        "immutable-catalog",
        "ConfigMap/ai-model-catalog replaced by a forgery marked immutable: true",
        "CatalogImmutable",
    )
    before = event_reasons(stage)
    stage.admin.delete("v1", "ConfigMap", stage.ns, CATALOG)
    stage.admin.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CATALOG, "namespace": stage.ns},
            "data": {"AI_APPLIANCE_MODEL_CATALOG_READY": "true", "forged": "yes"},
            "immutable": True,
        }
    )
    base = models_json(stage)
    stage.admin.apply(
        external_configmap(
            stage.ns, json.dumps({"models": [*base, {"name": "after-forgery", "model": "x/y"}]})
        )
    )
    try:
        wait_until(lambda: "CatalogImmutable" in event_reasons(stage), 60, 0.5, "a CatalogImmutable Event")
        outcome.measured["new_event_reasons"] = sorted(event_reasons(stage) - before)
        outcome.check("the forgery is named by an Event", "CatalogImmutable" in event_reasons(stage))
        stage.admin.delete("v1", "ConfigMap", stage.ns, CATALOG)
        began = time.monotonic()
        wait_until(lambda: "after-forgery" in stage.catalog_models(), 60, 0.5, "the catalog written again")
        outcome.measured["rewritten_after_delete_s"] = round(time.monotonic() - began, 2)
        outcome.check("written again once deleted", "forged" not in stage.catalog_data())
        outcome.user_sees = (
            "a Warning Event CatalogImmutable on ConfigMap/ai-model-catalog with the kubectl delete that "
            "mends it (and a model-catalog status row); once deleted, the catalog is written again at once"
        )
    finally:
        stage.admin.apply(external_configmap(stage.ns, json.dumps({"models": base})))
        stage.wait_converged(120)
    assert not outcome.failed(), outcome.failed()


@pytest.mark.faults
def test_zz_the_input_stage_keeps_every_invariant(input_stage: Any) -> None:
    """After every bad input is mended, the whole stage is judged like a fault scenario."""
    stage, _ = input_stage
    outcome = results.record(
        Outcome(
            "input-stage",
            "fault",
            "every adapter-level bad input above, then mended",
            PROFILE.name,
            bound_s=60.0,
        )
    )
    judge(stage, outcome, stage.first_snapshot, 0, alive=True)
    outcome.user_sees = (
        "after every bad input above is mended, the catalog equals render's answer and "
        "nothing foreign was touched"
    )
    assert not outcome.failed(), outcome.failed()
