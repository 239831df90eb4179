"""Hypothesis strategies: small, collision-prone clusters (names overlap across sources on purpose)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.core import builders as b

NAMES = ["llama", "qwen", "Llama", "embed", "phi", "gpt-4o", "mesh/llama", "local/qwen", "share/phi", "x y"]
CANARY = "sk-canary-7f3e9b1d"  # planted in every Secret; must never surface


names = st.sampled_from(NAMES)
limits = st.one_of(
    st.none(), st.integers(1, 200_000), st.sampled_from(["8192", "0", "-1", "lots", 1.5, True])
)


@st.composite
def kubeai(draw: st.DrawFn) -> dict[str, Any]:
    args = []
    if (ctx := draw(limits)) is not None:
        args = [f"--max-model-len={ctx}"]
    return b.kubeai_model(
        draw(names),
        ready=draw(st.sampled_from([0, 1, 2, None])),
        features=draw(
            st.sampled_from([["TextGeneration"], ["TextEmbedding"], ["Reranking"], ["SpeechToText"], []])
        ),
        args=args,
    )


@st.composite
def external_item(draw: st.DrawFn) -> Any:
    item: dict[str, Any] = {"name": draw(names), "model": draw(st.sampled_from(["openai/a", "groq/b", 5]))}
    if draw(st.booleans()):
        item["apiKeySecretRef"] = {
            "name": draw(
                st.sampled_from(
                    ["openai", "missing", "ai-model-provider-m", "unlabelled", "litellm-masterkey-secret"]
                )
            ),
            "key": "apiKey",
        }
    elif draw(st.booleans()):
        item["apiKey"] = CANARY + "-inline"
    if draw(st.booleans()):
        item["tpm"] = draw(limits)
    if draw(st.booleans()):
        item["enabled"] = draw(st.sampled_from([False, "false", True]))
    if draw(st.booleans()):
        item["contextWindow"] = draw(limits)
    return item


@st.composite
def external_configmap(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.integers(0, 9)) == 0:
        return b.external_configmap(None, raw_text='{"models": [ {"name": "' + CANARY + '",, ]')
    return b.external_configmap(draw(st.lists(external_item(), max_size=4)))


@st.composite
def activation(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["external", "local"]))
    external = None
    if kind == "external":
        external = {"model": "mistral/large"}
        ref = draw(
            st.sampled_from(
                [None, "ai-model-provider-m", "openai", "litellm-masterkey-secret", "labelled", "unlabelled"]
            )
        )
        if ref:
            external["apiKeySecretRef"] = {"name": ref, "key": "apiKey"}
        elif draw(st.booleans()):
            external["apiKey"] = CANARY + "-activation"
    return b.activation(
        draw(names), kind=kind, external=external, enabled=draw(st.sampled_from([None, False]))
    )


@st.composite
def runtime(draw: st.DrawFn) -> list[dict[str, Any]]:
    name = draw(st.sampled_from(["rt-a", "rt-b"]))
    objs = [
        b.freetoken_deployment(
            name,
            activation_name=draw(st.sampled_from([None, "phi", "llama", "gone"])),
            ready=draw(st.booleans()),
            endpoint=draw(st.sampled_from([None, f"http://{name}.ai.svc:8080/v1", "http://evil.example/v1"])),
        )
    ]
    if draw(st.booleans()):
        objs.append(b.service(name))
    return objs


def secrets() -> list[dict[str, Any]]:
    labels = {"appliance.magicstick.dev/model-provider-secret": "true"}
    return [
        b.secret("openai", {"apiKey": CANARY + "-openai"}),
        b.secret("ai-model-provider-m", {"apiKey": CANARY + "-m"}),
        b.secret("labelled", {"apiKey": CANARY + "-l"}, labels=labels),
        b.secret("unlabelled", {"apiKey": CANARY + "-u"}, labels={}),
        # the master key Secret, labelled by mistake: still never handed out (behaviour §1.5)
        b.secret("litellm-masterkey-secret", {"apiKey": CANARY + "-master"}),
    ]


@st.composite
def rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for i in range(draw(st.integers(0, 4))):
        name = draw(names)
        kind = draw(st.sampled_from(["mesh", "hand", "legacy", "owned", "foreign-our-id"]))
        if kind == "mesh":
            out.append(b.row(name, f"mesh-{i}", owner="private-mesh", order=1))
        elif kind == "hand":
            out.append(b.row(name, f"hand-{i}"))
        elif kind == "legacy":
            out.append(b.row(name, f"ai-appliance-kubeai-legacy{i}", managed=True))
        elif kind == "owned":
            out.append(b.row(name, f"ai-appliance-external-stale{i}", owner="model-catalog"))
        else:
            out.append(b.row(name, "ai-appliance-kubeai-llama", owner="private-mesh"))
    return out


@st.composite
def cluster(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(Kubernetes objects, LiteLLM rows)."""
    objs: list[dict[str, Any]] = []
    objs += draw(st.lists(kubeai(), max_size=4))
    if draw(st.booleans()):
        objs.append(draw(external_configmap()))
    objs += draw(st.lists(activation(), max_size=3))
    for r in draw(st.lists(runtime(), max_size=2)):
        objs += r
    objs += secrets()
    if draw(st.booleans()):
        objs.append(b.agent_template("litellm-default", models={"old": {"name": "old"}}))
    if draw(st.booleans()):
        objs += [
            b.deployment(
                "openclaw",
                labels={"app.kubernetes.io/instance": "openclaw", "app.kubernetes.io/name": "openclaw"},
            ),
            b.replicaset("openclaw-1", "openclaw"),
            b.pod(
                "openclaw-1-a",
                labels={"app.kubernetes.io/instance": "openclaw", "app.kubernetes.io/name": "openclaw"},
                owner=("ReplicaSet", "openclaw-1"),
            ),
            b.pod("solo", labels={"app": "anything-llm"}),
        ]
    return _dedupe(objs), draw(rows())


