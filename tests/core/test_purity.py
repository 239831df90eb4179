"""catalog_core imports only the standard library (minus I/O, clock, randomness, logging, env) and attrs."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "catalog_core"
FORBIDDEN_STDLIB = {
    "os", "sys", "time", "datetime", "random", "secrets", "logging", "asyncio", "socket", "subprocess",
    "threading", "multiprocessing", "io", "pathlib", "shutil", "tempfile", "urllib", "http", "uuid", "signal",
}  # fmt: skip
ALLOWED_THIRD_PARTY = {"attrs"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_core_imports_only_pure_stdlib_and_attrs():
    offenders = {}
    for path in CORE.rglob("*.py"):
        for module in _imports(path):
            allowed = (
                module == "catalog_core"
                or module in ALLOWED_THIRD_PARTY
                or module == "__future__"
                or (module in sys.stdlib_module_names and module not in FORBIDDEN_STDLIB)
            )
            if not allowed:
                offenders.setdefault(str(path.relative_to(CORE.parent)), []).append(module)
    assert offenders == {}


def test_core_never_reads_the_environment_or_the_clock():
    for path in CORE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert not names & {"environ", "getenv", "monotonic", "perf_counter", "urandom"}, path
