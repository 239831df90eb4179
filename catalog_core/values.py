"""Small value rules shared by every source: positive ints, slugs, ids, model types."""

from __future__ import annotations

import re
from enum import StrEnum
from json.encoder import encode_basestring_ascii
from typing import Any, ClassVar

import attrs

from catalog_core.openenum import OpenEnum

OWNER = "model-catalog"
MESH_OWNER = "private-mesh"
TRUSTED_OWNERS = frozenset({OWNER, MESH_OWNER})
ID_PREFIX = "ai-appliance-"
ALIAS_PREFIXES = ("local/", "share/", "mesh/")

# Larger than any context window in use (10M tokens) but small enough to catch typos.
MAX_TOKENS = 16_777_216
# tpm / rpm are rates, not token counts; still bounded so a typo cannot pass silently.
MAX_RATE = 1_000_000_000
# Names become LiteLLM model names, catalog ids and defaults.env values: one 100 KB name must not make the
# catalog too large for everyone, so a longer one rejects its own item.
MAX_NAME_LENGTH = 512
# Model names are object keys in opencode-providers.json, the Paperclip files and hermes.yaml, which Node apps
# parse and merge into their own objects: "__proto__" as a key sets the prototype of the object it is merged
# into (prototype pollution), "constructor" and "prototype" reach it through the next merge, and a key named
# after another member every object inherits replaces that method on the merged object. None is a name.
RESERVED_NAMES = frozenset(
    {
        "__proto__",
        "constructor",
        "prototype",
        "__defineGetter__",
        "__defineSetter__",
        "__lookupGetter__",
        "__lookupSetter__",
        "hasOwnProperty",
        "isPrototypeOf",
        "propertyIsEnumerable",
        "toLocaleString",
        "toString",
        "valueOf",
    }
)
# hermes.yaml is JSON text read as YAML, and YAML reads a key of at most 1,024 characters (quotes and
# escapes included; the catalog writes every non-ASCII character as an escape, up to 12 characters): a longer
# one makes the whole file unreadable, so its name is refused.
MAX_ESCAPED_KEY_LENGTH = 1024
_SURELY_SHORT_KEY = (MAX_ESCAPED_KEY_LENGTH - 2) // 12  # characters that fit whatever they are
# LiteLLM resolves a string of a DB model's litellm_params that starts with this from its own environment
# (ProxyConfig._resolve_db_litellm_param): input must never be able to make it read its master key.
ENV_REFERENCE_PREFIX = "os.environ/"
# C0 and C1 controls, DEL, the Unicode line and paragraph separators and the bidirectional overrides:
# nothing a single-line value (defaults.env, a ConfigMap key's value, a log line, a terminal) may hold.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class ModelType(StrEnum):
    CHAT = "chat"
    EMBEDDING = "embedding"
    RERANK = "rerank"
    AUDIO = "audio"


class Source(OpenEnum):
    """Where an owned route comes from; also the ``source`` of its routes.json record. The built-in ones are
    declared below; a new route source declares its own in its module (its ``SourceSpec``)."""

    KUBEAI: ClassVar[Source]
    EXTERNAL: ClassVar[Source]  # ConfigMap/ai-external-models
    ACTIVATION: ClassVar[Source]
    FREETOKEN: ClassVar[Source]


Source.declare_constants(
    {
        "KUBEAI": "kubeai",
        "EXTERNAL": "external",
        "ACTIVATION": "modelactivation",
        "FREETOKEN": "freetoken",
    }
)


# Each source's rank, id family and the rest: catalog_core/registry.py.


@attrs.frozen
class FieldError:
    """A present but unusable value; becomes InvalidField with this message."""

    message: str


def positive_int(value: Any, field: str, maximum: int = MAX_TOKENS) -> int | FieldError | None:
    """Contracts notation: an int > 0 or a string of digits > 0; booleans and floats are not.

    ``None`` (absent or null) means "not given".
    """
    if value is None:
        return None
    if type(value) is int and 0 < value <= maximum:  # the common case, first
        return value
    if isinstance(value, bool) or not isinstance(value, int | str):
        return FieldError(f"{field} must be a positive integer, got {type(value).__name__}")
    if isinstance(value, str):
        text = value.strip()
        if not (text.isascii() and text.isdigit()):
            return FieldError(f"{field} must be a positive integer, got {_show(value)}")
        if len(text) > 12:
            return FieldError(f"{field} is out of range (1..{maximum})")
        value = int(text)
    if 0 < value <= maximum:
        return int(value)
    # Quoted only when short: str() of an integer past 4,300 digits (an embedding host can pass one) raises.
    shown = str(value) if -(10**18) < value < 10**18 else "a number of that size"
    if value <= 0:
        return FieldError(f"{field} must be a positive integer, got {shown}")
    return FieldError(f"{field} is out of range (1..{maximum}), got {shown}")


