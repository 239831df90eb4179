"""Immutable JSON values for frozen domain types and commands.

A ``Json`` holds the canonical text (sorted keys, compact separators), so it is
hashable, compares by content and has one spelling. Parse it with ``value()``
only where the structure is needed.

Performance (issue 7): ``canonical`` reuses one encoder instead of building a
``JSONEncoder`` per call, and ``pretty`` is a direct recursive join instead of
``json.dumps(indent=2)``, whose indenting encoder is pure Python (the C encoder
only serves ``indent=None``). Both give exactly the bytes of the ``json.dumps``
calls they replace (``tests/core/test_jsonval.py`` compares them). A ``Fragment``
is a value rendered once and reused by every file and every render that holds
it (the catalog's per-model parts), so a render costs a join per unchanged
model instead of an encode.
"""

from __future__ import annotations

import hashlib
import json
from json.encoder import encode_basestring_ascii
from typing import Any

import attrs

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
if _c_make_encoder is not None:
    # The C encoder that JSONEncoder.encode would build on every call, built once (same arguments; no
    # circular-reference markers: our values are trees). ~3x cheaper for the small values the fold hashes.
    _c_canonical = _c_make_encoder(
        None, _CANONICAL.default, encode_basestring_ascii, None, ":", ",", True, False, True
    )

    def _encode_canonical(value: Any) -> str:
        return "".join(_c_canonical(value, 0))

else:  # pragma: no cover - CPython always has the C encoder

    def _encode_canonical(value: Any) -> str:
        return _CANONICAL.encode(value)


_str = encode_basestring_ascii  # json's own (C) string encoder, ensure_ascii=True like json.dumps


def canonical(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace. The basis of every hash we publish."""
    return _encode_canonical(value)


def pretty(value: Any) -> str:
    """The catalog's file format: indent 2, sorted keys, trailing newline (behaviour §5.1).

    Byte for byte ``json.dumps(value, indent=2, sort_keys=True) + "\\n"``; ``Fragment`` values inside
    are spliced in from their cache.
    """
    return _pretty(value, "\n") + "\n"


class Fragment:
    """A JSON value rendered once: its pretty text (re-indented to any depth) and its canonical text.

    Only the texts are kept, not the value. ``pretty`` and ``canonical_join`` splice them in where the
    value would go.
    """

    __slots__ = ("canonical", "text")

    def __init__(self, value: Any, *, hashed: bool = False) -> None:
        """``hashed``: also keep the canonical text (only fragments inside a hashed value need it)."""
        self.text = _pretty(value, "\n")
        self.canonical: str | None = None
        if hashed:
            try:
                self.canonical = _encode_canonical(value)  # the C encoder, when no fragment is inside
            except TypeError:
                self.canonical = canonical_join(value)

    def pretty_at(self, newline: str) -> str:
        # ensure_ascii escapes every newline inside strings, so each "\n" in the text is layout.
        return self.text if newline == "\n" else self.text.replace("\n", newline)


def canonical_join(value: Any) -> str:
    """``canonical(value)`` for a value that may hold ``Fragment``s."""
    t = type(value)
    if t is Fragment:
        if value.canonical is None:
            raise ValueError("a Fragment made without hashed=True has no canonical text")
        return value.canonical  # type: ignore[no-any-return]
    if t is dict and value and all(type(k) is str for k in value):
        return "{" + ",".join([_str(k) + ":" + canonical_join(value[k]) for k in sorted(value)]) + "}"
    if (t is list or t is tuple) and value:
        return "[" + ",".join([canonical_join(v) for v in value]) + "]"
    return _encode_canonical(value)


def _pretty(value: Any, newline: str) -> str:
    """``json.dumps(value, indent=2, sort_keys=True)`` at the depth whose line break is ``newline``."""
    t = type(value)
    if t is str:
        return _str(value)
    if t is dict:
        if not value:
            return "{}"
        keys = list(value)
        if not all(type(k) is str for k in keys):
            return _fallback(value, newline)  # non-string keys: json's own conversion rules
        keys.sort()
        inner = newline + "  "
        return (
            "{"
            + inner
            + ("," + inner).join([_str(k) + ": " + _pretty(value[k], inner) for k in keys])
            + newline
            + "}"
        )
    if t is list or t is tuple:
        if not value:
            return "[]"
        inner = newline + "  "
        return "[" + inner + ("," + inner).join([_pretty(v, inner) for v in value]) + newline + "]"
    if t is Fragment:
        return value.pretty_at(newline)  # type: ignore[no-any-return]
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if t is int:
        return int.__repr__(value)
    if t is float:
        return _encode_canonical(value)  # json's float rules (repr, NaN, Infinity)
    return _fallback(value, newline)


def _fallback(value: Any, newline: str) -> str:
    """Anything unusual (subclasses, non-string keys): json itself, re-indented to this depth."""
    text = json.dumps(value, indent=2, sort_keys=True)
    return text if newline == "\n" else text.replace("\n", newline)


def short_hash(text: str, length: int = 16) -> str:
    """First ``length`` hex chars of SHA-256 over ``text``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


@attrs.frozen(repr=False)
class Json:
    text: str

    @classmethod
    def of(cls, value: Any) -> Json:
        return cls(_encode_canonical(value))

    def value(self) -> Any:
        return json.loads(self.text)

    def __repr__(self) -> str:
        return f"Json({self.text})"
