"""The one generated schema: everything the published schemas say about which sources exist.

``contracts/schemas/sources.schema.json`` is written from the registry by ``just schemas`` (this module
run as a script); the other schemas ``$ref`` it, so a new source regenerates this one file. A test checks
that the committed file is what this module generates.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from catalog_core import registry
from catalog_core.events import SourceKind
from catalog_core.values import ID_PREFIX, Source

FILE = Path(__file__).resolve().parent / "schemas" / "sources.schema.json"


def sources_schema() -> dict[str, Any]:
    families = sorted({spec.id_family for spec in registry.SPECS})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://magicstick.dev/schemas/model-catalog/sources.schema.json",
        "title": "The sources model-catalog knows. Generated from catalog_core/registry.py by `just schemas`",
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


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else FILE
    path.write_text(text())
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
