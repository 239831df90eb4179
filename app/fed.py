"""What a host feeds the catalog (``ModelCatalog.listed`` / ``upserted`` / ``deleted``), redacted.

Redaction is the watches' own (``adapters.kube.watch.redact_all``: the fingerprints of a source that holds
secrets are computed in a worker thread, never on the event loop the catalog and its Lease run on). What a
host adds: it lists its whole cache on every pass, so the redaction of an unchanged object is reused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import orjson

from adapters.kube.watch import redact_all
from catalog_core.events import SourceKind
from catalog_core.redact import SECRET_HOLDING, Redacted


class FedRedactions:
    """The redaction of each object a host fed, kept while the host keeps feeding the same content.

    A host lists its whole cache on every pass, and a key's fingerprint costs milliseconds (PBKDF2): an
    object equal to the one last fed under its name is not redacted again. Only for the sources that hold
    secrets (the rest is trimming, cheaper than the comparison). The content is compared by a digest of
    its canonical JSON, not by reference: a host may change its cached objects in place."""

    def __init__(self) -> None:
        self._held: dict[SourceKind, dict[tuple[str, str], tuple[bytes, Redacted]]] = {}

    async def redact(
        self, source: SourceKind, objects: Sequence[Mapping[str, Any]], *, replace: bool
    ) -> tuple[Redacted, ...]:
        """Each object redacted, off the event loop for a source that holds secrets (the watches' own
        ``redact_all``). ``replace``: the objects are the source's whole content (a listing)."""
        if source not in SECRET_HOLDING:
            return await redact_all(source, objects)
        held = self._held.setdefault(source, {})
        names = [_name(o) for o in objects]
        digests = [_digest(o) for o in objects]
        fresh_at = [
            i
            for i, (name, digest) in enumerate(zip(names, digests, strict=True))
            if digest is None or name not in held or held[name][0] != digest
        ]
        # Shielded: when the host's call gives up (a blocking host's call_timeout), the work done is still
        # kept, so its next pass does not start over.
        with anyio.CancelScope(shield=True):
            fresh = await redact_all(source, [objects[i] for i in fresh_at])
            done = dict(zip(fresh_at, fresh, strict=True))
            out = tuple(done[i] if i in done else held[names[i]][1] for i in range(len(objects)))
            kept = {} if replace else held
            for name, digest, redacted in zip(names, digests, out, strict=True):
                if digest is not None:
                    kept[name] = (digest, redacted)
            self._held[source] = kept
        return out

    def forget(self, source: SourceKind, obj: Mapping[str, Any]) -> None:
        self._held.get(source, {}).pop(_name(obj), None)


def _name(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _digest(obj: Mapping[str, Any]) -> bytes | None:
    """A digest of the object's content, or None when it is not plain JSON (then it is never reused)."""
    try:
        return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).digest()
    except (TypeError, orjson.JSONEncodeError):
        return None
