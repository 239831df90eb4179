"""Each source item's claim to a route: the route, or the reason it has none (behaviour §1, §7, §8, §1.5)."""

from __future__ import annotations

import functools
import re
from typing import Any

from catalog_core.commands import ApiKeyRef, InlineKeyRef, SecretKey
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from catalog_core.evolve import evolve
from catalog_core.external_fields import CUSTOM_LLM_PROVIDER
from catalog_core.gates import Gate
from catalog_core.keys import ItemKey, activation_ref, secret_ref, service_ref
from catalog_core.reasons import CURRENT_ROUTE, KEEPS_LAST_GOOD, Reason
from catalog_core.rules.routes import NO_KEY, Origin, external_route, kubeai_route, runtime_route
from catalog_core.sealing import ENV_REFERENCE, TOO_MANY, invalid_value
from catalog_core.sources.activation import ModelActivation
from catalog_core.sources.common import PROVIDER_SECRET_LABEL, PROVIDER_SECRET_PREFIX
from catalog_core.sources.external import ExternalModel, InlineKey, SecretKeyRef
from catalog_core.sources.kubeai import KubeAIModel
from catalog_core.sources.secret import SecretInfo, allowed_by_name
from catalog_core.state import Candidate, CatalogState, DesiredRoute, SourceStatus
from catalog_core.trim import PROVIDER_SECRET_API_BASES
from catalog_core.urls import Destination, DestinationPattern
from catalog_core.values import ModelType, is_env_reference, parse_model_type, shown

_ENDPOINT = re.compile(r"^(https?)://([a-z0-9]([-a-z0-9.]*[a-z0-9])?)(?::(\d{1,5}))?(/[^\s?#]*)?$")


def checked(state: CatalogState, claim: Candidate | None) -> Candidate | None:
    """The last gate of every claim, whatever its source and field: LiteLLM resolves a string of
    litellm_params that starts with os.environ/ from its own environment (its master key, its
    DATABASE_URL)."""
    if claim is None or claim.route is None or claim.reason not in CURRENT_ROUTE:
        return claim
    field = env_reference_field(claim.route)
    if field is not None:
        return _with_last_good(
            state,
            evolve(claim, route=None),
            Reason.ENV_REFERENCE_REJECTED,
            f"{field} starts with os.environ/, which LiteLLM would read from its own environment",
            claim.refs,
        )
    api_base = claim.route.api_base
    if (
        claim.route.api_key is None
        and api_base is not None
        and Gate.AMBIENT_CREDENTIALS in state.config.gates
        and not _ambient_allowed(state, api_base)
    ):
        # Whatever produced it: a keyless route makes LiteLLM use its own credentials.
        return _with_last_good(
            state,
            evolve(claim, route=None),
            Reason.AMBIENT_CREDENTIAL_REJECTED,
            _ambient_refusal(api_base, "a route without a key lets LiteLLM use its own credentials"),
            claim.refs,
        )
    return claim


def env_reference_field(route: DesiredRoute) -> str | None:
    """The first field of ``route`` LiteLLM would resolve from its environment, or None."""
    if is_env_reference(route.model_name):
        return "model_name"
    for part, value in (("litellm_params", route.litellm_params), ("model_info", route.model_info)):
        found = _env_reference_in(value.value(), part)
        if found is not None:
            return found
    return None


