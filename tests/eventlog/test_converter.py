"""The wire format: round trips of every event and command type, tags, schema, strictness."""

from __future__ import annotations

import json
import typing
import zlib
from importlib import resources
from pathlib import Path
from typing import Any, get_args

import attrs
import jsonschema
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core import commands as cmd
from catalog_core import events as ev
from catalog_core.config import CatalogConfig
from catalog_core.fold import initial_state
from catalog_core.jsonval import Json
from catalog_core.pmap import PMap
from contracts import eventlog as wire
from tests.contracts.schemas import validator as schema_validator
from tests.eventlog import strategies as gen
from tests.eventlog.harness import record_run
from tests.eventlog.same import differences, same

# The registry as released (format version 1; version 2 added the tick's busy). A tag, once written, never
# changes meaning: this table may only grow (and growing it, or changing a type's fields, means a new format
# version with a migration).
RELEASED_TAGS = {
    "object-upserted": ("ObjectUpserted", ["source", "object"]),
    "object-deleted": ("ObjectDeleted", ["source", "object"]),
    "source-listed": ("SourceListed", ["source", "objects", "scope"]),
    "source-unavailable": ("SourceUnavailable", ["source", "status", "detail"]),
    "litellm-rows-observed": ("LiteLLMRowsObserved", ["rows"]),
    "litellm-unreachable": ("LiteLLMUnreachable", ["reason", "detail"]),
    "runtime-probed": ("RuntimeProbed", ["runtime", "url", "healthy", "detail"]),
    "command-completed": (
        "CommandCompleted",
        ["key", "command_id", "outcome", "retry_after", "reason", "detail"],
    ),
    "ticked": ("Ticked", ["now", "busy"]),  # busy since format version 2
    "litellm-create": (
        "CreateLiteLLMModel",
        ["model_id", "model_name", "litellm_params", "model_info", "api_key", "id"],
    ),
    "litellm-update": (
        "UpdateLiteLLMModel",
        ["model_id", "model_name", "litellm_params", "model_info", "api_key", "id"],
    ),
    "litellm-recreate": (
        "RecreateLiteLLMModel",
        ["model_id", "model_name", "litellm_params", "model_info", "api_key", "id"],
    ),
    "litellm-delete": ("DeleteLiteLLMModel", ["model_id", "id"]),
    "catalog-write": ("WriteCatalog", ["namespace", "name", "data", "catalog_hash", "fingerprint", "id"]),
    "agenttemplate-patch": ("PatchAgentTemplate", ["namespace", "name", "resource_version", "patch", "id"]),
    "workload-roll": ("RollWorkload", ["namespace", "kind", "name", "catalog_hash", "id"]),
    "pod-evict": ("EvictPod", ["namespace", "name", "uid", "catalog_hash", "id"]),
    "runtime-probe": ("ProbeRuntime", ["runtime", "url", "id"]),
    "kubernetes-event": ("EmitKubernetesEvent", ["involved", "reason", "message", "event_type", "id"]),
    "secrets-watch": ("WatchSecrets", ["namespace", "secrets", "id"]),
    # Added before format 1 was ever released (0.1.0): a new tag changes no existing one's meaning.
    "leadership-changed": ("LeadershipChanged", ["leading"]),
    "observe-litellm": ("ObserveLiteLLM", ["reason", "id"]),
    "catalog-placeholder": (
        "CreateCatalogPlaceholder",
        ["namespace", "name", "data", "catalog_hash", "fingerprint", "id"],
    ),
}


def _schema() -> dict[str, Any]:
    text = resources.files("contracts").joinpath(wire.SCHEMA_FILE).read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


VALIDATOR = schema_validator("eventlog.schema.json")  # with sources.schema.json, which it $refs


def test_the_schema_is_a_valid_2020_12_schema_of_this_version() -> None:
    schema = _schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$defs"]["header"]["properties"]["version"] == {"const": wire.FORMAT_VERSION}


def test_every_event_and_command_type_has_a_tag_and_no_tag_changed_meaning() -> None:
    assert set(wire.EVENT_TAGS) == set(get_args(ev.Event))
    assert set(wire.COMMAND_TAGS) == set(get_args(cmd.Command))
    written = {**wire.EVENT_TAGS, **wire.COMMAND_TAGS}
    assert len(set(written.values())) == len(written)
    for cls, tag in written.items():
        assert tag in RELEASED_TAGS, f"new tag {tag}: add it to RELEASED_TAGS (and bump the format version)"
        name, fields = RELEASED_TAGS[tag]
        assert cls.__name__ == name, f"tag {tag} now means {cls.__name__}, not {name}"
        assert [f.name for f in attrs.fields(cls)] == fields, f"the fields of {tag} changed: bump the version"


