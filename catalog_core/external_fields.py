"""The optional fields of an external model definition that become LiteLLM parameters: one declaration each.

An ``ExternalField`` says everything about one of them: where it is read (its spellings in models.json,
which a ModelActivation's ``spec.external`` shares: behaviour §1.2, §1.3), what its value is, what a bad
value does, the ``litellm_params`` key it becomes, and whether LiteLLM's ``/model/info`` shows it back.
``FIELDS`` lists them; nothing else names them. ``sources/external.py`` reads them into
``ExternalModel.params``, ``rules/routes.py`` writes them into the route, ``sources/litellm_row.py`` keeps
the ones read back (so a restart compares them and writes nothing), ``rules/litellm_plan.py`` recreates a
row that had one no longer wanted. ``tests/core/test_external_fields.py`` holds every declaration to what it
says, in the core and in ``contracts/schemas/models-json-item.schema.json`` and the ModelActivation CRD.
"""

from __future__ import annotations

from enum import Enum

import attrs


class Value(Enum):
    """What a field's value is, and so what a bad one does (behaviour §5.2).

    TEXT: a string. A non-string is dropped with a warning (the route is published without it); a string
    LiteLLM would resolve from its environment (``os.environ/...``), with control characters or too long is
    an error: the item keeps its last good route (``reasons.KEEPS_LAST_GOOD``).
    RATE: a positive integer up to ``values.MAX_RATE`` (or a string of digits); anything else is dropped
    with a warning."""

    TEXT = "text"
    RATE = "rate"


@attrs.frozen
class ExternalField:
    """``spellings``: the paths that may hold it, the first present wins (camelCase first, then the
    LiteLLM spelling; top level before ``litellm.*``). ``param``: its ``litellm_params`` key.
    ``read_back``: ``/model/info`` returns it as written, so it is compared on every read; a parameter
    LiteLLM does not return would be rewritten on every restart if compared, so it is not."""

    param: str
    spellings: tuple[tuple[str, ...], ...]
    value: Value
    read_back: bool = True


def _both(camel: str, snake: str) -> tuple[tuple[str, ...], ...]:
    """Top level, then under ``litellm``; camelCase before LiteLLM's own spelling."""
    return ((camel,), (snake,), ("litellm", camel), ("litellm", snake))


API_VERSION = ExternalField("api_version", _both("apiVersion", "api_version"), Value.TEXT)
CUSTOM_LLM_PROVIDER = ExternalField(
    "custom_llm_provider", _both("customLlmProvider", "custom_llm_provider"), Value.TEXT
)
TPM = ExternalField("tpm", (("tpm",), ("litellm", "tpm")), Value.RATE)
RPM = ExternalField("rpm", (("rpm",), ("litellm", "rpm")), Value.RATE)

FIELDS: tuple[ExternalField, ...] = (API_VERSION, CUSTOM_LLM_PROVIDER, TPM, RPM)

# litellm_params keys the controller sets besides these: the model, its base URL and its order.
FIXED_PARAMS = ("model", "api_base", "order")
PARAMS: tuple[str, ...] = tuple(f.param for f in FIELDS)
READ_BACK_PARAMS: tuple[str, ...] = tuple(f.param for f in FIELDS if f.read_back)


def check(fields: tuple[ExternalField, ...]) -> None:
    """Unique parameters and spellings, none a fixed parameter. Raised at import, naming the field."""
    params = [f.param for f in fields]
    for f in fields:
        if params.count(f.param) > 1 or f.param in FIXED_PARAMS:
            raise ValueError(
                f"external field {f.param!r} declared twice or is a parameter set by the controller"
            )
        if not f.spellings:
            raise ValueError(f"external field {f.param!r} has no spelling")
    spellings = [s for f in fields for s in f.spellings]
    if len(set(spellings)) != len(spellings):
        raise ValueError(f"an external field's spelling is declared twice: {spellings}")


check(FIELDS)