def text_problem(value: str) -> str | None:
    """Why a string from input cannot be published as it is, or None.

    A lone surrogate (``"\\ud800"`` in JSON) is not a Unicode scalar value: it cannot be encoded, so it
    would stop the write of the catalog; a control character would add lines to defaults.env.
    """
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "is not valid Unicode text (it holds a lone surrogate)"
    if _CONTROL.search(value):
        return "must be printable text on one line (it holds a control character)"
    return None


def name_problem(value: str) -> str | None:
    """``text_problem``, a bound on the length of a name, and what its catalog key must be: not a name
    JavaScript objects reserve, and short enough once escaped for a YAML key."""
    problem = text_problem(value)
    if problem is not None:
        return problem
    if len(value) > MAX_NAME_LENGTH:
        return f"is longer than {MAX_NAME_LENGTH} characters"
    logical = logical_name(value)
    if not logical.strip():
        # "mesh/" alone would be an alias of a model with no name (behaviour §6)
        return "names no model after its local/, share/ or mesh/ prefix"
    if logical in RESERVED_NAMES:
        return (
            f"is {logical!r}, which JavaScript objects inherit or treat specially: as a key of the catalog's "
            "JSON files it could change the objects of the Node apps that merge them"
        )
    if (
        len(logical) > _SURELY_SHORT_KEY
        and (escaped_length := len(encode_basestring_ascii(logical))) > MAX_ESCAPED_KEY_LENGTH
    ):
        return (
            f"is {escaped_length:,} characters long once escaped, too long for a key of hermes.yaml "
            f"(YAML reads keys of at most {MAX_ESCAPED_KEY_LENGTH:,})"
        )
    return None


def escaped(value: str) -> str:
    """``value`` with what cannot be shown on one line (controls, lone surrogates) as escapes, bounded in
    length: the name under which a rejected item is reported."""
    text = value.encode("utf-8", "backslashreplace").decode("utf-8")
    text = _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    return text if len(text) <= MAX_NAME_LENGTH else text[: MAX_NAME_LENGTH - 3] + "..."


def is_env_reference(value: str) -> bool:
    """Whether LiteLLM would read ``value`` from its own environment (case-insensitive, trimmed)."""
    return value.strip()[: len(ENV_REFERENCE_PREFIX)].lower() == ENV_REFERENCE_PREFIX


def shown(value: str) -> str:
    """A string from input, safe to quote in a message: escaped where it is not printable, and short."""
    return _show(value)


def _show(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:37] + "...")


_SLUG_RUNS = re.compile(r"[^A-Za-z0-9_.-]+")


def slug(name: str) -> str:
    """behaviour §2.1: runs outside [A-Za-z0-9_.-] become '-'; dashes trimmed; lower case; 'model' if
    empty."""
    out = _SLUG_RUNS.sub("-", name).strip("-").lower()
    return out or "model"


def logical_name(model_name: str) -> str:
    """The model name without a leading local/, share/ or mesh/ (behaviour §6)."""
    for prefix in ALIAS_PREFIXES:
        if model_name.startswith(prefix):
            return model_name[len(prefix) :]
    return model_name


def parse_model_type(value: Any, field: str) -> ModelType | FieldError | None:
    if value is None:
        return None
    if not isinstance(value, str):
        return FieldError(f"{field} must be one of chat, embedding, rerank, audio")
    try:
        return ModelType(value.strip().lower())
    except ValueError:
        return FieldError(f"{field} must be one of chat, embedding, rerank, audio, got {_show(value)}")


def features_type(features: tuple[str, ...]) -> ModelType | None:
    """behaviour §1.1, §11: case-insensitive substrings of the features; None when none says."""
    lowered = [f.lower() for f in features]
    if any("embedding" in f for f in lowered):
        return ModelType.EMBEDDING
    if any("rerank" in f for f in lowered):
        return ModelType.RERANK
    if any("speechtotext" in f or "speech-to-text" in f or "transcription" in f for f in lowered):
        return ModelType.AUDIO
    if any("generation" in f or "chat" in f for f in lowered):
        return ModelType.CHAT
    return None


def kubeai_model_type(features: tuple[str, ...], name: str) -> ModelType:
    """behaviour §1.1, §11: the features, then a name containing "embedding", then chat."""
    from_features = features_type(features)
    if from_features is not None:
        return from_features
    if "embedding" in name.lower():
        return ModelType.EMBEDDING
    return ModelType.CHAT


COMPUTE_TARGETS = ("cpu", "nvidia-gpu", "amd-gpu", "intel-gpu")


def compute_target_from_profile(profile: str) -> str:
    """A KubeAI resource profile (e.g. ``nvidia-gpu-l4:1``) or resource name to a compute target."""
    p = profile.lower()
    if "nvidia" in p:
        return "nvidia-gpu"
    if "amd" in p:
        return "amd-gpu"
    if "intel" in p:
        return "intel-gpu"
    return "cpu"
