"""The committed files (and parts of files) written from the declarations, and ``just generate`` (this
module run as a script), which rewrites every one of them.

Each is derived from one declaration, so a change to the declaration is followed by ``just generate``
and never by a hand edit of these files; ``tests/test_generated.py`` fails, naming the command and the
file, when the committed text is not what the declarations give. A part of a file (``docs/rbac.md``'s
table) is rewritten in place between its marker and the end of the table, the prose around it is the
file's own.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import attrs

from app.placeholder import placeholder_yaml
from catalog_core.config import CatalogConfig
from contracts import rbac, source_schema

COMMAND = "just generate"
REPO = Path(__file__).resolve().parents[1]
RBAC_TABLE_MARKER = "<!-- rbac-table:"


@attrs.frozen
class Generated:
    """One committed file and how to write it: ``write`` turns the committed text into the generated one."""

    path: str  # relative to the repository
    source: str  # the declaration it is generated from
    write: Callable[[str], str]

    def expected(self, root: Path = REPO) -> str:
        file = root / self.path
        return self.write(file.read_text() if file.exists() else "")

    def is_stale(self, root: Path = REPO) -> bool:
        file = root / self.path
        return not file.exists() or file.read_text() != self.expected(root)


def _rbac_table(current: str) -> str:
    """docs/rbac.md with the rows of its table (after the marker, the header and the separator) replaced
    by ``contracts/rbac.GRANTS`` printed with the default names."""
    lines = current.splitlines(keepends=True)
    marker = next((i for i, line in enumerate(lines) if line.startswith(RBAC_TABLE_MARKER)), None)
    if marker is None:
        raise ValueError(f"docs/rbac.md has no line starting with {RBAC_TABLE_MARKER!r} above its table")
    start = marker + 3  # the marker, the header, the separator
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    rows = [f"{row}\n" for row in rbac.table_rows(rbac.DEFAULT_SETTINGS, rbac.GRANTS)]
    return "".join([*lines[:start], *rows, *lines[end:]])


GENERATED: tuple[Generated, ...] = (
    Generated(
        "contracts/schemas/sources.schema.json",
        "catalog_core/registry.SPECS and every SourceKind (catalog_core/kinds.KINDS)",
        lambda _: source_schema.text(),
    ),
    Generated("docs/rbac.md", "contracts/rbac.GRANTS (the table's rows)", _rbac_table),
    Generated(
        "deploy/bootstrap/configmap-ai-model-catalog.yaml",
        "catalog_core/catalog_files.FILES (the placeholder, `model-catalog placeholder` with the defaults)",
        lambda _: placeholder_yaml(CatalogConfig()),
    ),
)


def main(argv: list[str]) -> int:
    """Rewrite every generated file under the repository (or ``argv[0]``); print the ones that changed."""
    root = Path(argv[0]) if argv else REPO
    for generated in GENERATED:
        if generated.is_stale(root):
            text = generated.expected(root)
            (root / generated.path).write_text(text)
            print(f"wrote {generated.path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
