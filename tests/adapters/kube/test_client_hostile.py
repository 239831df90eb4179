"""The Kubernetes client against answers a real API server never gives: a loopback HTTP server of the
test's own plays a broken API server or a hostile proxy in front of one. Each answer ends in a typed
``KubeError`` within a bound (of time and of memory), with no credential in its message."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream
from kubernetes_asyncio import client as k8s_client

from adapters.kube import api as api_module
from adapters.kube.api import RETRY_AFTER_LIMIT, KubeApi, KubeError, retry_after
from adapters.kube.client import ClusterAccess, KubeClient
from adapters.kube.settings import ERRORS_TOTAL, KubeStats
from adapters.kube.watch import WatchSource, WatchSpec
from adapters.kube.writers import Outcomes
from app.library import read_litellm_master_key
from catalog_core.commands import EvictPod
from catalog_core.config import CatalogConfig
from catalog_core.events import Outcome, SourceKind
from contracts.kinds import RESOURCES
from tests.adapters.kube.helpers import FAST

pytestmark = pytest.mark.anyio

TOKEN = "sk-bearer-never-in-a-message"
Answer = Callable[[SocketStream, bytes], Awaitable[None]]


async def _head(stream: SocketStream) -> bytes:
    """The request's head (request line and headers); its body, if any, is left unread."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    return data.split(b"\r\n\r\n", 1)[0]


@asynccontextmanager
async def serving(answer: Answer) -> AsyncIterator[tuple[str, list[bytes]]]:
    """A loopback HTTP/1.1 server whose every connection gets ``answer``: its URL and the request heads
    it received."""
    heads: list[bytes] = []

    async def handle(stream: SocketStream) -> None:
        async with stream:
            try:
                head = await _head(stream)
                heads.append(head)
                await answer(stream, head)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
                pass  # the client hung up, as it should once it has had enough

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        try:
            yield f"http://127.0.0.1:{port}", heads
        finally:
            tg.cancel_scope.cancel()


def _client(server: str) -> KubeClient:
    async def bearer() -> str | None:
        return f"Bearer {TOKEN}"

    return KubeClient(ClusterAccess(server=server, authorization=bearer))


