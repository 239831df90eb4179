"""KubeAI ``Model`` (kubeai.org/v1) — behaviour §1.1, §2.2, §11."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.memo import SmallKeyMemo
from catalog_core.sources.common import (
    COMPUTE_TARGET_ANNOTATION,
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
from catalog_core.trim import REJECTED
from catalog_core.values import (
    COMPUTE_TARGETS,
    MAX_TOKENS,
    RESERVED_NAMES,
    FieldError,
    ModelType,
    compute_target_from_profile,
    features_type,
    kubeai_model_type,
    positive_int,
    shown,
)

_FLAG = re.compile(r"^--max-model-len(?:(?:=|\s+)(\S*))?$")
_SEQS = re.compile(r"^--max-num-seqs(?:(?:=|\s+)(\S*))?$")


@attrs.frozen
class KubeAIModel:
    """What the catalog needs from a Model. Replica counts shrink to ``ready`` and ``starting`` so they cause
    no writes."""

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
    # KubeAI scales it up from zero when a request for it arrives: autoscaling is on (no
    # spec.autoscalingDisabled), spec.minReplicas is 0 (KubeAI's default) and spec.maxReplicas is absent or
    # at least 1. The default is what a Model without those fields reads as.
    scales_from_zero: bool = True
    starting: bool = False  # it has pods (status.replicas.all) and none of them is ready

    @classmethod
    def from_k8s(cls, obj: Mapping[str, Any]) -> KubeAIModel | None:
        """None for an object without a name (skipped, behaviour §1.1).

        Performance (bench P5): the parse was ~46% of a watch event's fold. A Model of the common,
        well-formed shape is read by ``_from_plain`` (no warning, no problem possible); anything else
        by ``from_k8s_careful``, which decides every odd case. Both give equal values on every input
        the fast one accepts (``tests/core/test_kubeai_fast_path.py``)."""
        plain = _from_plain(obj)
        return plain if plain is not None else cls.from_k8s_careful(obj)

    @classmethod
    def from_k8s_careful(cls, obj: Mapping[str, Any]) -> KubeAIModel | None:
        """``from_k8s`` for any object: every field checked, unusable optional ones dropped with a warning."""
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
        pods = isinstance(positive_int(raw.path(obj, "status", "replicas", "all"), "all"), int)

        fields = OptionalFields()
        scales_from_zero = _scales_from_zero(spec, fields)
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
            scales_from_zero=scales_from_zero,
            starting=pods and not ready,
        )


_ONLY_WHILE_READY = "read as not scaling from zero: published only while a replica is ready"


def _scales_from_zero(spec: Mapping[str, Any], fields: OptionalFields) -> bool:
    """Whether KubeAI scales the Model up from zero on a request (behaviour §1.1). A value KubeAI's own
    schema refuses is dropped with a warning, and the Model keeps the rule that needs no guess: it is
    published only while a replica is ready."""
    disabled = spec.get("autoscalingDisabled")
    if disabled is not None and not isinstance(disabled, bool):
        fields.drop(
            "spec.autoscalingDisabled",
            f"must be true or false, got {_described(disabled)}; {_ONLY_WHILE_READY}",
        )
        return False
    minimum = _count(spec.get("minReplicas"))
    if isinstance(minimum, FieldError):
        fields.drop(
            "spec.minReplicas", f"must be an integer >= 0, got {minimum.message}; {_ONLY_WHILE_READY}"
        )
        return False
    maximum = _count(spec.get("maxReplicas"))
    if isinstance(maximum, FieldError) or maximum == 0:
        got = maximum.message if isinstance(maximum, FieldError) else "0"
        fields.drop("spec.maxReplicas", f"must be an integer >= 1, got {got}; {_ONLY_WHILE_READY}")
        return False
    return not disabled and not minimum


def _count(value: Any) -> int | FieldError | None:
    """A replica count: an int >= 0 or a string of digits (None when absent or null); else the error, whose
    message describes the value."""
    if value is None or (type(value) is int and value >= 0):
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() and len(value) <= 12:
        return int(value.strip())
    return FieldError(_described(value))


def _described(value: Any) -> str:
    """How a value from input is quoted in a warning (strings escaped and short, numbers only when short)."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if -(10**18) < value < 10**18 else "a number of that size"
    return type(value).__name__


# A name the API server accepts (a DNS subdomain, or any case of one): printable ASCII on one line, shorter
# than MAX_NAME_LENGTH, with no alias prefix: unless it is one of RESERVED_NAMES, ``checked_name`` finds no
# problem in it.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}").fullmatch
_NO_ANNOTATIONS: Mapping[str, Any] = {}
# KubeAI's features are a handful of words; a model's type is a function of them alone.
_features_type = SmallKeyMemo(features_type, max_entries=64)
# A cluster has a handful of resource profiles.
_profile_target = SmallKeyMemo(compute_target_from_profile, max_entries=256)


def _plain_limit(value: Any) -> int | None:
    """An int, or a string of ASCII digits, in 1..MAX_TOKENS; None for anything the careful path must
    judge (it may warn about it)."""
    if type(value) is int:
        return value if 0 < value <= MAX_TOKENS else None
    if type(value) is str and value.isdigit() and value.isascii() and len(value) <= 12:
        number = int(value)
        return number if number <= MAX_TOKENS and number > 0 else None
    return None


