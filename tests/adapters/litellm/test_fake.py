"""The fake itself: served on a loopback port, request counts, fault injection.

(What it answers is pinned against the real proxy in test_contract.py.)
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import anyio
import httpx
import pytest

from adapters.litellm.client import LiteLLMTransportError
from tests.adapters.litellm.conftest import Peer
from tests.fakes.litellm import DELETE, INFO, NEW, PATCH, UPDATE, FakeLiteLLM, Fault

pytestmark = pytest.mark.anyio


async def test_served_on_a_port_it_answers_like_in_process(fake_peer: Peer) -> None:
    fake = fake_peer.fake
    assert fake is not None
    async with fake.serving() as url:
        assert url.startswith("http://127.0.0.1:")
        client = fake_peer.client(base_url=url)
        body = {
            "model_name": fake_peer.name("m"),
            "litellm_params": {"model": "openai/m", "api_key": "sk-hidden-1234"},
            "model_info": {"id": fake_peer.id("m"), "custom": {"nested": [1, 2]}},
        }
        assert (await client.new(body)).status == 200
        assert (await client.new(body)).status == 500
        assert (await client.patch_update(fake_peer.id("m"), {"litellm_params": {"rpm": 3}})).status == 200
        assert (
            await client.update({"litellm_params": {"tpm": 4}, "model_info": {"id": fake_peer.id("m")}})
        ).status == 200
        info = await client.info()
        [row] = info.body["data"]
        assert row["litellm_params"]["rpm"] == 3 and row["litellm_params"]["tpm"] == 4
        assert "api_key" not in row["litellm_params"] and row["model_info"]["custom"] == {"nested": [1, 2]}
        assert (await client.delete(fake_peer.id("m"))).status == 200
        assert (await client.delete(fake_peer.id("m"))).status == 400
        assert (await fake_peer.client("wrong", base_url=url).info()).status == 401
    assert fake.requests == {NEW: 2, PATCH: 1, UPDATE: 1, INFO: 2, DELETE: 2}
    assert fake.writes() == 6
    assert fake.answers[-1] == (INFO, 401)


async def test_a_refusing_fault_closes_the_connection_on_a_port(fake_peer: Peer) -> None:
    fake = fake_peer.fake
    assert fake is not None
    fake.seed(fake_peer.name("m"), {"model": "openai/m"}, {"id": fake_peer.id("m")})
    async with fake.serving() as url:
        client = fake_peer.client(base_url=url)
        fake.refuse(times=2)  # the client's one retry meets the second
        with pytest.raises(LiteLLMTransportError) as caught:
            await client.info()
        assert caught.value.kind == "network"
        assert (await client.info()).status == 200


async def test_a_client_that_dies_mid_body_does_not_stop_the_served_fake(fake_peer: Peer) -> None:
    """Regression (fault suite): a controller SIGKILLed while sending a request body made
    ``receive_exactly`` raise IncompleteRead, which ended the whole server: every later request was
    refused."""
    fake = fake_peer.fake
    assert fake is not None
    fake.seed(fake_peer.name("m"), {"model": "openai/m"}, {"id": fake_peer.id("m")})
    async with fake.serving() as url:
        port = int(url.rsplit(":", 1)[1])
        stream = await anyio.connect_tcp("127.0.0.1", port)
        head = "POST /model/new HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"
        await stream.send(head.encode() + b'{"model_')
        await stream.aclose()  # gone before the rest of the body
        await anyio.sleep(0.1)
        assert (await fake_peer.client(base_url=url).info()).status == 200


async def test_faults_by_endpoint_count_time_and_apply_first(fake_peer: Peer) -> None:
    fake = fake_peer.fake
    assert fake is not None
    client = fake_peer.client()
    fake.seed(fake_peer.name("m"), {"model": "openai/m"}, {"id": fake_peer.id("m")})
    fake.fail(503, times=2, endpoints=frozenset({INFO}))
    assert [(await client.info()).status for _ in range(3)] == [503, 503, 200]
    fake.inject(Fault(status=401, seconds=0.1))
    assert (await client.info()).status == 401
    await anyio.sleep(0.12)
    assert (await client.info()).status == 200
    fake.inject(Fault(status=504, apply_first=True, endpoints=frozenset({NEW}), times=1))
    body = {
        "model_name": fake_peer.name("x"),
        "litellm_params": {"model": "openai/x"},
        "model_info": {"id": "x1"},
    }
    assert (await client.new(body)).status == 504
    assert fake.ids() == [fake_peer.id("m"), "x1"]  # carried out all the same
    fake.inject(Fault(delay=0.05, times=1))
    started = time.monotonic()
    assert (await client.info()).status == 200
    assert time.monotonic() - started >= 0.05
    fake.refuse(times=1)
    with pytest.raises(LiteLLMTransportError):
        await client.info()
    fake.clear_faults()
    assert fake.faults == []


def test_seed_edit_and_remove_work_behind_the_controllers_back() -> None:
    fake = FakeLiteLLM()
    model_id = fake.seed("m", {"model": "openai/m"}, {"ai_appliance_owner": "private-mesh"})
    assert len(model_id) == 36 and fake.requests == {}
    fake.edit(model_id, params={"api_base": "http://x"}, info={"k": "v"})
    stored = fake.stored(model_id)
    assert stored is not None and stored["litellm_params"]["api_base"] == "http://x"
    fake.remove(model_id)
    assert fake.ids() == [] and fake.stored(model_id) is None


def test_it_can_be_run_as_a_program_for_an_out_of_process_controller() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.litellm", "--port", str(port), "--master-key", "sk-x"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"fake LiteLLM on http://127.0.0.1:{port}"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            assert http.get("/health/readiness").json() == {"status": "healthy", "db": "connected"}
            empty = http.get("/model/info", headers={"Authorization": "Bearer sk-x"})
            assert empty.status_code == 500 and "LLM Model List not loaded" in empty.text
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_a_proxy_that_never_had_a_model_has_no_model_list(fake_peer: Peer) -> None:
    """Measured on the real proxy: started on an empty database, /model/info answers 500 until the
    first model is added; afterwards an empty table lists as ``{"data": []}``. A restart with rows
    lists them at once (and they register their limits again)."""
    fake = fake_peer.fake
    assert fake is not None
    client = fake_peer.client()
    empty = await client.info()
    assert empty.status == 500
    assert empty.body == {"detail": {"error": empty.body["detail"]["error"]}}
    assert empty.body["detail"]["error"].startswith("LLM Model List not loaded in.")
    body = {
        "model_name": fake_peer.name("m"),
        "litellm_params": {"model": "openai/m"},
        "model_info": {"id": "m1"},
    }
    assert (await client.new(body)).status == 200
    assert (await client.delete("m1")).status == 200
    assert (await client.info()).body == {"data": []}
    fake.restart()
    assert (await client.info()).status == 500
    fake.seed("a", {"model": "openai/shared"}, {"id": "a", "max_input_tokens": 777})
    fake.seed("b", {"model": "openai/shared"}, {"id": "b"})
    fake.restart()
    rows = (await client.info()).body["data"]
    assert [(r["model_info"]["id"], r["model_info"]["max_input_tokens"]) for r in rows] == [
        ("a", 777),
        ("b", 777),
    ]
