"""The observed ``ConfigMap/ai-model-catalog``: what is published now."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.jsonval import canonical, short_hash
from catalog_core.memo import LastCall
from catalog_core.sources.common import CATALOG_HASH_ANNOTATION, PREVIOUS_HASH_ANNOTATION

READY_KEY = "AI_APPLIANCE_MODEL_CATALOG_READY"
DEFAULT_CHAT_KEY = "AI_APPLIANCE_DEFAULT_CHAT_MODEL"
DEFAULT_EMBEDDING_KEY = "AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL"


# What the API server admits in one ConfigMap: the keys and values of ``data`` (and ``binaryData``)
# together, in bytes (Kubernetes' MaxSecretSize, also applied to ConfigMaps).
CONFIGMAP_DATA_LIMIT = 1024 * 1024


def configmap_data_size(data: Iterable[tuple[str, str]]) -> int:
    return sum(len(key.encode()) + len(value.encode()) for key, value in data)


def data_fingerprint(data: Mapping[str, str]) -> str:
    return _FINGERPRINT(dict(data))  # a copy: the kept argument must not change


# Performance (bench P6): the catalog the plan renders comes back as the watch's echo of its write, whose
# data is fingerprinted again (~40 us for a dozen models: the canonical text of every file and its
# SHA-256); comparing the two dicts costs ~1 us.
_FINGERPRINT: LastCall[dict[str, str], str] = LastCall(
    lambda data: short_hash(canonical(data), 32), same=operator.eq
)


@attrs.frozen
class HeldDefaults:
    """The default chat and embedding models a written catalog holds ("" for none): with ``auto`` (or a
    configured model that is not published), a default stays while it is published (behaviour §5.1)."""

    chat: str = ""
    embedding: str = ""

    @classmethod
    def of(cls, data: Mapping[str, str]) -> HeldDefaults:
        """What ``data`` holds; none for a catalog that is not ready (the bootstrap placeholder)."""
        if data.get(READY_KEY, "").strip().lower() != "true":
            return NO_DEFAULTS
        return cls(data.get(DEFAULT_CHAT_KEY, ""), data.get(DEFAULT_EMBEDDING_KEY, ""))


NO_DEFAULTS = HeldDefaults()


@attrs.frozen
class ObservedCatalog:
    resource_version: str
    catalog_hash: str | None
    fingerprint: str
    ready: bool
    # The hash this catalog replaced, when the controller wrote it over a different one: the catalog that
    # consumers started before this write may still be reading (see rules/rollouts.py).
    previous_hash: str | None = None
    defaults: HeldDefaults = NO_DEFAULTS

    @classmethod
    def from_k8s(cls, obj: Mapping[str, Any]) -> ObservedCatalog:
        data = raw.string_map(obj, "data")
        annotations = raw.string_map(obj, "metadata", "annotations")
        return cls(
            resource_version=raw.resource_version_of(obj),
            catalog_hash=annotations.get(CATALOG_HASH_ANNOTATION),
            fingerprint=data_fingerprint(data),
            ready=data.get(READY_KEY, "").strip().lower() == "true",
            previous_hash=annotations.get(PREVIOUS_HASH_ANNOTATION),
            defaults=HeldDefaults.of(data),
        )


def held_defaults(catalog: ObservedCatalog | None) -> HeldDefaults:
    """The defaults the observed catalog holds (none when there is none)."""
    return catalog.defaults if catalog is not None else NO_DEFAULTS
