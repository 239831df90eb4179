"""The admin-API client: timeouts on every call, the master key never shown, transport errors typed."""

from __future__ import annotations

import contextlib

import anyio
import anyio.abc
import httpx
import orjson
import pytest

from adapters.identity import USER_AGENT
from adapters.litellm.bounds import DEFAULT_MAX_ANSWER_BYTES, AnswerBounds
from adapters.litellm.client import DEFAULT_TIMEOUT, TOO_LARGE, Answer, LiteLLMClient, LiteLLMTransportError
from adapters.litellm.scrub import safe_text
from tests.adapters.litellm.conftest import Peer
from tests.fakes.litellm import DELETE, NEW

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


# --- bounded answers (a LiteLLM, or whoever answers as it, cannot make the controller read without end)

# One row of GET /model/info as LiteLLM 1.84.0 answers it for an external model of a known kind: 3.7 KB,
# ~121 JSON values (LiteLLM adds its whole model-map entry to model_info).
_REAL_INFO = {f"cost_or_capability_{i:02d}": None for i in range(84)} | {
    "id": "ai-appliance-external-model-00000",
    "db_model": True,
    "mode": "chat",
    "max_input_tokens": 128000,
    "ai_appliance_owner": "model-catalog",
    "ai_appliance_source": "external",
    "key": "gpt-4o",
    "max_tokens": 16384,
    "max_output_tokens": 16384,
    "input_cost_per_token": 2.5e-06,
    "output_cost_per_token": 1e-05,
    "litellm_provider": "openai",
    "supported_openai_params": ["frequency_penalty", "logit_bias", "logprobs", "max_tokens", "n", "stop"],
}


def _real_rows(count: int) -> bytes:
    rows = [
        {
            "model_name": f"model-{i:05d}",
            "litellm_params": {
                "api_base": "https://api.openai.example/v1",
                "use_in_pass_through": False,
                "use_litellm_proxy": False,
                "merge_reasoning_content_in_choices": False,
                "model": "openai/gpt-4o",
            },
            "model_info": {**_REAL_INFO, "id": f"ai-appliance-external-model-{i:05d}"},
        }
        for i in range(count)
    ]
    return orjson.dumps({"data": rows})


async def test_ten_thousand_real_rows_are_within_the_default_bounds() -> None:
    body = _real_rows(10_000)
    assert 30_000_000 < len(body) < DEFAULT_MAX_ANSWER_BYTES / 1.5
    assert AnswerBounds().values_problem(body) is None

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    async with LiteLLMClient("http://x", MASTER, transport=httpx.MockTransport(handler)) as client:
        answer = await client.info()
    assert answer.status == 200 and len(answer.body["data"]) == 10_000


async def test_an_answer_of_too_many_small_values_is_refused_before_it_is_parsed() -> None:
    """40 MiB of ``[[],[],...]`` took 665 MiB to parse (OOM-killed, then again after every restart): an
    answer holding more JSON values than the bound is not parsed at all."""
    body = b'{"data": [' + b"[]," * 3_000_000 + b"[]]}"  # 9 MB, 3 million values
    parsed: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    async with LiteLLMClient("http://x", MASTER, transport=httpx.MockTransport(handler)) as client:
        with pytest.raises(LiteLLMTransportError) as caught:
            await client.info(parse=parsed.append)
    assert caught.value.kind == TOO_LARGE and parsed == []
    assert "more than 2,000,000 JSON values (CATALOG_LITELLM_MAX_ANSWER_VALUES)" in caught.value.detail


async def _endless(stream: anyio.abc.SocketStream, sent: list[int], declare: int | None) -> None:
    """Answer like a "LiteLLM" whose /model/info never ends (chunked, or declaring ``declare`` bytes);
    count what was sent."""
    async with stream:
        await stream.receive()
        length = f"content-length: {declare}" if declare is not None else "transfer-encoding: chunked"
        await stream.send(f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{length}\r\n\r\n".encode())
        chunk = b'{"a": "' + b"x" * 65_536 + b'"},'
        framed = chunk if declare is not None else f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            while sent[0] < 256 * 1024 * 1024:
                await stream.send(framed)
                sent[0] += len(chunk)


@pytest.mark.parametrize("declare", [None, 256 * 1024 * 1024])
async def test_an_answer_larger_than_the_bound_is_not_read_whole(declare: int | None) -> None:
    """The answer is read up to ``max_bytes`` and then dropped; one that declares a larger length is not
    read at all."""
    sent = [0]
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    bounds = AnswerBounds(max_bytes=4 * 1024 * 1024)
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, lambda stream: _endless(stream, sent, declare))
        async with LiteLLMClient(f"http://127.0.0.1:{port}", MASTER, bounds=bounds) as client:
            with pytest.raises(LiteLLMTransportError) as caught:
                await client.info()
        tg.cancel_scope.cancel()
    await listener.aclose()
    assert caught.value.kind == TOO_LARGE
    assert "larger than 4,194,304 bytes (CATALOG_LITELLM_MAX_ANSWER_BYTES)" in caught.value.detail
    assert sent[0] < 64 * 1024 * 1024  # stopped long before the end (socket buffers hold a few MB)
