"""Safe reading of raw Kubernetes objects (plain dicts from the API or from files).

Nothing here raises on a malformed object: a missing or mistyped field reads
as ``None`` (or an empty mapping), and the named constructors decide what that
means.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EMPTY: Mapping[str, Any] = {}


def path(obj: Any, *keys: str) -> Any:
    for key in keys:
        # ``type(...) is dict`` first: the ABC check alone is a measurable part of parsing.
        if type(obj) is not dict and not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def mapping(obj: Any, *keys: str) -> Mapping[str, Any]:
    value = path(obj, *keys)
    return value if type(value) is dict or isinstance(value, Mapping) else EMPTY


def string(obj: Any, *keys: str) -> str | None:
    value = path(obj, *keys)
    return value if isinstance(value, str) else None


def string_map(obj: Any, *keys: str) -> dict[str, str]:
    """Labels or annotations: string values only."""
    return {k: v for k, v in mapping(obj, *keys).items() if isinstance(k, str) and isinstance(v, str)}


def name_of(obj: Any) -> str:
    if type(obj) is dict and type(meta := obj.get("metadata")) is dict:  # the usual shape, read directly
        name = meta.get("name")
        return name.strip() if isinstance(name, str) else ""
    return (string(obj, "metadata", "name") or "").strip()


def uid_of(obj: Any) -> str:
    return string(obj, "metadata", "uid") or ""


def namespace_of(obj: Any) -> str:
    return string(obj, "metadata", "namespace") or ""


def resource_version_of(obj: Any) -> str:
    return string(obj, "metadata", "resourceVersion") or ""


def is_true_label(labels: Mapping[str, str], key: str) -> bool:
    return labels.get(key, "").strip().lower() == "true"