def _read_plain_flags(args: tuple[Any, ...]) -> tuple[int | None, int | None] | None:
    """(--max-model-len, --max-num-seqs) of a container's args, each None when absent; None when any is
    unusual. Memoized (``_plain_flags``, bench P5): a Model's args rarely change, and every watch
    event re-reads them."""
    # The first --max-model-len / --max-num-seqs counts (as in _flag_value); only "--flag=N" is plain.
    context: int | None = None
    max_num_seqs: int | None = None
    for arg in args:
        if type(arg) is not str:
            return None
        if "--max-" not in arg:
            continue
        flag, equals, digits = arg.partition("=")
        if flag == "--max-model-len":
            if context is None and (not equals or (context := _plain_limit(digits)) is None):
                return None
        elif flag == "--max-num-seqs":
            if max_num_seqs is None and (not equals or (max_num_seqs := _plain_limit(digits)) is None):
                return None
        elif not flag.startswith("--max-") or flag.startswith(("--max-model-len", "--max-num-seqs")):
            # " --max-model-len=N", "--max-model-len N", "--max-model-lenX": the careful path's expressions
            return None
        # else another vLLM limit (--max-loras=2), which the core does not read
    return context, max_num_seqs


_plain_flags = SmallKeyMemo(_read_plain_flags, max_entries=1024)


def _from_plain(obj: Mapping[str, Any]) -> KubeAIModel | None:
    """The Model of a well-formed object, read directly; None when anything is unusual (a stub, a name
    that needs checking, a field of another type, a limit that is not a plain positive number, a flag
    spelled another way, an unknown compute target), which ``from_k8s_careful`` then reads.

    Every value it accepts is one the careful path accepts without a warning, so the two agree."""
    if type(obj) is not dict or REJECTED in obj:
        return None
    meta = obj.get("metadata")
    spec = obj.get("spec")
    if type(meta) is not dict or type(spec) is not dict:
        return None
    name = meta.get("name")
    uid = meta.get("uid", "")
    if type(name) is not str or type(uid) is not str or _PLAIN_NAME(name) is None or name in RESERVED_NAMES:
        return None
    annotations = meta.get("annotations", _NO_ANNOTATIONS)
    features_raw = spec.get("features")
    args = spec.get("args")
    if args is None:  # absent or null: no flags (the careful path reads any non-list as none)
        args = ()
    elif type(args) is not list:
        return None
    if type(annotations) is not dict or type(features_raw) is not list:
        return None
    features = tuple(features_raw)
    for feature in features:
        if type(feature) is not str:
            return None
    try:
        flags = _plain_flags(tuple(args))
    except TypeError:  # an unhashable member (an object, a list): not a plain flag
        return None
    if flags is None:
        return None
    context, max_num_seqs = flags
    max_output: int | None = None
    target: str | None = None
    if annotations:
        value = annotations.get(CONTEXT_WINDOW_ANNOTATION)
        if value is not None and (context := _plain_limit(value)) is None:
            return None
        value = annotations.get(MAX_OUTPUT_ANNOTATION)
        if value is not None and (max_output := _plain_limit(value)) is None:
            return None
        if MAX_NUM_SEQS_ANNOTATION in annotations:  # present, even null, it replaces the flag
            value = annotations[MAX_NUM_SEQS_ANNOTATION]
            max_num_seqs = None if value is None else _plain_limit(value)
            if value is not None and max_num_seqs is None:
                return None
        target = annotations.get(COMPUTE_TARGET_ANNOTATION)
        if target is not None and not (type(target) is str and target in COMPUTE_TARGETS):
            return None
    minimum = spec.get("minReplicas")
    maximum = spec.get("maxReplicas")
    disabled = spec.get("autoscalingDisabled")
    if (
        (minimum is not None and (type(minimum) is not int or minimum < 0))
        or (maximum is not None and (type(maximum) is not int or maximum < 1))
        or (disabled is not None and type(disabled) is not bool)
    ):
        return None  # the careful path decides (and warns about) what KubeAI's schema would refuse
    status = obj.get("status")
    replicas = status.get("replicas") if type(status) is dict else None
    count = replicas.get("ready") if type(replicas) is dict else None
    if type(count) is int:
        ready = 0 < count <= MAX_TOKENS
    else:
        ready = isinstance(positive_int(raw.path(obj, "status", "replicas", "ready"), "ready"), int)
    count = replicas.get("all") if type(replicas) is dict else None
    if type(count) is int:
        pods = 0 < count <= MAX_TOKENS
    else:
        pods = isinstance(positive_int(raw.path(obj, "status", "replicas", "all"), "all"), int)
    engine = spec.get("engine")
    if not (isinstance(engine, str) and engine.strip()):
        engine = annotations.get(ENGINE_ANNOTATION)
        engine = engine if isinstance(engine, str) and engine.strip() else "vllm"
    if target is None:
        profile = spec.get("resourceProfile")
        target = _profile_target(profile if isinstance(profile, str) else "")
    model_type = _features_type(features)
    if model_type is None:
        model_type = kubeai_model_type((), name)
    return KubeAIModel(
        name,
        uid,
        ready,
        model_type,
        features,
        engine.strip().lower(),
        target,
        context,
        max_output,
        max_num_seqs,
        scales_from_zero=not disabled and not minimum,
        starting=pods and not ready,
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
