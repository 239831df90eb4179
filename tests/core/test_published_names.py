"""Every name the catalog accepts is safe as a key of every file it publishes.

Model names are object keys in ``opencode-providers.json``, ``paperclip-opencode-providers.json`` and
``hermes.yaml``. Node apps merge those objects into their own: ``__proto__`` as a key reaches the prototype
of the object it is merged into, ``constructor`` and ``prototype`` the next one, and a key named after a
member every object inherits replaces that method. And ``hermes.yaml`` is JSON text read as YAML, whose keys
hold at most 1,024 characters: one name of 171 non-ASCII characters (six per escape) made the whole file
unreadable for Hermes. Such names are refused, each rejecting its own item (``InvalidField``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core.values import RESERVED_NAMES
from tests.core import builders as b
from tests.core.harness import Cluster

OBJECT_FILES = ("opencode-providers.json", "paperclip-opencode-providers.json")
GOOD = b.external_configmap([{"name": "good", "model": "openai/good"}])


def _keys(c: Cluster) -> set[str]:
    keys = set(yaml.safe_load(c.data["hermes.yaml"])["providers"]["litellm"]["models"])
    for name in OBJECT_FILES:
        keys |= set(json.loads(c.data[name])["litellm"]["models"])
    return keys


def _error(c: Cluster, item: str) -> dict[str, Any]:
    record = c.record(item)
    assert (record["state"], record["reason"]) == ("error", "InvalidField"), record
    return record


@pytest.mark.parametrize(
    "name", ["__proto__", "constructor", "prototype", "mesh/__proto__", "hasOwnProperty"]
)
def test_a_models_json_item_named_as_javascript_reserves_is_refused_alone(name):
    c = Cluster()
    c.start(
        b.external_configmap([{"name": "good", "model": "openai/good"}, {"name": name, "model": "openai/x"}])
    )
    assert _keys(c) == {"good"}
    assert "JavaScript objects inherit or treat specially" in _error(c, "models.json[1]")["message"]


@pytest.mark.parametrize("name", ["constructor", "prototype", "valueOf"])
def test_kubeai_models_activations_and_runtimes_named_so_are_refused_alone(name):
    """Names the API server accepts (DNS labels, any case): the watch's fast paths refuse them too."""
    c = Cluster()
    c.world.healthy = frozenset({"rt"})
    c.start(
        GOOD,
        b.kubeai_model(name),
        b.activation(name, external={"model": "openai/x"}),
        b.freetoken_deployment("rt", activation_name=name),
        b.service("rt"),
    )
    assert _keys(c) == {"good"}
    assert not any(name in row["model_name"] for row in c.world.rows.values())
    for record in c.routes():
        if record["name"] != "good":
            assert (record["state"], record["reason"]) == ("error", "InvalidField"), record


def test_a_foreign_litellm_row_named_proto_is_left_out_of_the_catalog():
    c = Cluster()
    c.start(GOOD, rows=[b.row("__proto__", "hand-made-proto"), b.row("mesh/constructor", "hand-made-ctor")])
    assert _keys(c) == {"good"}


def test_a_name_too_long_for_a_yaml_key_once_escaped_is_refused_alone():
    """171 non-ASCII characters are 1,028 characters once escaped: YAML stops reading the key at 1,024."""
    c = Cluster()
    long_ok, too_long = "é" * 169, "é" * 171
    c.start(
        b.external_configmap(
            [{"name": long_ok, "model": "openai/a"}, {"name": too_long, "model": "openai/b"}]
        )
    )
    assert _keys(c) == {long_ok}
    assert "too long for a key of hermes.yaml" in _error(c, "models.json[1]")["message"]
    assert yaml.safe_load(c.data["hermes.yaml"]) == json.loads(c.data["hermes.yaml"])


def test_names_beyond_the_bmp_read_the_same_from_hermes_yaml():
    """JSON escapes 😀 as a surrogate pair; PyYAML read it as two lone surrogates and libyaml refused the
    file. hermes.yaml writes such characters as themselves (JSON allows it)."""
    c = Cluster()
    c.start(b.external_configmap([{"name": "chat-😀", "model": "openai/a"}]))
    _parsed(c.data)
    assert _keys(c) == {"chat-😀"}
    assert "\\ud83d" in c.data["opencode-providers.json"] and "chat-😀" in c.data["hermes.yaml"]


def test_a_foreign_display_name_that_is_not_valid_text_is_not_published():
    c = Cluster()
    row = b.row("foreign", "hand-made-foreign")
    row["model_info"]["team_public_model_name"] = "bad\ud800name"
    c.start(GOOD, rows=[row])
    _parsed(c.data)
    assert c.entry("foreign")["name"] == "foreign"


names = st.one_of(
    st.text(min_size=1, max_size=12),
    st.text(st.sampled_from(['"', "\\", "é", "😀", "中", "a", "/", " "]), min_size=80, max_size=520),
    st.tuples(st.sampled_from(["", "local/", "mesh/"]), st.sampled_from(sorted(RESERVED_NAMES))).map("".join),
)


def _parsed(data: dict[str, str]) -> None:
    """Every file of the catalog ConfigMap read the way its consumers read it."""
    for key, text in data.items():
        if key.endswith(".json"):
            json.loads(text)
        elif key.endswith(".yaml"):
            assert yaml.safe_load(text) == json.loads(text), key
            if yaml.__with_libyaml__:  # libyaml refused what PyYAML misread
                assert yaml.load(text, Loader=yaml.CSafeLoader) == json.loads(text), key
        elif key.endswith(".env"):
            lines = text.splitlines()
            assert len(lines) == 8 and all("=" in line for line in lines), text


@given(names)
@settings(max_examples=80, deadline=None)
def test_every_generated_file_parses_for_every_accepted_name(name):
    c = Cluster()
    c.start(b.external_configmap([{"name": name, "model": "openai/x"}]))
    _parsed(c.data)
    published = c.model_ids()
    if published:
        (entry,) = published
        assert entry not in RESERVED_NAMES
        assert _keys(c) == {entry}
    else:
        assert c.record("models.json[0]")["reason"] in ("InvalidField", "MissingField")


def test_an_item_named_question_mark_is_a_name_like_any_other():
    """An item without a usable name is recorded under its position only; ``?`` is a name, published,
    recorded and shadowed under itself like any other."""
    c = Cluster()
    c.start(
        b.external_configmap(
            [{"name": "?", "model": "openai/x"}, {"model": "openai/y"}, {"name": "?", "model": "openai/z"}]
        )
    )
    assert c.model_ids() == ["?"]
    assert c.entry("?")["litellm"]["model"] == "openai/z"  # the last definition of a name wins
    assert c.record("?")["state"] == "published"
    assert c.record("? (models.json[0])")["reason"] == "DuplicateName"
    assert c.record("models.json[1]")["reason"] == "MissingField"
