"""Every declaration of ``catalog_core/external_fields.py`` does what it says, read from the declarations
themselves, so a field added there is held to it with no test of its own: each spelling reaches LiteLLM as
its parameter, a restart against what was written writes nothing (the zero-writes promise), a bad value
keeps the last good route or is dropped as its kind says, and the published schema of models.json and the
ModelActivation CRD accept every spelling. Each failure names the declaration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalog_core import external_fields
from catalog_core.commands import LiteLLMCommand
from catalog_core.external_fields import FIELDS, ExternalField, Value
from tests.core import builders as b
from tests.core.harness import Cluster

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "contracts" / "schemas" / "models-json-item.schema.json"
CRD = REPO / "contracts" / "crds" / "modelactivation.yaml"
GOOD: dict[Value, Any] = {Value.TEXT: "2024-06-01", Value.RATE: 7}
# What each kind of value does when bad: TEXT keeps the last good route (an error), RATE is dropped.
BAD: dict[Value, Any] = {Value.TEXT: "os.environ/AZURE_API_VERSION", Value.RATE: "lots"}
SCHEMA_TYPE: dict[Value, dict[str, Any]] = {
    Value.TEXT: {"type": "string"},
    Value.RATE: {"$ref": "#/$defs/positiveInt"},
}
CRD_TYPE: dict[Value, dict[str, Any]] = {
    Value.TEXT: {"type": "string"},
    Value.RATE: {"x-kubernetes-int-or-string": True},
}


def _cluster() -> Cluster:
    """A field may name any provider: the test's API base is one LiteLLM may send its own credentials to."""
    return Cluster(CATALOG_AMBIENT_CREDENTIAL_API_BASES="https://api.example.com")


def _name(f: ExternalField) -> str:
    return "external_fields." + next(k for k, v in vars(external_fields).items() if v is f)


def _item() -> dict[str, Any]:
    return {"name": "gpt", "model": "azure/gpt-4o", "apiBase": "https://api.example.com/v1", "apiKey": "sk-1"}


def _with(spelling: tuple[str, ...], value: Any) -> dict[str, Any]:
    item = _item()
    if len(spelling) == 1:
        item[spelling[0]] = value
    else:
        item.setdefault(spelling[0], {})[spelling[1]] = value
    return item


def _params(c: Cluster) -> dict[str, Any]:
    (row,) = c.world.rows.values()
    return dict(row["litellm_params"])


def test_every_declared_field_is_listed_in_fields():
    declared = {_name(v) for v in vars(external_fields).values() if isinstance(v, ExternalField)}
    listed = {_name(f) for f in FIELDS}
    assert declared == listed, (
        f"declared in catalog_core/external_fields.py, not in FIELDS: {declared - listed}"
    )


SPELLINGS = [(f, s) for f in FIELDS for s in f.spellings]


@pytest.mark.parametrize(
    ("f", "spelling"), SPELLINGS, ids=lambda x: ".".join(x) if isinstance(x, tuple) else ""
)
def test_each_spelling_reaches_litellm_as_the_declared_parameter(f, spelling):
    c = _cluster()
    c.start(b.external_configmap([_with(spelling, GOOD[f.value])]))
    assert _params(c).get(f.param) == GOOD[f.value], (
        f"{_name(f)}: models.json {'.'.join(spelling)} does not reach LiteLLM as {f.param}"
    )


@pytest.mark.parametrize("f", FIELDS, ids=lambda f: f.param)
def test_a_restart_against_the_written_row_writes_nothing(f):
    first = _cluster()
    configmap = b.external_configmap([_with(f.spellings[0], GOOD[f.value])])
    first.start(configmap)
    restarted = _cluster()
    commands = restarted.start(configmap, rows=list(first.world.rows.values()))
    writes = [type(x).__name__ for x in commands if isinstance(x, LiteLLMCommand)]
    assert not writes, (
        f"{_name(f)}: a restart rewrites the row ({writes}): is {f.param} read back "
        "(sources/litellm_row.PARAM_KEYS) as its read_back says?"
    )


@pytest.mark.parametrize("f", FIELDS, ids=lambda f: f.param)
def test_a_bad_value_does_what_its_kind_says(f):
    c = _cluster()
    c.start(b.external_configmap([_with(f.spellings[0], GOOD[f.value])]))
    good_row = _params(c)
    c.apply(b.external_configmap([_with(f.spellings[0], BAD[f.value])]))
    record = c.record("gpt")
    if f.value is Value.TEXT:
        assert record["state"] == "error" and record.get("servingLastGood"), (
            f"{_name(f)}: a bad value must keep the last good route (reasons.KEEPS_LAST_GOOD): {record}"
        )
        assert _params(c) == good_row, f"{_name(f)}: the last good row was rewritten"
    else:
        assert record["state"] == "published", f"{_name(f)}: a bad value must be dropped, not fail: {record}"
        assert f.param not in _params(c), f"{_name(f)}: the bad value reached LiteLLM"
        fields = [w["field"] for w in record.get("warnings", [])]
        assert ".".join(f.spellings[0]) in fields, f"{_name(f)}: the dropped value is not reported: {record}"


def _schema_at(doc: dict[str, Any], spelling: tuple[str, ...]) -> Any:
    props = doc["properties"]
    for part in spelling[:-1]:
        props = props.get(part, {}).get("properties", {})
    return props.get(spelling[-1])


@pytest.mark.parametrize(
    ("f", "spelling"), SPELLINGS, ids=lambda x: ".".join(x) if isinstance(x, tuple) else ""
)
def test_the_published_schema_and_the_crd_accept_each_spelling(f, spelling):
    try:
        schema = json.loads(SCHEMA.read_text())
    except json.JSONDecodeError as exc:
        pytest.fail(
            f"{_name(f)}: {SCHEMA.relative_to(REPO)} is not JSON ({exc}), so it describes no spelling"
        )
    assert _schema_at(schema, spelling) == SCHEMA_TYPE[f.value], (
        f"{_name(f)}: {SCHEMA.relative_to(REPO)} must describe {'.'.join(spelling)} as {SCHEMA_TYPE[f.value]}"
    )
    crd = yaml.safe_load(CRD.read_text())
    (version,) = crd["spec"]["versions"]
    external = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["external"]
    assert _schema_at(external, spelling) == CRD_TYPE[f.value], (
        f"{_name(f)}: {CRD.relative_to(REPO)} spec.external must describe {'.'.join(spelling)} as "
        f"{CRD_TYPE[f.value]}"
    )


@pytest.mark.parametrize("f", [f for f in FIELDS if f.read_back], ids=lambda f: f.param)
def test_a_read_back_parameter_edited_by_hand_is_written_again(f):
    c = _cluster()
    c.start(b.external_configmap([_with(f.spellings[0], GOOD[f.value])]))
    (row,) = c.world.rows.values()
    row["litellm_params"][f.param] = BAD[f.value]  # someone edits LiteLLM
    c.rows_changed()
    assert _params(c).get(f.param) == GOOD[f.value], (
        f"{_name(f)}: read_back, yet a hand edit of {f.param} stays (sources/litellm_row.PARAM_KEYS)"
    )
