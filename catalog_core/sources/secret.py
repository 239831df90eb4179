"""Secrets referenced by external definitions — only metadata and fingerprints, never values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw
from catalog_core.sealing import SERVICE_ACCOUNT_TOKEN, redacted_fingerprint
from catalog_core.sources.common import PROVIDER_SECRET_LABEL, PROVIDER_SECRET_PREFIX
from catalog_core.trim import PROVIDER_SECRET_API_BASES
from catalog_core.urls import pattern_entries

MAX_API_BASES = 32  # entries of the API bases annotation read (each is named in messages about the Secret)


@attrs.frozen
class SecretInfo:
    name: str
    uid: str
    resource_version: str
    provider_label: bool
    keys: frozenset[str]
    fingerprints: tuple[tuple[str, str], ...]
    service_account_token: bool = False  # never handed out, whatever its labels (behaviour §1.5)
    # The API bases its key may be sent to besides its provider's own, as written in its annotation
    # (behaviour §1.5; patterns: catalog_core.urls.DestinationPattern).
    api_bases: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        """behaviour §1.5: labelled model-provider-secret=true, or named ai-model-provider-*."""
        return self.provider_label or self.name.startswith(PROVIDER_SECRET_PREFIX)

    def fingerprint(self, key: str) -> str:
        return dict(self.fingerprints).get(key, "")

    @classmethod
    def from_k8s(cls, obj: Mapping[str, Any]) -> SecretInfo | None:
        """``obj`` is a redacted Secret (catalog_core.redact.redact_secret)."""
        name = raw.name_of(obj)
        if not name:
            return None
        data = raw.mapping(obj, "data")
        fps = tuple(sorted((k, redacted_fingerprint(v) or "") for k, v in data.items() if isinstance(k, str)))
        return cls(
            name=name,
            uid=raw.uid_of(obj),
            resource_version=raw.resource_version_of(obj),
            provider_label=raw.is_true_label(
                raw.string_map(obj, "metadata", "labels"), PROVIDER_SECRET_LABEL
            ),
            keys=frozenset(k for k, _ in fps),
            fingerprints=fps,
            service_account_token=obj.get("type") == SERVICE_ACCOUNT_TOKEN,
            api_bases=pattern_entries(
                raw.string_map(obj, "metadata", "annotations").get(PROVIDER_SECRET_API_BASES, "")
            )[:MAX_API_BASES],
        )


def allowed_by_name(name: str) -> bool:
    return name.startswith(PROVIDER_SECRET_PREFIX)
