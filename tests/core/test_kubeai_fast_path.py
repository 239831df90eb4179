"""Issue 15, P5: ``KubeAIModel.from_k8s`` reads a well-formed Model on a fast path and anything else on the
careful one. Both must give the same value (or the same None) for every object: here the fast path's
answer, whenever it gives one, is compared with the careful path's, over Models built from the values
each field can hold (the odd ones included) and over well-formed Models with any field replaced by any
JSON value or removed."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core.sources import kubeai
from catalog_core.sources.kubeai import KubeAIModel, _from_plain
from catalog_core.trim import REJECTED
from tests.core import strategies as gen
from tests.core.builders import (
    CONTEXT_ANNOTATION,
    ENGINE_ANNOTATION,
    MAX_OUTPUT_ANNOTATION,
    MAX_SEQS_ANNOTATION,
    TARGET_ANNOTATION,
)


def model(
    name: Any = "llama-3-8b",
    *,
    annotations: Any = None,
    args: Any = None,
    features: Any = None,
    ready: Any = 1,
    pods: Any = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ai", "uid": "uid-1", "resourceVersion": "7"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": meta,
        "spec": {
            "features": ["TextGeneration"] if features is None else features,
            "engine": "VLLM",
            "resourceProfile": "nvidia-gpu-l4:1",
            "args": ["--max-model-len=8192", "--max-num-seqs=8"] if args is None else args,
            **spec,
        },
        "status": {"replicas": {"ready": ready} if pods is None else {"all": pods, "ready": ready}},
    }


def same_on_both_paths(obj: Any) -> KubeAIModel | None:
    """The fast path's answer (None: it left the object to the careful path), checked against the
    careful path's."""
    careful = KubeAIModel.from_k8s_careful(obj)
    fast = _from_plain(obj)
    if fast is not None:
        assert fast == careful
    assert KubeAIModel.from_k8s(obj) == careful
    return fast


def test_the_common_shape_takes_the_fast_path():
    read = same_on_both_paths(model(annotations={MAX_OUTPUT_ANNOTATION: "1024"}))
    assert read == KubeAIModel(
        "llama-3-8b", "uid-1", True, KubeAIModel.from_k8s_careful(model()).model_type, ("TextGeneration",),
        "vllm", "nvidia-gpu", 8192, 1024, 8,
    )  # fmt: skip
    assert same_on_both_paths(model(args=[], features=["TextEmbedding"], ready=0)) is not None
    assert (
        same_on_both_paths(
            model(annotations={CONTEXT_ANNOTATION: 4096, TARGET_ANNOTATION: "cpu", MAX_SEQS_ANNOTATION: None})
        )
        is not None
    )


def test_what_the_careful_path_must_judge_is_left_to_it():
    # Each of these may warn, reject, or read a field another way: the fast path gives no answer.
    unusual = [
        model(annotations={CONTEXT_ANNOTATION: "0"}),  # dropped with a warning
        model(annotations={MAX_OUTPUT_ANNOTATION: " 1024"}),  # trimmed by the careful path
        model(annotations={TARGET_ANNOTATION: "GPU"}),  # unknown target, dropped with a warning
        model(args=["--max-model-len", "8192"]),  # the flag and its value as two args
        model(args=[" --max-model-len=8192"]),
        model(args=["--max-model-len=lots"]),
        model(args=["--max-model-len=8192", 5]),  # a non-string arg
        model("mesh/llama"),  # an alias prefix: the name needs checking
        model("bad\nname"),
        {**model(), REJECTED: {"reason": "NestedTooDeeply", "message": "deep"}},
        {"metadata": {"name": "x"}},  # no spec
    ]
    for obj in unusual:
        assert same_on_both_paths(obj) is None
    # A bool is no replica count: read by the careful rule, still on the fast path
    assert same_on_both_paths(model(ready=True)) is not None
    # Scaling fields KubeAI's schema refuses are dropped with a warning by the careful path only
    for spec in (
        {"minReplicas": "x"},
        {"minReplicas": -1},
        {"maxReplicas": 0},
        {"autoscalingDisabled": "yes"},
    ):
        assert same_on_both_paths(model(**spec)) is None
        assert KubeAIModel.from_k8s(model(**spec)).scales_from_zero is False


