"""Issue 15, P6: ``FreeTokenRuntime.from_k8s`` reads a well-formed Deployment on a fast path and anything else
on the careful one. Both must give the same value (or the same None) for every object: here the fast path's
answer, whenever it gives one, is compared with the careful path's, over Deployments built from the values
each field can hold (the odd ones included) and over well-formed Deployments with any field replaced by any
JSON value or removed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core.sources.common import LabelMatch
from catalog_core.sources.freetoken import RUNTIME_MATCH, FreeTokenRuntime, _from_plain
from catalog_core.trim import REJECTED
from tests.core import strategies as gen
from tests.core.builders import (
    CONTEXT_ANNOTATION,
    ENDPOINT_ANNOTATION,
    ENGINE_ANNOTATION,
    MAX_OUTPUT_ANNOTATION,
    MAX_SEQS_ANNOTATION,
    TARGET_ANNOTATION,
)

RUNTIME = "appliance.magicstick.dev/runtime"
ACTIVATION = "appliance.magicstick.dev/modelactivation"
OTHER_RUNTIME = LabelMatch(RUNTIME, "walkthrough")


def deployment(
    name: Any = "phi-rt",
    *,
    activation: Any = "phi",
    kind: Any = "freetoken",
    annotations: Any = None,
    generation: Any = 1,
    observed: Any = 1,
    ready_replicas: Any = 1,
    conditions: Any = None,
    resources: Any = None,
) -> dict[str, Any]:
    """A runtime Deployment as the adapters hand it to the core (trimmed as trim.RUNTIME_DEPLOYMENT says)."""
    labels: dict[str, Any] = {RUNTIME: kind}
    if activation is not None:
        labels[ACTIVATION] = activation
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ai",
        "uid": "uid-ai-phi-rt",
        "resourceVersion": "1002",
        "generation": generation,
        "labels": labels,
    }
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"resources": {"limits": {"nvidia.com/gpu": "1"}} if resources is None else resources}
                    ]
                }
            }
        },
        "status": {
            "observedGeneration": observed,
            "readyReplicas": ready_replicas,
            "conditions": [{"type": "Available", "status": "True"}] if conditions is None else conditions,
        },
    }


def same_on_both_paths(obj: Any, runtime: LabelMatch = RUNTIME_MATCH) -> FreeTokenRuntime | None:
    """The fast path's answer (None: it left the object to the careful path), checked against the
    careful path's."""
    careful = FreeTokenRuntime.from_k8s_careful(obj, runtime)
    fast = _from_plain(obj, runtime)
    if fast is not None:
        assert fast == careful
        assert careful is not None and careful.problem is None and careful.warnings == ()
    assert FreeTokenRuntime.from_k8s(obj, runtime) == careful
    return fast


def test_the_common_shape_takes_the_fast_path():
    read = same_on_both_paths(
        deployment(
            annotations={CONTEXT_ANNOTATION: "16384", ENDPOINT_ANNOTATION: " http://phi.ai.svc:80/v1 "}
        )
    )
    assert read == FreeTokenRuntime(
        "phi-rt",
        "uid-ai-phi-rt",
        "phi",
        "http://phi.ai.svc:80/v1",
        True,
        "",
        "freetoken",
        "nvidia-gpu",
        16384,
    )
    not_ready = same_on_both_paths(
        deployment(ready_replicas=0, annotations={ENGINE_ANNOTATION: " FreeToken-2 "})
    )
    assert not_ready is not None and (not_ready.ready, not_ready.not_ready_because, not_ready.engine) == (
        False,
        "no ready replicas",
        "freetoken-2",
    )
    rolling = same_on_both_paths(
        deployment(generation=3, observed=2, activation=None, annotations={TARGET_ANNOTATION: "cpu"})
    )
    assert rolling is not None and (rolling.ready, rolling.activation, rolling.compute_target) == (
        False,
        None,
        "cpu",
    )
    assert same_on_both_paths(deployment(conditions=[{"type": "Progressing", "status": "True"}])) is not None
    # Another runtime served the same way reads its own label value, on the fast path too.
    other = deployment(kind="walkthrough")
    assert same_on_both_paths(other, OTHER_RUNTIME) is not None
    assert FreeTokenRuntime.from_k8s(other) is None


