"""Load the JSON Schemas in contracts/schemas with their cross references resolved."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMAS = Path(__file__).resolve().parents[2] / "contracts" / "schemas"


@cache
def _registry() -> Registry:
    resources = []
    for path in SCHEMAS.glob("*.json"):
        doc = json.loads(path.read_text())
        resource = Resource.from_contents(doc)
        resources += [(path.name, resource), (doc["$id"], resource)]
    return Registry().with_resources(resources)


def validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=_registry())


def errors(name: str, instance: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator(name).iter_errors(instance)
    ]
