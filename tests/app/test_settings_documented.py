"""Every environment variable the controller reads is a row of README's configuration table, and every row
names one it reads: a setting nobody can find, or a documented one that does nothing, fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Where settings are read: the catalog's own (behaviour §10) and the service's (``model-catalog run``).
READERS = (ROOT / "catalog_core" / "config.py", ROOT / "app" / "settings.py")
# Read outside those modules, by the libraries they configure; documented all the same.
READ_ELSEWHERE = frozenset({"KUBECONFIG", "OTEL_EXPORTER_OTLP_ENDPOINT"})


def _read() -> set[str]:
    names: set[str] = set()
    for path in READERS:
        text = path.read_text()
        names |= set(
            re.findall(r'(?:reader\.\w+|text|number|boolean|merged\.get)\(\s*"([A-Z][A-Z0-9_]+)"', text)
        )
    return names


def _documented() -> tuple[set[str], list[tuple[str, str]]]:
    """The names the table spells out, and its abbreviations (``..._FILES`` beside
    ``CATALOG_EVENT_LOG_MAX_BYTES``) as (the row's first two words, suffix)."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("### Configuration") :]
    table = table[: table.index("\n\n", table.index("| variable |"))]
    names: set[str] = set()
    short: list[tuple[str, str]] = []
    for row in re.findall(r"^\| ([^|]+) \|", table, flags=re.M)[1:]:  # after the header
        spelled = re.findall(r"`([A-Z0-9_.]+)`", row)
        prefix = "_".join(spelled[0].split("_")[:2])
        names |= {n for n in spelled if not n.startswith("...")}
        short += [(prefix, n[3:]) for n in spelled if n.startswith("...")]
    return names, short


def test_every_setting_read_is_documented_and_every_documented_one_is_read():
    read, (documented, short) = _read(), _documented()

    def abbreviated(name: str) -> bool:
        return any(name.startswith(prefix) and name.endswith(suffix) for prefix, suffix in short)

    assert {n for n in read - documented if not abbreviated(n)} == set(), (
        "not in README's configuration table"
    )
    assert documented - read - READ_ELSEWHERE == set(), "in README's configuration table but never read"
    assert [s for s in short if not any(n.startswith(s[0]) and n.endswith(s[1]) for n in read)] == []
