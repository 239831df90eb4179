"""The bootstrap placeholder (behaviour §5.2) when nobody shipped it: a kubectl install holds no ConfigMap, so
the controller creates ``ConfigMap/ai-model-catalog`` as the placeholder while it cannot write a catalog yet,
and never over an existing one (create only)."""

from __future__ import annotations

from typing import Any

from catalog_core.commands import Command, CreateCatalogPlaceholder, WriteCatalog
from catalog_core.config import CatalogConfig
from catalog_core.events import Event, LeadershipChanged, LiteLLMUnreachable, SourceKind, SourceListed
from catalog_core.rules.render import bootstrap_data
from contracts.kinds import sources_of
from tests.core import builders as b
from tests.core.harness import Cluster


def _listed(cluster: Cluster, *objects: dict[str, Any]) -> list[Event]:
    """Every Kubernetes source listed with ``objects`` (and nothing else): LiteLLM not read."""
    kinds = [s for s in SourceKind if s is not SourceKind.SECRETS]
    grouped: dict[SourceKind, list[dict[str, Any]]] = {s: [] for s in kinds}
    for obj in objects:
        for source in sources_of(obj, cluster.config):
            grouped[source].append(obj)
    return [SourceListed(s, tuple(objs)) for s, objs in grouped.items()]


def _placeholders(commands: list[Command]) -> list[CreateCatalogPlaceholder]:
    return [c for c in commands if isinstance(c, CreateCatalogPlaceholder)]


def test_a_missing_catalog_is_created_as_the_placeholder_while_litellm_cannot_be_read() -> None:
    cluster = Cluster()
    commands = cluster.run(*_listed(cluster), LiteLLMUnreachable("unreachable"))
    (created,) = _placeholders(commands)
    assert dict(created.data) == bootstrap_data(CatalogConfig())
    assert created.catalog_hash == "bootstrap"
    assert cluster.data == bootstrap_data(CatalogConfig())
    # planned again and again while LiteLLM stays unreachable: created once
    assert not _placeholders(cluster.run(LiteLLMUnreachable("unreachable")))
    # LiteLLM answers: the real catalog is written over the placeholder
    commands = cluster.run(cluster.world.rows_event())
    assert [c for c in commands if isinstance(c, WriteCatalog)]
    assert cluster.data["AI_APPLIANCE_MODEL_CATALOG_READY"] == "true"


def test_an_existing_catalog_is_never_replaced_by_the_placeholder() -> None:
    for existing in (b.catalog_configmap("written-hash", ready=True), b.catalog_configmap()):
        cluster = Cluster()
        cluster.world.catalog = existing
        commands = cluster.run(*_listed(cluster, existing), LiteLLMUnreachable("unreachable"))
        assert not _placeholders(commands)
        assert cluster.world.catalog is existing


def test_with_every_input_read_the_real_catalog_is_created_and_no_placeholder() -> None:
    cluster = Cluster()
    commands = cluster.start(catalog=False)
    assert not _placeholders(commands)
    assert cluster.data["AI_APPLIANCE_MODEL_CATALOG_READY"] == "true"


def test_a_deleted_catalog_comes_back_as_the_placeholder_while_litellm_is_down() -> None:
    cluster = Cluster()
    cluster.start()
    cluster.run(LiteLLMUnreachable("unreachable"))
    written = cluster.world.catalog
    assert written is not None
    cluster.world.catalog = None
    commands = cluster.delete(written)
    # LiteLLM's rows were read before it went down: the inputs are known, so the real catalog comes back
    assert [c for c in commands if isinstance(c, WriteCatalog)] and not _placeholders(commands)

    fresh = Cluster()  # a controller that has never read LiteLLM
    fresh.run(*_listed(fresh), LiteLLMUnreachable("unreachable"))
    placeholder = fresh.world.catalog
    assert placeholder is not None
    fresh.world.catalog = None
    assert _placeholders(fresh.delete(placeholder))


def test_a_standby_never_creates_the_placeholder() -> None:
    cluster = Cluster()
    cluster.feed(LeadershipChanged(False))
    assert not _placeholders(cluster.run(*_listed(cluster), LiteLLMUnreachable("unreachable")))
    assert cluster.world.catalog is None
    assert _placeholders(cluster.run(LeadershipChanged(True)))
