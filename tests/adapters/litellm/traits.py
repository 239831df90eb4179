"""What the LiteLLM under test does where releases differ, read from the running proxy (a probe), never
from a version string: the contract tests state each version-dependent expectation on these.

``probe`` runs against any LiteLLM (a real proxy, or a fake of one release on its own table), so the
fake of a release is checked to answer the probe as the real proxy of that release does.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import attrs
import httpx

from adapters.litellm.client import LiteLLMClient
from tests.fixtures.litellm_peer import TEST_PREFIX


@attrs.frozen
class Traits:
    # A limit a row added at run time registers under its ``litellm_params.model`` fills it in for the
    # other rows of that model (every release does so for the rows its router is built with).
    shares_registered_limits: bool
    # The 401 answer to a wrong master key quotes the key's last four characters and its SHA-256.
    quotes_refused_key: bool
    # An explicit null for a price in ``litellm_params`` of PATCH /model/{id}/update clears it (a null
    # keeps every field of ours).
    null_clears_prices: bool


async def probe(base_url: str, master_key: str, transport: httpx.AsyncBaseTransport | None = None) -> Traits:
    """Ask the running LiteLLM: rows of models only this probe uses, and one wrong key. The rows are
    deleted again (a registered limit stays in LiteLLM's model map, under that unused model)."""
    tag = f"{TEST_PREFIX}probe-{uuid.uuid4().hex[:8]}"
    model = f"openai/{tag}"
    client = LiteLLMClient(base_url, master_key, transport=transport)
    ids = [f"{tag}-{n}" for n in ("first", "sets", "fills", "priced")]
    try:
        # The first row of a proxy that had none builds its router, and every release registers those.
        await _created(client, ids[0], f"openai/{tag}-other")
        await _created(client, ids[1], model, info={"max_input_tokens": 4242})
        await _created(client, ids[2], model)
        await _created(client, ids[3], model, params={"input_cost_per_token": 1.5e-06})
        shared = (await _row(client, ids[2]))["model_info"].get("max_input_tokens") == 4242
        patched = await client.patch_update(ids[3], {"litellm_params": {"input_cost_per_token": None}})
        assert patched.status == 200, patched
        cleared = (await _row(client, ids[3]))["litellm_params"].get("input_cost_per_token") is None
        wrong = f"sk-probe-{uuid.uuid4().hex}"
        async with httpx.AsyncClient(base_url=base_url, transport=transport) as raw:
            said = (await raw.get("/model/info", headers={"authorization": f"Bearer {wrong}"})).text
        quotes = hashlib.sha256(wrong.encode()).hexdigest() in said
        return Traits(shares_registered_limits=shared, quotes_refused_key=quotes, null_clears_prices=cleared)
    finally:
        for model_id in ids:
            await client.delete(model_id)
        await client.aclose()


async def _created(
    client: LiteLLMClient,
    model_id: str,
    model: str,
    *,
    params: dict[str, object] | None = None,
    info: dict[str, object] | None = None,
) -> None:
    answer = await client.new(
        {
            "model_name": model_id,
            "litellm_params": {"model": model, "api_key": "none", **(params or {})},
            "model_info": {"id": model_id, **(info or {})},
        }
    )
    assert answer.status == 200, answer


async def _row(client: LiteLLMClient, model_id: str) -> dict[str, Any]:
    answer = await client.info_of(model_id)
    assert answer.status == 200, answer
    [row] = answer.body["data"]
    return dict(row)
