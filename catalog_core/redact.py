"""Redaction at the edge of the core: secret values never enter it.

Adapters pass every raw object through ``redact`` before it becomes an event.
Secret values (Secret data, inline API keys in models.json or a
ModelActivation) are replaced by a marker ``{"$redacted": "<fingerprint>"}``
and handed back separately, for the shell's vault. The core decides from
fingerprints, uids and resourceVersions alone, so the event log can record
exactly what the core saw and a replay decides identically.

The fingerprint is PBKDF2-HMAC-SHA256 (fixed salt, 20,000 rounds, 8 bytes):
stable across restarts and machines, and too slow to brute-force a short key
from a leaked log.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import attrs

REDACTED = "$redacted"
INVALID_JSON_MARKER = "\u0000model-catalog: invalid JSON: "
_SALT = b"model-catalog/secret-fingerprint/v1"
_ROUNDS = 20_000

# Annotations that copy an object's content (kubectl's last-applied copy holds Secret data in clear).
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
INLINE_KEY_FIELDS = ("apiKey", "api_key")


def fingerprint(value: str | bytes) -> str:
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    return "fp1:" + hashlib.pbkdf2_hmac("sha256", raw, _SALT, _ROUNDS, dklen=8).hex()


def marker(fp: str) -> dict[str, str]:
    return {REDACTED: fp}


def redacted_fingerprint(value: Any) -> str | None:
    """The fingerprint if ``value`` is a redaction marker."""
    if isinstance(value, Mapping) and len(value) == 1:
        fp = value.get(REDACTED)
        if isinstance(fp, str):
            return fp
    return None


@attrs.frozen
class Redacted:
    """A raw object safe to log, plus the secret values it held, by vault key."""

    obj: Mapping[str, Any]
    secrets: Mapping[str, str]


def secret_vault_key(namespace: str, name: str, key: str) -> str:
    return f"secret:{namespace}/{name}#{key}"


def inline_vault_key(fp: str) -> str:
    return f"inline:{fp}"


def _scrub_metadata(obj: dict[str, Any]) -> None:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for name in _DROPPED_ANNOTATIONS:
            annotations.pop(name, None)


def redact_secret(obj: Mapping[str, Any]) -> Redacted:
    """Secret data values become fingerprints; annotations are dropped entirely."""
    out = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("data", "stringData")}
    _scrub_metadata(out)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta.pop("annotations", None)
    ns = meta.get("namespace", "") if isinstance(meta, dict) else ""
    name = meta.get("name", "") if isinstance(meta, dict) else ""
    secrets: dict[str, str] = {}
    data: dict[str, Any] = {}
    for key, value in dict(obj.get("data") or {}).items():
        if not isinstance(key, str):
            continue
        text = _decode_b64(value)
        if text is None:
            data[key] = {REDACTED: "undecodable"}
            continue
        data[key] = marker(fingerprint(text))
        secrets[secret_vault_key(str(ns), str(name), key)] = text
    for key, value in dict(obj.get("stringData") or {}).items():
        if isinstance(key, str) and isinstance(value, str):
            data[key] = marker(fingerprint(value))
            secrets[secret_vault_key(str(ns), str(name), key)] = value
    out["data"] = data
    return Redacted(out, secrets)


def _decode_b64(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None


def _redact_inline_keys(item: Any, secrets: dict[str, str]) -> Any:
    """In one external model definition, replace inline API keys (top level and under ``litellm``)."""
    if not isinstance(item, dict):
        return item
    out = dict(item)
    for field in INLINE_KEY_FIELDS:
        if field in out and out[field] is not None and redacted_fingerprint(out[field]) is None:
            out[field] = _redact_value(out[field], secrets)
    nested = out.get("litellm")
    if isinstance(nested, dict):
        nested = dict(nested)
        for field in INLINE_KEY_FIELDS:
            if field in nested and nested[field] is not None and redacted_fingerprint(nested[field]) is None:
                nested[field] = _redact_value(nested[field], secrets)
        out["litellm"] = nested
    return out


def _redact_value(value: Any, secrets: dict[str, str]) -> Any:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    fp = fingerprint(text)
    if isinstance(value, str):
        secrets[inline_vault_key(fp)] = value
    return marker(fp)


def redact_models_json(text: str) -> tuple[str, dict[str, str]]:
    """models.json with inline keys replaced; unparsable text becomes a marker carrying only the error."""
    secrets: dict[str, str] = {}
    doc, error = load_json_text(text)
    if error is not None:
        return INVALID_JSON_MARKER + error, {}
    if isinstance(doc, list):
        doc = [_redact_inline_keys(item, secrets) for item in doc]
    elif isinstance(doc, dict) and isinstance(doc.get("models"), list):
        doc = {**doc, "models": [_redact_inline_keys(item, secrets) for item in doc["models"]]}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")), secrets


def load_json_text(text: str) -> tuple[Any, str | None]:
    """Parse JSON typed by a person: (document, None), or (None, why not) — never an exception.

    Every reader of models.json goes through here, so they agree on what is invalid and how it is
    described; a few KB of brackets exceed the recursion limit, which is bad input like any other.
    """
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:
        return None, _json_error(exc)


def _json_error(exc: ValueError | RecursionError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return "not valid UTF-8 JSON"


def redact_configmap(obj: Mapping[str, Any], models_key: str | None = None) -> Redacted:
    """A ConfigMap; when ``models_key`` is given, that data key is read as models.json."""
    out = copy.deepcopy(dict(obj))
    _scrub_metadata(out)
    secrets: dict[str, str] = {}
    data = out.get("data")
    if models_key and isinstance(data, dict) and isinstance(data.get(models_key), str):
        data[models_key], secrets = redact_models_json(data[models_key])
    return Redacted(out, secrets)


def redact_activation(obj: Mapping[str, Any]) -> Redacted:
    """A ModelActivation: inline keys in spec.external are replaced (the core rejects them)."""
    out = copy.deepcopy(dict(obj))
    _scrub_metadata(out)
    secrets: dict[str, str] = {}
    spec = out.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("external"), dict):
        spec["external"] = _redact_inline_keys(spec["external"], secrets)
    # The core rejects inline keys in activations; their values are not kept anywhere.
    return Redacted(out, {})


def redact_object(obj: Mapping[str, Any]) -> Redacted:
    """Any other object: only the metadata that copies content is dropped."""
    out = copy.deepcopy(dict(obj))
    _scrub_metadata(out)
    return Redacted(out, {})


def redact_for_source(source: str, obj: Mapping[str, Any]) -> Redacted:
    """The redaction every adapter applies to an object of ``source`` (a ``SourceKind`` value)."""
    if source == "secrets":
        return redact_secret(obj)
    if source == "external-models":
        return redact_configmap(obj, "models.json")
    if source == "model-activations":
        return redact_activation(obj)
    return redact_object(obj)
