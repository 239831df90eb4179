"""No module of the project imports a module that (transitively) imports it.

import-linter's layers keep the packages in order; inside a package, a circle of imports (a late,
function-level import included: grimp sees those) means neither side can be read or changed alone.
This fails on any such circle, naming it.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = tuple(
    name
    for name in ("catalog_core", "contracts", "adapters", "app", "model_catalog", "bench")
    if (ROOT / name / "__init__.py").is_file()
)


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """A circle through each group of modules that import each other (a strongly connected component of
    more than one module): [a, b, ..., a]."""
    modules = sorted(m for m in graph.modules if m.split(".")[0] in PACKAGES)
    imports = {
        m: sorted(i for i in graph.find_modules_directly_imported_by(m) if i in graph.modules)
        for m in modules
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        # Tarjan's algorithm, iterative: the graph is deeper than the recursion limit allows for.
        work = [(root, 0)]
        while work:
            node, edge = work.pop()
            if edge == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = imports.get(node, [])
            if edge < len(targets):
                work.append((node, edge + 1))
                target = targets[edge]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return [_circle(graph, group) for group in groups]


def _circle(graph: grimp.ImportGraph, group: list[str]) -> list[str]:
    """One circle through ``group``'s first module: the shortest way from it to a member that imports it,
    and back ([a, b, ..., a]). A way between two members of a group never leaves the group."""
    first = group[0]
    importers = [m for m in group if first in graph.find_modules_directly_imported_by(m)]
    chains = [graph.find_shortest_chain(importer=first, imported=m) for m in importers]
    chain = min((c for c in chains if c is not None), key=len)
    return [*chain, first]


def _explain(graph: grimp.ImportGraph, circle: list[str]) -> str:
    lines = []
    for importer, imported in itertools.pairwise(circle):
        details = graph.get_import_details(importer=importer, imported=imported)
        where = ", ".join(f"line {d['line_number']}" for d in details) or "?"
        lines.append(f"    {importer} -> {imported} ({where})")
    return " -> ".join(circle) + "\n" + "\n".join(lines)


def _graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, cache_dir=None)


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return _graph()


def test_no_module_of_the_project_imports_itself_through_others(graph: grimp.ImportGraph) -> None:
    found = cycles(graph)
    assert not found, "import cycles (a late import counts too):\n" + "\n".join(
        _explain(graph, c) for c in found
    )


def test_an_import_that_closes_a_circle_is_found_and_named() -> None:
    """The check itself: an import of the registry from trim (which the registry imports) is a circle."""
    graph = _graph()
    graph.add_import(
        importer="catalog_core.trim", imported="catalog_core.registry", line_number=1, line_contents=""
    )
    found = cycles(graph)
    assert len(found) == 1, found
    circle = found[0]
    assert circle[0] == circle[-1] and {"catalog_core.trim", "catalog_core.registry"} <= set(circle)
    assert "catalog_core.trim -> catalog_core.registry" in _explain(graph, circle)
