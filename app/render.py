"""``model-catalog render``: what the controller would publish for a given cluster, computed offline.

The same fold as the controller runs against a simulated world that accepts
every write; render never probes, so FreeToken runtimes pass their health gate
only when named with ``--healthy``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core import raw, registry
from catalog_core.commands import (
    ApiKeyRef,
    CreateLiteLLMModel,
    DeleteLiteLLMModel,
    EmitKubernetesEvent,
    InlineKeyRef,
    LiteralKey,
    RecreateLiteLLMModel,
    SecretKey,
    UpdateLiteLLMModel,
)
from catalog_core.config import CatalogConfig
from catalog_core.events import Event, SourceKind, SourceListed
from catalog_core.fold import initial_state
from catalog_core.kinds import ROLLABLE
from catalog_core.plan import all_records, rendered_catalog
from catalog_core.redact import inline_vault_key, redact_for_source, secret_vault_key
from catalog_core.rules.agent_templates import applied_content
from catalog_core.rules.health import FAILURES_TO_WITHDRAW
from catalog_core.simulate import SimulatedWorld, converge, settling_probe_at
from catalog_core.sources.catalog_configmap import held_defaults
from catalog_core.sources.common import ACTIVATION_LABEL
from catalog_core.state import CatalogState
from catalog_core.urls import masked_url
from contracts.kinds import sources_of


@attrs.frozen
class RenderResult:
    output: dict[str, Any]
    warnings: tuple[str, ...]


def _redact(source: SourceKind, obj: Mapping[str, Any], vault: dict[str, str]) -> Mapping[str, Any]:
    redacted = redact_for_source(source.value, obj)
    vault.update(redacted.secrets)
    return redacted.obj


def api_key_value(ref: ApiKeyRef | None, vault: Mapping[str, str], show_secrets: bool) -> str | None:
    if ref is None:
        return None
    if isinstance(ref, LiteralKey):
        return ref.value
    if isinstance(ref, SecretKey):
        key = secret_vault_key(ref.namespace, ref.name, ref.key)
        return (
            vault.get(key, "<missing>")
            if show_secrets
            else f"<redacted: Secret {ref.namespace}/{ref.name} key {ref.key}>"
        )
    assert isinstance(ref, InlineKeyRef)
    return (
        vault.get(inline_vault_key(ref.fingerprint), "<missing>")
        if show_secrets
        else "<redacted: inline key>"
    )


def _body(
    command: CreateLiteLLMModel | UpdateLiteLLMModel | RecreateLiteLLMModel,
    vault: Mapping[str, str],
    show: bool,
) -> dict[str, Any]:
    params = dict(command.litellm_params.value())
    if not show and isinstance(params.get("api_base"), str):
        params["api_base"] = masked_url(params["api_base"])  # its user:password@ and query are secrets too
    value = api_key_value(command.api_key, vault, show)
    if value is not None:
        params["api_key"] = value
    return {
        "model_name": command.model_name,
        "litellm_params": params,
        "model_info": command.model_info.value(),
    }


def render(
    objects: list[dict[str, Any]],
    config: CatalogConfig,
    *,
    model_info: list[dict[str, Any]] | None = None,
    healthy: tuple[str, ...] = (),
    show_secrets: bool = False,
) -> RenderResult:
    vault: dict[str, str] = {}
    grouped: dict[SourceKind, list[Mapping[str, Any]]] = defaultdict(list)
    for obj in objects:
        for source in sources_of(obj, config):
            grouped[source].append(_redact(source, obj, vault))
    world = SimulatedWorld()
    world.secrets = {raw.name_of(s): s for s in grouped.pop(SourceKind.SECRETS, [])}
    world.templates = {raw.name_of(t): dict(t) for t in grouped.get(SourceKind.AGENT_TEMPLATES, [])}
    for kind in ROLLABLE:
        for w in grouped.get(kind.source, []):
            world.workloads[kind.key(raw.name_of(w))] = dict(w)
    world.healthy = _healthy_items(grouped, healthy)
    for row in model_info or []:
        rid = raw.string(row, "model_info", "id")
        if rid:
            world.rows[rid] = row
    events: list[Event] = [
        SourceListed(source, tuple(grouped.get(source, ())))
        for source in SourceKind
        if source is not SourceKind.SECRETS
    ]
    events.append(world.rows_event())
    state, commands, now = converge(initial_state(config), world, start=0.0, events=events)
    # What a running controller settles on: a runtime that keeps failing its probe is withheld as
    # HealthCheckFailed after its second failure, so run the clock on to the probes that settle it.
    for _ in range(FAILURES_TO_WITHDRAW):
        due = settling_probe_at(state)
        if due is None:
            break
        state, more, now = converge(state, world, start=max(now + 1.0, due), events=())
        commands.extend(more)
    output: dict[str, Any] = {
        "litellm": _desired(state, vault, show_secrets),
        "catalog": rendered_catalog(state).as_dict(),
        "agentTemplate": applied_content(
            list(state.derived.entries.values()), config, held_defaults(state.cluster.catalog).chat
        ),
        "routes": [r.as_json() for r in sorted(all_records(state), key=lambda r: (r.source, r.name))],
    }
    if model_info is not None:
        names = {raw.string(r, "model_info", "id") or "": raw.string(r, "model_name") for r in model_info}
        output["plan"] = _plan(commands, vault, show_secrets, names)
    warnings = tuple(_warning(e) for e in world.events)
    return RenderResult(output, warnings)


def _healthy_items(
    grouped: Mapping[SourceKind, list[Mapping[str, Any]]], names: tuple[str, ...]
) -> frozenset[str]:
    """The health keys ``--healthy`` names: each takes a health-gated item's object name (a runtime
    Deployment) or its model (ModelActivation) name."""
    wanted = set(names)
    out = set()
    for spec in registry.SPECS:
        if not spec.health_gated:
            continue
        for obj in grouped.get(spec.kind, []):
            labels = raw.string_map(obj, "metadata", "labels")
            name = raw.name_of(obj)
            if name in wanted or labels.get(ACTIVATION_LABEL) in wanted:
                out.add(registry.health_key(spec.item(name)))
    return frozenset(out)


def _desired(state: CatalogState, vault: Mapping[str, str], show: bool) -> list[dict[str, Any]]:
    out = []
    for rid in sorted(state.derived.winners):
        route = state.derived.candidates[state.derived.winners[rid]].route
        if route is None:
            continue
        command = CreateLiteLLMModel(
            route.id, route.model_name, route.litellm_params, route.model_info, route.api_key
        )
        out.append(_body(command, vault, show))
    return out


def _plan(
    commands: list[Any], vault: Mapping[str, str], show: bool, names: Mapping[str, str | None]
) -> list[dict[str, Any]]:
    plan = []
    for command in commands:
        if isinstance(command, DeleteLiteLLMModel):
            name = names.get(command.model_id)
            plan.append(
                {"op": "delete", "id": command.model_id, "model_name": name, "body": {"id": command.model_id}}
            )
        elif isinstance(command, CreateLiteLLMModel | UpdateLiteLLMModel | RecreateLiteLLMModel):
            step: dict[str, Any] = {
                "op": "create" if isinstance(command, CreateLiteLLMModel) else "update",
                "id": command.model_id,
                "model_name": command.model_name,
                "body": _body(command, vault, show),
            }
            if isinstance(command, RecreateLiteLLMModel):
                step["replace"] = True  # LiteLLM merges updates; dropping a field takes delete + create
            plan.append(step)
    return sorted(plan, key=lambda p: (p["id"], p["op"]))


def _warning(event: EmitKubernetesEvent) -> str:
    ref = event.involved
    return f"warning: {ref.kind} {ref.namespace}/{ref.name}: {event.reason}: {event.message}"
