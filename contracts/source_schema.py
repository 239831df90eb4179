"""The one generated schema: everything the published schemas say about which sources exist.

``contracts/schemas/sources.schema.json`` is written from the registry by ``just generate``
(``app/generated.py``); the other schemas ``$ref`` it, so a new source or watched kind regenerates this one
file. A test checks that the committed file is what this module generates.
"""

from __future__ import annotations

import json
from typing import Any

from catalog_core import registry
from catalog_core.events import SourceKind
from catalog_core.values import ID_PREFIX, Source


def sources_schema() -> dict[str, Any]:
    families = sorted({spec.id_family for spec in registry.SPECS})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://magicstick.dev/schemas/model-catalog/sources.schema.json",
        "title": "The sources model-catalog knows, generated from catalog_core/registry.py: `just generate`",
        "$defs": {
            "SourceKind": {
                "description": "an event's source (the event log)",
                "enum": [kind.value for kind in SourceKind],
            },
            "Source": {
                "description": "where a route comes from: the source of a routes.json record",
                "enum": [source.value for source in Source],
            },
            "RouteId": {
                "description": "the LiteLLM id of a route the catalog owns: ai-appliance-<id family>-<slug>",
                "type": "string",
                "pattern": f"^{ID_PREFIX}({'|'.join(families)})-",
            },
        },
    }


def text() -> str:
    return json.dumps(sources_schema(), indent=2) + "\n"