def test_scaling_fields_read_the_same_on_both_paths():
    # KubeAI's defaults: no minReplicas is 0, so a Model scales from zero unless told otherwise
    assert same_on_both_paths(model()).scales_from_zero is True  # type: ignore[union-attr]
    for spec, scales in (
        ({"minReplicas": 0}, True),
        ({"minReplicas": 0, "maxReplicas": 3}, True),
        ({"minReplicas": 1}, False),
        ({"minReplicas": 0, "autoscalingDisabled": True}, False),
        ({"autoscalingDisabled": False}, True),
    ):
        read = same_on_both_paths(model(**spec))
        assert read is not None and read.scales_from_zero is scales, spec
    # starting: pods exist, none ready
    for ready, pods, starting in (
        (0, 1, True),
        (0, 0, False),
        (1, 1, False),
        (0, None, False),
        (0, "2", True),
    ):
        read = KubeAIModel.from_k8s(model(ready=ready, pods=pods))
        assert read is not None and read.starting is starting, (ready, pods)


# Plain values (the fast path reads them) as often as odd ones (it must leave them to the careful path).
plain_limits = st.one_of(st.integers(1, 16_777_216), st.integers(1, 200_000).map(str))
limits = st.one_of(
    plain_limits,
    st.none(),
    st.integers(-2, 20_000_000),
    st.sampled_from(
        ["8192", "0", "-1", "007", " 12", "12 ", "1e3", "١٢", "", "9" * 13, "16777217", True, 1.5]
    ),
)
replica_counts = st.one_of(
    st.integers(-2, 5), st.sampled_from(["0", "1", " 0", "x", "", True, False, 1.5, 2**40, "9" * 13, [0]])
)
names = st.one_of(
    st.sampled_from(["llama", "Llama-3.1_8B", "qwen2.5-7b", "embed-v1"]),
    st.sampled_from(["mesh/llama", "local/", " x ", "x y", "a" * 600, "", "é", "-x", 5]),
    st.text(max_size=8),
)
flags = st.one_of(
    st.builds(lambda n: f"--max-model-len={n}", plain_limits),
    st.builds(lambda n: f"--max-num-seqs={n}", plain_limits),
    st.builds(lambda n: f"--max-model-len={n}", limits),
    st.builds(lambda n: f"--max-num-seqs={n}", limits),
    st.sampled_from(
        [
            "--max-model-len",
            "--max-model-len=",
            "--max-model-len=8192=1",
            "--max-num-seqs==4",
            "--max-model-len=\u0661\u0662",
            "--max-model-len 4096",
            " --max-num-seqs=4",
            "--max-loras=2",
            "--max-model-lenx=4",
            "x--max-model-len=4",
            "--port=8000",
            "4096",
        ]
    ),
    st.integers(0, 3),
)
annotation_maps = st.dictionaries(
    st.sampled_from(
        [
            CONTEXT_ANNOTATION,
            MAX_OUTPUT_ANNOTATION,
            MAX_SEQS_ANNOTATION,
            ENGINE_ANNOTATION,
            TARGET_ANNOTATION,
            "other",
        ]
    ),
    st.one_of(limits, st.sampled_from(["cpu", "nvidia-gpu", " CPU", "tpu", "vLLM", "  "])),
    max_size=5,
)


