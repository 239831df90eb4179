"""The fast event decoder reads exactly what the converter reads (issue 15, replay speed).

``structure_event`` first tries ``decode_event_fast`` (fields straight into the class) and hands anything it
declines to the cattrs converter. So the one property that matters: whatever the fast decoder accepts, the
converter accepts too, with the same value down to the types (an integer ``now`` is a float either way) --
on the events the core emits, on their damaged copies (a field missing, one too many, a wrong type, an
unknown enum value, a bool where a number belongs) and on the hostile objects of the converter's tests.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from catalog_core import events as ev
from contracts import eventlog as wire
from tests.eventlog.test_converter import events, json_values


def by_converter(value: Any) -> ev.Event | Exception:
    try:
        event: ev.Event = wire.CONVERTER.structure(value, ev.Event)
    except Exception as exc:
        return exc
    return event


def same_value(fast: ev.Event, slow: ev.Event | Exception) -> bool:
    """Equal and encoded alike (``==`` alone would take 1 for 1.0 and True for 1)."""
    return (
        not isinstance(slow, Exception)
        and type(fast) is type(slow)
        and fast == slow
        and wire.dumps(wire.unstructure_event(fast)) == wire.dumps(wire.unstructure_event(slow))
    )


def check(value: Any) -> None:
    fast = wire.decode_event_fast(value) if type(value) is dict else None
    slow = by_converter(value)
    if fast is not None:
        assert same_value(fast, slow), (value, fast, slow)
    decoded = wire.structure_event(value) if not isinstance(slow, Exception) else None
    if decoded is not None:
        assert same_value(decoded, slow)


@given(events)
def test_every_event_decodes_fast_to_what_the_converter_reads(event: ev.Event) -> None:
    value = wire.unstructure_event(event)
    fast = wire.decode_event_fast(value)
    assert fast is not None, value  # every field type of the events has an inline reader or a hook
    assert same_value(fast, event)
    check(value)


damage = st.one_of(
    st.tuples(st.just("drop"), st.integers(0, 8), st.none()),
    st.tuples(st.just("set"), st.integers(0, 8), json_values),
    st.tuples(st.just("add"), st.sampled_from(["extra", "T", "object ", "now2"]), json_values),
    st.tuples(
        st.just("tag"), st.just(0), st.one_of(json_values, st.sampled_from(["ticked", "Ticked", "nope"]))
    ),
)


@given(events, st.lists(damage, min_size=1, max_size=3))
def test_a_damaged_event_is_read_fast_only_as_the_converter_reads_it(
    event: ev.Event, damages: list[tuple[str, Any, Any]]
) -> None:
    value = wire.unstructure_event(event)
    for how, where, what in damages:
        keys = [k for k in value if k != "t"]
        if how == "drop" and keys:
            del value[keys[where % len(keys)]]
        elif how == "set" and keys:
            value[keys[where % len(keys)]] = what
        elif how == "add":
            value[where] = what
        elif how == "tag":
            value["t"] = what
    check(value)


@given(
    st.sampled_from(sorted(wire.EVENT_TAGS.values())),
    st.dictionaries(st.text(max_size=12), json_values, max_size=6),
)
def test_arbitrary_objects_under_a_known_tag_are_read_fast_only_as_the_converter_reads_them(
    tag: str, fields: dict[str, Any]
) -> None:
    check({"t": tag, **fields})


def test_numbers_and_enums_keep_the_converters_exact_types() -> None:
    assert wire.decode_event_fast({"t": "ticked", "now": 3}) == ev.Ticked(3.0)
    assert type(wire.decode_event_fast({"t": "ticked", "now": 3}).now) is float  # type: ignore[union-attr]
    assert wire.decode_event_fast({"t": "ticked", "now": True}) is None  # a bool is no number
    assert wire.decode_event_fast({"t": "leadership-changed", "leading": 1}) is None
    assert wire.decode_event_fast({"t": "object-upserted", "source": "nope", "object": {}}) is None
    assert wire.decode_event_fast({"t": "litellm-rows-observed", "rows": [{}, 1]}) is None
    assert wire.decode_event_fast({"t": "ticked", "now": 1.0, "extra": 1}) is None
    upserted = wire.decode_event_fast({"t": "object-upserted", "source": "kubeai-models", "object": {"a": 1}})
    assert upserted == ev.ObjectUpserted(ev.SourceKind.KUBEAI_MODELS, {"a": 1})


def test_a_field_the_fast_decoder_hands_to_a_hook_that_refuses_it_is_declined_not_raised() -> None:
    # Found by the randomized profile: a None among a SourceListed's scope names raised TypeError out of
    # decode_event_fast (structure_event caught it; the decoder alone did not): it declines instead.
    value = wire.unstructure_event(ev.SourceListed(ev.SourceKind("kubeai-models"), (), None))
    value["scope"] = [None]
    assert wire.decode_event_fast(value) is None
    assert isinstance(by_converter(value), Exception)
    check(value)
