"""The admin-API client: timeouts on every call, the master key never shown, transport errors typed."""

from __future__ import annotations

import httpx
import pytest

from adapters.identity import USER_AGENT
from adapters.litellm.client import DEFAULT_TIMEOUT, Answer, LiteLLMClient, LiteLLMTransportError
from adapters.litellm.fake import DELETE, NEW
from adapters.litellm.scrub import safe_text
from tests.adapters.litellm.conftest import Peer

pytestmark = pytest.mark.anyio

MASTER = "sk-master-key-abcdef123456"


def recording(seen: list[httpx.Request], status: int = 200, json: object = None) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, json=json if json is not None else {"data": []})

    return httpx.MockTransport(handler)


async def test_every_call_carries_all_four_timeouts_and_the_bearer_key() -> None:
    seen: list[httpx.Request] = []
    async with LiteLLMClient("http://litellm:4000/", MASTER, transport=recording(seen)) as client:
        await client.info()
        await client.new({"model_name": "x"})
        await client.patch_update("a/b id", {"litellm_params": {}})
        await client.update({"model_info": {"id": "x"}})
        await client.delete("x")
    assert [(r.method, r.url.raw_path.decode()) for r in seen] == [
        ("GET", "/model/info"),
        ("POST", "/model/new"),
        ("PATCH", "/model/a%2Fb%20id/update"),
        ("POST", "/model/update"),
        ("POST", "/model/delete"),
    ]
    for request in seen:
        assert request.extensions["timeout"] == {"connect": 3.0, "read": 10.0, "write": 10.0, "pool": 5.0}
        assert request.headers["authorization"] == f"Bearer {MASTER}"
    assert seen[-1].read() == b'{"id": "x"}'
    assert None not in (
        DEFAULT_TIMEOUT.connect,
        DEFAULT_TIMEOUT.read,
        DEFAULT_TIMEOUT.write,
        DEFAULT_TIMEOUT.pool,
    )


async def test_every_call_names_us_in_its_user_agent() -> None:
    seen: list[httpx.Request] = []
    async with LiteLLMClient("http://litellm:4000", MASTER, transport=recording(seen)) as client:
        await client.info()
        await client.new({"model_name": "x"})
        await client.patch_update("x", {"litellm_params": {}})
        await client.delete("x")
    assert [r.headers["user-agent"] for r in seen] == [USER_AGENT] * 4
    assert USER_AGENT.startswith("model-catalog/")


async def test_an_empty_master_key_sends_no_header() -> None:
    seen: list[httpx.Request] = []
    async with LiteLLMClient("http://litellm:4000", "", transport=recording(seen)) as client:
        await client.info()
    assert "authorization" not in seen[0].headers


async def test_the_master_key_is_never_rendered() -> None:
    client = LiteLLMClient("http://127.0.0.1:9", MASTER)  # discard port: nothing listens
    with pytest.raises(LiteLLMTransportError) as caught:
        await client.info()
    assert caught.value.kind == "connect"
    for text in (
        repr(client),
        str(client.__dict__),
        str(caught.value),
        repr(caught.value),
        repr(client._http),
    ):
        assert MASTER not in text
    await client.aclose()


async def test_a_dropped_keep_alive_connection_is_tried_once_more() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise httpx.ReadError("[Errno 104] Connection reset by peer", request=request)
        return httpx.Response(200, json={"data": []})

    async with LiteLLMClient("http://x", MASTER, transport=httpx.MockTransport(handler)) as client:
        assert (await client.info()).status == 200
    assert calls == 2

    def always(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)

    async with LiteLLMClient("http://x", MASTER, transport=httpx.MockTransport(always)) as client:
        with pytest.raises(LiteLLMTransportError) as caught:
            await client.info()
    assert caught.value.kind == "network"
    assert caught.value.detail == "GET /model/info: RemoteProtocolError"


async def test_after_litellms_generic_500_the_next_call_still_works(fake_peer: Peer) -> None:
    """LiteLLM drops the connection after an unhandled error without saying so (seen on the real
    proxy; the served fake does the same)."""
    assert fake_peer.fake is not None
    async with fake_peer.fake.serving() as url:
        client = fake_peer.client(base_url=url)
        broken = await client.new({"litellm_params": {"model": "openai/x"}})  # no model_name
        assert broken.status == 500 and broken.body["error"]["type"] == "internal_server_error"
        assert (await client.delete(fake_peer.id("none"))).status == 400  # an answer, not a reset
    assert fake_peer.fake.requests[NEW] == 1 and fake_peer.fake.requests[DELETE] == 1


async def test_the_real_proxy_drops_the_connection_after_its_generic_500(peer: Peer) -> None:
    client = peer.client()
    assert (await client.new({"litellm_params": {"model": "openai/x"}})).status == 500
    assert (await client.delete(peer.id("none"))).status == 400  # one transparent retry covers the reset


def test_error_messages_of_every_shape_and_never_pydantics_input() -> None:
    assert Answer(400, {"error": {"message": "model not found"}}, "").error_message() == "model not found"
    assert Answer(500, {"error": "plain"}, "").error_message() == "plain"
    assert Answer(404, {"detail": "Not Found"}, "").error_message() == "Not Found"
    detail = {
        "detail": [
            {"type": "missing", "loc": ["body", "litellm_params", "api_key"], "msg": "bad", "input": "sk-1"}
        ]
    }
    assert Answer(422, detail, "").error_message() == "litellm_params.api_key: bad"
    # Whole and as sent: collapsing and shortening come after scrubbing (``safe_text``), never before.
    assert Answer(502, None, "<html>bad   gateway</html>").error_message() == "<html>bad   gateway</html>"
    assert (
        safe_text(Answer(502, None, "<html>bad   gateway</html>").error_message(), [])
        == "<html>bad gateway</html>"
    )
    assert Answer(500, None, "x" * 1000).error_message() == "x" * 1000
    assert len(safe_text(Answer(500, None, "x" * 1000).error_message(), [])) == 300


async def test_a_body_that_is_not_json_is_kept_as_text() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="Bad Gateway")

    async with LiteLLMClient("http://x", MASTER, transport=httpx.MockTransport(handler)) as client:
        answer = await client.info()
    assert (answer.status, answer.body, answer.text, answer.ok) == (502, None, "Bad Gateway", False)


def test_bodies_are_read_as_the_standard_library_reads_them() -> None:
    from adapters.litellm.client import parse_body

    assert parse_body(b'{"data": [{"model_name": "m"}]}') == {"data": [{"model_name": "m"}]}
    assert parse_body(b'{"x": NaN}')["x"] != parse_body(b'{"x": NaN}')["x"]  # NaN: orjson refuses it
    assert parse_body(b'{"x": Infinity}') == {"x": float("inf")}
    assert parse_body(b'{"n": 9223372036854775807}') == {"n": 9223372036854775807}
    assert parse_body(b"<html>bad gateway</html>") is None
    assert parse_body(b"") is None
    assert parse_body(b"[" * 100_000 + b"]" * 100_000) is None  # deeper than either reader: no crash


async def test_only_an_error_answer_keeps_its_text() -> None:
    async with LiteLLMClient("http://litellm:4000", MASTER, transport=recording([])) as client:
        good = await client.info()
    assert good.ok and good.body == {"data": []} and good.text == ""
    bad_transport = httpx.MockTransport(lambda request: httpx.Response(502, text="<html>bad gateway</html>"))
    async with LiteLLMClient("http://litellm:4000", MASTER, transport=bad_transport) as client:
        bad = await client.info()
    assert bad.body is None and bad.error_message() == "<html>bad gateway</html>"
