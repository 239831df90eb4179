"""The fast JSON writers give exactly the bytes of the ``json.dumps`` calls they replace (issue 7)."""

from __future__ import annotations

import enum
import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from catalog_core.jsonval import Fragment, canonical, canonical_join, pretty

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities included: json writes NaN / Infinity
    | st.text()  # any code point: ensure_ascii escapes them
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=30,
)


def _old_pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def _old_canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@given(values)
def test_pretty_and_canonical_match_json_dumps(value: Any) -> None:
    assert pretty(value) == _old_pretty(value)
    assert canonical(value) == _old_canonical(value)
    assert canonical_join(value) == _old_canonical(value)


@given(st.dictionaries(st.text(max_size=5), values, max_size=4), st.lists(values, max_size=4))
def test_fragments_splice_the_text_the_value_would_give(outer: dict[str, Any], items: list[Any]) -> None:
    document = {"outer": outer, "items": items, "nested": [{"deep": items}]}
    spliced = {
        "outer": {k: Fragment(v, hashed=True) for k, v in outer.items()},
        "items": [Fragment(v, hashed=True) for v in items],
        "nested": [{"deep": [Fragment(v, hashed=True) for v in items]}],
    }
    assert pretty(spliced) == _old_pretty(document)
    assert canonical_join(spliced) == _old_canonical(document)


class Color(enum.StrEnum):
    RED = "red"


def test_unusual_values_fall_back_to_json_itself() -> None:
    for value in (
        {1: "a", 2: [True, None]},  # non-string keys: json converts them
        {"e": Color.RED, Color.RED: 1.5},
        [math.inf, -math.inf, 1e300, -0.0],
        {"x": {}, "y": [], "z": [{}]},
    ):
        assert pretty(value) == _old_pretty(value)
        assert canonical(value) == _old_canonical(value)


def test_a_fragment_without_its_canonical_text_refuses_to_be_hashed() -> None:
    try:
        canonical_join([Fragment({"a": 1})])
    except ValueError:
        return
    raise AssertionError("expected a ValueError")