def test_the_schema_knows_exactly_the_fields_and_enum_values_of_the_core() -> None:
    defs = _schema()["$defs"]
    for union, table in (("Event", wire.EVENT_TAGS), ("Command", wire.COMMAND_TAGS)):
        for cls, tag in table.items():
            props = defs[f"{union}.{tag}"]["properties"]
            assert set(props) == {"t", *(f.name for f in attrs.fields(cls))}
    for enum in (ev.Unavailability, ev.Outcome):
        assert defs[enum.__name__]["enum"] == [m.value for m in enum]
    assert defs["SourceKind"]["$ref"].endswith("sources.schema.json#/$defs/SourceKind")  # generated
    state_fields = {f.name for f in attrs.fields(type(initial_state(CatalogConfig())))}
    assert set(defs["State"]["required"]) == state_fields, "CatalogState changed: update State in the schema"


# --- generated values of every event and command type ---------------------------------------------

text = st.text(max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
raw_objects = st.one_of(
    gen.kubeai_model(),
    gen.external_configmap(),
    gen.activation(),
    gen.freetoken_deployment(),
    gen.services,
    gen.litellm_row(),
    st.dictionaries(text, json_values, max_size=4),
)
jsons = json_values.map(Json.of)
api_keys = st.one_of(
    st.none(),
    st.builds(cmd.LiteralKey, text),
    st.builds(cmd.SecretKey, text, text, text, text, text, text),
    st.builds(cmd.InlineKeyRef, text),
)
floats = st.floats(allow_nan=False, allow_infinity=False)

events: st.SearchStrategy[ev.Event] = st.one_of(
    st.builds(ev.ObjectUpserted, st.sampled_from(list(ev.SourceKind)), raw_objects),
    st.builds(ev.ObjectDeleted, st.sampled_from(list(ev.SourceKind)), raw_objects),
    st.builds(
        ev.SourceListed,
        st.sampled_from(list(ev.SourceKind)),
        st.lists(raw_objects, max_size=3).map(tuple),
        st.none() | st.lists(text, max_size=3).map(tuple),
    ),
    st.builds(
        ev.SourceUnavailable, st.sampled_from(list(ev.SourceKind)), st.sampled_from(ev.Unavailability), text
    ),
    st.builds(ev.LiteLLMRowsObserved, st.lists(gen.litellm_row(), max_size=3).map(tuple)),
    st.builds(ev.LiteLLMUnreachable, text, text),
    st.builds(ev.RuntimeProbed, text, text, st.booleans(), text),
    st.builds(ev.CommandCompleted, text, text, st.sampled_from(ev.Outcome), floats, text, text),
    st.builds(ev.Ticked, floats),
)
litellm_writes = st.sampled_from([cmd.CreateLiteLLMModel, cmd.UpdateLiteLLMModel, cmd.RecreateLiteLLMModel])
commands: st.SearchStrategy[cmd.Command] = st.one_of(
    st.builds(lambda cls, *a: cls(*a), litellm_writes, text, text, jsons, jsons, api_keys),
    st.builds(cmd.DeleteLiteLLMModel, text),
    st.builds(
        cmd.WriteCatalog, text, text, st.lists(st.tuples(text, text), max_size=3).map(tuple), text, text
    ),
    st.builds(cmd.PatchAgentTemplate, text, text, text, jsons),
    st.builds(cmd.RollWorkload, text, text, text, text),
    st.builds(cmd.EvictPod, text, text, text, text),
    st.builds(cmd.ProbeRuntime, text, text),
    st.builds(
        cmd.EmitKubernetesEvent, st.builds(cmd.ObjectRef, text, text, text, text, text), text, text, text
    ),
    st.builds(
        cmd.WatchSecrets,
        text,
        st.lists(st.builds(cmd.SecretWatch, text, st.booleans()), max_size=3).map(tuple),
    ),
)


@settings(max_examples=300)
@given(events)
def test_every_event_round_trips_to_an_identical_value(event: ev.Event) -> None:
    line = wire.encode_event(7, "2026-01-01T00:00:00.000Z", event)
    raw = wire.parse_line(line)
    assert not list(VALIDATOR.iter_errors(raw))
    back = wire.decode(raw)
    assert isinstance(back, wire.EventRecord)
    assert differences(back.event, event) == []
    assert wire.encode_event(7, "2026-01-01T00:00:00.000Z", back.event) == line  # byte for byte


@settings(max_examples=300)
@given(st.lists(commands, min_size=1, max_size=3))
def test_every_command_round_trips_with_its_id_recomputed(batch: list[cmd.Command]) -> None:
    line = wire.encode_commands(8, "ts", 7, batch)
    raw = wire.parse_line(line)
    assert not list(VALIDATOR.iter_errors(raw))
    assert [c["id"] for c in raw["commands"]] == [c.id for c in batch]
    back = wire.decode(raw)
    assert isinstance(back, wire.CommandsRecord)
    assert differences(back.commands, tuple(batch)) == []
    assert wire.encode_commands(8, "ts", 7, back.commands) == line


def test_a_command_whose_id_does_not_match_its_content_is_refused() -> None:
    command = cmd.DeleteLiteLLMModel("ai-appliance-kubeai-x")
    body = wire.unstructure_commands([command])
    body[0]["model_id"] = "ai-appliance-kubeai-y"
    with pytest.raises(wire.LogFormatError, match=r"recorded id .* but its content has id"):
        wire.structure_commands(body)


@settings(max_examples=25)
@given(scn=gen.scenario())
def test_core_states_round_trip_identically(scn: dict[str, Any], tmp_path_factory: Any) -> None:
    run = record_run(scn, tmp_path_factory.mktemp("state"))
    for _, transition in run.history[-12:]:
        state = transition.state
        raw = orjson.loads(wire.encode_snapshot(3, "ts", 2, state))
        assert not list(VALIDATOR.iter_errors(raw))
        back = wire.structure_state(raw["state"])
        assert differences(back, state) == []
        assert wire.encode_snapshot(3, "ts", 2, back) == wire.encode_snapshot(3, "ts", 2, state)


def _colliding_keys() -> tuple[str, str]:
    """Two strings with the same CRC-32 (the hash of the PMap's first levels): they share a ``_Deep`` trie."""
    a, b = "plumless", "buckeroo"
    assert zlib.crc32(a.encode()) == zlib.crc32(b.encode())
    return a, b


def test_pmap_keeps_its_iteration_order_even_for_colliding_keys() -> None:
    a, b = _colliding_keys()
    for first, second in ((a, b), (b, a)):
        pmap: PMap[int] = PMap.of([("x", 0), (first, 1), (second, 2), ("y", 3)])
        hook_un = wire.CONVERTER.get_unstructure_hook(PMap[int])
        back = wire.CONVERTER.structure(orjson.loads(orjson.dumps(hook_un(pmap))), PMap[int])
        assert list(back.items()) == list(pmap.items())
        assert same(back, pmap)
    assert list(PMap.of([(a, 1), (b, 2)])) != list(PMap.of([(b, 2), (a, 1)]))


def test_frozensets_are_sorted_and_enums_are_their_values() -> None:
    hook = wire.CONVERTER.get_unstructure_hook(frozenset[str])
    assert hook(frozenset({"b", "c", "a"})) == ["a", "b", "c"]
    raw = wire.unstructure_event(ev.SourceUnavailable(ev.SourceKind.PODS, ev.Unavailability.FORBIDDEN))
    assert raw == {"t": "source-unavailable", "source": "pods", "status": "forbidden", "detail": ""}
    assert type(raw["source"]) is str


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"t": "ticked", "now": "soon"}, r"expected a number, got str @ \$.event.now"),
        ({"t": "ticked"}, r"required field missing @ \$.event.now"),
        ({"t": "ticked", "now": 1.0, "extra": 1}, r"extra fields found \(extra\)"),
        ({"t": "tickd", "now": 1.0}, r"unknown type tag 'tickd'"),
        ({"now": 1.0}, r"unknown type tag None"),
        (
            {"t": "runtime-probed", "runtime": "r", "url": "u", "healthy": 1, "detail": ""},
            "expected true or false",
        ),
        (
            {"t": "source-unavailable", "source": "kubeai", "status": "failing", "detail": ""},
            "is not a SourceKind",
        ),
        ({"t": "object-upserted", "source": "pods", "object": []}, "expected an object, got list"),
    ],
)
def test_reading_is_strict_and_says_why(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(wire.LogFormatError, match=message):
        wire.structure_event(raw)


def test_envelope_checks() -> None:
    with pytest.raises(wire.LogFormatError, match="not JSON"):
        wire.parse_line(b'{"seq": 1,')
    with pytest.raises(wire.LogFormatError, match="unknown record kind 'note'"):
        wire.parse_line(b'{"seq": 1, "ts": "x", "k": "note"}')
    with pytest.raises(wire.LogFormatError, match="event record: missing event; unknown evnt"):
        wire.parse_line(b'{"seq": 1, "ts": "x", "k": "event", "evnt": {}}')
    with pytest.raises(wire.LogFormatError, match="seq must be a non-negative integer"):
        wire.parse_line(b'{"seq": "1", "ts": "x", "k": "event", "event": {}}')


def test_the_header_holds_the_decision_config_and_refuses_secrets() -> None:
    config = CatalogConfig()
    env = wire.config_env(config)
    assert env == config.as_env()
    assert CatalogConfig.from_env(env) == config
    with_credentials = attrs.evolve(config, litellm_base_url="http://admin:hunter2@litellm.ai:4000")
    with pytest.raises(wire.UnsafeConfigError, match="LITELLM_BASE_URL carries credentials"):
        wire.config_env(with_credentials)
    unnormalised = attrs.evolve(config, default_chat_model="  spaced  ")
    with pytest.raises(wire.UnsafeConfigError, match="does not read back"):
        wire.config_env(unnormalised)


# The fingerprint of today's CatalogState, written out: a change of the state's shape (a field, a type, an
# enum value) changes it, and must come with a new value here, a snapshot migration or a new example log
# (examples/event-log.jsonl carries this value in its header). The shapes before it that snapshots are
# still read from are wire.READABLE_OLDER_STATE_SCHEMAS (test_cli: a log written before gates were recorded).
STATE_SCHEMA_OF_THIS_VERSION = "0e062acd20b071ec"


def test_state_schema_is_a_stable_fingerprint_of_the_state_shape() -> None:
    assert wire.state_schema() == wire.STATE_SCHEMA == STATE_SCHEMA_OF_THIS_VERSION
    example = Path(__file__).parents[2] / "examples" / "event-log.jsonl"
    with example.open("rb") as log:
        assert json.loads(log.readline())["state_schema"] == STATE_SCHEMA_OF_THIS_VERSION


def _walk(tp: Any) -> list[Any]:
    out = [tp]
    for arg in get_args(tp):
        out += _walk(arg)
    return out


def test_every_type_in_events_commands_and_state_has_a_strict_hook() -> None:
    """No field type falls back to a lenient default (e.g. str(x) for a str field)."""
    todo: list[Any] = [*wire.EVENT_TAGS, *wire.COMMAND_TAGS, type(initial_state(CatalogConfig()))]
    seen: set[Any] = set()
    while todo:
        cls = todo.pop()
        if cls in seen or not attrs.has(cls):
            continue
        seen.add(cls)
        hints = typing.get_type_hints(cls)
        for f in attrs.fields(cls):
            for tp in _walk(hints[f.name]):
                if tp in (str, int, float, bool):
                    with pytest.raises(wire.LogFormatError):
                        wire._structure([1, 2] if tp is not bool else "yes", tp, "$")
                if attrs.has(tp):
                    todo.append(tp)


def test_the_example_log_is_valid_against_the_schema(example_log: Path) -> None:
    with open(example_log, "rb") as f:
        for number, line in enumerate(f, 1):
            errors = list(VALIDATOR.iter_errors(orjson.loads(line)))
            assert not errors, f"line {number}: {errors[0].message}"


def test_a_header_written_before_the_burst_rule_replays_without_it() -> None:
    env = CatalogConfig().as_env()
    older = {k: v for k, v in env.items() if not k.startswith("CATALOG_LITELLM_BURST_")}
    header = wire.Header(
        seq=0, ts="t", service_version="0", run="r", starts_run=True, origin="log",
        state_schema=wire.STATE_SCHEMA, snapshot_every=1, config=older,
    )  # fmt: skip
    assert header.catalog_config().litellm_burst_rows == 0  # decided as the code of its day did
    assert attrs.evolve(header, config=env).catalog_config() == CatalogConfig()
