"""Reading Kubernetes objects from files the way kubectl writes them (YAML streams, JSON objects or Lists).

Every way a file can be unreadable — bad syntax, a number Python will not convert, nesting deeper than
the parsers or the later stages can follow — is an ``InputError`` naming the file, never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

# What YAML aliases (*name) may add to a document, in values and string characters: anchors that share
# defaults between a few hundred objects add far less; "billion laughs" (646 bytes that expand to more
# than 2.4 GB) far more.
MAX_ALIAS_GROWTH = 1_000_000
# kubectl's objects nest a few dozen levels at most. Deeper input is refused up front: PyYAML's composer
# recurses ~3 frames a level (RecursionError from ~330), copy.deepcopy 2 (~490), orjson stops at 254.
MAX_DEPTH = 100


class InputError(Exception):
    """An unreadable input: the message names the file and the reason."""


def read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from exc


def _too_deep(path: str, index: int | None = None) -> InputError:
    where = f"{path}: document {index + 1}" if index is not None else path
    return InputError(f"{where} is nested more than {MAX_DEPTH} levels deep")


def _first_clause(exc: ValueError) -> str:
    """``int()`` and ``datetime`` messages, without the advice ``use sys.set_int_max_str_digits()``."""
    return str(exc).split(";")[0]


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        return f"{exc.problem}{where}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _json(path: str, text: str) -> Any:
    """One JSON document; ``json.JSONDecodeError`` is left to the caller (it may try YAML instead)."""
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise _too_deep(path) from exc
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # an integer longer than int() converts
        raise InputError(f"{path}: invalid JSON: {_first_clause(exc)}") from exc


def _alias_growth(node: yaml.Node) -> int | None:
    """How much larger a YAML document's aliases make it: the values and string characters of the
    document with every alias expanded, less those of its own nodes; None when an alias contains itself
    (a document nested without end). Found on the node graph, without expanding anything."""
    own: dict[int, int] = {}  # node -> its own weight (1, plus its characters for a scalar)
    expanded: dict[int, int] = {}  # node -> the weight of its whole expansion
    visiting: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:
        current, children_done = stack.pop()
        key = id(current)
        if isinstance(current, yaml.ScalarNode):
            own[key] = expanded[key] = 1 + len(current.value)
            continue
        if isinstance(current, yaml.MappingNode):
            children = [part for pair in current.value for part in pair]
        else:
            children = list(current.value)
        if children_done:
            visiting.discard(key)
            own[key] = 1
            expanded[key] = 1 + sum(expanded[id(child)] for child in children)
            continue
        if key in expanded:
            continue
        if key in visiting:
            return None
        visiting.add(key)
        stack.append((current, True))
        for child in children:
            if id(child) in visiting:
                return None
            if id(child) not in expanded:
                stack.append((child, False))
    return expanded[id(node)] - sum(own.values())


def _yaml_documents(path: str, text: str) -> Iterator[Any]:
    """Each document, composed, checked for alias growth, then constructed (``yaml.safe_load_all``'s
    steps, with the check between them)."""
    loader = yaml.SafeLoader(text)
    try:
        yield from _checked_yaml_documents(path, loader)
    finally:
        loader.dispose()


def _checked_yaml_documents(path: str, loader: yaml.SafeLoader) -> Iterator[Any]:
    index = 0
    while True:
        try:
            if not loader.check_node():
                return
            node = loader.get_node()
            if node is None:  # an empty document
                yield None
                index += 1
                continue
            growth = _alias_growth(node)
            if growth is None:  # an alias that contains itself nests without end
                raise _too_deep(path, index)
            if growth > MAX_ALIAS_GROWTH:
                raise InputError(
                    f"{path}: document {index + 1}: its aliases (*name) expand it by more than "
                    f"{MAX_ALIAS_GROWTH:,} values and characters; write the repeated parts out"
                )
            doc = loader.construct_document(node)
        except yaml.YAMLError as exc:
            raise InputError(f"{path}: invalid YAML: {_yaml_problem(exc)}") from exc
        except RecursionError as exc:
            raise _too_deep(path, index) from exc
        except ValueError as exc:  # a value the constructor cannot convert: 5,000 digits, 2001-02-30
            raise InputError(f"{path}: invalid YAML: document {index + 1}: {_first_clause(exc)}") from exc
        yield doc
        index += 1


def _documents(path: str, text: str) -> Iterator[Any]:
    if not text.lstrip().startswith(("{", "[")):
        yield from _yaml_documents(path, text)
        return
    try:
        yield _json(path, text)
        return
    except json.JSONDecodeError as exc:
        json_error = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    # Flow-style YAML (``{apiVersion: v1, kind: List, items: []}``) starts like JSON, too.
    try:
        docs = list(_yaml_documents(path, text))
    except InputError as exc:
        yaml_error = str(exc).removeprefix(f"{path}: ").removeprefix("invalid YAML: ")
        raise InputError(f"{path}: invalid JSON: {json_error} (read as YAML: {yaml_error})") from exc
    yield from docs


def _nested_deeper_than(doc: Any, limit: int) -> bool:
    """Whether ``doc`` nests more than ``limit`` lists and mappings, found without recursion. YAML anchors
    may share a node (or make a cycle): a node is walked again only when reached deeper than before."""
    deepest: dict[int, int] = {}
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = list(node.values())
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        if deepest.get(id(node), 0) >= depth:
            continue
        deepest[id(node)] = depth
        stack.extend((child, depth + 1) for child in children)
    return False


def _expand(path: str, index: int, doc: Any) -> Iterator[dict[str, Any]]:
    if doc is None:
        return
    if isinstance(doc, list):
        for item in doc:
            yield from _expand(path, index, item)
        return
    if not isinstance(doc, dict):
        raise InputError(f"{path}: document {index + 1} is not a Kubernetes object")
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            yield from _expand(path, index, item)
        return
    meta = doc.get("metadata")
    if not (
        isinstance(kind, str)
        and isinstance(doc.get("apiVersion"), str)
        and isinstance(meta, dict)
        and isinstance(meta.get("name"), str)
    ):
        raise InputError(
            f"{path}: document {index + 1} is not a Kubernetes object (needs apiVersion, kind, metadata.name)"
        )
    yield doc


def read_objects(paths: list[str]) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for path in paths:
        text = read_text(path)
        for index, doc in enumerate(_documents(path, text)):
            if _nested_deeper_than(doc, MAX_DEPTH):
                raise _too_deep(path, index)
            objects.extend(_expand(path, index, doc))
    return objects


def read_model_info(path: str) -> list[dict[str, Any]]:
    """A saved ``GET /model/info`` response: ``{"data": [...]}``."""
    text = read_text(path)
    try:
        doc = _json(path, text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    if _nested_deeper_than(doc, MAX_DEPTH):
        raise _too_deep(path)
    rows = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise InputError(f'{path}: not a /model/info response (expected {{"data": [...]}})')
    return rows
