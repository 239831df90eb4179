"""KubeAI ``Model`` (kubeai.org/v1) — behaviour §1.1, §2.2, §11."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.sources.common import (
    CONTEXT_WINDOW_ANNOTATION,
    ENGINE_ANNOTATION,
    MAX_NUM_SEQS_ANNOTATION,
    MAX_OUTPUT_ANNOTATION,
    FieldWarning,
    OptionalFields,
    Problem,
    checked_name,
    compute_target,
    unreadable,
)
from catalog_core.values import (
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
    problem: Problem | None = None  # the model cannot be published (its last good route stays)
    warnings: tuple[FieldWarning, ...] = ()  # optional fields dropped; published without them

    @classmethod
    def from_k8s(cls, obj: Mapping[str, Any]) -> KubeAIModel | None:
        """None for an object without a name (skipped, behaviour §1.1). Hot path: plain dict reads."""
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        name = meta.get("name")
        name = name.strip() if isinstance(name, str) else ""
        if not name:
            return None
        name, problem = checked_name(name)
        stub = unreadable(obj)
        if stub is not None:
            return cls(name, _uid(meta), False, ModelType.CHAT, (), "vllm", "cpu", problem=stub)
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

        fields = OptionalFields()
        context: int | None = None
        if CONTEXT_WINDOW_ANNOTATION in annotations:
            context = fields.limit(annotations[CONTEXT_WINDOW_ANNOTATION], CONTEXT_WINDOW_ANNOTATION)
        if context is None:  # absent or unusable: --max-model-len applies, as today (behaviour §1.1, §5.2)
            context = fields.limit(_flag_value(args, _FLAG), "--max-model-len")
        max_output = fields.limit(annotations.get(MAX_OUTPUT_ANNOTATION), MAX_OUTPUT_ANNOTATION)
        if MAX_NUM_SEQS_ANNOTATION in annotations:
            max_num_seqs = fields.limit(annotations[MAX_NUM_SEQS_ANNOTATION], MAX_NUM_SEQS_ANNOTATION)
        else:
            max_num_seqs = fields.limit(_flag_value(args, _SEQS), "--max-num-seqs")

        engine = spec.get("engine")
        if not (isinstance(engine, str) and engine.strip()):
            engine = annotations.get(ENGINE_ANNOTATION)
            engine = engine if isinstance(engine, str) and engine.strip() else "vllm"
        target = compute_target(annotations, fields)
        if target is None:
            profile = spec.get("resourceProfile")
            target = compute_target_from_profile(profile if isinstance(profile, str) else "")
        return cls(
            name=name,
            uid=_uid(meta),
            ready=ready,
            model_type=kubeai_model_type(features, name),
            features=features,
            engine=engine.strip().lower(),
            compute_target=target,
            context_window=context,
            max_output_tokens=max_output,
            max_num_seqs=max_num_seqs,
            problem=problem,
            warnings=fields.warnings,
        )


def _uid(meta: Mapping[str, Any]) -> str:
    uid = meta.get("uid")
    return uid if isinstance(uid, str) else ""


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
