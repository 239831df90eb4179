"""contracts/rbac.GRANTS is exact: a ServiceAccount granted just those runs every source and executor.

The same declaration is docs/rbac.md's table and what deploy/'s Roles grant
(tests/deploy/test_rbac_declaration.py), and what ``model-catalog check`` asks for."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from adapters.kube import KubeAdapters, KubeApi
from adapters.vault import SecretVault
from catalog_core.commands import (
    CreateCatalogPlaceholder,
    EmitKubernetesEvent,
    EvictPod,
    ObjectRef,
    PatchAgentTemplate,
    RollWorkload,
    SecretWatch,
    WatchSecrets,
    WriteCatalog,
)
from catalog_core.config import CatalogConfig
from catalog_core.events import CommandCompleted, Outcome, SourceKind, SourceListed, SourceUnavailable
from catalog_core.jsonval import Json
from contracts import rbac
from tests.adapters.kube.helpers import FAST, listed, running
from tests.fixtures.kube_peer import KubePeer, create_namespace, install_crds, new_api_client

pytestmark = [pytest.mark.kube, pytest.mark.anyio]


async def _service_account_token(api: KubeApi, ns: str, name: str) -> str:
    await api.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts", body={"metadata": {"name": name}})
    answer = await api.request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    return str(answer["status"]["token"])


def _workload(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }


async def test_the_documented_rules_are_enough_and_nothing_more_is_readable(
    kube_peer: KubePeer, kube_client: Any
) -> None:
    await install_crds(kube_client)
    ns, appliance_ns = await create_namespace(kube_client), await create_namespace(kube_client, "mcsys")
    config = CatalogConfig(namespace=ns, appliance_namespace=appliance_ns)
    admin = KubeApi(kube_client)
    rbac_api = client.RbacAuthorizationV1Api(kube_client)
    rules = rbac.role_rules(
        {
            rbac.NAMESPACE: ns,
            rbac.APPLIANCE_NAMESPACE: appliance_ns,
            rbac.LEASE_NAMESPACE: ns,
            "EXTERNAL_MODELS_CONFIGMAP": config.external_models_configmap,
            "CATALOG_CONFIGMAP": config.catalog_configmap,
            "CATALOG_LEASE_NAME": "ai-model-catalog-controller",
        }
    )
    assert set(rules) == {ns, appliance_ns}
    for namespace, namespace_rules in rules.items():
        await rbac_api.create_namespaced_role(
            namespace, {"metadata": {"name": "model-catalog"}, "rules": namespace_rules}
        )
        await rbac_api.create_namespaced_role_binding(
            namespace,
            {
                "metadata": {"name": "model-catalog"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "model-catalog"},
                "subjects": [{"kind": "ServiceAccount", "name": "model-catalog", "namespace": ns}],
            },
        )
    token = await _service_account_token(admin, ns, "model-catalog")

    core, apps, custom = (
        client.CoreV1Api(kube_client),
        client.AppsV1Api(kube_client),
        client.CustomObjectsApi(kube_client),
    )
    template = await custom.create_namespaced_custom_object(
        "kubeopencode.io",
        "v1alpha1",
        ns,
        "agenttemplates",
        {
            "apiVersion": "kubeopencode.io/v1alpha1",
            "kind": "AgentTemplate",
            "metadata": {"name": "litellm-default"},
        },
    )
    activation = await custom.create_namespaced_custom_object(
        "appliance.magicstick.dev",
        "v1alpha1",
        appliance_ns,
        "modelactivations",
        {
            "apiVersion": "appliance.magicstick.dev/v1alpha1",
            "kind": "ModelActivation",
            "metadata": {"name": "act"},
        },
    )
    await apps.create_namespaced_deployment(ns, _workload("web"))
    await apps.create_namespaced_stateful_set(ns, _workload("db"))
    await apps.create_namespaced_daemon_set(ns, _workload("agent"))
    pod = await core.create_namespaced_pod(
        ns, {"metadata": {"name": "loose"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    )
    await core.create_namespaced_secret(
        ns, {"metadata": {"name": "ai-model-provider-x"}, "string_data": {"k": "v"}}
    )
    await core.create_namespaced_config_map(ns, {"metadata": {"name": "someone-elses"}, "data": {"a": "b"}})

    as_sa = await new_api_client(kube_peer, token=token)
    adapters = KubeAdapters(as_sa, config, SecretVault(), settings=FAST)
    try:
        async with running(adapters.sources) as (events, _):
            for source in SourceKind:
                if source is not SourceKind.SECRETS:
                    await events.wait_for(listed(source))

            def run(command: Any) -> Any:
                executor = next(e for e in adapters.executors if e.handles(command))
                return executor.execute(command)

            watch = WatchSecrets(ns, (SecretWatch("ai-model-provider-x", provider_only=False),))
            assert (await run(watch))[0].outcome is Outcome.APPLIED
            secrets = await events.wait_for(listed(SourceKind.SECRETS))
            assert isinstance(secrets, SourceListed) and len(secrets.objects) == 1

            model_ref = ObjectRef("kubeai.org/v1", "Model", ns, "m", "")
            activation_ref = ObjectRef(
                "appliance.magicstick.dev/v1alpha1",
                "ModelActivation",
                appliance_ns,
                "act",
                activation["metadata"]["uid"],
            )
            placeholder = CreateCatalogPlaceholder(ns, "ai-model-catalog", (("a", "0"),), "bootstrap", "f0")
            commands = [
                placeholder,  # create
                WriteCatalog(ns, "ai-model-catalog", (("a", "1"),), "h1", "f1"),  # get + update
                WriteCatalog(ns, "ai-model-catalog", (("a", "2"),), "h2", "f2"),
                PatchAgentTemplate(
                    ns,
                    "litellm-default",
                    template["metadata"]["resourceVersion"],
                    Json.of(
                        {
                            "metadata": {"resourceVersion": template["metadata"]["resourceVersion"]},
                            "spec": {"config": {"model": "litellm/x"}},
                        }
                    ),
                ),
                RollWorkload(ns, "Deployment", "web", "h2"),
                RollWorkload(ns, "StatefulSet", "db", "h2"),
                RollWorkload(ns, "DaemonSet", "agent", "h2"),
                EvictPod(ns, "loose", pod.metadata.uid, "h2"),
                EmitKubernetesEvent(model_ref, "InvalidField", "m: bad"),
                EmitKubernetesEvent(model_ref, "InvalidField", "m: bad"),  # get + update
                EmitKubernetesEvent(activation_ref, "SecretNotAllowed", "act: not a provider Secret"),
                EmitKubernetesEvent(activation_ref, "SecretNotAllowed", "act: not a provider Secret"),
            ]
            for command in commands:
                [done, *_] = await run(command)
                assert isinstance(done, CommandCompleted)
                assert (done.outcome, done.reason, done.detail) == (Outcome.APPLIED, "", ""), command
            # the placeholder again: refused by the API server (it exists), so nothing is written
            [done] = await run(placeholder)
            assert (done.outcome, done.detail) == (Outcome.APPLIED, "it exists already")
            assert (await core.read_namespaced_config_map("ai-model-catalog", ns)).data == {"a": "2"}
            assert not [e for e in events.events if isinstance(e, SourceUnavailable)]

        # Least privilege: nothing beyond the table.
        sa_core = client.CoreV1Api(as_sa)
        for call in (
            sa_core.read_namespaced_config_map("someone-elses", ns),
            sa_core.list_namespaced_config_map(ns),
            sa_core.read_namespaced_secret("ai-model-provider-x", ns),
            sa_core.list_namespaced_secret(appliance_ns),
            sa_core.delete_namespaced_pod("whatever", ns),
        ):
            with pytest.raises(ApiException) as denied:
                await call
            assert denied.value.status == 403
    finally:
        await as_sa.close()
        await adapters.aclose()
