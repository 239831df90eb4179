"""The routes.json schema names every reason code the core can write (behaviour §7): a reason added to
``catalog_core.reasons`` without the schema (four were, by issue 12) would make valid output look invalid
to anyone validating it."""

from __future__ import annotations

import json

from catalog_core.reasons import Reason
from tests.contracts.schemas import SCHEMAS, errors


def test_the_schema_lists_exactly_the_reason_codes_of_the_core() -> None:
    schema = json.loads((SCHEMAS / "routes.schema.json").read_text())
    listed = set(schema["items"]["properties"]["reason"]["enum"])
    assert listed == {r.value for r in Reason}


def test_a_record_with_a_hardening_reason_is_valid() -> None:
    record = {
        "source": "modelactivation",
        "name": "exfil",
        "logicalName": "exfil",
        "state": "error",
        "reason": "EnvReferenceRejected",
        "message": "litellm.model starts with os.environ/",
    }
    assert errors("routes.schema.json", [record]) == []
