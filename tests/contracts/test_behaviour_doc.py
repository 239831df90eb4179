"""docs/behaviour.md is what the code cites: every citation resolves, and every reason code is explained."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from catalog_core.reasons import Reason, state_of

ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "behaviour.md").read_text()
SECTIONS = set(re.findall(r"^#+ (§[0-9.]*[0-9])\b", DOC, flags=re.M))


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    suffixes = {".py", ".md", ".yaml", ".yml", ".json", ".toml"}
    return [ROOT / p for p in listed.stdout.split() if Path(p).suffix in suffixes]


def test_every_citation_names_a_section_of_the_document() -> None:
    unresolved = []
    for path in _tracked_text_files():
        text = path.read_text(errors="replace")
        for cited in re.findall(r"behaviour ((?:§[0-9.]*[0-9](?:, )?)+)", text):
            unresolved += [(path.name, s) for s in re.findall(r"§[0-9.]*[0-9]", cited) if s not in SECTIONS]
    assert unresolved == []


def test_no_citation_of_a_document_outside_the_repository() -> None:
    # The contract sections (A.1 ... C.11) were in a document the repository does not hold.
    stale = [
        f"{path.relative_to(ROOT)}: {m.group()}"
        for path in _tracked_text_files()
        if path.name not in ("behaviour.md", "requirements.lock")
        for m in re.finditer(r"\b[Cc]ontracts? [ABC]\.[0-9]+", path.read_text(errors="replace"))
    ]
    assert stale == []


def test_every_reason_code_is_explained_with_its_state() -> None:
    rows = dict(re.findall(r"^\| `(\w+)` \| (\w+) \|", DOC, flags=re.M))
    assert set(rows) == {r.value for r in Reason}
    assert rows == {r.value: state_of(r).value for r in Reason}
