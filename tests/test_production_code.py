"""What ships is production code: no test doubles and no project history in the shipped packages."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ("catalog_core", "contracts", "adapters", "app", "model_catalog")
# A comment gives the reason; which issue asked for a change is the commit's and the tracker's to say.
ISSUE_REFERENCE = re.compile(r"\b[Ii]ssues? #?\d+\b|\(#\d+\)")


def _shipped_sources() -> list[Path]:
    return sorted(p for package in SHIPPED for p in (ROOT / package).rglob("*.py"))


def test_the_shipped_packages_are_found() -> None:
    assert len(_shipped_sources()) > 50


def test_no_test_double_ships_in_a_production_package() -> None:
    doubles = []
    for path in _shipped_sources():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef) and node.name.startswith(("Fake", "Stub", "Mock")):
                doubles.append(f"{path.relative_to(ROOT)}:{node.lineno}: class {node.name}")
    assert doubles == [], "test doubles belong in tests/ (tests/fakes/): " + "; ".join(doubles)


def test_no_issue_number_in_production_code() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _shipped_sources()
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if ISSUE_REFERENCE.search(line)
    ]
    assert found == [], "give the reason, not the issue number:\n" + "\n".join(found)


def test_the_checks_see_what_they_look_for() -> None:
    assert ISSUE_REFERENCE.search("a bound (issue 15, P5)")
    assert ISSUE_REFERENCE.search("see #12 (#12)")
    assert not ISSUE_REFERENCE.search("an issuer 15 of tokens; P5")
