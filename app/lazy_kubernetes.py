"""Load kubernetes-asyncio's generated client lazily: a class is imported when it is first used.

``import kubernetes_asyncio.client`` runs a generated ``__init__`` that imports every API class and all
~770 model classes (about 870 modules, 19-21 MiB of RSS and a few hundred milliseconds of start, issue
15), and its own package ``__init__`` adds the dynamic client, ``stream``, ``utils`` and ``watch``. The
controller sends its requests with httpx (``adapters/kube/client.py``) and loads kubernetes-asyncio only to
read a kubeconfig whose user authenticates through a program or a provider (``app/kube_client.py``): then
it needs ``Configuration`` and the kubeconfig loaders, which import ``ApiClient``, not the ~770 models.

:func:`defer_generated_client` puts lazy stand-ins for those four package modules in ``sys.modules``
before anything imports them. Each stand-in is the real package (same spec, ``__path__``, ``__file__``)
minus the execution of its ``__init__``: the names that ``__init__`` would bind are read from its source
(an ``ast`` pass, ~10 ms), and a module ``__getattr__`` (PEP 562) imports one when it is first asked for,
so ``from kubernetes_asyncio.client import CoreV1Api``, ``client.V1Lease`` and the deserializer's
``getattr(kubernetes_asyncio.client.models, "V1ObjectMeta")`` behave as before. An ``__init__`` holding
anything but imports, literal assignments and docstrings (another version of the library) is left to
load eagerly, as is a package something imported before us.
"""

from __future__ import annotations
import __future__

import ast
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence
from typing import Any

# Parents before children: a child's spec is looked up on its parent's __path__.
GENERATED_PACKAGES = (
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.api",
    "kubernetes_asyncio.client.models",
)

Binding = tuple[str, str | None]  # (module to import, attribute of it; None: the module itself)


class UnsupportedInitError(Exception):
    """The package's ``__init__`` does more than bind imported names and literals."""


def init_bindings(source: str, package: str) -> tuple[dict[str, Binding], dict[str, Any]]:
    """What a package ``__init__`` binds: names to import on first use, and literal values."""
    bindings: dict[str, Binding] = {}
    literals: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom):
            if node.module == "__future__":  # binds the feature, as any import does
                literals.update({a.asname or a.name: getattr(__future__, a.name) for a in node.names})
                continue
            module = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            for alias in node.names:
                if alias.name == "*":
                    raise UnsupportedInitError(f"{package}: from {module} import *")
                bindings[alias.asname or alias.name] = (module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname is None:  # binds the top-level package, not what it names
                    raise UnsupportedInitError(f"{package}: import {alias.name}")
                bindings[alias.asname] = (alias.name, None)
        elif isinstance(node, ast.Assign) and [type(t) for t in node.targets] == [ast.Name]:
            target = node.targets[0].id  # type: ignore[attr-defined]
            try:
                literals[target] = ast.literal_eval(node.value)
            except ValueError as exc:
                raise UnsupportedInitError(f"{package}: {target} is not a literal") from exc
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring
        else:
            raise UnsupportedInitError(f"{package}: {type(node).__name__} at line {node.lineno}")
    return bindings, literals


def lazy_package(
    spec: importlib.machinery.ModuleSpec, bindings: dict[str, Binding], literals: dict[str, Any]
) -> types.ModuleType:
    """The package of ``spec`` with its ``__init__`` not run: ``bindings`` are imported on first use."""
    module = importlib.util.module_from_spec(spec)  # __spec__, __path__, __file__, __loader__ as usual
    module.__dict__.update(literals)

    def load_on_first_use(name: str) -> Any:
        try:
            target, attribute = bindings[name]
        except KeyError:
            # Not bound by __init__: the import system goes on to look for a submodule of that name.
            raise AttributeError(f"module {spec.name!r} has no attribute {name!r}") from None
        value = importlib.import_module(target)
        if attribute is not None:
            value = getattr(value, attribute)
        setattr(module, name, value)  # the next lookup is an ordinary attribute
        return value

    def names() -> list[str]:
        return sorted({*module.__dict__, *bindings})

    module.__dict__.update(__getattr__=load_on_first_use, __dir__=names)  # PEP 562
    return module


def _spec(name: str, parent_path: Sequence[str] | None) -> importlib.machinery.ModuleSpec | None:
    if parent_path is None:
        return importlib.util.find_spec(name)  # a top-level name: imports nothing
    return importlib.machinery.PathFinder.find_spec(name, list(parent_path))


def defer_generated_client(packages: Sequence[str] = GENERATED_PACKAGES) -> bool:
    """Install the lazy stand-ins; False (and nothing changed) when any of ``packages`` is already
    imported, cannot be found with its source, or has an ``__init__`` this cannot stand in for."""
    if any(name in sys.modules for name in packages):
        return False
    prepared: list[tuple[importlib.machinery.ModuleSpec, dict[str, Binding], dict[str, Any]]] = []
    paths: dict[str, Sequence[str] | None] = {}
    for name in packages:
        parent = name.rpartition(".")[0]
        spec = _spec(name, paths.get(parent) if parent else None)
        if spec is None or spec.submodule_search_locations is None:
            return False
        loader = spec.loader
        source = loader.get_source(name) if isinstance(loader, importlib.abc.InspectLoader) else None
        if source is None:
            return False
        try:
            bindings, literals = init_bindings(source, name)
        except (UnsupportedInitError, SyntaxError):
            return False
        paths[name] = spec.submodule_search_locations
        prepared.append((spec, bindings, literals))
    for spec, bindings, literals in prepared:
        module = lazy_package(spec, bindings, literals)
        sys.modules[spec.name] = module
        parent, _, child = spec.name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)  # as the import system binds a submodule
    return True
