"""Redaction at the edge of the core: secret values never enter it.

Adapters pass every raw object through ``redact_for_source`` before it becomes an event. It first trims
the object to the fields the core reads (its kind's trim spec, ``registry.trim_spec``), then replaces
every secret value (Secret data, any API-key-shaped field anywhere in models.json or a ModelActivation)
by a marker ``{"$redacted": "<fingerprint>"}`` (``catalog_core.sealing``); the values are handed back
separately, for the shell's vault. The core decides from fingerprints, uids and resourceVersions alone,
so the event log can record exactly what the core saw and a replay decides identically.

A value the core must refuse is never fingerprinted: its marker names the problem instead (``empty``,
``undecodable``, ``env-reference``, ``not-a-string``, ``too-long``, ``too-many``, ``refused``), and it is not
handed to the vault, so it cannot be sent anywhere.

The fingerprint is PBKDF2-HMAC-SHA256 (fixed salt, 20,000 rounds, 8 bytes): stable across restarts and
machines, and too slow to brute-force a short key from a leaked log. That cost is bounded per object
(``MAX_INLINE_KEYS``), memoised for short values, and paid off the event loop by the adapters.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from catalog_core import raw, registry
from catalog_core.events import SourceKind
from catalog_core.sealing import (
    INVALID_JSON_MARKER,
    MAX_INLINE_KEYS,
    REDACTED,
    REFUSED,
    SERVICE_ACCOUNT_TOKEN,
    TOO_MANY,
    UNDECODABLE,
    classify,
    fingerprint,
    load_json_text,
    marker,
    redacted_fingerprint,
)
from catalog_core.trim import MAX_DEPTH, PROVIDER_SECRET_API_BASES, rejection, trim

# Redaction is by shape, wherever the field sits: any of these names (case, "-" and "_" ignored) holds a
# secret, in any models.json shape (an array, {"models": ...}, a bare object, nested arrays).
_SECRET_FIELDS: Final = frozenset(
    {
        "apikey",
        "key",
        "password",
        "secret",
        "token",
        "accesstoken",
        "bearertoken",
        "authorization",
        "secretkey",
        "accesskey",
        "clientsecret",
        "awssecretaccesskey",
        "awssessiontoken",
    }
)
# "key" names a Secret's key inside apiKeySecretRef, not a secret.
_REFERENCE_FIELDS: Final = frozenset({"apikeysecretref"})


@attrs.frozen
class Redacted:
    """A raw object safe to log, plus the secret values it held, by vault key."""

    obj: Mapping[str, Any]
    secrets: Mapping[str, str]


def secret_vault_key(namespace: str, name: str, key: str) -> str:
    return f"secret:{namespace}/{name}#{key}"


def inline_vault_key(fp: str) -> str:
    return f"inline:{fp}"


class _Budget:
    """How many values one object may still have fingerprinted."""

    def __init__(self, left: int) -> None:
        self.left = left

    def take(self) -> bool:
        self.left -= 1
        return self.left >= 0


def _seal(value: Any, budget: _Budget) -> tuple[dict[str, str], str | None]:
    """(marker, value to keep in the vault or None)."""
    problem = classify(value)
    if problem is not None:
        return marker(problem), None
    if not budget.take():
        return marker(TOO_MANY), None
    fp = fingerprint(value)
    return marker(fp), value


def redact_secret(obj: Mapping[str, Any]) -> Redacted:
    """Secret data values become fingerprints; of its annotations only the API bases its key may be sent
    to are kept (the others may hold a copy of the data: kubectl's last-applied-configuration)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    out_meta = {
        k: v for k, v in meta.items() if k in ("name", "namespace", "uid", "resourceVersion", "labels")
    }
    api_bases = raw.string_map(meta, "annotations").get(PROVIDER_SECRET_API_BASES)
    if api_bases is not None:
        out_meta["annotations"] = {PROVIDER_SECRET_API_BASES: api_bases}
    out: dict[str, Any] = {k: v for k, v in obj.items() if k in ("apiVersion", "kind", "type")}
    out["metadata"] = out_meta
    # Strings only: str() of a huge integer raises, and a Secret with another name cannot be referenced.
    ns, name = raw.string(out_meta, "namespace") or "", raw.string(out_meta, "name") or ""
    refused = obj.get("type") == SERVICE_ACCOUNT_TOKEN
    secrets: dict[str, str] = {}
    data: dict[str, Any] = {}
    budget = _Budget(MAX_INLINE_KEYS)
    raw_data = obj.get("data")
    for key, value in raw_data.items() if isinstance(raw_data, Mapping) else ():
        if not isinstance(key, str):
            continue
        if redacted_fingerprint(value) is not None:
            data[key] = dict(value)  # already redacted (the event log's guard re-checks)
            continue
        data[key] = _secret_value(
            _decode_b64(value), refused, budget, secrets, secret_vault_key(ns, name, key)
        )
    string_data = obj.get("stringData")
    for key, value in string_data.items() if isinstance(string_data, Mapping) else ():
        if isinstance(key, str):
            data[key] = _secret_value(value, refused, budget, secrets, secret_vault_key(ns, name, key))
    out["data"] = data
    return Redacted(out, secrets)


