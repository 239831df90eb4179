"""Every Kubernetes permission the controller needs: the one declaration.

``model-catalog check`` asks the API server for each of them (SelfSubjectAccessReview);
``tests/adapters/kube/test_rbac.py`` grants exactly these to a ServiceAccount and runs every source and
executor with it; ``tests/deploy/test_rbac_declaration.py`` checks that the Roles in ``deploy/`` grant
exactly these, naming each permission one lacks; ``just generate`` writes the table of ``docs/rbac.md``
from them. A verb an adapter starts using goes here first, or those tests fail. The watch and the patch
of each rollable workload kind are derived from its declaration (``catalog_core/kinds.py``).

Namespaces and resource names are the settings that hold them (behaviour §10), resolved by the caller:
``NAMESPACE``, ``APPLIANCE_NAMESPACE`` and ``CATALOG_LEASE_NAMESPACE`` (the Lease's, ``NAMESPACE`` by
default); ``EXTERNAL_MODELS_CONFIGMAP``, ``CATALOG_CONFIGMAP`` and ``CATALOG_LEASE_NAME``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import attrs

from catalog_core import registry
from catalog_core.kinds import ROLLABLE

SERVICE_ACCOUNT = "ai-model-catalog-controller"  # the controller's, in NAMESPACE (deploy/serviceaccount.yaml)

NAMESPACE = "NAMESPACE"
APPLIANCE_NAMESPACE = "APPLIANCE_NAMESPACE"
LEASE_NAMESPACE = "CATALOG_LEASE_NAMESPACE"


@attrs.frozen
class Grant:
    """One rule: what ``adapter`` does to ``resources`` (``name/subresource`` for a subresource)."""

    adapter: str
    namespace: str  # NAMESPACE, APPLIANCE_NAMESPACE or LEASE_NAMESPACE
    group: str  # "" for the core group
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    names: tuple[str, ...] = ()  # settings holding the resourceNames; () for every object

    @property
    def who(self) -> str:
        """The adapter, as plain text (the docs' table sets its class in code)."""
        return self.adapter.replace("`", "")


@attrs.frozen
class RoleRef:
    """The Role of ``deploy/`` that grants a namespace's rules."""

    name: str
    file: str


# The settings' defaults (behaviour §10), as docs/rbac.md's table and the Roles in deploy/ print them.
DEFAULT_SETTINGS: Mapping[str, str] = {
    NAMESPACE: "ai",
    APPLIANCE_NAMESPACE: "ai-system",
    LEASE_NAMESPACE: "ai",
    "EXTERNAL_MODELS_CONFIGMAP": "ai-external-models",
    "CATALOG_CONFIGMAP": "ai-model-catalog",
    "CATALOG_LEASE_NAME": "ai-model-catalog-controller",
}

ROLES: Mapping[str, RoleRef] = {
    NAMESPACE: RoleRef("ai-model-catalog-controller", "deploy/controller/role-ai.yaml"),
    APPLIANCE_NAMESPACE: RoleRef("ai-model-catalog-controller", "deploy/controller/role-ai-system.yaml"),
    LEASE_NAMESPACE: RoleRef("ai-model-catalog-controller", "deploy/controller/role-ai.yaml"),
}

_LIST_WATCH = ("list", "watch")
_EVENTS = ("get", "create", "update")
# Resources a route source watches: their grants are written below (one names every source it serves).
_WATCHED_WITH_A_ROUTE_SOURCE = frozenset((s.resource.group, s.resource.plural) for s in registry.SPECS)


def _rollable_watches() -> tuple[Grant, ...]:
    """The watch of each rollable workload kind (catalog_core/kinds.py), one grant per kind."""
    return tuple(
        Grant(
            f"`WatchSource` {kind.source}",
            NAMESPACE,
            kind.resource.group,
            (kind.resource.plural,),
            _LIST_WATCH,
        )
        for kind in ROLLABLE
        if (kind.resource.group, kind.resource.plural) not in _WATCHED_WITH_A_ROUTE_SOURCE
    )


def _rollers() -> tuple[Grant, ...]:
    """``WorkloadRoller``'s patch of every rollable workload kind, one grant per API group."""
    plurals: dict[str, list[str]] = {}
    for kind in ROLLABLE:
        plurals.setdefault(kind.resource.group, []).append(kind.resource.plural)
    return tuple(
        Grant("`WorkloadRoller`", NAMESPACE, group, tuple(p), ("patch",)) for group, p in plurals.items()
    )


GRANTS: tuple[Grant, ...] = (
    Grant("`WatchSource` kubeai-models", NAMESPACE, "kubeai.org", ("models",), _LIST_WATCH),
    Grant(
        "`WatchSource` external-models, catalog-configmap",
        NAMESPACE,
        "",
        ("configmaps",),
        _LIST_WATCH,
        ("EXTERNAL_MODELS_CONFIGMAP", "CATALOG_CONFIGMAP"),
    ),
    Grant(
        "`WatchSource` freetoken-deployments, deployments", NAMESPACE, "apps", ("deployments",), _LIST_WATCH
    ),
    Grant("`WatchSource` replicasets", NAMESPACE, "apps", ("replicasets",), _LIST_WATCH),
    *_rollable_watches(),
    Grant("`WatchSource` services", NAMESPACE, "", ("services",), _LIST_WATCH),
    Grant("`WatchSource` pods", NAMESPACE, "", ("pods",), _LIST_WATCH),
    Grant("`WatchSource` agent-templates", NAMESPACE, "kubeopencode.io", ("agenttemplates",), _LIST_WATCH),
    Grant("`SecretWatcher`", NAMESPACE, "", ("secrets",), _LIST_WATCH),
    Grant("`CatalogWriter`", NAMESPACE, "", ("configmaps",), ("get", "update"), ("CATALOG_CONFIGMAP",)),
    Grant(
        "`CatalogWriter` (only while `ai-model-catalog` is missing)",
        NAMESPACE,
        "",
        ("configmaps",),
        ("create",),
    ),
    Grant("`AgentTemplatePatcher`", NAMESPACE, "kubeopencode.io", ("agenttemplates",), ("patch",)),
    *_rollers(),
    Grant("`PodEvictor`", NAMESPACE, "", ("pods/eviction",), ("create",)),
    Grant("`EventRecorder`", NAMESPACE, "", ("events",), _EVENTS),
    Grant(
        "`WatchSource` model-activations",
        APPLIANCE_NAMESPACE,
        "appliance.magicstick.dev",
        ("modelactivations",),
        _LIST_WATCH,
    ),
    Grant("`EventRecorder` (Events on ModelActivations)", APPLIANCE_NAMESPACE, "", ("events",), _EVENTS),
    Grant(
        "`LeaderElector`",
        LEASE_NAMESPACE,
        "coordination.k8s.io",
        ("leases",),
        ("get", "update"),
        ("CATALOG_LEASE_NAME",),
    ),
    Grant(
        "`LeaderElector` (first run only)", LEASE_NAMESPACE, "coordination.k8s.io", ("leases",), ("create",)
    ),
    Grant(
        "`WatchLiveness` (the watches' liveness signal; the elector reads it too)",
        LEASE_NAMESPACE,
        "coordination.k8s.io",
        ("leases",),
        _LIST_WATCH,
        ("CATALOG_LEASE_NAME",),
    ),
)


@attrs.frozen
class Permission:
    """One verb on one resource (and name) in one namespace, as a SelfSubjectAccessReview asks it."""

    namespace: str
    group: str
    resource: str
    subresource: str
    name: str  # "" for any object
    verb: str
    grant: Grant

    @property
    def role(self) -> RoleRef:
        return ROLES[self.grant.namespace]

    def describe(self) -> str:
        """``list models.kubeai.org in ai``, ``create pods/eviction in ai``, ``get configmaps/x in ai``."""
        resource = f"{self.resource}.{self.group}" if self.group else self.resource
        if self.subresource:
            resource = f"{resource}/{self.subresource}"
        named = f" {self.name!r}" if self.name else ""
        return f"{self.verb} {resource}{named} in {self.namespace}"


def permissions(settings: Mapping[str, str], grants: tuple[Grant, ...] = GRANTS) -> Iterator[Permission]:
    """Each grant resolved with ``settings`` (the namespaces' and names' values, by setting name), one
    permission per verb, resource and name."""
    for grant in grants:
        names = tuple(settings[setting] for setting in grant.names) or ("",)
        for resource in grant.resources:
            plural, _, subresource = resource.partition("/")
            for name in names:
                for verb in grant.verbs:
                    yield Permission(
                        settings[grant.namespace], grant.group, plural, subresource, name, verb, grant
                    )


def role_rules(
    settings: Mapping[str, str], grants: tuple[Grant, ...] = GRANTS
) -> dict[str, list[dict[str, object]]]:
    """The grants as RBAC rules, by namespace (what a Role per namespace must hold)."""
    rules: dict[str, list[dict[str, object]]] = {}
    for grant in grants:
        rule: dict[str, object] = {
            "apiGroups": [grant.group],
            "resources": list(grant.resources),
            "verbs": list(grant.verbs),
        }
        if grant.names:
            rule["resourceNames"] = [settings[setting] for setting in grant.names]
        rules.setdefault(settings[grant.namespace], []).append(rule)
    return rules


def table_rows(settings: Mapping[str, str], grants: tuple[Grant, ...] = GRANTS) -> list[str]:
    """The grants as the Markdown rows of docs/rbac.md's table (names resolved with ``settings``)."""

    def cells(values: tuple[str, ...]) -> str:
        return ", ".join(f"`{v}`" for v in values)

    rows = []
    for grant in grants:
        row = [
            grant.adapter,
            f"`{grant.namespace}`",
            f"`{grant.group}`" if grant.group else '`""` (core)',
            cells(grant.resources),
            cells(tuple(settings[s] for s in grant.names)),
            cells(grant.verbs),
        ]
        rows.append(" ".join(["|", *(f"{cell} |" if cell else "|" for cell in row)]))
    return rows
