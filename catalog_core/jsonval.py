"""Immutable JSON values for frozen domain types and commands.

A ``Json`` holds the canonical text (sorted keys, compact separators), so it is
hashable, compares by content and has one spelling. Parse it with ``value()``
only where the structure is needed.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import attrs


def canonical(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace. The basis of every hash we publish."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def pretty(value: Any) -> str:
    """The catalog's file format: indent 2, sorted keys, trailing newline (contracts A.5)."""
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def short_hash(text: str, length: int = 16) -> str:
    """First ``length`` hex chars of SHA-256 over ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


@attrs.frozen(repr=False)
class Json:
    text: str

    @classmethod
    def of(cls, value: Any) -> Json:
        return cls(canonical(value))

    def value(self) -> Any:
        return json.loads(self.text)

    def __repr__(self) -> str:
        return f"Json({self.text})"
