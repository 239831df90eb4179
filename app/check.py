"""``model-catalog check``: are the controller's prerequisites in place? Read-only (a dry run at most).

Before the first install, after one, and from the runbook, it checks, in order:

1. the API server answers (its version);
2. each CRD the controller reads is installed and serves the version it reads (discovery);
3. every permission of ``contracts/rbac.GRANTS`` is granted to the controller's identity
   (SelfSubjectAccessReview; one line per missing one, with the Role of ``deploy/`` to add it to). Outside
   a pod the controller's ServiceAccount is impersonated (``--as`` picks another user, ``--as=`` your own);
   in a pod it is the pod's own identity;
4. the LiteLLM master key: ``LITELLM_MASTER_KEY`` when set (as in the controller's pod), else the Secret
   the Deployment reads it from (with your own identity: the controller never reads that Secret);
5. LiteLLM answers at ``LITELLM_BASE_URL`` (``--litellm-url``), its version, and it accepts the key;
6. the controller may write the catalog ConfigMap: a server-side dry run of an update (or of the create,
   when it does not exist yet) as the controller's identity, so admission, immutability and RBAC all
   answer.

Exit status by the worst finding: 0 all ok, 1 warnings only (the controller runs, with less: a CRD not
installed, LiteLLM's version unknown, the key not checked), 2 a failure (it cannot do its job). No value
of a Secret is ever printed.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, urlsplit

import anyio
import attrs
import orjson

from adapters.kube.api import KubeApi, KubeError, resource_label
from adapters.kube.master_key import MASTER_KEY_FIELD, MasterKeyError, read_master_key
from app.terminal import TerminalSafe, one_line
from catalog_core.config import CatalogConfig
from contracts import rbac
from contracts.kinds import RESOURCES, Resource

REQUEST_TIMEOUT_SECONDS = 10.0
REVIEWS_AT_ONCE = 8
DRY_RUN_KEY = "model-catalog-check"  # a data key only a dry run ever adds: it tests a change of data


class Severity(enum.IntEnum):
    OK = 0
    WARN = 1
    FAIL = 2

    @property
    def label(self) -> str:
        return {Severity.OK: "ok", Severity.WARN: "warn", Severity.FAIL: "FAIL"}[self]


@attrs.frozen
class Finding:
    severity: Severity
    check: str  # cluster | crd | permissions | permission | master-key | litellm | catalog
    message: str
    permission: rbac.Permission | None = None  # the missing one, for a "permission" finding

    def line(self) -> str:
        return one_line(f"{self.severity.label:<4}  {self.check}: {self.message}")

    def as_json(self) -> dict[str, Any]:
        return {"severity": self.severity.label.lower(), "check": self.check, "message": self.message}


@attrs.frozen
class CheckSettings:
    config: CatalogConfig
    lease_namespace: str
    lease_name: str
    litellm_url: str
    identity: str  # whose permissions: the impersonated user, or "" for the kubeconfig's own
    master_key: str | None = attrs.field(default=None, repr=False)  # LITELLM_MASTER_KEY when set

    def names(self) -> dict[str, str]:
        """The values of the settings contracts/rbac names."""
        c = self.config
        return {
            rbac.NAMESPACE: c.namespace,
            rbac.APPLIANCE_NAMESPACE: c.appliance_namespace,
            rbac.LEASE_NAMESPACE: self.lease_namespace,
            "EXTERNAL_MODELS_CONFIGMAP": c.external_models_configmap,
            "CATALOG_CONFIGMAP": c.catalog_configmap,
            "CATALOG_LEASE_NAME": self.lease_name,
        }


def controller_identity(namespace: str) -> str:
    return f"system:serviceaccount:{namespace}:{rbac.SERVICE_ACCOUNT}"


# --- 1. the API server
async def check_cluster(api: KubeApi, server: str) -> Finding:
    try:
        version = await api.request("GET", "/version", timeout=REQUEST_TIMEOUT_SECONDS)
    except KubeError as exc:
        return Finding(Severity.FAIL, "cluster", f"the API server at {server} does not answer: {exc}")
    return Finding(Severity.OK, "cluster", f"Kubernetes {version.get('gitVersion', '?')} at {server}")


# --- 2. CRDs
def crd_resources() -> list[tuple[Resource, list[str]]]:
    """Each CRD the controller reads, with the sources it feeds."""
    out: dict[tuple[str, str], tuple[Resource, list[str]]] = {}
    for kind, resource in RESOURCES.items():
        if resource.crd:
            out.setdefault((resource.group, resource.plural), (resource, []))[1].append(str(kind))
    return list(out.values())


async def check_crds(api: KubeApi) -> list[Finding]:
    findings = []
    for resource, sources in crd_resources():
        name = resource_label(resource)
        feeds = ", ".join(sources)
        try:
            group = await api.request(
                "GET", f"/apis/{quote(resource.group, safe='')}", timeout=REQUEST_TIMEOUT_SECONDS
            )
        except KubeError as exc:
            if exc.status == 404:
                findings.append(
                    Finding(
                        Severity.WARN,
                        "crd",
                        f"{name} is not installed: the controller reads {feeds} as empty until it is",
                    )
                )
            else:
                findings.append(Finding(Severity.FAIL, "crd", f"{name}: discovery failed: {exc}"))
            continue
        versions = [v.get("version") for v in group.get("versions") or [] if isinstance(v, Mapping)]
        served = ", ".join(str(v) for v in versions) or "none"
        if resource.version not in versions:
            findings.append(
                Finding(
                    Severity.FAIL,
                    "crd",
                    f"{name}: the API server serves {resource.group} {served}, the controller reads "
                    f"{resource.version}: install a release of the CRD that serves {resource.version}",
                )
            )
            continue
        try:
            listing = await api.request(
                "GET",
                f"/apis/{quote(resource.group, safe='')}/{resource.version}",
                timeout=REQUEST_TIMEOUT_SECONDS,
            )
        except KubeError as exc:
            findings.append(Finding(Severity.FAIL, "crd", f"{name}: discovery failed: {exc}"))
            continue
        plurals = {r.get("name") for r in listing.get("resources") or [] if isinstance(r, Mapping)}
        if resource.plural not in plurals:
            findings.append(
                Finding(
                    Severity.WARN,
                    "crd",
                    f"{name} is not installed ({resource.group}/{resource.version} has no "
                    f"{resource.plural}): the controller reads {feeds} as empty until it is",
                )
            )
            continue
        findings.append(Finding(Severity.OK, "crd", f"{name} {resource.version} (served: {served})"))
    return findings


# --- 3. permissions
async def review(api: KubeApi, permission: rbac.Permission) -> bool:
    """Whether the client's identity has one permission (a SelfSubjectAccessReview)."""
    attributes = {
        "namespace": permission.namespace,
        "verb": permission.verb,
        "group": permission.group,
        "resource": permission.resource,
    }
    if permission.subresource:
        attributes["subresource"] = permission.subresource
    if permission.name:
        attributes["name"] = permission.name
    answer = await api.request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body={
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        },
        timeout=REQUEST_TIMEOUT_SECONDS,
    )
    status = answer.get("status")
    return isinstance(status, Mapping) and status.get("allowed") is True


