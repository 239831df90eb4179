"""Contracts notation and behaviour §2.1 ids."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalog_core.registry import route_id
from catalog_core.values import FieldError, Source, logical_name, positive_int, slug


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, 1), (8192, 8192), ("8192", 8192), (" 42 ", 42), (None, None)],
)
def test_positive_int_accepts_ints_and_digit_strings(value, expected):
    assert positive_int(value, "f") == expected


@pytest.mark.parametrize("value", [0, -1, "0", "-5", True, False, 1.5, 8192.0, "8k", "1e3", "", [], {}, "٣"])
def test_positive_int_rejects_booleans_floats_and_non_digits(value):
    assert isinstance(positive_int(value, "f"), FieldError)


def test_positive_int_bounds_absurd_values():
    assert isinstance(positive_int(10**12, "f"), FieldError)
    assert isinstance(positive_int("99999999999999999999", "f"), FieldError)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Llama 3.1 8B", "llama-3.1-8b"),
        ("--weird//name--", "weird-name"),
        ("gpt_4o", "gpt_4o"),
        ("???", "model"),
        ("", "model"),
        ("Ünïcödé", "n-c-d"),
    ],
)
def test_slug(name, expected):
    assert slug(name) == expected


def test_route_ids_per_source():
    assert route_id(Source.KUBEAI, "Llama 3") == "ai-appliance-kubeai-llama-3"
    assert route_id(Source.EXTERNAL, "gpt-4o") == "ai-appliance-external-gpt-4o"
    assert route_id(Source.ACTIVATION, "gpt-4o") == "ai-appliance-external-gpt-4o"
    assert route_id(Source.FREETOKEN, "phi") == "ai-appliance-freetoken-phi"


@given(st.text())
def test_slug_is_always_a_safe_nonempty_id(name):
    s = slug(name)
    assert s
    assert all(c.isascii() and (c.isalnum() or c in "_.-") for c in s)
    assert s == s.lower()
    assert not s.startswith("-")
    assert not s.endswith("-")


def test_logical_name_strips_alias_prefixes():
    assert logical_name("local/llama") == "llama"
    assert logical_name("mesh/llama") == "llama"
    assert logical_name("share/llama") == "llama"
    assert logical_name("llama") == "llama"
    assert logical_name("other/llama") == "other/llama"
