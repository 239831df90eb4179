"""The fold reuses a held LiteLLM row when an observation repeats its exact text (issue 7, made cheaper
in issue 15: per-row marshal texts, one walk of the held map). Reuse must never change the result: the
rows held after any sequence of observations are those a fresh state makes of the last one alone."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core.config import CatalogConfig
from catalog_core.events import LiteLLMRowsObserved
from catalog_core.fold import initial_state, step
from catalog_core.ingest import _PREPARED_TEXTS, _text_of, prepare_row_texts

# Values that are equal in Python but not the same JSON (1, 1.0, True), so a cache keyed by equality
# rather than by exact text would keep the wrong one.
_ODD = st.sampled_from([1, 1.0, True, 0, False, None, "1", 2048, 2048.0])


@st.composite
def _row(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(0, 4))
    info: dict[str, Any] = {
        "id": f"ai-appliance-kubeai-m{n}",
        "ai_appliance_owner": draw(st.sampled_from(["model-catalog", "someone-else", None])),
        "ai_appliance_managed": draw(_ODD),
        "max_input_tokens": draw(_ODD),
    }
    return {
        "model_name": draw(st.sampled_from([f"m{n}", f"m{n}-b"])),
        "litellm_params": {
            "model": f"openai/m{n}",
            "api_base": "http://runtime.ai:8000/v1",
            "rpm": draw(_ODD),
        },
        "model_info": info,
    }


@settings(max_examples=200)
@given(st.lists(st.lists(_row(), max_size=6).map(tuple), min_size=1, max_size=6))
def test_rows_held_after_any_observations_are_those_of_the_last_one_alone(observations: list[Any]) -> None:
    config = CatalogConfig()
    state = initial_state(config)
    for rows in observations:
        state = step(state, LiteLLMRowsObserved(rows)).state
    fresh = step(initial_state(config), LiteLLMRowsObserved(observations[-1])).state
    assert dict(state.litellm.rows.items()) == dict(fresh.litellm.rows.items())
    assert dict(state.litellm.rows_by_logical.items()) == dict(fresh.litellm.rows_by_logical.items())
    # and the same values by type, not only by equality (True is not 1 in what LiteLLM holds)
    for rid, row in state.litellm.rows.items():
        assert repr(row) == repr(fresh.litellm.rows[rid])


@settings(max_examples=100)
@given(
    st.lists(st.lists(_row(), max_size=6).map(tuple), min_size=1, max_size=5),
    st.lists(st.booleans(), min_size=5, max_size=5),
    st.integers(1, 4),
)
def test_texts_prepared_before_the_fold_give_the_same_result(
    observations: list[Any], prepare: list[bool], chunk: int
) -> None:
    """The LiteLLM observer prepares an observation's texts in steps (``prepare_row_texts``) for its fold
    to take; which observations were prepared, and in what chunks, changes nothing folded."""
    config = CatalogConfig()
    state, plain = initial_state(config), initial_state(config)
    for rows, prepared in zip(observations, prepare, strict=False):
        if prepared:
            steps = list(prepare_row_texts(rows, chunk))
            assert len(steps) == max(0, -(-len(rows) // chunk) - 1)  # a step between two chunks
        result, expected = step(state, LiteLLMRowsObserved(rows)), step(plain, LiteLLMRowsObserved(rows))
        state, plain = result.state, expected.state
        assert result.commands == expected.commands
        assert dict(state.litellm.rows.items()) == dict(plain.litellm.rows.items())
        for rid, row in state.litellm.rows.items():
            assert repr(row) == repr(plain.litellm.rows[rid])


def test_prepared_texts_are_taken_by_the_fold_of_that_very_tuple_only() -> None:
    rows = ({"model_name": "m", "litellm_params": {"model": "openai/m"}, "model_info": {"id": "x"}},)
    equal_but_another_tuple = (dict(rows[0]),)
    list(prepare_row_texts(rows, 10))
    assert _PREPARED_TEXTS.take(equal_but_another_tuple) is None
    taken = _PREPARED_TEXTS.take(rows)
    assert taken == [_text_of(rows[0])]
    assert _PREPARED_TEXTS.take(rows) is None  # taken once: a second fold computes them again