async def check_permissions(api: KubeApi, settings: CheckSettings) -> list[Finding]:
    who = settings.identity or "your own identity"
    wanted = list(rbac.permissions(settings.names()))
    allowed: dict[int, bool] = {}
    errors: list[KubeError] = []
    limiter = anyio.CapacityLimiter(REVIEWS_AT_ONCE)

    async def one(index: int, permission: rbac.Permission) -> None:
        async with limiter:
            try:
                allowed[index] = await review(api, permission)
            except KubeError as exc:
                errors.append(exc)

    async with anyio.create_task_group() as tg:
        for index, permission in enumerate(wanted):
            tg.start_soon(one, index, permission)
    if errors:
        error = errors[0]
        hint = ""
        if error.status == 403 and settings.identity:
            hint = (
                f"; you may not impersonate {settings.identity}: run check in the controller's pod "
                "(kubectl exec deploy/ai-model-catalog-controller -- model-catalog check), or pass --as= to "
                "check your own identity"
            )
        return [
            Finding(Severity.FAIL, "permissions", f"cannot review the permissions of {who}: {error}{hint}")
        ]
    findings = []
    for index, permission in enumerate(wanted):
        if not allowed[index]:
            role = permission.role
            findings.append(
                Finding(
                    Severity.FAIL,
                    "permission",
                    f"{permission.describe()} is not allowed (needed by {permission.grant.who}): "
                    f"add it to Role {permission.namespace}/{role.name} ({role.file})",
                    permission,
                )
            )
    granted = len(wanted) - len(findings)
    severity = Severity.OK if not findings else Severity.FAIL
    summary = Finding(severity, "permissions", f"{granted} of {len(wanted)} granted to {who}")
    return [summary, *findings]


