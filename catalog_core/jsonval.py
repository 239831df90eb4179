"""Immutable JSON values for frozen domain types and commands.

A ``Json`` holds the canonical text (sorted keys, compact separators), so it is
hashable, compares by content and has one spelling. Parse it with ``value()``
only where the structure is needed.

Performance: ``canonical`` reuses one encoder instead of building a
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
from bisect import bisect_left
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

    Memory (bench P7): one pretty text is kept, at the depth last asked for, so a ``Run`` that holds
    its members' texts at their depth holds the fragment's own string, not a re-indented copy of it.
    """

    __slots__ = ("_pretty", "canonical")

    def __init__(self, value: Any, *, hashed: bool = False) -> None:
        """``hashed``: also keep the canonical text (only fragments inside a hashed value need it)."""
        # (the line break of the depth, the text at that depth): one attribute, so a reader on another
        # thread (a blocking host's view) always sees a matching pair
        self._pretty = ("\n", _pretty(value, "\n"))
        self.canonical: str | None = None
        if hashed:
            try:
                self.canonical = _encode_canonical(value)  # the C encoder, when no fragment is inside
            except TypeError:
                self.canonical = canonical_join(value)

    def pretty_at(self, newline: str) -> str:
        at, text = self._pretty
        if newline == at:
            return text
        # ensure_ascii escapes every line break inside strings, so each one in the text is layout, and at
        # depth ``at`` each begins with ``at`` (deeper lines add spaces after it).
        text = text.replace(at, newline)
        self._pretty = (newline, text)
        return text


class Run:
    """The members of a JSON array (or object), each rendered once, kept in the order of their sort keys.

    Performance: a catalog file lists every model; a ``Run`` keeps each member's text, at
    every depth it was asked for, in a list maintained in order by ``put`` and ``remove`` (a bisection
    and a C-level insert), so the file is one ``str.join`` of cached texts instead of a pass over
    every model in Python. Also kept, for hashed fragments: each member's canonical text. ``pretty``
    and ``canonical_join`` splice a run in where the array or object would go.

    Memory (bench P7): no escaped copy of the members is kept (it was ~2 KiB per model); the
    fingerprint escapes each file's text in one C call instead (``json``'s string encoder).
    """

    __slots__ = ("_at", "_canonical", "_fragments", "_keys", "_lengths", "_names", "is_object")

    def __init__(self, *, is_object: bool = False) -> None:
        self.is_object = is_object
        self._keys: list[Any] = []
        self._fragments: list[Fragment] = []
        self._names: list[str] = []  # an object's member names, else empty strings
        self._at: dict[str, list[str]] = {}  # container line break -> the members' texts at that depth
        self._lengths: dict[str, int] = {}  # container line break -> the sum of those texts' lengths
        self._canonical: list[str] | None = None

    def __len__(self) -> int:
        return len(self._keys)

    def first(self) -> Any:
        """The sort key of the first member (the run must not be empty)."""
        return self._keys[0]

    def first_from(self, key: Any) -> Any:
        """The first member's sort key that is not below ``key`` (there must be one)."""
        return self._keys[bisect_left(self._keys, key)]

    def put(self, key: Any, fragment: Fragment, name: str = "") -> None:
        """Insert the member with sort key ``key``, or replace the one that has it."""
        i = bisect_left(self._keys, key)
        if i < len(self._keys) and self._keys[i] == key:
            self._fragments[i], self._names[i] = fragment, name
            for newline, texts in self._at.items():
                text = self._member(fragment, name, newline + "  ")
                self._lengths[newline] += len(text) - len(texts[i])
                texts[i] = text
            if self._canonical is not None:
                self._canonical[i] = self._member_canonical(fragment, name)
            return
        self._keys.insert(i, key)
        self._fragments.insert(i, fragment)
        self._names.insert(i, name)
        for newline, texts in self._at.items():
            text = self._member(fragment, name, newline + "  ")
            self._lengths[newline] += len(text)
            texts.insert(i, text)
        if self._canonical is not None:
            self._canonical.insert(i, self._member_canonical(fragment, name))

    def remove(self, key: Any) -> None:
        i = bisect_left(self._keys, key)
        if i == len(self._keys) or self._keys[i] != key:
            raise KeyError(key)
        for parallel in (self._keys, self._fragments, self._names):
            del parallel[i]
        for newline, texts in self._at.items():
            self._lengths[newline] -= len(texts[i])
            del texts[i]
        if self._canonical is not None:
            del self._canonical[i]

    def _member(self, fragment: Fragment, name: str, inner: str) -> str:
        text = fragment.pretty_at(inner)
        return _str(name) + ": " + text if self.is_object else text

    def _member_canonical(self, fragment: Fragment, name: str) -> str:
        text = canonical_join(fragment)
        return _str(name) + ":" + text if self.is_object else text

    def _texts(self, newline: str) -> list[str]:
        found = self._at.get(newline)
        if found is None:
            inner = newline + "  "
            found = self._at[newline] = [
                self._member(f, n, inner) for f, n in zip(self._fragments, self._names, strict=True)
            ]
            self._lengths[newline] = sum(map(len, found))
        return found

    def length_at_least(self) -> int:
        """A lower bound of the length of this run's text, known without joining it: the length of its
        members' texts at the depth it was rendered at (the longest, if at several; 0 before its first
        render)."""
        return max(self._lengths.values(), default=0)

    def _brackets(self) -> tuple[str, str]:
        return ("{", "}") if self.is_object else ("[", "]")

    def pretty_at(self, newline: str) -> str:
        start, end = self._brackets()
        if not self._keys:
            return start + end
        inner = newline + "  "
        return start + inner + ("," + inner).join(self._texts(newline)) + newline + end

    def canonical_text(self) -> str:
        if self._canonical is None:
            self._canonical = [
                self._member_canonical(f, n) for f, n in zip(self._fragments, self._names, strict=True)
            ]
        start, end = self._brackets()
        return start + ",".join(self._canonical) + end


def canonical_join(value: Any) -> str:
    """``canonical(value)`` for a value that may hold ``Fragment``s and ``Run``s."""
    t = type(value)
    if t is Fragment:
        if value.canonical is None:
            raise ValueError("a Fragment made without hashed=True has no canonical text")
        return value.canonical  # type: ignore[no-any-return]
    if t is Run:
        return value.canonical_text()  # type: ignore[no-any-return]
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
    if t is Fragment or t is Run:
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
