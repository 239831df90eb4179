"""External model definitions: items of ``models.json`` (behaviour §1.2), shared by ModelActivations
(behaviour §1.3).

Keys are read in the contract's order ("first wins"). Only whitelisted keys are
copied, so user-supplied ``order`` and ``ai_appliance_*`` keys are dropped (behaviour §2.2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.external_fields import FIELDS, Value
from catalog_core.reasons import Reason
from catalog_core.sealing import (
    INLINE_KEY_FIELDS,
    INVALID_JSON_MARKER,
    NOT_A_STRING,
    classify,
    fingerprint,
    load_json_text,
    redacted_fingerprint,
)
from catalog_core.sources.common import FieldWarning, OptionalFields, Problem
from catalog_core.urls import has_credentials
from catalog_core.values import (
    MAX_RATE,
    MAX_TOKENS,
    FieldError,
    ModelType,
    is_env_reference,
    name_problem,
    parse_model_type,
    text_problem,
)

_URL = re.compile(r"^https?://[^\s/?#]+[^\s]*$")
_SECRET_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")  # a DNS subdomain
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
_ENV_WHY = "starts with os.environ/, which LiteLLM would read from its own environment"
MAX_VALUE_LENGTH = 4096  # a model id, URL, API version or provider name is far shorter


@attrs.frozen
class SecretKeyRef:
    name: str
    key: str


@attrs.frozen
class InlineKey:
    """An API key written in the definition itself; only its fingerprint is known to the core."""

    fingerprint: str


ApiKeySpec = SecretKeyRef | InlineKey | None


@attrs.frozen
class ExternalModel:
    name: str
    enabled: bool
    litellm_model: str
    api_base: str | None
    api_key: ApiKeySpec
    # the declared optional fields present (external_fields.FIELDS), as (LiteLLM parameter, value), in
    # declaration order
    params: tuple[tuple[str, str | int], ...] = ()
    model_type: ModelType = ModelType.CHAT
    context_window: int | None = None
    max_output_tokens: int | None = None
    warnings: tuple[FieldWarning, ...] = ()  # optional fields dropped; published without them

    def param(self, name: str) -> str | int | None:
        """The value of the declared field that becomes LiteLLM parameter ``name``, or None."""
        return dict(self.params).get(name)


@attrs.frozen
class ExternalItem:
    """One definition: a model, or the problem that stops it (``name`` may be a position when unnamed)."""

    name: str
    model: ExternalModel | None
    problem: Problem | None


def _first(item: Mapping[str, Any], *paths: tuple[str, ...]) -> tuple[str, Any]:
    """The first present, non-null value among ``paths`` and its dotted name."""
    for p in paths:
        value = raw.path(item, *p)
        if value is not None:
            return ".".join(p), value
    return ".".join(paths[0]), None


def _own_name(item: Any) -> str | Problem:
    """The name a definition gives itself, or why it gives none that can be shown or published."""
    if not isinstance(item, Mapping):
        return Problem(Reason.INVALID_FIELD, "a model definition must be an object")
    raw_name = item.get("name")
    if not isinstance(raw_name, str) or not raw_name.strip():
        return Problem(Reason.MISSING_FIELD, "name is required")
    name = raw_name.strip()
    why = name_problem(name)
    if why is not None:
        return Problem(Reason.INVALID_FIELD, f"name {why}")
    return name


def parse_definition(
    item: Any,
    name: str | None,
    *,
    inline_keys_allowed: bool,
    namespace: str,
    position: str = "",
    model_type_hint: Any = None,
) -> ExternalItem:
    """Read one definition. ``name`` overrides the item's own name (ModelActivations use metadata.name);
    without it, a definition that names itself unusably is reported under ``position`` (its place in
    the document), which only records show: it has no model, so nothing is published under it."""
    if name is None:
        own = _own_name(item)
        if isinstance(own, Problem):
            return ExternalItem(position, None, own)
        name = own
    elif not isinstance(item, Mapping):
        return ExternalItem(name, None, Problem(Reason.INVALID_FIELD, "a model definition must be an object"))
    problems: list[tuple[Reason, str]] = []
    if is_env_reference(name):
        problems.append((Reason.ENV_REFERENCE_REJECTED, f"name {_ENV_WHY}"))
    optional = OptionalFields()

    def text(*paths: tuple[str, ...], required: bool = True) -> str | None:
        """A string field; a non-string is an error when the route needs it, else dropped (behaviour §5.2)."""
        field, value = _first(item, *paths)
        if value is None:
            return None
        if not isinstance(value, str):
            if required:
                problems.append((Reason.INVALID_FIELD, f"{field} must be a string"))
            else:
                optional.drop(field, "must be a string; ignored")
            return None
        if is_env_reference(value):
            problems.append((Reason.ENV_REFERENCE_REJECTED, f"{field} {_ENV_WHY}"))
            return None
        why = text_problem(value) if len(value) <= MAX_VALUE_LENGTH else f"is longer than {MAX_VALUE_LENGTH}"
        if why is not None:
            problems.append((Reason.INVALID_FIELD, f"{field} {why}"))
            return None
        return value.strip() or None

    def number(maximum: int, *paths: tuple[str, ...]) -> int | None:
        field, value = _first(item, *paths)
        return optional.limit(value, field, maximum)

    enabled = item.get("enabled") is not False
    litellm_model = text(("litellm", "model"), ("model",))
    if litellm_model is None and not any(r == Reason.INVALID_FIELD for r, _ in problems):
        problems.append((Reason.MISSING_FIELD, "litellm.model (or model) is required"))
    api_base = text(("litellm", "apiBase"), ("litellm", "api_base"), ("apiBase",), ("api_base",))
    if api_base is not None and not _URL.match(api_base):
        problems.append((Reason.INVALID_FIELD, "apiBase must be an http(s) URL"))
    elif api_base is not None and not inline_keys_allowed and has_credentials(api_base):
        # an inline credential by another name (behaviour §1.5); the message never quotes the value
        problems.append(
            (
                Reason.INLINE_KEY_REJECTED,
                "apiBase may not carry user:password@, a query or a fragment here; use apiKeySecretRef",
            )
        )
    api_key = _api_key(item, namespace, inline_keys_allowed, problems)
    params: list[tuple[str, str | int]] = []
    for declared in FIELDS:
        if declared.value is Value.TEXT:
            value: str | int | None = text(*declared.spellings, required=False)
        else:
            value = number(MAX_RATE, *declared.spellings)
        if value is not None:
            params.append((declared.param, value))
    type_field, type_value = _first(item, ("type",), ("modelType",))
    if type_value is None and model_type_hint is not None:
        type_field, type_value = "spec.modelType", model_type_hint
    model_type = parse_model_type(type_value, type_field)
    if isinstance(model_type, FieldError):
        problems.append((Reason.INVALID_FIELD, model_type.message))
        model_type = None
    context = number(MAX_TOKENS, ("contextWindow",), ("context_window",), ("max_input_tokens",))
    max_output = number(MAX_TOKENS, ("maxOutputTokens",), ("max_output_tokens",))
    if problems:
        # The most specific reason first: a secret problem tells the user more than a missing field.
        order = [
            Reason.ENV_REFERENCE_REJECTED,
            Reason.INLINE_KEY_REJECTED,
            Reason.SECRET_NOT_ALLOWED,
            Reason.MISSING_FIELD,
            Reason.INVALID_FIELD,
        ]
        reason = min((r for r, _ in problems), key=lambda r: order.index(r) if r in order else len(order))
        return ExternalItem(name, None, Problem(reason, "; ".join(m for _, m in problems)))
    assert litellm_model is not None
    return ExternalItem(
        name,
        ExternalModel(
            name=name,
            enabled=enabled,
            litellm_model=litellm_model,
            api_base=api_base,
            api_key=api_key,
            params=tuple(params),
            model_type=model_type or ModelType.CHAT,
            context_window=context,
            max_output_tokens=max_output,
            warnings=optional.warnings,
        ),
        None,
    )


def _api_key(
    item: Mapping[str, Any], namespace: str, inline_keys_allowed: bool, problems: list[tuple[Reason, str]]
) -> ApiKeySpec:
    ref = item.get("apiKeySecretRef")
    if ref is not None:
        if not isinstance(ref, Mapping):
            problems.append((Reason.INVALID_FIELD, "apiKeySecretRef must be an object with name and key"))
            return None
        name, key, ns = ref.get("name"), ref.get("key"), ref.get("namespace")
        if not isinstance(name, str) or not name.strip() or not isinstance(key, str) or not key.strip():
            problems.append((Reason.INVALID_FIELD, "apiKeySecretRef needs string name and key"))
            return None
        if not _SECRET_NAME.match(name.strip()):
            problems.append((Reason.INVALID_FIELD, "apiKeySecretRef.name is not a valid Secret name"))
            return None
        if not _SECRET_KEY.match(key.strip()):
            problems.append((Reason.INVALID_FIELD, "apiKeySecretRef.key is not a valid Secret key"))
            return None
        if ns is not None and ns != namespace:
            reason = Reason.INVALID_FIELD if inline_keys_allowed else Reason.SECRET_NOT_ALLOWED
            problems.append((reason, f"apiKeySecretRef must name a Secret in namespace {namespace}"))
            return None
        return SecretKeyRef(name.strip(), key.strip())
    for path in (*(("litellm", f) for f in INLINE_KEY_FIELDS), *((f,) for f in INLINE_KEY_FIELDS)):
        value = raw.path(item, *path)
        if value is None:
            continue
        if not inline_keys_allowed:
            problems.append(
                (Reason.INLINE_KEY_REJECTED, "inline API keys are not allowed here; use apiKeySecretRef")
            )
            return None
        # Normally already sealed by the adapter; a raw value (a test, a hand-made event) is classified the
        # same way. An unusable key (empty, os.environ/...) is refused by the rules with its own reason.
        fp = redacted_fingerprint(value)
        if fp is None:
            fp = classify(value) or fingerprint(value)
        if fp == NOT_A_STRING:
            problems.append((Reason.INVALID_FIELD, f"{'.'.join(path)} must be a string"))
            return None
        return InlineKey(fp)
    return None


@attrs.frozen
class ExternalModelsDocument:
    """The parsed ``models.json`` of ConfigMap/ai-external-models."""

    items: tuple[ExternalItem, ...]
    problem: Problem | None  # the whole document is unreadable: keep the last good items

    @classmethod
    def from_configmap(cls, obj: Mapping[str, Any] | None, namespace: str) -> ExternalModelsDocument:
        if obj is None:
            return cls((), None)
        text = raw.path(obj, "data", "models.json")
        if text is None:
            return cls((), None)
        if not isinstance(text, str):
            return cls((), Problem(Reason.INVALID_JSON, "models.json is not a string"))
        return cls.from_text(text, namespace)

    @classmethod
    def from_text(cls, text: str, namespace: str) -> ExternalModelsDocument:
        if text.startswith(INVALID_JSON_MARKER):
            return cls((), Problem(Reason.INVALID_JSON, "models.json: " + text[len(INVALID_JSON_MARKER) :]))
        if not text.strip():
            return cls((), None)
        doc, error = load_json_text(text)
        if error is not None:
            return cls((), Problem(Reason.INVALID_JSON, f"models.json: {error}"))
        if isinstance(doc, Mapping) and "models" in doc:
            doc = doc["models"]
        if not isinstance(doc, list):
            return cls((), Problem(Reason.INVALID_JSON, 'models.json must be {"models": [...]} or an array'))
        parsed = [
            parse_definition(
                entry, None, inline_keys_allowed=True, namespace=namespace, position=f"models.json[{index}]"
            )
            for index, entry in enumerate(doc)
        ]
        named = [isinstance(_own_name(entry), str) for entry in doc]
        # The last definition of a name wins, as today (behaviour §5.2); each earlier one is reported,
        # naming it.
        last = {p.name: index for index, p in enumerate(parsed) if named[index]}
        items: list[ExternalItem] = []
        for index, item in enumerate(parsed):
            if not named[index]:
                items.append(item)
            elif (winner := last[item.name]) != index:
                message = f"{item.name!r} is defined again in models.json[{winner}], the definition used"
                items.append(
                    ExternalItem(
                        f"{item.name} (models.json[{index}])",
                        None,
                        Problem(Reason.DUPLICATE_NAME, message),
                    )
                )
            else:
                items.append(item)
        return cls(tuple(items), None)
