"""KubeAI ``Model`` (kubeai.org/v1) — contracts A.1, B.2, C.9."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.reasons import Reason
from catalog_core.sources.common import (
    COMPUTE_TARGET_ANNOTATION,
    CONTEXT_WINDOW_ANNOTATION,
    ENGINE_ANNOTATION,
    MAX_NUM_SEQS_ANNOTATION,
    MAX_OUTPUT_ANNOTATION,
    Problem,
)
from catalog_core.values import (
    COMPUTE_TARGETS,
    FieldError,
    ModelType,
    compute_target_from_profile,
    kubeai_model_type,
    positive_int,
)

_FLAG = re.compile(r"^--max-model-len(?:(?:=|\s+)(\S*))?$")
_SEQS = re.compile(r"^--max-num-seqs(?:(?:=|\s+)(\S*))?$")


@attrs.frozen
class KubeAIModel:
    """What the catalog needs from a Model. Replica counts shrink to ``ready`` so they cause no writes."""

    name: str
    uid: str
    ready: bool
    model_type: ModelType
    features: tuple[str, ...]
    engine: str
    compute_target: str
    context_window: int | None = None
    max_output_tokens: int | None = None
    max_num_seqs: int | None = None
    problem: Problem | None = None

    @classmethod
    def from_k8s(cls, obj: Mapping[str, Any]) -> KubeAIModel | None:
        """None for an object without a name (skipped, contracts A.1). Hot path: plain dict reads."""
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        name = meta.get("name")
        name = name.strip() if isinstance(name, str) else ""
        if not name:
            return None
        annotations = meta.get("annotations")
        annotations = annotations if isinstance(annotations, dict) else {}
        spec = obj.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        features_raw = spec.get("features")
        features = (
            tuple(f for f in features_raw if isinstance(f, str)) if isinstance(features_raw, list) else ()
        )
        args_raw = spec.get("args")
        args = [a for a in args_raw if isinstance(a, str)] if isinstance(args_raw, list) else []
        ready = isinstance(positive_int(raw.path(obj, "status", "replicas", "ready"), "ready"), int)

        problems: list[str] = []

        def limit(value: Any, field: str) -> int | None:
            parsed = positive_int(value, field)
            if isinstance(parsed, FieldError):
                problems.append(parsed.message)
                return None
            return parsed

        if CONTEXT_WINDOW_ANNOTATION in annotations:
            context = limit(annotations[CONTEXT_WINDOW_ANNOTATION], CONTEXT_WINDOW_ANNOTATION)
        else:
            context = limit(_flag_value(args, _FLAG), "--max-model-len")
        max_output = limit(annotations.get(MAX_OUTPUT_ANNOTATION), MAX_OUTPUT_ANNOTATION)
        max_num_seqs = limit(
            annotations.get(MAX_NUM_SEQS_ANNOTATION) or _flag_value(args, _SEQS), "max-num-seqs"
        )

        engine = spec.get("engine")
        if not (isinstance(engine, str) and engine.strip()):
            engine = annotations.get(ENGINE_ANNOTATION)
            engine = engine if isinstance(engine, str) and engine.strip() else "vllm"
        target = annotations.get(COMPUTE_TARGET_ANNOTATION)
        if target is not None and target not in COMPUTE_TARGETS:
            problems.append(f"{COMPUTE_TARGET_ANNOTATION} must be one of {', '.join(COMPUTE_TARGETS)}")
            target = None
        if target is None:
            profile = spec.get("resourceProfile")
            target = compute_target_from_profile(profile if isinstance(profile, str) else "")
        uid = meta.get("uid")
        return cls(
            name=name,
            uid=uid if isinstance(uid, str) else "",
            ready=ready,
            model_type=kubeai_model_type(features, name),
            features=features,
            engine=engine.strip().lower(),
            compute_target=target,
            context_window=context,
            max_output_tokens=max_output,
            max_num_seqs=max_num_seqs,
            problem=Problem(Reason.INVALID_FIELD, "; ".join(problems)) if problems else None,
        )


def _flag_value(args: list[str], flag: re.Pattern[str]) -> str | None:
    """The first ``--flag=N`` or ``--flag N`` in a container's args."""
    for i, arg in enumerate(args):
        if not arg.lstrip().startswith("--max-"):
            continue
        match = flag.match(arg.strip())
        if match is None:
            continue
        if match.group(1) is not None:
            return match.group(1)
        return args[i + 1] if i + 1 < len(args) else ""
    return None
