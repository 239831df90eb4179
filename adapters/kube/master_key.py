"""The LiteLLM master key, read from the Secret LiteLLM itself uses: for a host that embeds the catalog.

``model-catalog run`` gets the key from its environment (``LITELLM_MASTER_KEY``, a ``secretKeyRef`` in its
Deployment). A host embedding the library (the Magic Stick Operator) runs in another namespace and has no
such variable: it reads ``Secret/<LITELLM_MASTER_KEY_SECRET_NAME>`` key ``LITELLM_MASTER_KEY`` in LiteLLM's
namespace (``NAMESPACE``) once, at start. One GET with a timeout; every failure is a
``MasterKeyError`` that says what to fix, and never carries the value (nor any part of it).
"""

from __future__ import annotations

import base64
import binascii

import anyio

from adapters.kube.api import KubeApi, KubeError, object_path
from catalog_core.events import SourceKind
from contracts.kinds import RESOURCES

MASTER_KEY_FIELD = "LITELLM_MASTER_KEY"  # also what deploy/deployment.yaml puts in the environment
DEFAULT_TIMEOUT = 10.0


class MasterKeyError(RuntimeError):
    """The LiteLLM master key could not be read from its Secret; the message says why and what to fix.
    ``status``: the API server's HTTP status when it refused the read (0 otherwise)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


async def read_master_key(
    api: KubeApi,
    namespace: str,
    name: str,
    *,
    field: str = MASTER_KEY_FIELD,
    timeout: float = DEFAULT_TIMEOUT,
) -> str:
    """The value of ``field`` in ``Secret/<name>`` in ``namespace``; ``MasterKeyError`` within ``timeout``
    seconds otherwise."""
    where = f"Secret {namespace}/{name}"
    path = object_path(RESOURCES[SourceKind.SECRETS], namespace, name)
    try:
        with anyio.fail_after(timeout):  # the request's own timeout is a second longer: this one says it
            secret = await api.request("GET", path, timeout=timeout + 1)
    except TimeoutError:
        raise MasterKeyError(
            f"cannot read the LiteLLM master key from {where}: no answer from the API server within "
            f"{timeout:g} s"
        ) from None
    except KubeError as exc:
        raise MasterKeyError(
            f"cannot read the LiteLLM master key from {where}: {exc}{_fix(exc.status, namespace, name)}",
            exc.status,
        ) from None
    data = secret.get("data")
    value = data.get(field) if isinstance(data, dict) else None
    if not isinstance(value, str):
        present = ", ".join(sorted(k for k in data if isinstance(k, str))) if isinstance(data, dict) else ""
        raise MasterKeyError(
            f"{where} has no key {field} (it has: {present or 'no keys'}); LiteLLM's master key is "
            f"expected there, as LiteLLM itself reads it"
        )
    try:
        key = base64.b64decode(value, validate=True).decode("utf-8").strip()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise MasterKeyError(f"{where} key {field} is not base64-encoded UTF-8 text") from None
    if not key:
        raise MasterKeyError(f"{where} key {field} is empty")
    return key


def _fix(status: int, namespace: str, name: str) -> str:
    if status == 403:
        return (
            f" (the host's ServiceAccount needs `get` on secrets/{name} in namespace {namespace}: a Role "
            f"there with resourceNames [{name}], bound to it)"
        )
    if status == 404:
        return (
            " (LiteLLM's Secret is not there: check NAMESPACE and LITELLM_MASTER_KEY_SECRET_NAME in the "
            "catalog's configuration)"
        )
    if status == 401:
        return " (the API server refused the host's credentials)"
    return ""