# --- 4. the master key
async def master_key(api: KubeApi, settings: CheckSettings) -> tuple[Finding, str | None]:
    if settings.master_key:
        return Finding(
            Severity.OK, "master-key", "from the environment (LITELLM_MASTER_KEY)"
        ), settings.master_key
    ns, name = settings.config.namespace, settings.config.litellm_master_key_secret
    where = f"Secret {ns}/{name} key {MASTER_KEY_FIELD}"
    try:
        key = await read_master_key(api, ns, name, timeout=REQUEST_TIMEOUT_SECONDS)
    except MasterKeyError as exc:
        if exc.status == 404:
            return (
                Finding(
                    Severity.FAIL,
                    "master-key",
                    f"{where}: the Secret does not exist: the controller's pod cannot start without it; "
                    "create it with LiteLLM's master key",
                ),
                None,
            )
        if exc.status == 403:
            return (
                Finding(
                    Severity.WARN,
                    "master-key",
                    f"{where}: your identity may not read it (HTTP 403), so the key is not checked; run "
                    "check in the controller's pod, or with a kubeconfig that may get Secrets in "
                    f"{ns}",
                ),
                None,
            )
        return Finding(Severity.FAIL, "master-key", str(exc)), None
    return Finding(Severity.OK, "master-key", f"{where} is readable"), key


# --- 5. LiteLLM
async def check_litellm(url: str, key: str | None, transport: Any = None) -> list[Finding]:
    from adapters.litellm.client import Answer, LiteLLMClient, LiteLLMTransportError
    from adapters.litellm.observer import no_models_loaded
    from adapters.litellm.scrub import safe_text

    findings = []
    async with LiteLLMClient(url, key or "", transport=transport) as client:
        secrets = client.secrets_to_scrub()

        def said(answer: Answer) -> str:
            return safe_text(f"HTTP {answer.status}: {answer.error_message()}", secrets)

        try:
            ready = await client.readiness()
        except LiteLLMTransportError as exc:
            hint = _port_forward_hint(url)
            return [
                Finding(
                    Severity.FAIL, "litellm", f"{url} does not answer: {safe_text(str(exc), secrets)}{hint}"
                )
            ]
        if not ready.ok:
            return [Finding(Severity.FAIL, "litellm", f"{url} is not ready: {said(ready)}")]
        version = _version(ready.body)
        if key is None:
            findings.append(Finding(Severity.WARN, "litellm", "no master key to try: the key is not checked"))
        else:
            try:
                info = await client.info()
            except LiteLLMTransportError as exc:
                return [
                    Finding(Severity.FAIL, "litellm", f"GET {url}/model/info: {safe_text(str(exc), secrets)}")
                ]
            if info.status in (401, 403):
                findings.append(
                    Finding(
                        Severity.FAIL,
                        "litellm",
                        f"LiteLLM refuses the master key ({said(info)}): LITELLM_MASTER_KEY does not match "
                        "LiteLLM's; fix the Secret and restart the controller",
                    )
                )
            elif info.ok or no_models_loaded(info):
                rows = info.body.get("data") if info.ok and isinstance(info.body, Mapping) else []
                count = len(rows) if isinstance(rows, list) else 0
                findings.append(
                    Finding(Severity.OK, "litellm", f"accepts the master key (GET /model/info: {count} rows)")
                )
                if version is None:
                    try:
                        details = await client.readiness(details=True)
                        version = _version(details.body) if details.ok else None
                    except LiteLLMTransportError:
                        version = None
            else:
                findings.append(Finding(Severity.FAIL, "litellm", f"GET /model/info: {said(info)}"))
    reachable = Finding(Severity.OK, "litellm", f"{url} is ready, version {version or 'unknown'}")
    if version is None:
        findings.append(Finding(Severity.WARN, "litellm", "LiteLLM does not say its version"))
    return [reachable, *findings]


def _port_forward_hint(url: str) -> str:
    """How to reach an in-cluster Service URL from outside the cluster ("" for any other URL)."""
    parts = urlsplit(url)
    labels = (parts.hostname or "").split(".")
    if len(labels) < 3 or labels[2] != "svc":
        return ""
    port = parts.port or 80
    return (
        f"; from outside the cluster: kubectl port-forward -n {labels[1]} svc/{labels[0]} {port}:{port} and "
        f"pass --litellm-url http://127.0.0.1:{port}"
    )


def _version(body: Any) -> str | None:
    value = body.get("litellm_version") if isinstance(body, Mapping) else None
    return value if isinstance(value, str) and value else None


# --- 6. the catalog ConfigMap
async def check_catalog_writable(api: KubeApi, settings: CheckSettings) -> Finding:
    ns, name = settings.config.namespace, settings.config.catalog_configmap
    who = settings.identity or "your identity"
    collection = f"/api/v1/namespaces/{quote(ns, safe='')}/configmaps"
    path = f"{collection}/{quote(name, safe='')}"
    dry_run = [("dryRun", "All")]
    try:
        current = await api.request("GET", path, timeout=REQUEST_TIMEOUT_SECONDS)
    except KubeError as exc:
        if exc.status != 404:
            return Finding(Severity.FAIL, "catalog", f"ConfigMap {ns}/{name}: {who} cannot read it: {exc}")
        current = None
    try:
        if current is None:
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}}
            await api.request("POST", collection, query=dry_run, body=body, timeout=REQUEST_TIMEOUT_SECONDS)
            return Finding(
                Severity.OK,
                "catalog",
                f"ConfigMap {ns}/{name} does not exist yet; {who} may create it (server-side dry run)",
            )
        data = dict(current.get("data") or {})
        data[DRY_RUN_KEY] = "dry-run"
        await api.request(
            "PUT", path, query=dry_run, body={**current, "data": data}, timeout=REQUEST_TIMEOUT_SECONDS
        )
    except KubeError as exc:
        verb = "create" if current is None else "update"
        return Finding(Severity.FAIL, "catalog", f"ConfigMap {ns}/{name}: {who} may not {verb} it: {exc}")
    return Finding(
        Severity.OK, "catalog", f"ConfigMap {ns}/{name}: {who} may update it (server-side dry run)"
    )