def _env_reference_in(value: Any, path: str) -> str | None:
    if isinstance(value, str):
        return path if is_env_reference(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and is_env_reference(key):
                return f"{path}.{key}"
            found = _env_reference_in(item, f"{path}.{key}")
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _env_reference_in(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _with_last_good(
    state: CatalogState, base: Candidate, reason: Reason, message: str, refs: tuple[str, ...] = ()
) -> Candidate:
    """Bad input keeps the item's last good route (behaviour §8); other reasons withdraw it."""
    route = (
        state.derived.last_good.get(base.item)
        if reason in KEEPS_LAST_GOOD or reason is Reason.PENDING
        else None
    )
    if (
        route is not None
        and isinstance(route.api_key, SecretKey)
        and Gate.SECRET_REVOCATION in state.config.gates
    ):
        # The last good route is kept only while the Secret its key came from still allows it: deleting,
        # unlabelling or un-annotating a Secret withdraws its key from LiteLLM (the row is deleted).
        key = route.api_key
        lost = _grant_lost(state, key, route.api_base)
        if lost is not None:
            route = None
            message = f"{message}; its last good route is withdrawn: {lost}"
        ref = secret_ref(key.name)
        if ref not in refs:
            refs = (*refs, ref)  # so the Secret stays watched, and a change to it re-derives this item
    return evolve(base, route=route, reason=reason, message=message, refs=refs)


def _grant_lost(state: CatalogState, key: SecretKey, api_base: str | None) -> str | None:
    """Why Secret ``key`` no longer allows a route to ``api_base``, or None (also while it is unread)."""
    what = f"Secret {key.namespace}/{key.name}"
    if key.name == state.config.litellm_master_key_secret:
        return f"{what} holds the LiteLLM master key"
    if key.name not in state.observed.secrets_scope:
        return None
    secret = state.observed.secrets.get(key.name)
    if secret is None:
        return f"{what} was deleted or is no longer a model-provider Secret"
    if secret.uid != key.uid:
        return f"{what} was deleted and created again"
    if secret.service_account_token or not secret.allowed:
        return f"{what} is no longer a model-provider Secret"
    if api_base is not None and _destination_checked(state) and _destination_refused(secret, api_base):
        return f"{what} no longer allows its key to be sent to {_origin(api_base)}"
    return None


def kubeai_claim(state: CatalogState, spec: Origin, key: ItemKey) -> Candidate | None:
    model = state.stored(spec.kind).get(key.name)
    if model is None:
        return None
    item = key.text
    base = Candidate(
        item, spec.source, model.name, model.uid, None, Reason.PUBLISHED, warnings=model.warnings
    )
    if model.problem is not None and model.problem.reason is Reason.NESTED_TOO_DEEPLY:
        # unreadable, so its readiness is unknown: bad input keeps the last good route
        return _with_last_good(state, base, model.problem.reason, model.problem.message)
    cold = published_cold(state.config, model)
    if not model.ready and not cold:
        return _with_last_good(
            state, base, Reason.NOT_READY, "status.replicas.ready is not a positive number"
        )
    if model.problem is not None:
        return _with_last_good(state, base, model.problem.reason, model.problem.message)
    route = kubeai_route(model, item, spec, state.config)
    if not cold:
        return evolve(base, route=route)
    # The same claim whether or not a replica is ready, so readiness flapping between 0 and N rewrites
    # nothing (no LiteLLM row, no catalog, no consumer); only a start that never ends is reported.
    watch = state.starts.get(item)
    if watch is not None and watch.overdue:
        seconds = f"{state.config.kubeai_start_deadline_seconds:g}"
        message = (
            f"its pods have been starting for more than {seconds} s and none is ready: requests for it "
            "wait for KubeAI, which keeps starting it (see the Model's pods); the route stays published"
        )
        return evolve(base, route=route, reason=Reason.START_DEADLINE_EXCEEDED, message=message)
    message = (
        "published with or without a ready replica: KubeAI starts one when a request arrives (autoscaling "
        "from zero), so the first request after it scaled to zero waits for a cold start"
    )
    return evolve(base, route=route, reason=Reason.SCALES_FROM_ZERO, message=message)


def published_cold(config: CatalogConfig, model: KubeAIModel) -> bool:
    """Whether ``model`` is published while no replica is ready: KubeAI scales it up from zero on a
    request, and the setting and the planning gate allow it (behaviour §1.1)."""
    allowed = Gate.SCALE_FROM_ZERO in config.gates and config.kubeai_scale_from_zero
    return allowed and model.scales_from_zero


def kubeai_start_deadline(state: CatalogState, spec: Origin, key: ItemKey) -> float | None:
    """The start deadline of a Model published while no replica is ready whose pods are starting."""
    model = state.stored(spec.kind).get(key.name)
    if model is None or not model.starting or not published_cold(state.config, model):
        return None
    return state.config.kubeai_start_deadline_seconds


_HOW_TO_ALLOW = (
    "to allow it, label it: kubectl label secret -n {ns} {name} "
    f"{PROVIDER_SECRET_LABEL}=true (or name it {PROVIDER_SECRET_PREFIX}*)"
)
_KeyResolution = tuple[ApiKeyRef | None, Reason | None, str, tuple[str, ...]]


def _inline_key(fp: str) -> _KeyResolution:
    why = invalid_value(fp)
    if why is None:
        return InlineKeyRef(fp), None, "", ()
    if fp == ENV_REFERENCE:
        return None, Reason.ENV_REFERENCE_REJECTED, f"the inline API key {why}", ()
    if fp == TOO_MANY:
        return None, Reason.INLINE_KEY_REJECTED, f"the inline API key {why}", ()
    return None, Reason.INVALID_FIELD, f"the inline API key {why}", ()


def _resolve_key(
    state: CatalogState, spec: SecretKeyRef | InlineKey | None, api_base: str | None
) -> _KeyResolution:
    """The key a route to ``api_base`` sends, or why there is none. Every Secret reference, whatever its
    source, passes the same allow-list (behaviour §1.5): whoever edits models.json or a ModelActivation must
    not be able to make the controller hand out a Secret its author could not read, nor send its key to any
    other API base than the ones the Secret itself names."""
    if spec is None:
        return None, None, "", ()
    if isinstance(spec, InlineKey):
        return _inline_key(spec.fingerprint)
    refs = (secret_ref(spec.name),)
    ns = state.config.namespace
    what = f"Secret {ns}/{spec.name}"
    if spec.name == state.config.litellm_master_key_secret:
        # Not even read: the reference alone is refused, so no label can make it a provider Secret.
        return (
            None,
            Reason.SECRET_NOT_ALLOWED,
            f"{what} holds the LiteLLM master key and is never handed out as a provider key",
            refs,
        )
    how = _HOW_TO_ALLOW.format(ns=ns, name=spec.name)
    if spec.name not in state.observed.secrets_scope:
        return None, Reason.PENDING, f"waiting for {what} to be read", refs
    secret = state.observed.secrets.get(spec.name)
    if secret is None:
        if not allowed_by_name(spec.name):
            return (
                None,
                Reason.SECRET_NOT_ALLOWED,
                f"{what} does not exist or is not a model-provider Secret; {how}",
                refs,
            )
        return None, Reason.SECRET_NOT_FOUND, f"{what} not found", refs
    if secret.service_account_token:
        return (
            None,
            Reason.SECRET_NOT_ALLOWED,
            f"{what} is a ServiceAccount token Secret, which is never handed out, even if labelled",
            refs,
        )
    if not secret.allowed:
        return None, Reason.SECRET_NOT_ALLOWED, f"{what} is not a model-provider Secret; {how}", refs
    if spec.key not in secret.keys:
        return None, Reason.SECRET_KEY_NOT_FOUND, f"{what} has no key {spec.key!r}", refs
    fp = secret.fingerprint(spec.key)
    why = invalid_value(fp)
    if why is not None:
        reason = Reason.ENV_REFERENCE_REJECTED if fp == ENV_REFERENCE else Reason.SECRET_VALUE_INVALID
        return None, reason, f"the value of key {spec.key!r} of {what} {why}", refs
    if api_base is not None and _destination_checked(state) and _destination_refused(secret, api_base):
        return None, Reason.SECRET_API_BASE_NOT_ALLOWED, _how_to_send(state, secret, api_base), refs
    key = SecretKey(ns, spec.name, spec.key, secret.uid, secret.resource_version, fp)
    return key, None, "", refs


@functools.lru_cache(maxsize=256)
def _patterns(entries: tuple[str, ...]) -> tuple[DestinationPattern, ...]:
    return tuple(p for p in map(DestinationPattern.parse, entries) if p is not None)


def _destination_checked(state: CatalogState) -> bool:
    """Whether a Secret's key goes only to the API bases it names (``Gate.SECRET_API_BASES``)."""
    return Gate.SECRET_API_BASES in state.config.gates


def _destination_refused(secret: SecretInfo, api_base: str) -> bool:
    """Whether ``secret`` does not name ``api_base`` among the API bases its key may be sent to."""
    destination = Destination.of(api_base)
    return destination is None or not any(p.allows(destination) for p in _patterns(secret.api_bases))


def _origin(api_base: str) -> str:
    """``scheme://host[:port]`` of ``api_base`` (never its credential parts), to name it in a message."""
    destination = Destination.of(api_base)
    return (
        destination.origin if destination is not None else "an apiBase whose host cannot be told for certain"
    )


_SHELL_SAFE = re.compile(r"^[A-Za-z0-9._:/,=-]+$")


def _how_to_send(state: CatalogState, secret: SecretInfo, api_base: str) -> str:
    """SecretApiBaseNotAllowed's message: what the Secret allows, and the command that allows this too."""
    ns, name = state.config.namespace, secret.name
    what = f"Secret {ns}/{name}"
    destination = Destination.of(api_base)
    if destination is None:
        return (
            f"{what} is never sent to an apiBase whose host cannot be told for certain "
            "(apiBase must be http(s)://host[:port]/...)"
        )
    allowed = [str(p) for p in _patterns(secret.api_bases)]
    ignored = [e for e in secret.api_bases if DestinationPattern.parse(e) is None]
    said = (
        f"allows its key to be sent only to its provider's own API and {', '.join(allowed)}"
        if allowed
        else "names no API base its key may be sent to besides its provider's own "
        f"(annotation {PROVIDER_SECRET_API_BASES})"
    )
    if ignored:
        said += (
            f" (entries that are not API base patterns, ignored: {', '.join(shown(e) for e in ignored[:3])})"
        )
    value = f"{PROVIDER_SECRET_API_BASES}={','.join([*allowed, destination.origin])}"
    if not _SHELL_SAFE.match(value):
        value = f"'{value}'"
    return (
        f"{what} {said}, not {destination.origin}; if its key may go there, annotate it: "
        f"kubectl annotate secret -n {ns} {name} --overwrite {value}"
    )


# Providers whose every credential in LiteLLM is the route's api_key (LiteLLM 1.84.0 and 1.108.7: the
# route's api_key, else the environment's; nothing else is attached): an explicit key stops LiteLLM from
# using its own. Any other provider may attach LiteLLM's identity whatever the key (Azure's AD token,
# Vertex AI's and Bedrock's cloud identity, Ollama's OLLAMA_API_KEY), and so may a model whose provider
# LiteLLM would guess from its name.
KEY_ONLY_PROVIDERS: frozenset[str] = frozenset(
    {"openai", "custom_openai", "text-completion-openai", "hosted_vllm"}
)


def route_provider(model: ExternalModel) -> str | None:
    """The LiteLLM provider ``model`` names: ``customLlmProvider``, else the prefix of its model. As
    written: LiteLLM compares provider names as they are, so ``OpenAI`` is not ``openai`` to it either."""
    provider = model.param(CUSTOM_LLM_PROVIDER.param)
    if isinstance(provider, str) and provider:
        return provider.strip()
    prefix, slash, _ = model.litellm_model.partition("/")
    return prefix.strip() if slash else None


def _ambient_allowed(state: CatalogState, api_base: str) -> bool:
    destination = Destination.of(api_base)
    patterns = _patterns(state.config.ambient_credential_api_bases)
    return destination is not None and any(p.allows(destination) for p in patterns)


def _ambient_guard(
    state: CatalogState, model: ExternalModel, api_key: ApiKeyRef | None
) -> tuple[ApiKeyRef | None, str | None]:
    """The key an external route sends so LiteLLM never sends its own credentials to a custom API base the
    cluster admin did not allow (behaviour §1.5), or why the route cannot be published."""
    if Gate.AMBIENT_CREDENTIALS not in state.config.gates:
        return api_key, None
    if model.api_base is None or isinstance(api_key, SecretKey) or _ambient_allowed(state, model.api_base):
        # its provider's own API, or an API base the admin allowed (in the Secret, or for LiteLLM's own)
        return api_key, None
    provider = route_provider(model)
    if provider in KEY_ONLY_PROVIDERS:
        return (api_key if api_key is not None else NO_KEY), None
    which = (
        f"provider {shown(provider)} may attach LiteLLM's own credentials"
        if provider
        else "the model names no provider (provider/model or customLlmProvider), so LiteLLM would guess one, "
        "which may attach LiteLLM's own credentials"
    )
    return None, _ambient_refusal(model.api_base, which)


def _ambient_refusal(api_base: str, which: str) -> str:
    origin = _origin(api_base)
    return (
        f"{which} (its environment's keys, its cloud identity) and {origin} is not among the API bases the "
        "cluster admin allowed for them (CATALOG_AMBIENT_CREDENTIAL_API_BASES); use apiKeySecretRef with a "
        f"Secret that allows {origin}, or, for an OpenAI-compatible server, openai/<model>"
    )


def _external_claim(state: CatalogState, base: Candidate, model: ExternalModel, spec: Origin) -> Candidate:
    if not model.enabled:
        return _with_last_good(state, base, Reason.DISABLED, "enabled is false")
    base = evolve(base, warnings=model.warnings)
    api_key, reason, message, refs = _resolve_key(state, model.api_key, model.api_base)
    if reason is not None:
        return _with_last_good(state, base, reason, message, refs)
    api_key, refused = _ambient_guard(state, model, api_key)
    if refused is not None:
        return _with_last_good(state, base, Reason.AMBIENT_CREDENTIAL_REJECTED, refused, refs)
    route = external_route(model, base.item, spec, api_key)
    return evolve(base, route=route, refs=refs)


def external_claim(state: CatalogState, spec: Origin, key: ItemKey) -> Candidate | None:
    entry = state.observed.external_items.get(key.name)
    if entry is None:
        return None
    base = Candidate(key.text, spec.source, entry.name, state.observed.external_uid, None, Reason.PUBLISHED)
    if entry.problem is not None or entry.model is None:
        problem = entry.problem
        reason = problem.reason if problem else Reason.INVALID_FIELD
        return _with_last_good(state, base, reason, problem.message if problem else "")
    return _external_claim(state, base, entry.model, spec)


def activation_claim(state: CatalogState, spec: Origin, key: ItemKey) -> Candidate | None:
    activation = state.stored(spec.kind).get(key.name)
    if activation is None:
        return None
    if activation.kind != "external":
        return _local_activation_claim(state, spec, key, activation)
    base = Candidate(key.text, spec.source, activation.name, activation.uid, None, Reason.PUBLISHED)
    if activation.deleting:
        return _with_last_good(state, base, Reason.DELETING, "the ModelActivation is being deleted")
    if not activation.enabled:
        return _with_last_good(state, base, Reason.DISABLED, "spec.enabled is false")
    if activation.problem is not None or activation.external is None:
        problem = activation.problem
        reason = problem.reason if problem else Reason.MISSING_FIELD
        return _with_last_good(
            state, base, reason, problem.message if problem else "spec.external is required"
        )
    return _external_claim(state, base, activation.external, spec)


def _local_activation_claim(
    state: CatalogState, spec: Origin, key: ItemKey, activation: ModelActivation
) -> Candidate | None:
    """A local activation reaches the catalog through its runtime, so it claims nothing, unless its runtime
    can never appear: its engine runs on KubeAI and KubeAI is not installed (behaviour §1.3)."""
    if not (activation.active and activation.runs_on_kubeai):
        return None
    if state.source(SourceKind.KUBEAI_MODELS).status is not SourceStatus.NOT_INSTALLED:
        return None
    message = (
        f"engine {activation.engine} runs on KubeAI, whose CustomResourceDefinition models.kubeai.org is "
        "not installed: install KubeAI, and the model is published once its KubeAI Model is ready"
    )
    base = Candidate(key.text, spec.source, activation.name, activation.uid, None, Reason.PUBLISHED)
    return _with_last_good(state, base, Reason.KUBEAI_NOT_INSTALLED, message)


def trusted_endpoint(state: CatalogState, url: str) -> tuple[str, str] | None:
    """(service name, health URL) when ``url`` is an in-cluster Service URL in NAMESPACE (behaviour §1.4)."""
    match = _ENDPOINT.match(url.strip())
    if match is None:
        return None
    scheme, host, _, port, _ = match.groups()
    parts = host.split(".")
    ns = state.config.namespace
    if (
        len(parts) < 2
        or parts[1] != ns
        or tuple(parts[2:]) not in ((), ("svc",), ("svc", "cluster", "local"))
    ):
        return None
    service = parts[0]
    if service not in state.observed.services or service_refusal(state, service) is not None:
        return None
    origin = f"{scheme}://{host}" + (f":{port}" if port else "")
    return service, f"{origin}/health"


def service_refusal(state: CatalogState, name: str) -> str | None:
    """Why Service ``name`` (in NAMESPACE) may not be probed or published, or None (behaviour §1.4).

    A headless ClusterIP Service (``clusterIP: None``) is trusted like any ClusterIP one: its name resolves
    to the same endpoints a cluster IP would route to. An ExternalName one is a DNS alias to anywhere.
    """
    ns = state.config.namespace
    service = state.observed.services.get(name)
    if service is not None and service.service_type != "ClusterIP":
        return (
            f"Service {ns}/{name} is of type {service.service_type}; only ClusterIP Services are probed "
            "and published"
        )
    if (name, ns) in _litellm_services(state.config):
        return f"Service {ns}/{name} is LiteLLM's own; a runtime is never published as LiteLLM"
    return None


@functools.lru_cache(maxsize=8)
def _litellm_services(config: CatalogConfig) -> frozenset[tuple[str, str]]:
    """(name, namespace) of the Services LiteLLM is reached through (LITELLM_BASE_URL, LITELLM_API_BASE)."""
    out: set[tuple[str, str]] = set()
    for url in (config.litellm_base_url, config.litellm_api_base):
        match = re.match(r"^https?://(?:[^/?#]*@)?([^/:?#@\[]+)", url)
        if match is None:
            continue
        # DNS is case-insensitive and "x." is "x"; a short name resolves in the controller's namespace, and
        # <name>.<ns>.svc.<domain> is the Service whatever the cluster domain is called.
        parts = match.group(1).lower().rstrip(".").split(".")
        if len(parts) == 1:
            out.add((parts[0], config.namespace))
        elif len(parts) == 2 or parts[2] == "svc":
            out.add((parts[0], parts[1]))
    return frozenset(out)


def runtime_claim(state: CatalogState, spec: Origin, key: ItemKey) -> Candidate | None:
    """A runtime's claim. Its route names a Service by DNS, so a route kept as last good stays only while
    that Service is trusted: else LiteLLM would follow it to wherever it now points."""
    claim = _runtime_claim(state, spec, key)
    if claim is None or claim.reason is Reason.PUBLISHED or claim.route is None:
        return claim
    url = claim.route.api_base or ""
    service = _service_of(url)
    ref = service_ref(service) if service is not None else ""
    refs = claim.refs if service is None or ref in claim.refs else (*claim.refs, ref)
    route = claim.route if trusted_endpoint(state, url) is not None else None
    return evolve(claim, route=route, refs=refs)


def _runtime_claim(state: CatalogState, spec: Origin, key: ItemKey) -> Candidate | None:
    runtime = state.stored(spec.kind).get(key.name)
    if runtime is None:
        return None
    item = key.text
    model_name = runtime.activation or runtime.name
    base = Candidate(
        item, spec.source, model_name, runtime.uid, None, Reason.PUBLISHED, warnings=runtime.warnings
    )
    refs: tuple[str, ...] = (activation_ref(runtime.activation),) if runtime.activation else ()
    activations = state.stored(SourceKind.MODEL_ACTIVATIONS)
    activation = activations.get(runtime.activation) if runtime.activation else None
    if activation is None:
        why = (
            "label appliance.magicstick.dev/modelactivation is missing"
            if runtime.activation is None
            else f"ModelActivation {state.config.appliance_namespace}/{runtime.activation} not found"
        )
        return _with_last_good(state, base, Reason.ACTIVATION_NOT_FOUND, why, refs)
    if not activation.active:
        reason = Reason.DELETING if activation.deleting else Reason.ACTIVATION_DISABLED
        return _with_last_good(state, base, reason, f"ModelActivation {activation.name} is not active", refs)
    if runtime.activation_owner_uid and runtime.activation_owner_uid == activation.uid:
        # Owned by its activation, by that activation's uid: the operator's own runtime (behaviour §3).
        base = evolve(base, vouched=True)
    if runtime.problem is not None and runtime.problem.reason is Reason.NESTED_TOO_DEEPLY:
        # unreadable, so its readiness is unknown: bad input keeps the last good route
        return _with_last_good(state, base, runtime.problem.reason, runtime.problem.message, refs)
    if not runtime.ready:
        return _with_last_good(state, base, Reason.NOT_READY, runtime.not_ready_because, refs)
    if runtime.problem is not None:
        return _with_last_good(state, base, runtime.problem.reason, runtime.problem.message, refs)
    ns = state.config.namespace
    if runtime.endpoint_annotation is not None:
        endpoint = runtime.endpoint_annotation
        service_name = _service_of(endpoint)
        if service_name:
            refs = (*refs, service_ref(service_name))
        trusted = trusted_endpoint(state, endpoint)
        if trusted is None:
            refused = service_refusal(state, service_name) if service_name else None
            return _with_last_good(
                state,
                base,
                Reason.UNTRUSTED_ENDPOINT,
                refused or f"endpoint {shown(endpoint)} is not the URL of a Service in namespace {ns}",
                refs,
            )
        health_url = trusted[1]
    else:
        refs = (*refs, service_ref(runtime.name))
        service = state.observed.services.get(runtime.name)
        if service is None:
            return _with_last_good(
                state,
                base,
                Reason.ENDPOINT_NOT_FOUND,
                f"no ai-appliance.io/endpoint and no Service {ns}/{runtime.name}",
                refs,
            )
        refused = service_refusal(state, runtime.name)
        if refused is not None:
            return _with_last_good(state, base, Reason.UNTRUSTED_ENDPOINT, refused, refs)
        port = f":{service.port}" if service.port else ""
        origin = f"http://{runtime.name}.{ns}.svc.cluster.local{port}"
        endpoint, health_url = f"{origin}/v1", f"{origin}/health"
    health = state.health.get(spec.health_key(key))
    model_type = parse_model_type(activation.model_type_hint, "spec.modelType")
    kind = model_type if isinstance(model_type, ModelType) else ModelType.CHAT
    route: DesiredRoute = runtime_route(runtime, model_name, endpoint, kind, item, origin=spec)
    if health is None or health.url != health_url or not health.healthy:
        failed = health is not None and health.url == health_url and health.failures >= 2
        reason = Reason.HEALTH_CHECK_FAILED if failed else Reason.HEALTH_CHECK_PENDING
        detail = health.detail if health is not None and health.url == health_url else ""
        message = f"GET {health_url}: {detail}" if detail else f"waiting for GET {health_url} to succeed"
        return evolve(base, reason=reason, message=message, refs=refs, health_url=health_url)
    return evolve(base, route=route, refs=refs, health_url=health_url)


def _service_of(url: str) -> str | None:
    match = _ENDPOINT.match(url.strip())
    return match.group(2).split(".")[0] if match else None
