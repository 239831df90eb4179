"""A host program that embeds the catalog, the way the Magic Stick Operator does.

    KUBECONFIG=... LITELLM_BASE_URL=http://127.0.0.1:4000 LITELLM_MASTER_KEY=sk-... \
        .venv/bin/python examples/embedded_operator.py

It runs the catalog inside its own anyio task group with its own API client,
feeds the ModelActivations it watches itself (here: a plain list+watch loop
standing in for the operator's cache), and prints every change to what is
published. Ctrl-C stops both.
"""

from __future__ import annotations

import os

import anyio
from kubernetes_asyncio import client, config, watch

from app.library import ModelCatalog
from catalog_core.config import CatalogConfig, ConfigError
from catalog_core.events import SourceKind


async def feed_activations(catalog: ModelCatalog, api: client.ApiClient, namespace: str) -> None:
    """The host's own ModelActivation watch, handed to the catalog instead of a second watch."""
    custom = client.CustomObjectsApi(api)
    group, version, plural = "appliance.magicstick.dev", "v1alpha1", "modelactivations"
    listing = await custom.list_namespaced_custom_object(group, version, namespace, plural)
    await catalog.listed(SourceKind.MODEL_ACTIVATIONS, listing["items"])
    stream = watch.Watch().stream(
        custom.list_namespaced_custom_object,
        group,
        version,
        namespace,
        plural,
        resource_version=listing["metadata"]["resourceVersion"],
        timeout_seconds=300,
    )
    async for change in stream:
        if change["type"] == "DELETED":
            await catalog.deleted(SourceKind.MODEL_ACTIVATIONS, change["object"])
        elif change["type"] in ("ADDED", "MODIFIED"):
            await catalog.upserted(SourceKind.MODEL_ACTIVATIONS, change["object"])


async def main() -> None:
    catalog_config = CatalogConfig.from_env(os.environ)
    if isinstance(catalog_config, ConfigError):
        raise SystemExit(f"invalid configuration: {catalog_config}")
    configuration = client.Configuration()
    await config.load_kube_config(client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        catalog = ModelCatalog(
            catalog_config,
            api,
            litellm_master_key=os.environ["LITELLM_MASTER_KEY"],
            host_sources={SourceKind.MODEL_ACTIVATIONS},
        )
        async with anyio.create_task_group() as tg:
            await tg.start(catalog.run)
            tg.start_soon(feed_activations, catalog, api, catalog_config.appliance_namespace)
            await catalog.wait_ready()
            async for view in catalog.changes():
                published = [r["name"] for r in view.routes if r["state"] == "published"]
                print(f"catalog {view.catalog_hash}: published {published}")


if __name__ == "__main__":
    anyio.run(main)