def _dedupe(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last object of each (kind, namespace, name) wins: a cluster holds one of each."""
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for o in objs:
        seen[(o["kind"], o["metadata"]["namespace"], o["metadata"]["name"])] = o
    return list(seen.values())


# --- hostile input (issue 12, item 3) ------------------------------------------------------------------

_ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, categories=None)  # surrogates too
hostile_text = st.text(_ANY_CHAR, max_size=10) | st.sampled_from(
    [
        *("\ud800", "a\udfffb", "a\nb", "\x1b[2J", "\u202e", "", " ", "x" * 300, "x" * 600),
        *("os.environ/X", "-1", "1e9", "true", "8192"),
    ]
)
# (Integers past the 4,300 digits str() refuses cannot be drawn: Hypothesis could not print them. An
# embedding host can pass one; test_near_valid_properties puts one in every field of every kind.)
hostile_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.sampled_from([0, -1, 2**63, 10**400, -(10**400)])
    | st.floats(allow_nan=True, allow_infinity=True)
    | hostile_text
)
json_values = st.recursive(
    hostile_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile_text, inner, max_size=3),
    max_leaves=12,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value``'s objects and arrays (not the root)."""
    out: list[tuple[Any, ...]] = []
    children = (
        value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    )
    for key, child in children:
        out.append((*prefix, key))
        out.extend(paths(child, (*prefix, key)))
    return out


def edited(value: Any, path: tuple[Any, ...], new: Any, delete: bool = False) -> Any:
    """A copy of ``value`` with the value at ``path`` replaced by ``new`` (or removed)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    if delete and not rest:
        del copy[head]
    else:
        copy[head] = edited(value[head], rest, new, delete)
    return copy


@st.composite
def mutated(draw: st.DrawFn, seed: Any, max_edits: int = 3) -> Any:
    """``seed`` with one to ``max_edits`` of its fields replaced by any JSON value, or removed."""
    value = seed
    for _ in range(draw(st.integers(1, max_edits))):
        found = paths(value)
        if not found:
            break
        path = draw(st.sampled_from(found))
        value = edited(value, path, draw(json_values), delete=draw(st.integers(0, 4)) == 0)
    return value


def as_delivered(value: Any) -> Any:
    """``value`` as the API server hands it back: Go's JSON decoder turns a lone surrogate into U+FFFD (a
    surrogate pair into its character). The six characters ``\\ud800`` inside a string (models.json's
    text) are plain ASCII and stay."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {as_delivered(k): as_delivered(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_delivered(v) for v in value]
    return value
