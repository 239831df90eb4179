"""model-catalog's public API: the one import a host needs, and the only one that is supported.

    from model_catalog import BlockingModelCatalog, CatalogConfig, SourceKind   # a synchronous host
    from model_catalog import ModelCatalog                                      # a host with an anyio loop

Everything in ``__all__`` follows the distribution's version (semantic versioning: a name is removed or
its behaviour changed only in a new major version). Every other module (``app``, ``adapters``,
``contracts``, ``catalog_core``) is internal and may change in any release; see ARCHITECTURE.md,
"Embedding".
"""

from __future__ import annotations

try:
    from adapters.identity import VERSION
    from adapters.kube.master_key import MasterKeyError
    from adapters.kube.settings import KubeSettings
    from app.blocking import (
        BlockingModelCatalog,
        CallTimeoutError,
        CatalogClosedError,
        CatalogError,
        CatalogFailedError,
    )
    from app.leader import LeaseConfig
    from app.library import CatalogView, ModelCatalog, read_litellm_master_key
    from app.options import CatalogOptions, LiteLLMOptions, WriteOptions
    from catalog_core.config import CatalogConfig, ConfigError
    from catalog_core.events import SourceKind
except ImportError as exc:  # a host module named like one of ours (app, adapters, ...) shadows it
    import sys

    shadow = sys.modules.get((exc.name or "").split(".")[0])
    where = getattr(shadow, "__file__", None) or getattr(shadow, "__path__", None)
    raise ImportError(
        f"model_catalog could not import its internal package {exc.name!r}"
        + (f": {where} shadows it (a host module of the same name earlier on sys.path)" if where else "")
    ) from exc

__version__ = VERSION

__all__ = [
    "BlockingModelCatalog",
    "CallTimeoutError",
    "CatalogClosedError",
    "CatalogConfig",
    "CatalogError",
    "CatalogFailedError",
    "CatalogOptions",
    "CatalogView",
    "ConfigError",
    "KubeSettings",
    "LeaseConfig",
    "LiteLLMOptions",
    "MasterKeyError",
    "ModelCatalog",
    "SourceKind",
    "WriteOptions",
    "__version__",
    "read_litellm_master_key",
]