def test_what_the_careful_path_must_judge_is_left_to_it():
    # Each of these may warn, reject, or read a field another way: the fast path gives no answer.
    unusual = [
        deployment(annotations={CONTEXT_ANNOTATION: "0"}),  # dropped with a warning
        deployment(annotations={MAX_OUTPUT_ANNOTATION: " 1024"}),  # trimmed by the careful path
        deployment(annotations={MAX_SEQS_ANNOTATION: 8}),  # not a string: the careful path ignores it
        deployment(annotations={TARGET_ANNOTATION: "GPU"}),  # unknown target, dropped with a warning
        deployment(annotations={TARGET_ANNOTATION: " cpu"}),
        deployment(kind="kubeai"),  # another kind: None on both
        deployment(activation=""),
        deployment(activation="mesh/phi"),  # an alias prefix: the activation name needs checking
        deployment("mesh/phi-rt"),
        deployment("bad\nname"),
        deployment(" phi-rt "),
        {**deployment(), REJECTED: {"reason": "NestedTooDeeply", "message": "deep"}},
        {"metadata": {"name": "x", "labels": {RUNTIME: "freetoken"}}},  # no annotations is fine, no uid too
    ]
    for obj in unusual[:-1]:
        assert same_on_both_paths(obj) is None
    assert same_on_both_paths(unusual[-1]) is not None
    # An odd status or odd containers are read by the careful path's own helpers, still on the fast path.
    assert same_on_both_paths(deployment(ready_replicas=True)) is not None
    assert same_on_both_paths(deployment(conditions=[None, {"type": "Available", "status": 1}])) is not None
    assert same_on_both_paths(deployment(resources={"limits": ["amd.com/gpu"]})) is not None
    # The label is matched as LabelMatch.matches does (trimmed, any case) on either path.
    assert same_on_both_paths(deployment(kind=" FreeToken")) is not None


# Plain values (the fast path reads them) three times as often as odd ones (it must leave them to the careful
# path), so that both paths' answers are compared on plenty of objects the fast path accepts.
def mostly(plain: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.integers(0, 3).flatmap(lambda draw: odd if draw == 0 else plain)


plain_limits = st.integers(1, 200_000).map(str)
limits = st.one_of(
    plain_limits,
    st.none(),
    st.integers(-2, 20_000_000),
    st.sampled_from(
        [
            "16777216",
            "0",
            "-1",
            "007",
            " 12",
            "12 ",
            "1e3",
            "\u0661\u0662",
            "",
            "9" * 13,
            "16777217",
            True,
            1.5,
        ]
    ),
)
plain_names = st.sampled_from(["phi-rt", "Phi-3.5_mini", "ft-0-runtime", "a", "x" * 253])
odd_names = st.one_of(
    st.sampled_from(
        ["mesh/phi", "local/", " x ", "x y", "x" * 254, "a" * 600, "", "\xe9", "-x", "x\u2028", 5]
    ),
    st.text(max_size=8),
)
names = mostly(plain_names, st.one_of(odd_names, st.none()))
activations = mostly(st.one_of(st.none(), plain_names), odd_names)
kinds = mostly(
    st.sampled_from(["freetoken", "FreeToken", " freetoken ", "walkthrough"]),
    st.one_of(st.sampled_from(["", "kubeai", 1, None]), st.text(max_size=4)),
)
plain_annotations = st.fixed_dictionaries(
    {},
    optional={
        CONTEXT_ANNOTATION: plain_limits,
        MAX_OUTPUT_ANNOTATION: plain_limits,
        MAX_SEQS_ANNOTATION: st.one_of(st.none(), plain_limits),
        ENGINE_ANNOTATION: st.sampled_from(["FreeToken", " llama.cpp ", "", " ", None]),
        TARGET_ANNOTATION: st.sampled_from(["cpu", "nvidia-gpu", "amd-gpu", "intel-gpu", None]),
        ENDPOINT_ANNOTATION: st.sampled_from(
            ["http://phi.ai.svc.cluster.local:8080/v1", " http://x ", "", None]
        ),
        "other": st.one_of(st.none(), st.integers(), st.text(max_size=3)),
    },
)
odd_annotations = st.one_of(
    st.dictionaries(
        st.sampled_from(
            [
                CONTEXT_ANNOTATION,
                MAX_OUTPUT_ANNOTATION,
                MAX_SEQS_ANNOTATION,
                ENGINE_ANNOTATION,
                TARGET_ANNOTATION,
                ENDPOINT_ANNOTATION,
                "other",
            ]
        ),
        st.one_of(
            limits,
            st.sampled_from(
                ["cpu", "nvidia-gpu", "amd-gpu", " CPU", "tpu", "vLLM", "  ", "http://x.ai.svc:1/v1", []]
            ),
        ),
        max_size=6,
    ),
    st.sampled_from([[], "x"]),
)
annotation_maps = mostly(st.one_of(st.none(), plain_annotations), odd_annotations)
counts = st.one_of(st.none(), st.integers(-1, 3), st.sampled_from([True, False, "1", 1.0, [], {}]))
conditions = st.one_of(
    st.none(),
    st.lists(
        st.one_of(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["Available", "Progressing", "ReplicaFailure", "available", 1])},
                optional={"status": st.sampled_from(["True", "False", "Unknown", "true", True, None])},
            ),
            st.sampled_from([None, "Available", [], {}]),
        ),
        max_size=3,
    ),
    st.sampled_from(["Available", {}]),
)
resources = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["limits", "requests", "claims"]),
        st.one_of(
            st.dictionaries(
                st.sampled_from(
                    ["cpu", "memory", "nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915", "x"]
                ),
                st.sampled_from(["1", 1, "500m"]),
                max_size=3,
            ),
            st.sampled_from([None, [], "nvidia.com/gpu"]),
        ),
        max_size=3,
    ),
    st.sampled_from(["nvidia", []]),
)


