"""What every source's parse can return besides a value: a problem with a reason code, or warnings about
optional fields it dropped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.reasons import Reason
from catalog_core.trim import rejection
from catalog_core.values import COMPUTE_TARGETS, MAX_TOKENS, FieldError, escaped, name_problem, positive_int

ANNOTATION_PREFIX = "ai-appliance.io/"
CONTEXT_WINDOW_ANNOTATION = "ai-appliance.io/context-window"
MAX_OUTPUT_ANNOTATION = "ai-appliance.io/max-output-tokens"
ENGINE_ANNOTATION = "ai-appliance.io/engine"
COMPUTE_TARGET_ANNOTATION = "ai-appliance.io/compute-target"
MAX_NUM_SEQS_ANNOTATION = "ai-appliance.io/max-num-seqs"
ENDPOINT_ANNOTATION = "ai-appliance.io/endpoint"
CATALOG_HASH_ANNOTATION = "ai-appliance.io/catalog-hash"
PREVIOUS_HASH_ANNOTATION = "ai-appliance.io/previous-catalog-hash"
CONSUMER_MARK = "ai-appliance.io/model-catalog-consumer"
RUNTIME_LABEL = "appliance.magicstick.dev/runtime"
ACTIVATION_LABEL = "appliance.magicstick.dev/modelactivation"


@attrs.frozen
class LabelMatch:
    """Objects of a source carry label ``key`` = ``value``: the watch's label selector and the test a
    parser and ``sources_of`` apply (trimmed and case-insensitive, as people write labels) in one place."""

    key: str
    value: str

    @property
    def selector(self) -> str:
        return f"{self.key}={self.value}"

    def matches(self, obj: Mapping[str, Any]) -> bool:
        labels = raw.string_map(obj, "metadata", "labels")
        return labels.get(self.key, "").strip().lower() == self.value


APPINSTANCE_LABEL = "appliance.magicstick.dev/appinstance"
PROVIDER_SECRET_LABEL = "appliance.magicstick.dev/model-provider-secret"
PROVIDER_SECRET_PREFIX = "ai-model-provider-"


@attrs.frozen
class Problem:
    reason: Reason
    message: str


@attrs.frozen
class FieldWarning:
    """An optional field that was unusable and dropped: the item is published without it (behaviour §5.2)."""

    field: str
    message: str
    reason: Reason = Reason.INVALID_FIELD

    def as_json(self) -> dict[str, str]:
        return {"field": self.field, "reason": self.reason.value, "message": self.message}


class OptionalFields:
    """Reads optional fields of one object: an unusable value is dropped with a warning, never an error."""

    def __init__(self) -> None:
        self._warnings: list[FieldWarning] = []

    @property
    def warnings(self) -> tuple[FieldWarning, ...]:
        return tuple(self._warnings)

    def drop(self, field: str, message: str) -> None:
        self._warnings.append(FieldWarning(field, message))

    def limit(self, value: Any, field: str, maximum: int = MAX_TOKENS) -> int | None:
        """A positive integer (contracts notation), or None (absent, or dropped with a warning)."""
        parsed = positive_int(value, field, maximum)
        if isinstance(parsed, FieldError):
            self.drop(field, f"{parsed.message}; ignored")
            return None
        return parsed


def compute_target(annotations: Mapping[str, Any], fields: OptionalFields) -> str | None:
    """The ``ai-appliance.io/compute-target`` annotation, or None (absent, or unknown and dropped)."""
    target = annotations.get(COMPUTE_TARGET_ANNOTATION)
    if target is None:
        return None
    if isinstance(target, str) and target.strip().lower() in COMPUTE_TARGETS:
        return target.strip().lower()
    fields.drop(COMPUTE_TARGET_ANNOTATION, f"must be one of {', '.join(COMPUTE_TARGETS)}; ignored")
    return None


def unreadable(obj: Mapping[str, Any]) -> Problem | None:
    """The problem of an object the adapters could not read whole (a stub left by catalog_core.trim)."""
    found = rejection(obj)
    if found is None:
        return None
    reason, message = found
    known = reason in Reason._value2member_map_
    return Problem(Reason(reason) if known else Reason.NESTED_TOO_DEEPLY, message)


def checked_name(name: str, field: str = "metadata.name") -> tuple[str, Problem | None]:
    """A name, or its escaped form and the problem when it cannot be published (one line, printable,
    valid Unicode, bounded length). Names from the API server always pass; files given to render may not."""
    why = name_problem(name)
    if why is None:
        return name, None
    return escaped(name), Problem(Reason.INVALID_FIELD, f"{field} {why}")
