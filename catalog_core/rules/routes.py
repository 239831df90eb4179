"""Desired LiteLLM deployments for each kind of source (behaviour §1.1, §1.2, §1.3, §2.2, §1.4, §2.3)."""

from __future__ import annotations

from typing import Any, Protocol

from catalog_core.commands import ApiKeyRef, LiteralKey, SecretKey
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from catalog_core.jsonval import Json, canonical, short_hash
from catalog_core.keys import ItemKey
from catalog_core.sources.external import ExternalModel
from catalog_core.sources.freetoken import FreeTokenRuntime
from catalog_core.sources.kubeai import KubeAIModel
from catalog_core.sources.litellm_row import SET_KEYS_KEY
from catalog_core.state import DesiredRoute
from catalog_core.values import OWNER, ModelType, Source

SPEC_HASH_KEY = "ai_appliance_spec_hash"
_OPTIONAL_INFO = ("max_input_tokens", "max_output_tokens", "features", "ai_appliance_scheduler")
NO_KEY = LiteralKey("none")


class Origin(Protocol):
    """What a route needs to know of its source (``registry.SourceSpec`` is one)."""

    @property
    def source(self) -> Source: ...

    @property
    def id_family(self) -> str: ...

    @property
    def kind(self) -> SourceKind: ...

    def route_id(self, model_name: str) -> str: ...

    def health_key(self, item: ItemKey) -> str: ...


def key_identity(api_key: ApiKeyRef | None) -> Any:
    """What a key contributes to the spec hash: never its value (behaviour §2.3)."""
    if api_key is None:
        return None
    if isinstance(api_key, LiteralKey):
        return api_key.value
    if isinstance(api_key, SecretKey):
        return {
            "secret": api_key.name,
            "key": api_key.key,
            "uid": api_key.uid,
            "rv": api_key.resource_version,
        }
    return {"inline": api_key.fingerprint}


def spec_hash(
    model_name: str, params: dict[str, Any], info: dict[str, Any], api_key: ApiKeyRef | None
) -> str:
    return short_hash(
        canonical(
            {"v": 1, "model_name": model_name, "params": params, "info": info, "key": key_identity(api_key)}
        )
    )


def _scheduler(
    engine: str, compute_target: str, context: int | None, max_output: int | None, max_num_seqs: int | None
) -> dict[str, Any]:
    """Trusted scheduler metadata of a ready local route (behaviour §2.2). No replica counts: they
    change too often."""
    out: dict[str, Any] = {
        "trusted": True,
        "locality": "local",
        "engine": engine,
        "computeTarget": compute_target,
    }
    if context is not None:
        out["contextWindow"] = context
    if max_output is not None:
        out["maxOutputTokens"] = max_output
    if max_num_seqs is not None:
        out["maxNumSeqs"] = max_num_seqs
    return out


def _finish(
    *,
    origin: Origin,
    item: str,
    name: str,
    params: dict[str, Any],
    info: dict[str, Any],
    api_key: ApiKeyRef | None,
    model_type: ModelType,
    locality: str,
    context: int | None,
    max_output: int | None,
) -> DesiredRoute:
    rid = origin.route_id(name)
    family = origin.id_family
    model_info: dict[str, Any] = {
        "id": rid,
        "ai_appliance_managed": True,
        "ai_appliance_owner": OWNER,
        "ai_appliance_source": family,
        "ai_appliance_type": model_type.value,
        "source": family,
        **info,
    }
    if context is not None:
        model_info["max_input_tokens"] = context
    if max_output is not None:
        model_info["max_output_tokens"] = max_output
    # LiteLLM merges updates and fills limits in from its model map: recording which optional keys we
    # set is the only way to know, later, that one must be dropped (which takes a fresh row).
    model_info[SET_KEYS_KEY] = sorted(
        [f"litellm_params.{k}" for k in params if k != "model"]
        + (["litellm_params.api_key"] if api_key is not None else [])
        + [f"model_info.{k}" for k in _OPTIONAL_INFO if k in model_info]
    )
    digest = spec_hash(name, params, model_info, api_key)
    model_info[SPEC_HASH_KEY] = digest
    order = params.get("order")
    return DesiredRoute(
        id=rid,
        source=origin.source,
        item=item,
        model_name=name,
        litellm_params=Json.of(params),
        model_info=Json.of(model_info),
        api_key=api_key,
        spec_hash=digest,
        model_type=model_type,
        locality=locality,
        order=order if isinstance(order, int) else None,
        litellm_model=str(params["model"]),
        api_base=params.get("api_base"),
        context_window=context,
        max_output_tokens=max_output,
    )


def kubeai_route(model: KubeAIModel, item: str, origin: Origin, config: CatalogConfig) -> DesiredRoute:
    return _finish(
        origin=origin,
        item=item,
        name=model.name,
        params={"model": f"openai/{model.name}", "api_base": config.kubeai_api_base, "order": 0},
        info={
            "features": list(model.features),
            "ai_appliance_scheduler": _scheduler(
                model.engine,
                model.compute_target,
                model.context_window,
                model.max_output_tokens,
                model.max_num_seqs,
            ),
        },
        api_key=NO_KEY,
        model_type=model.model_type,
        locality="local",
        context=model.context_window,
        max_output=model.max_output_tokens,
    )


def external_route(
    model: ExternalModel, item: str, origin: Origin, api_key: ApiKeyRef | None
) -> DesiredRoute:
    params: dict[str, Any] = {"model": model.litellm_model}
    if model.api_base is not None:
        params["api_base"] = model.api_base
    params.update(model.params)  # the declared optional fields (external_fields.FIELDS)
    return _finish(
        origin=origin,
        item=item,
        name=model.name,
        params=params,
        info={},
        api_key=api_key,
        model_type=model.model_type,
        locality="external",
        context=model.context_window,
        max_output=model.max_output_tokens,
    )


def runtime_route(
    runtime: FreeTokenRuntime, name: str, endpoint: str, model_type: ModelType, item: str, *, origin: Origin
) -> DesiredRoute:
    return _finish(
        origin=origin,
        item=item,
        name=name,
        params={"model": f"openai/{name}", "api_base": endpoint, "order": 0},
        info={
            "ai_appliance_scheduler": _scheduler(
                runtime.engine,
                runtime.compute_target,
                runtime.context_window,
                runtime.max_output_tokens,
                runtime.max_num_seqs,
            ),
        },
        api_key=NO_KEY,
        model_type=model_type,
        locality="local",
        context=runtime.context_window,
        max_output=runtime.max_output_tokens,
    )