@settings(max_examples=300)
@given(
    name=names,
    activation=activations,
    kind=kinds,
    annotations=annotation_maps,
    generation=counts,
    observed=counts,
    ready_replicas=counts,
    conditions=conditions,
    resources=resources,
    runtime=st.sampled_from([RUNTIME_MATCH, RUNTIME_MATCH, OTHER_RUNTIME]),
)
def test_both_paths_agree_on_deployments_built_from_odd_field_values(
    name, activation, kind, annotations, generation, observed, ready_replicas, conditions, resources, runtime
):
    obj = deployment(
        name,
        activation=activation,
        kind=kind,
        annotations=annotations,
        generation=generation,
        observed=observed,
        ready_replicas=ready_replicas,
        conditions=conditions,
        resources=resources,
    )
    same_on_both_paths(obj, runtime)


WELL_FORMED = deployment(
    annotations={
        CONTEXT_ANNOTATION: "16384",
        MAX_OUTPUT_ANNOTATION: "1024",
        MAX_SEQS_ANNOTATION: "4",
        TARGET_ANNOTATION: "cpu",
        ENGINE_ANNOTATION: "FreeToken",
    }
)
WELL_FORMED["status"]["conditions"].insert(0, {"type": "Progressing", "status": "True"})
WELL_FORMED["spec"]["template"]["spec"]["containers"].insert(
    0, {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
)


@settings(max_examples=300)
@given(
    st.one_of(
        gen.mutated(WELL_FORMED),
        gen.mutated(deployment(annotations={ENDPOINT_ANNOTATION: "http://x.ai.svc:80/v1"})),
    )
)
def test_both_paths_agree_on_well_formed_deployments_with_any_field_changed(obj):
    same_on_both_paths(obj)


@settings(max_examples=200)
@given(
    name=st.from_regex(r"[a-z0-9][a-z0-9.-]{0,40}", fullmatch=True),
    activation=st.one_of(
        st.none(), st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,30}[A-Za-z0-9])?", fullmatch=True)
    ),
    annotations=st.one_of(
        st.none(),
        st.dictionaries(
            st.sampled_from([CONTEXT_ANNOTATION, MAX_OUTPUT_ANNOTATION, MAX_SEQS_ANNOTATION]),
            st.one_of(st.none(), plain_limits),
            max_size=3,
        ),
    ),
    endpoint=st.one_of(st.none(), st.sampled_from(["http://phi.ai.svc.cluster.local:8080/v1", "", " "])),
    engine=st.sampled_from([None, "freetoken", "FreeToken", "llama.cpp", ""]),
    target=st.sampled_from([None, "cpu", "nvidia-gpu", "amd-gpu", "intel-gpu"]),
    generation=st.integers(1, 5),
    lag=st.integers(-1, 1),
    ready_replicas=st.one_of(st.none(), st.integers(0, 3)),
    available=st.sampled_from(["True", "False", "Unknown", None]),
    resources=st.sampled_from(
        [{}, {"limits": {"nvidia.com/gpu": "1"}}, {"requests": {"cpu": "2"}, "limits": {"amd.com/gpu": "1"}}]
    ),
)
def test_well_formed_deployments_take_the_fast_path_and_read_as_on_the_careful_one(
    name,
    activation,
    annotations,
    endpoint,
    engine,
    target,
    generation,
    lag,
    ready_replicas,
    available,
    resources,
):
    annotations = dict(annotations or {})
    for key, value in (
        (ENDPOINT_ANNOTATION, endpoint),
        (ENGINE_ANNOTATION, engine),
        (TARGET_ANNOTATION, target),
    ):
        if value is not None:
            annotations[key] = value
    conds = [{"type": "Progressing", "status": "True"}]
    if available is not None:
        conds.append({"type": "Available", "status": available})
    obj = deployment(
        name,
        activation=activation,
        annotations=annotations,
        generation=generation,
        observed=generation + lag,
        ready_replicas=ready_replicas,
        conditions=conds,
        resources=resources,
    )
    if ready_replicas is None:
        del obj["status"]["readyReplicas"]
    assert same_on_both_paths(obj) is not None