async def _chunked_forever(stream: SocketStream, line: bytes) -> None:
    await stream.send(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    while True:
        await stream.send(b"%x\r\n%s\r\n" % (len(line), line))


def _no_token(err: BaseException) -> None:
    assert TOKEN not in str(err) and TOKEN not in repr(err.args)


async def test_an_answer_that_never_ends_fails_as_too_large_without_waiting_for_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(api_module, "ANSWER_LIMIT", 1 << 20, raising=False)

    async def endless(stream: SocketStream, head: bytes) -> None:
        await _chunked_forever(stream, b'{"items": [' + b" " * 65536)

    async with serving(endless) as (server, _), _client(server) as kube:
        with anyio.fail_after(20), pytest.raises(KubeError) as failed:
            # a timeout this long would let an endless answer fill the memory first
            await KubeApi(kube).request("GET", "/api/v1/namespaces/ns/configmaps", timeout=600)
    assert (failed.value.status, failed.value.reason) == (0, "ResponseTooLarge")
    assert failed.value.transient  # retried with backoff, as an outage is


async def test_an_error_answer_is_read_only_as_far_as_its_message_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 502 page of a proxy that never ends, on a request and on a watch: the error is its status."""

    async def endless_page(stream: SocketStream, head: bytes) -> None:
        await stream.send(
            b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        line = b"<html>\r\n<p>upstream\r\nfailed</p>" + b"x" * 4096
        while True:
            await stream.send(b"%x\r\n%s\r\n" % (len(line), line))

    async with serving(endless_page) as (server, _), _client(server) as kube:
        api = KubeApi(kube)
        with anyio.fail_after(20):
            with pytest.raises(KubeError) as failed:
                await api.request("GET", "/api/v1/namespaces", timeout=600)
            assert failed.value.status == 502 and "\n" not in str(failed.value)
            assert str(failed.value).startswith("HTTP 502 HTTP502: <html> <p>upstream failed</p>xxx")
            with pytest.raises(KubeError) as watch_failed:
                async with api.watch("/api/v1/namespaces", [], 600, 1.0):
                    pass
            assert watch_failed.value.status == 502


async def test_a_watch_line_that_never_ends_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_module, "WATCH_LINE_LIMIT", 1 << 20, raising=False)

    async def endless(stream: SocketStream, head: bytes) -> None:
        await _chunked_forever(stream, b'{"type": "ADDED", "object": {"data": "' + b"a" * 65536)

    async with serving(endless) as (server, _), _client(server) as kube:
        with anyio.fail_after(20), pytest.raises(KubeError) as failed:
            async with KubeApi(kube).watch("/api/v1/namespaces/ns/configmaps", [], 600, 1.0) as events:
                async for _ in events:
                    pass
    assert (failed.value.status, failed.value.reason) == (0, "InvalidWatchEvent")


@pytest.mark.parametrize("line", [b"[]", b"42", b'"ADDED"', b"null"])
async def test_a_watch_line_that_is_not_an_object_is_an_invalid_event(line: bytes) -> None:
    """Never skipped in silence: the watch fails (a reconnect from the last resourceVersion, counted)."""

    async def answer(stream: SocketStream, head: bytes) -> None:
        body = b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}\n' + line + b"\n"
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    async with serving(answer) as (server, _), _client(server) as kube:
        seen: list[dict[str, Any]] = []
        with anyio.fail_after(20), pytest.raises(KubeError) as failed:
            async with KubeApi(kube).watch("/api/v1/namespaces/ns/configmaps", [], 600, 1.0) as events:
                async for event in events:
                    seen.append(event)
    assert [e["type"] for e in seen] == ["BOOKMARK"]
    assert (failed.value.status, failed.value.reason) == (0, "InvalidWatchEvent")


@pytest.mark.parametrize("token", ["line\nbreak", "carriage\rreturn", "nul\x00byte", "caf\u00e9"])
async def test_a_token_a_header_cannot_carry_never_reaches_an_error_message(token: str) -> None:
    """h11 quotes a header value it refuses, and httpx refuses non-ASCII with a raw UnicodeEncodeError:
    both would carry the token (or crash the caller); the request fails as CredentialsError instead."""
    secret = f"{TOKEN}-{token}"

    async def bearer() -> str | None:
        return f"Bearer {secret}"

    async def never(stream: SocketStream, head: bytes) -> None:
        raise AssertionError("a request with a broken header was sent")

    async with (
        serving(never) as (server, heads),
        KubeClient(ClusterAccess(server=server, authorization=bearer)) as kube,
    ):
        with anyio.fail_after(20), pytest.raises(KubeError) as failed:
            await KubeApi(kube).request("GET", "/api/v1/namespaces")
    assert (failed.value.status, failed.value.reason) == (0, "CredentialsError")
    assert failed.value.transient  # a token file being rewritten is read again on the next try
    assert TOKEN not in str(failed.value) and failed.value.__cause__ is None
    assert heads == []


async def test_a_failing_credential_plugin_is_a_kube_error_without_what_it_printed() -> None:
    """A host's ApiClient whose refresh hook fails (as an exec plugin fails: its stderr in the message):
    a KubeError naming the exception's class, never an exception that would end a task group."""

    async def failing_hook(configuration: Any) -> None:
        raise RuntimeError(f"exec: process returned 1. token {TOKEN} expired")

    async def never(stream: SocketStream, head: bytes) -> None:
        raise AssertionError("a request without credentials was sent")

    async with serving(never) as (server, heads):
        configuration = k8s_client.Configuration(host=server)
        configuration.api_key = {"BearerToken": "stale"}
        configuration.refresh_api_key_hook = failing_hook
        async with k8s_client.ApiClient(configuration) as host:
            api = KubeApi(host)
            try:
                with anyio.fail_after(20), pytest.raises(KubeError) as failed:
                    await api.request("GET", "/api/v1/namespaces")
                with anyio.fail_after(20), pytest.raises(KubeError) as watch_failed:
                    async with api.watch("/api/v1/namespaces", [], 60, 1.0):
                        pass
            finally:
                await api.aclose()
    for err in (failed.value, watch_failed.value):
        assert (err.status, err.reason) == (0, "CredentialsError")
        assert "RuntimeError" in str(err)
        _no_token(err)
        assert err.__cause__ is None and err.__suppress_context__
    assert heads == []


async def test_a_redirect_is_never_followed_so_the_token_stays_with_the_api_server() -> None:
    async def elsewhere(stream: SocketStream, head: bytes) -> None:
        body = b'{"kind":"NamespaceList","items":[]}'
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    async with serving(elsewhere) as (other, stolen):

        async def redirect(stream: SocketStream, head: bytes) -> None:
            await stream.send(
                b"HTTP/1.1 307 Temporary Redirect\r\nLocation: %s/api/v1/namespaces\r\n"
                b"Content-Length: 0\r\n\r\n" % other.encode()
            )

        async with serving(redirect) as (server, heads), _client(server) as kube:
            api = KubeApi(kube)
            with anyio.fail_after(20), pytest.raises(KubeError) as failed:
                await api.request("GET", "/api/v1/namespaces")
            with anyio.fail_after(20), pytest.raises(KubeError) as watch_failed:
                async with api.watch("/api/v1/namespaces", [], 60, 1.0):
                    pass
    assert failed.value.status == watch_failed.value.status == 307
    assert not failed.value.transient  # a misconfiguration: reported (FAILING), not hammered
    assert len(heads) == 2 and all(TOKEN.encode() in h for h in heads)
    assert stolen == []


async def test_a_truncated_chunked_answer_is_a_transport_error() -> None:
    async def cut(stream: SocketStream, head: bytes) -> None:
        await stream.send(b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{"items": [')

    async with serving(cut) as (server, _), _client(server) as kube:
        with anyio.fail_after(20), pytest.raises(KubeError) as failed:
            await KubeApi(kube).request("GET", "/api/v1/namespaces")
    assert failed.value.status == 0 and failed.value.transient
    _no_token(failed.value)


async def test_the_client_made_from_a_host_api_client_is_closed_with_its_user(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The embedding library's case: what the catalog made from the host's ApiClient is closed when the
    catalog is done with it (KubeAdapters.aclose, the master key read); the host's ApiClient stays open."""
    made: list[KubeClient] = []
    original = api_module.kube_client_of

    def recording(client: Any) -> KubeClient:
        kube = original(client)
        made.append(kube)
        return kube

    monkeypatch.setattr(api_module, "kube_client_of", recording)

    async def secret(stream: SocketStream, head: bytes) -> None:
        body = b'{"kind":"Secret","data":{"LITELLM_MASTER_KEY":"c2stdGVzdA=="}}'
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    from adapters.kube import KubeAdapters
    from adapters.vault import SecretVault

    async with (
        serving(secret) as (server, _),
        k8s_client.ApiClient(k8s_client.Configuration(host=server)) as host,
    ):
        config = CatalogConfig(namespace="ai")
        assert await read_litellm_master_key(host, config) == "sk-test"
        assert len(made) == 1 and made[0].closed

        adapters = KubeAdapters(host, config, SecretVault())
        await adapters.api.request("GET", "/api/v1/namespaces/ai/secrets/x")
        assert len(made) == 2 and not made[1].closed
        await adapters.aclose()
        assert made[1].closed
        # the host's own client was not closed: it still sends
        assert (await host.call_api("/version", "GET", _preload_content=False)) is not None


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("3", 3.0),
        ("0", 0.0),
        (" 7 ", 7.0),
        ("-5", 0.0),  # not delay-seconds: no request to wait
        ("1.5", 0.0),
        ("soon", 0.0),
        ("", 0.0),
        (None, 0.0),
        ("86400000", RETRY_AFTER_LIMIT),  # a day and more: bounded
        ("Thu, 01 Jan 2026 00:00:10 GMT", 10.0),  # an HTTP-date, 10 s after ``now``
        ("Wed, 31 Dec 2025 23:59:00 GMT", 0.0),  # past
        ("Fri, 01 Jan 2027 00:00:00 GMT", RETRY_AFTER_LIMIT),
        ("Thu, 01 Jan 2026 00:00:10", 0.0),  # no zone: no HTTP-date
        ("\u00b2", 0.0),  # a digit to str.isdigit (the header is read as latin-1), not to float()
        ("\uff11\uff12", 0.0),  # fullwidth digits: no delay-seconds either
        ("9" * 5000, RETRY_AFTER_LIMIT),
    ],
)
def test_retry_after_is_read_as_rfc_9110_says_and_bounded(header: str | None, seconds: float) -> None:
    now = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    assert retry_after(header, now) == seconds


async def test_a_429_with_retry_after_holds_the_next_list_that_long_and_is_counted() -> None:
    """API Priority and Fairness answers 429 with Retry-After: the source waits at least that long (not
    its own shorter backoff) before it lists again; the error series existed at 0 before the first 429."""
    answers = anyio.Event()

    async def overloaded(stream: SocketStream, head: bytes) -> None:
        answers.set()
        body = b'{"kind":"Status","code":429,"reason":"TooManyRequests","message":"too many requests"}'
        await stream.send(
            b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\nContent-Length: %d\r\n\r\n%s"
            % (len(body), body)
        )

    stats = KubeStats()
    async with serving(overloaded) as (server, heads), _client(server) as kube:
        source = WatchSource(
            KubeApi(kube),
            WatchSpec(SourceKind.PODS, RESOURCES[SourceKind.PODS], "ai"),
            settings=FAST,
            stats=stats,
        )
        declared = dict(stats.counters)
        assert [
            n for (m, labels), n in declared.items() if m == ERRORS_TOTAL and ("status", "429") in labels
        ] == [0]
        async with anyio.create_task_group() as tg:
            tg.start_soon(source.run_into, _Sink())
            with anyio.fail_after(20):
                await answers.wait()
            # FAST's own backoff would list again within 0.1 s, and at least every second after that
            await anyio.sleep(3 * FAST.retry_cap_seconds)
            tg.cancel_scope.cancel()
    assert len(heads) == 1
    assert stats.total(ERRORS_TOTAL, source="pods", status="429") == 1


class _Sink:
    async def listed(self, objects: Any) -> None:
        raise AssertionError("nothing was listed")

    async def changed(self, obj: Any, deleted: bool) -> None:
        raise AssertionError("nothing changed")

    async def unavailable(self, status: Any, detail: str) -> None:
        pass


def test_a_write_answered_429_waits_for_its_retry_after() -> None:
    outcomes = Outcomes(KubeStats())
    command = EvictPod("ai", "p", "uid-p", "h1")
    done = outcomes.failed(
        command, KubeError(429, "TooManyRequests", retry_after=20.0), "create", "pods/p in ai"
    )
    assert done.outcome is Outcome.RETRY and done.retry_after >= 20.0


async def test_retry_after_is_taken_from_429_and_5xx_answers_only() -> None:
    async def answer(stream: SocketStream, head: bytes) -> None:
        status = head.split(b" ")[1].split(b"?")[0].rsplit(b"/", 1)[1]
        await stream.send(b"HTTP/1.1 %s X\r\nRetry-After: 4\r\nContent-Length: 0\r\n\r\n" % status)

    async with serving(answer) as (server, _), _client(server) as kube:
        api = KubeApi(kube)
        waits = {}
        for status in (429, 503, 500, 307, 400):
            with anyio.fail_after(20), pytest.raises(KubeError) as failed:
                await api.request("GET", f"/api/v1/{status}")
            assert failed.value.status == status
            waits[status] = failed.value.retry_after
            with anyio.fail_after(20), pytest.raises(KubeError) as watch_failed:
                async with api.watch(f"/api/v1/{status}", [], 60, 1.0):
                    pass
            assert watch_failed.value.retry_after == waits[status]
    assert waits == {429: 4.0, 503: 4.0, 500: 4.0, 307: 0.0, 400: 0.0}