# --- all of it
async def run_checks(
    api: KubeApi, api_as: KubeApi, settings: CheckSettings, server: str, litellm_transport: Any = None
) -> list[Finding]:
    """``api``: the kubeconfig's own identity (discovery, the master-key Secret); ``api_as``: the
    controller's identity (permissions, the dry run)."""
    cluster = await check_cluster(api, server)
    if cluster.severity is Severity.FAIL:
        return [cluster]
    findings = [cluster, *await check_crds(api), *await check_permissions(api_as, settings)]
    key_finding, key = await master_key(api, settings)
    findings.append(key_finding)
    findings += await check_litellm(settings.litellm_url, key, transport=litellm_transport)
    findings.append(await check_catalog_writable(api_as, settings))
    return findings


def worst(findings: Sequence[Finding]) -> Severity:
    return max((f.severity for f in findings), default=Severity.OK)


def show(findings: Sequence[Finding], out: IO[str], *, as_json: bool) -> None:
    if as_json:
        doc = {"findings": [f.as_json() for f in findings], "result": worst(findings).label.lower()}
        for line in orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode().split("\n"):
            out.write(line)
            out.write("\n")
        out.flush()
        return
    for finding in findings:
        out.write(finding.line())
        out.write("\n")
    failures = sum(1 for f in findings if f.severity is Severity.FAIL)
    warnings = sum(1 for f in findings if f.severity is Severity.WARN)
    out.write(f"result: {failures} failed, {warnings} warnings, {len(findings) - failures - warnings} ok")
    out.write("\n")  # a write of its own: TerminalSafe escapes line breaks inside a write
    out.flush()


@attrs.frozen
class Options:
    kubeconfig: str = ""
    context: str = ""
    identity: str | None = None  # --as; None: the controller's ServiceAccount unless in a pod
    litellm_url: str = ""
    as_json: bool = False
    service_account: Path | None = None  # where a pod's ServiceAccount is mounted (None: Kubernetes's place)


async def _main(config: CatalogConfig, options: Options, env: Mapping[str, str]) -> int:
    from app.kube_client import SERVICE_ACCOUNT_DIR, ClusterConfigError, load_cli_client

    mounted = options.service_account or SERVICE_ACCOUNT_DIR
    out: Any = TerminalSafe(sys.stdout)
    try:
        client, source = await load_cli_client(
            options.kubeconfig, env, context=options.context, connections=4, service_account=mounted
        )
    except ClusterConfigError as exc:
        sys.stderr.write(f"model-catalog: cannot load the cluster configuration: {one_line(str(exc))}\n")
        return int(Severity.FAIL)
    identity = options.identity
    if identity is None:
        identity = "" if not source.kubeconfig else controller_identity(config.namespace)
    settings = CheckSettings(
        config=config,
        lease_namespace=env.get("CATALOG_LEASE_NAMESPACE") or config.namespace,
        lease_name=env.get("CATALOG_LEASE_NAME") or "ai-model-catalog-controller",
        litellm_url=options.litellm_url or config.litellm_base_url,
        identity=identity,
        master_key=env.get("LITELLM_MASTER_KEY") or None,
    )
    async with client:
        server = client.server
        api = KubeApi(client, request_timeout=REQUEST_TIMEOUT_SECONDS)
        if identity:
            as_client, _ = await load_cli_client(
                options.kubeconfig,
                env,
                context=options.context,
                connections=REVIEWS_AT_ONCE,
                service_account=mounted,
                headers={"Impersonate-User": identity},
            )
        else:
            as_client = None
        try:
            api_as = (
                KubeApi(as_client, request_timeout=REQUEST_TIMEOUT_SECONDS) if as_client is not None else api
            )
            findings = await run_checks(api, api_as, settings, server)
        finally:
            if as_client is not None:
                await as_client.aclose()
    show(findings, out, as_json=options.as_json)
    return int(worst(findings))


def main(config: CatalogConfig, options: Options, env: Mapping[str, str]) -> int:
    return anyio.run(_main, config, options, env)
