"""Reading Kubernetes objects from files the way kubectl writes them (YAML streams, JSON objects or Lists)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml


class InputError(Exception):
    """An unreadable input: the message names the file and the reason."""


def read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from exc


def _documents(path: str, text: str) -> Iterator[Any]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            yield json.loads(text)
        except ValueError as exc:
            raise InputError(f"{path}: invalid JSON: {exc}") from exc
        return
    try:
        yield from yaml.safe_load_all(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from exc


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
            objects.extend(_expand(path, index, doc))
    return objects


def read_model_info(path: str) -> list[dict[str, Any]]:
    """A saved ``GET /model/info`` response: ``{"data": [...]}``."""
    text = read_text(path)
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path}: invalid JSON: {exc}") from exc
    rows = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise InputError(f'{path}: not a /model/info response (expected {{"data": [...]}})')
    return rows