@settings(max_examples=400)
@given(
    name=names,
    annotations=st.one_of(st.none(), annotation_maps, st.sampled_from([[], "x"])),
    args=st.one_of(st.none(), st.lists(flags, max_size=4), st.sampled_from(["--max-model-len=1", {}])),
    features=st.one_of(
        st.lists(st.sampled_from(["TextGeneration", "TextEmbedding", "Reranking", "SpeechToText", "X", 3])),
        st.sampled_from([None, "TextGeneration", ()]),
    ),
    ready=st.one_of(limits, st.sampled_from([{}, [1]])),
    pods=st.one_of(st.none(), limits),
    engine=st.one_of(st.none(), st.sampled_from(["VLLM", " OLlama ", "", " ", 7])),
    profile=st.one_of(st.none(), st.sampled_from(["nvidia-gpu-l4:1", "AMD-gpu", "intel", "cpu:2", 3])),
    minimum=st.one_of(st.none(), replica_counts),
    maximum=st.one_of(st.none(), replica_counts),
    disabled=st.one_of(st.none(), st.booleans(), st.sampled_from(["true", 0, 1, None])),
)
def test_both_paths_agree_on_models_built_from_odd_field_values(
    name, annotations, args, features, ready, pods, engine, profile, minimum, maximum, disabled
):
    obj = model(name, annotations=annotations, args=args, features=features, ready=ready, pods=pods)
    for field, value in (
        ("engine", engine),
        ("resourceProfile", profile),
        ("minReplicas", minimum),
        ("maxReplicas", maximum),
        ("autoscalingDisabled", disabled),
    ):
        if value is None:
            obj["spec"].pop(field, None)
        else:
            obj["spec"][field] = value
    same_on_both_paths(obj)


@settings(max_examples=300)
@given(
    gen.mutated(
        model(
            annotations={
                CONTEXT_ANNOTATION: "8192",
                MAX_OUTPUT_ANNOTATION: "1024",
                MAX_SEQS_ANNOTATION: "4",
                TARGET_ANNOTATION: "cpu",
            }
        )
    )
)
def test_both_paths_agree_on_well_formed_models_with_any_field_changed(obj):
    same_on_both_paths(obj)


@settings(max_examples=200)
@given(
    name=st.from_regex(r"[a-z0-9][a-z0-9.-]{0,40}", fullmatch=True),
    annotations=st.one_of(
        st.none(),
        st.dictionaries(
            st.sampled_from([CONTEXT_ANNOTATION, MAX_OUTPUT_ANNOTATION, MAX_SEQS_ANNOTATION]),
            st.one_of(st.none(), plain_limits),
            max_size=3,
        ),
    ),
    args=st.lists(
        st.one_of(
            st.builds(lambda n: f"--max-model-len={n}", plain_limits),
            st.builds(lambda n: f"--max-num-seqs={n}", plain_limits),
            st.sampled_from(["--max-loras=2", "--port=8000", "--enable-prefix-caching"]),
        ),
        max_size=4,
    ),
    features=st.lists(st.sampled_from(["TextGeneration", "TextEmbedding", "Reranking", "SpeechToText"])),
    ready=st.integers(0, 3),
    pods=st.one_of(st.none(), st.integers(0, 3)),
    target=st.sampled_from([None, "cpu", "nvidia-gpu", "amd-gpu", "intel-gpu"]),
    scaling=st.fixed_dictionaries(
        {},
        optional={
            "minReplicas": st.integers(0, 3),
            "maxReplicas": st.integers(1, 4),
            "autoscalingDisabled": st.booleans(),
        },
    ),
)
def test_well_formed_models_take_the_fast_path_and_read_as_on_the_careful_one(
    name, annotations, args, features, ready, pods, target, scaling
):
    if target is not None:
        annotations = {**(annotations or {}), TARGET_ANNOTATION: target}
    obj = model(
        name, annotations=annotations, args=args, features=features, ready=ready, pods=pods, **scaling
    )
    assert same_on_both_paths(obj) is not None


def test_megabyte_values_are_read_but_never_held_by_the_parse_memos():
    # Whoever may edit a Model can make its args, features or profile huge: read as any other, but the
    # memos (which keep their keys) must not hold them.
    huge = "x" * 1_000_000
    memos = (kubeai._plain_flags, kubeai._profile_target, kubeai._features_type)
    for memo in memos:
        memo.clear()
    obj = model(
        args=["--max-model-len=8192", f"--note={huge}"],
        features=["TextGeneration", huge],
        resourceProfile=f"nvidia-{huge}:1",
    )
    read = same_on_both_paths(obj)
    assert read is not None and read.context_window == 8192 and read.compute_target == "nvidia-gpu"
    assert all(len(memo) == 0 for memo in memos)
    same_on_both_paths(model())  # a usual Model is memoized as before
    assert all(len(memo) == 1 for memo in memos)