def _secret_value(
    text: Any, refused: bool, budget: _Budget, secrets: dict[str, str], vault_key: str
) -> dict[str, str]:
    if refused:
        return marker(REFUSED)
    if text is _UNDECODABLE:
        return marker(UNDECODABLE)
    sealed, value = _seal(text, budget)
    if value is not None:
        secrets[vault_key] = value
    return sealed


_UNDECODABLE: Final = object()


def _decode_b64(value: Any) -> Any:
    if not isinstance(value, str):
        return _UNDECODABLE
    try:
        return base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return _UNDECODABLE


def _norm(key: str) -> str:
    return key.lower().replace("-", "").replace("_", "")


def _redact_tree(value: Any, secrets: dict[str, str] | None, budget: _Budget, depth: int = 0) -> Any:
    """A copy of a JSON value with every secret-shaped field sealed, wherever it sits.

    ``secrets`` collects inline values for the vault (None: values are dropped, as for activations).
    """
    if depth > MAX_DEPTH:
        raise RecursionError  # callers turn this into a rejection of the object
    if isinstance(value, Mapping):
        return {key: _field(key, item, secrets, budget, depth) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_tree(item, secrets, budget, depth + 1) for item in value]
    return value


def _field(key: Any, item: Any, secrets: dict[str, str] | None, budget: _Budget, depth: int) -> Any:
    norm = _norm(key) if isinstance(key, str) else ""
    if norm in _SECRET_FIELDS and item is not None and redacted_fingerprint(item) is None:
        sealed, kept = _seal(item, budget)
        if kept is not None and secrets is not None:
            secrets[inline_vault_key(sealed[REDACTED])] = kept
        return sealed
    if norm in _REFERENCE_FIELDS and isinstance(item, Mapping):
        # apiKeySecretRef.key names a key of the Secret: it is not a secret itself
        return {
            k: v if k == "key" and isinstance(v, str) else _field(k, v, secrets, budget, depth + 1)
            for k, v in item.items()
        }
    return _redact_tree(item, secrets, budget, depth + 1)


def redact_models_json(text: str) -> tuple[str, dict[str, str]]:
    """models.json with every inline key sealed; unparsable text becomes a marker carrying only the error."""
    if text.startswith(INVALID_JSON_MARKER):
        return text, {}  # already redacted
    secrets: dict[str, str] = {}
    doc, error = load_json_text(text)
    if error is not None:
        return INVALID_JSON_MARKER + error, {}
    try:
        doc = _redact_tree(doc, secrets, _Budget(MAX_INLINE_KEYS))
    except RecursionError:
        return INVALID_JSON_MARKER + f"nested more than {MAX_DEPTH} levels deep", {}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")), secrets


def _external_models(obj: Mapping[str, Any]) -> Redacted:
    out = dict(obj)
    data = out.get("data")
    if isinstance(data, Mapping) and isinstance(data.get("models.json"), str):
        text, secrets = redact_models_json(data["models.json"])
        out["data"] = {**data, "models.json": text}
        return Redacted(out, secrets)
    return Redacted(out, {})


def _activation(obj: Mapping[str, Any]) -> Redacted:
    """Every secret-shaped field of spec is sealed; the core rejects inline keys, so no value is kept."""
    out = dict(obj)
    spec = out.get("spec")
    if isinstance(spec, Mapping):
        try:
            out["spec"] = _redact_tree(spec, None, _Budget(MAX_INLINE_KEYS))
        except RecursionError:
            out.pop("spec")
    return Redacted(out, {})


def redact_for_source(source: SourceKind | str, obj: Mapping[str, Any]) -> Redacted:
    """What every adapter applies to an object of ``source`` before it becomes an event: trimmed to the
    fields the core reads, secret values sealed. Idempotent: the event log's guard re-applies it."""
    kind = SourceKind(source)
    if rejection(obj) is not None:
        return Redacted(dict(obj), {})
    trimmed = trim(registry.trim_spec(kind), obj)
    if rejection(trimmed) is not None:
        return Redacted(trimmed, {})
    seal = _SEAL.get(kind)
    return seal(trimmed) if seal is not None else Redacted(trimmed, {})


# The sources whose objects may hold a secret value, and how each is sealed (the rest are only trimmed).
_SEAL: dict[SourceKind, Callable[[Mapping[str, Any]], Redacted]] = {
    SourceKind.SECRETS: redact_secret,
    SourceKind.EXTERNAL_MODELS: _external_models,
    SourceKind.MODEL_ACTIVATIONS: _activation,
}
SECRET_HOLDING: frozenset[SourceKind] = frozenset(_SEAL)


# Names kept for the adapters and tests that redact one kind directly.
def redact_configmap(obj: Mapping[str, Any], models_key: str | None = None) -> Redacted:
    """A ConfigMap; with ``models_key`` it is the external models ConfigMap."""
    source = SourceKind.EXTERNAL_MODELS if models_key else SourceKind.CATALOG_CONFIGMAP
    return redact_for_source(source, obj)


def redact_activation(obj: Mapping[str, Any]) -> Redacted:
    return redact_for_source(SourceKind.MODEL_ACTIVATIONS, obj)
