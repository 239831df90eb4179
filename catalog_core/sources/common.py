"""What every source's parse can return besides a value: a problem with a reason code, or warnings about
optional fields it dropped."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core.reasons import Reason
from catalog_core.values import COMPUTE_TARGETS, MAX_TOKENS, FieldError, positive_int

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
APPINSTANCE_LABEL = "appliance.magicstick.dev/appinstance"
PROVIDER_SECRET_LABEL = "appliance.magicstick.dev/model-provider-secret"
PROVIDER_SECRET_PREFIX = "ai-model-provider-"


@attrs.frozen
class Problem:
    reason: Reason
    message: str


@attrs.frozen
class FieldWarning:
    """An optional field that was unusable and dropped: the item is published without it (contracts A.8)."""

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
