"""The marker a secret value is replaced by before it reaches the core, and what the parsers read from it.

A secret value becomes ``{"$redacted": "<fingerprint>"}``; a value the core must refuse is never
fingerprinted, its marker names the problem instead (``empty``, ``undecodable``, ``env-reference``,
``not-a-string``, ``too-long``, ``too-many``, ``refused``). ``catalog_core.redact`` applies them; the
parsers only read them.

The fingerprint is PBKDF2-HMAC-SHA256 (fixed salt, 20,000 rounds, 8 bytes): stable across restarts and
machines, and too slow to brute-force a short key from a leaked log.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from catalog_core.values import is_env_reference

REDACTED: Final = "$redacted"
INVALID_JSON_MARKER: Final = "\u0000model-catalog: invalid JSON: "
_SALT = b"model-catalog/secret-fingerprint/v1"
_ROUNDS = 20_000
SERVICE_ACCOUNT_TOKEN: Final = "kubernetes.io/service-account-token"

# The fields the core reads an inline key from (the contract's spelling).
INLINE_KEY_FIELDS: Final = ("apiKey", "api_key")
# What a marker says instead of a fingerprint when the value cannot be used (never fingerprinted).
EMPTY: Final = "empty"
UNDECODABLE: Final = "undecodable"
ENV_REFERENCE: Final = "env-reference"
NOT_A_STRING: Final = "not-a-string"
TOO_LONG: Final = "too-long"
TOO_MANY: Final = "too-many"
REFUSED: Final = "refused"
INVALID_VALUES: Final = frozenset(
    {EMPTY, UNDECODABLE, ENV_REFERENCE, NOT_A_STRING, TOO_LONG, TOO_MANY, REFUSED}
)

MAX_KEY_LENGTH: Final = 16_384  # an API key, token or password is far shorter
MAX_INLINE_KEYS: Final = 256  # per object: the fingerprint cost of one edit stays bounded (~2 s worst)
_MEMO_LENGTH: Final = 512  # values up to this long are memoised (bounded: 1,024 entries)


def fingerprint(value: str | bytes) -> str:
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    if len(raw) <= _MEMO_LENGTH:
        return _memo_fingerprint(raw)
    return _fingerprint(raw)


@functools.lru_cache(maxsize=1024)
def _memo_fingerprint(raw: bytes) -> str:
    # A re-listed Secret or an edit of one entry of models.json re-redacts every key: memoised, the
    # PBKDF2 cost is paid once per value, not once per event.
    return _fingerprint(raw)


def _fingerprint(raw: bytes) -> str:
    return "fp1:" + hashlib.pbkdf2_hmac("sha256", raw, _SALT, _ROUNDS, dklen=8).hex()


def marker(fp: str) -> dict[str, str]:
    return {REDACTED: fp}


def redacted_fingerprint(value: Any) -> str | None:
    """The fingerprint (or the invalid-value word) if ``value`` is a redaction marker."""
    if isinstance(value, Mapping) and len(value) == 1:
        fp = value.get(REDACTED)
        if isinstance(fp, str):
            return fp
    return None


def invalid_value(fp: str) -> str | None:
    """Why the value behind a marker cannot be used (a sentence), or None for a real fingerprint."""
    return _WHY.get(fp) if fp in INVALID_VALUES else None


_WHY: Final = {
    EMPTY: "is empty",
    UNDECODABLE: "is not valid base64-encoded UTF-8 text",
    ENV_REFERENCE: "starts with os.environ/, which LiteLLM would read from its own environment",
    NOT_A_STRING: "is not a string",
    TOO_LONG: f"is longer than {MAX_KEY_LENGTH} characters",
    TOO_MANY: f"is past the first {MAX_INLINE_KEYS} inline keys of the object; use apiKeySecretRef",
    REFUSED: "belongs to a ServiceAccount token Secret, which is never handed out",
}


def classify(value: Any) -> str | None:
    """The marker word of a value that cannot be used as a key, or None when it can be fingerprinted."""
    if not isinstance(value, str):
        return NOT_A_STRING
    if not value.strip():
        return EMPTY
    if is_env_reference(value):
        return ENV_REFERENCE
    if len(value) > MAX_KEY_LENGTH:
        return TOO_LONG
    return None


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
    if "digits" in str(exc):
        return "an integer has too many digits"  # Python's int() limit (4,300 digits)
    return "not valid UTF-8 JSON"
