"""Secret values, kept outside the core. The core holds references; writers resolve them here at send time."""

from __future__ import annotations

from collections.abc import Mapping

from catalog_core.commands import ApiKeyRef, InlineKeyRef, LiteralKey, SecretKey
from catalog_core.redact import inline_vault_key, secret_vault_key


class SecretVault:
    """Values by vault key (``secret:ns/name#key`` or ``inline:fp``). Never logged, never serialized."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"SecretVault({len(self._values)} values)"

    def update(self, values: Mapping[str, str]) -> None:
        self._values.update(values)

    def forget_secret(self, namespace: str, name: str) -> None:
        prefix = f"secret:{namespace}/{name}#"
        for key in [k for k in self._values if k.startswith(prefix)]:
            del self._values[key]

    def replace_secret(self, namespace: str, name: str, values: Mapping[str, str]) -> None:
        self.forget_secret(namespace, name)
        self._values.update(values)

    def resolve(self, ref: ApiKeyRef | None) -> str | None:
        """The value for a key reference; None when it is not known (yet)."""
        if ref is None:
            return None
        if isinstance(ref, LiteralKey):
            return ref.value
        if isinstance(ref, SecretKey):
            return self._values.get(secret_vault_key(ref.namespace, ref.name, ref.key))
        assert isinstance(ref, InlineKeyRef)
        return self._values.get(inline_vault_key(ref.fingerprint))

    def values(self) -> frozenset[str]:
        """Every value held (for tests that assert nothing leaked)."""
        return frozenset(self._values.values())
