"""The blocking facade (issue 17): a synchronous host, like the Magic Stick Operator's poll loop, embeds
the catalog through ``model_catalog.BlockingModelCatalog``. Real kube-apiserver and real LiteLLM.

The tests are synchronous on purpose: the test thread is the host, with no event loop of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest
import yaml

from catalog_core.events import Event
from catalog_core.fold import Transition
from catalog_core.state import SourceStatus
from model_catalog import (
    BlockingModelCatalog,
    CallTimeoutError,
    CatalogClosedError,
    CatalogConfig,
    CatalogFailedError,
    CatalogView,
    MasterKeyError,
    SourceKind,
)
from tests.adapters.kube.helpers import FAST
from tests.core import builders as b
from tests.faults.peers import ProxyThread
from tests.fixtures.kube_peer import KubePeer, create_namespace, install_crds, new_api_client
from tests.fixtures.litellm_peer import TEST_PREFIX, LiteLLMPeer, delete_test_rows

pytestmark = [pytest.mark.kube]

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "blocking_operator.py"
ACTIVATIONS = "/apis/appliance.magicstick.dev/v1alpha1/namespaces/{ns}/modelactivations"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("blocking_operator", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Cluster:
    """The test's own writes to the API server (plain HTTP, like the host's reads)."""

    def __init__(self, peer: KubePeer) -> None:
        async def prepare() -> tuple[str, str]:
            api = await new_api_client(peer)
            try:
                await install_crds(api)
                return await create_namespace(api), await create_namespace(api, "mcsys")
            finally:
                await api.close()

        self.namespace, self.appliance_namespace = anyio.run(prepare)
        self.server = peer.server
        self._token = yaml.safe_load(peer.kubeconfig.read_text())["users"][0]["user"]["token"]

    def _http(self) -> httpx.Client:
        # One client per write, closed at once: no socket of the test's outlives the write that opened it.
        auth = {"Authorization": f"Bearer {self._token}"}
        return httpx.Client(base_url=self.server, headers=auth, verify=False, timeout=10.0)

    def config(self, **changes: Any) -> CatalogConfig:
        return CatalogConfig(
            namespace=self.namespace, appliance_namespace=self.appliance_namespace, **changes
        )

    def create_activation(self, name: str) -> None:
        body = {**b.activation(name, external={"model": "openai/gpt-4o-mini"}), "metadata": {"name": name}}
        with self._http() as http:
            answer = http.post(ACTIVATIONS.format(ns=self.appliance_namespace), json=body)
        assert answer.status_code == 201, answer.text

    def create_master_key_secret(self, key: str) -> None:
        """LiteLLM's own Secret, in LiteLLM's namespace, as the appliance has it."""
        body = {
            "metadata": {"name": "litellm-masterkey-secret"},
            "stringData": {"LITELLM_MASTER_KEY": key},
        }
        with self._http() as http:
            answer = http.post(f"/api/v1/namespaces/{self.namespace}/secrets", json=body)
        assert answer.status_code == 201, answer.text

    def catalog_configmap(self) -> dict[str, Any]:
        with self._http() as http:
            answer = http.get(f"/api/v1/namespaces/{self.namespace}/configmaps/ai-model-catalog")
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def disable_activation(self, name: str) -> None:
        with self._http() as http:
            answer = http.patch(
                ACTIVATIONS.format(ns=self.appliance_namespace) + f"/{name}",
                json={"spec": {"enabled": False}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
        assert answer.status_code == 200, answer.text


@pytest.fixture
def cluster(kube_peer: KubePeer) -> Cluster:
    return Cluster(kube_peer)


def _rows(peer: LiteLLMPeer) -> dict[str, dict[str, Any]]:
    answer = httpx.get(
        f"{peer.base_url}/model/info", headers={"Authorization": f"Bearer {peer.master_key}"}, timeout=10.0
    )
    return {row["model_info"]["id"]: row for row in answer.json()["data"]}


def _record(view: CatalogView, name: str) -> tuple[str, str] | None:
    records = [r for r in view.routes if r["source"] == "modelactivation" and r["name"] == name]
    return (records[0]["state"], records[0]["reason"]) if records else None


def _written(view: CatalogView) -> bool:
    """The catalog the view publishes is the one the ConfigMap holds."""
    return view.catalog is not None and view.catalog_hash == json.loads(view.catalog["catalog.json"])["hash"]


def _socket_inodes() -> set[str]:
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


def _connected_to(inodes: set[str], ports: set[int | None]) -> list[str]:
    """The TCP sockets among ``inodes`` whose remote end is one of ``ports`` (on any address)."""
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if f"socket:[{fields[9]}]" in inodes and remote_port in ports:
                found.append(f"{table}: {line.strip()}")
    return found


def _threads() -> set[threading.Thread]:
    return set(threading.enumerate())


# --- the documented example, as a process


class ExampleProcess:
    """``examples/blocking_operator.py`` run as the operator runs: its own process, its output read."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(EXAMPLE)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        stdout = self.process.stdout
        assert stdout is not None
        self._reader = threading.Thread(target=lambda: [self._lines.put(x) for x in stdout], daemon=True)
        self._reader.start()

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.seen.append(line)
            if predicate(line):
                return line
        raise AssertionError("".join(self.seen))

    def terminate(self) -> int:
        """SIGTERM, as the kubelet stops the pod; the exit status, once all its output is read."""
        self.process.send_signal(signal.SIGTERM)
        status = self.process.wait(30)
        self._reader.join(10)
        while not self._lines.empty():
            self.seen.append(self._lines.get())
        return status

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def _example_env(cluster: Cluster, kube_peer: KubePeer, litellm_peer: LiteLLMPeer) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "KUBECONFIG": str(kube_peer.kubeconfig),
        "NAMESPACE": cluster.namespace,
        "APPLIANCE_NAMESPACE": cluster.appliance_namespace,
        "LITELLM_BASE_URL": litellm_peer.base_url,
        "REQUEUE_SECONDS": "0.5",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(REPO),
    }


CLOSED_CLEANLY = "catalog closed; threads left: ['MainThread']"


@pytest.mark.litellm
def test_the_blocking_example_publishes_and_withdraws_what_the_host_lists(
    cluster: Cluster, kube_peer: KubePeer, litellm_peer: LiteLLMPeer
) -> None:
    name = f"{TEST_PREFIX}blocking-{uuid.uuid4().hex[:6]}"
    row_id = f"ai-appliance-external-{name}"
    cluster.create_activation(name)
    env = {**_example_env(cluster, kube_peer, litellm_peer), "LITELLM_MASTER_KEY": litellm_peer.master_key}
    host = ExampleProcess(env)
    try:
        # The host lists its ModelActivations; the catalog publishes the new one (a real LiteLLM row).
        host.wait_for(lambda line: line.startswith(f"published modelactivation/{name} (Published)"))
        host.wait_for(lambda line: line.startswith("catalog written: hash "))
        assert row_id in _rows(litellm_peer)
        # The operator disables it: the next pass's list says so, and the route is withdrawn.
        cluster.disable_activation(name)
        host.wait_for(lambda line: line.startswith(f"withdrawn modelactivation/{name} (Disabled)"))
        deadline = time.monotonic() + 30
        while row_id in _rows(litellm_peer):
            assert time.monotonic() < deadline, "the disabled activation's row is still in LiteLLM"
            time.sleep(0.2)
        # SIGTERM: the host leaves its loop, the catalog closes, the process exits cleanly.
        assert host.terminate() == 0
        assert host.seen[-1].strip() == CLOSED_CLEANLY, "".join(host.seen)
    finally:
        host.kill()
        delete_test_rows(litellm_peer, name)


class RowWatch:
    """Polls LiteLLM's rows on a thread of its own and remembers every poll that missed ``row_id``."""

    def __init__(self, peer: LiteLLMPeer, row_id: str) -> None:
        self.peer, self.row_id = peer, row_id
        self.polls = 0
        self.missing: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.row_id not in _rows(self.peer):
                self.missing.append(time.monotonic())
            self.polls += 1
            self._stop.wait(0.1)

    def __enter__(self) -> RowWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)


@pytest.mark.litellm
def test_the_blocking_example_never_withdraws_a_route_when_the_host_restarts(
    cluster: Cluster, kube_peer: KubePeer, litellm_peer: LiteLLMPeer
) -> None:
    # The operator's loop as it runs in the appliance: the master key read from LiteLLM's Secret (no
    # LITELLM_MASTER_KEY in its environment), stopped by SIGTERM and started again, as a rollout does.
    name = f"{TEST_PREFIX}restart-{uuid.uuid4().hex[:6]}"
    row_id = f"ai-appliance-external-{name}"
    cluster.create_activation(name)
    cluster.create_master_key_secret(litellm_peer.master_key)
    env = _example_env(cluster, kube_peer, litellm_peer)
    first = ExampleProcess(env)
    second: ExampleProcess | None = None
    try:
        first.wait_for(lambda line: line.startswith(f"published modelactivation/{name} (Published)"))
        # The first ready view may still show the bootstrap placeholder the controller created before its
        # first write; the catalog the restart must keep is the written one.
        written = first.wait_for(
            lambda line: (
                line.startswith("catalog written: hash ")
                and line.strip() != "catalog written: hash bootstrap"
            )
        )
        catalog_before = cluster.catalog_configmap()
        with RowWatch(litellm_peer, row_id) as rows:
            assert first.terminate() == 0
            assert first.seen[-1].strip() == CLOSED_CLEANLY, "".join(first.seen)
            second = ExampleProcess(env)
            # Its first view it acts on is the whole published catalog, exactly as it was ...
            second.wait_for(lambda line: line.startswith(f"published modelactivation/{name} (Published)"))
            assert second.wait_for(lambda line: line.startswith("catalog written: ")) == written
            # ... and a few more passes change nothing.
            time.sleep(2.0)
            assert second.terminate() == 0
        assert second.seen[-1].strip() == CLOSED_CLEANLY, "".join(second.seen)
        # Never, across the restart: a ModelActivation's status set to anything but Published, a route
        # withdrawn or removed in what the host was shown, a LiteLLM row missing, or a catalog write (the
        # ConfigMap is the very object the first run left).
        shown = first.seen + second.seen
        status = f"status modelactivation/{name}:"
        assert [line.strip() for line in first.seen if line.startswith(status)][-1] == f"{status} Published"
        assert [line.strip() for line in second.seen if line.startswith(status)] == [f"{status} Published"]
        assert not [line for line in shown if line.startswith(("withdrawn ", "removed "))], "".join(shown)
        assert rows.polls > 10 and rows.missing == [], rows.missing
        after = cluster.catalog_configmap()
        assert after["metadata"]["resourceVersion"] == catalog_before["metadata"]["resourceVersion"]
    finally:
        first.kill()
        if second is not None:
            second.kill()
        delete_test_rows(litellm_peer, name)


# --- the facade, in this process (the test thread is the host)


@pytest.mark.litellm
def test_a_down_litellm_never_blocks_the_host_and_close_leaves_no_thread_or_socket(
    cluster: Cluster, kube_peer: KubePeer, litellm_peer: LiteLLMPeer
) -> None:
    example = _example()
    kube = example.KubeReader.from_environment(str(kube_peer.kubeconfig))
    first, second = (f"{TEST_PREFIX}blk-{uuid.uuid4().hex[:6]}" for _ in range(2))
    cluster.create_activation(first)
    url = httpx.URL(litellm_peer.base_url)
    proxy = ProxyThread(url.host, url.port or 80)  # LiteLLM behind a cable this test can cut
    call_timeout = 2.0
    threads_before, sockets_before = _threads(), _socket_inodes()
    catalog = BlockingModelCatalog(
        cluster.config(litellm_base_url=f"http://127.0.0.1:{proxy.port}"),
        litellm_master_key=litellm_peer.master_key,
        kubeconfig=str(kube_peer.kubeconfig),
        host_sources={SourceKind.MODEL_ACTIVATIONS},
        call_timeout=call_timeout,
        kube_settings=FAST,
        litellm_resync_seconds=1.0,
        catalog_min_write_interval=0.0,
    )
    try:
        with catalog:
            # its loop's thread (and that loop's executor threads, for DNS lookups)
            assert "model-catalog" in {t.name for t in _threads() - threads_before}
            view = _passes_until(
                catalog, kube, cluster, lambda v: _record(v, first) == ("published", "Published")
            )
            assert catalog.wait_ready(1.0)
            # LiteLLM goes down: first every connection hangs (half-open, new ones too: a freeze of the
            # open ones alone lets a retry on a fresh connection through), then its port is closed.
            cluster.create_activation(second)
            # The host's passes go on: every call to the catalog returns within call_timeout (or says it
            # timed out, having delivered nothing), whatever LiteLLM does.
            durations: list[float] = []
            for cut in (proxy.hold, proxy.refuse):
                cut()
                down_until = time.monotonic() + 4.0
                while time.monotonic() < down_until:
                    activations = kube.list_activations(cluster.appliance_namespace)
                    answer: object = None
                    for call in (
                        functools.partial(catalog.listed, SourceKind.MODEL_ACTIVATIONS, activations),
                        catalog.view,
                    ):
                        began = time.monotonic()
                        with contextlib.suppress(CallTimeoutError):
                            answer = call()
                        durations.append(time.monotonic() - began)
                    view = answer if isinstance(answer, CatalogView) else view
                    time.sleep(0.2)
            # call_timeout, plus what a loaded 2-core machine takes to wake the waiting thread
            assert max(durations) < call_timeout + 0.5, sorted(durations)[-5:]
            assert _record(view, second) != ("published", "Published")  # it cannot be, LiteLLM is down
            assert _record(view, first) == ("published", "Published")  # and nothing was wiped
            proxy.heal()
            _passes_until(
                catalog, kube, cluster, lambda v: _record(v, second) == ("published", "Published"), timeout=90
            )
        with pytest.raises(CatalogClosedError):
            catalog.view()
        assert _threads() - threads_before == set()
        # None of the catalog's connections (to the API server, to LiteLLM through the proxy) is left.
        peers = {httpx.URL(kube_peer.server).port, proxy.port}
        left = _connected_to(_socket_inodes() - sockets_before, peers)
        assert left == [], left
    finally:
        catalog.close()
        _close_proxy(proxy)
        delete_test_rows(litellm_peer, f"{TEST_PREFIX}blk-")


def _close_proxy(proxy: ProxyThread) -> None:
    """Stop the proxy's loop, then let it run the callbacks that close the sockets it aborted."""
    if proxy.loop.is_closed():
        return
    proxy.close()
    proxy.loop.run_until_complete(asyncio.sleep(0.1))
    proxy.loop.close()


def _passes_until(
    catalog: BlockingModelCatalog,
    kube: Any,
    cluster: Cluster,
    predicate: Callable[[CatalogView], bool],
    timeout: float = 45.0,
    operator: Any = None,
) -> CatalogView:
    if operator is None:
        operator = _example().Operator(catalog, kube, cluster.appliance_namespace)
    deadline = time.monotonic() + timeout
    view: CatalogView | None = None
    while time.monotonic() < deadline:
        view = operator.reconcile()
        if view is not None and predicate(view):  # None: not ready yet, nothing to act on
            return view
        time.sleep(0.2)
    raise AssertionError(f"timed out; last view: {view}")


class _FailingRecorder:
    """A host-supplied event-log recorder whose disk fills up when it sees ``poison``."""

    def __init__(self, poison: str) -> None:
        self.poison = poison

    def record(self, event: Event, transition: Transition) -> None:
        if self.poison in repr(event):
            raise OSError(28, "No space left on device")


def test_an_exception_on_the_catalog_thread_surfaces_in_the_hosts_next_call(
    cluster: Cluster, kube_peer: KubePeer
) -> None:
    threads_before = _threads()
    # LiteLLM plays no part here: nothing listens on this port (every LiteLLM call fails fast).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    catalog = BlockingModelCatalog(
        cluster.config(litellm_base_url=f"http://127.0.0.1:{closed_port}"),
        litellm_master_key="sk-unused",
        kubeconfig=str(kube_peer.kubeconfig),
        host_sources={SourceKind.MODEL_ACTIVATIONS},
        kube_settings=FAST,
        recorder=_FailingRecorder("mct-poison"),
    )
    with catalog:
        catalog.listed(SourceKind.MODEL_ACTIVATIONS, [b.activation("fine")])
        catalog.listed(SourceKind.MODEL_ACTIVATIONS, [b.activation("mct-poison")])  # delivered; fails later
        deadline = time.monotonic() + 10
        with pytest.raises(CatalogFailedError) as failed:
            while time.monotonic() < deadline:
                catalog.view()  # the host's next calls: the first one after the failure raises
                time.sleep(0.05)
        assert isinstance(failed.value.__cause__, OSError)
        assert failed.value.__cause__.errno == 28
        assert "OSError: [Errno 28] No space left on device" in str(failed.value)
        with pytest.raises(CatalogFailedError):  # and every call after it: the catalog is stopped
            catalog.listed(SourceKind.MODEL_ACTIVATIONS, [])
    # Leaving `with` closed it without raising the failure a third time, and joined its thread.
    assert _threads() - threads_before == set()


@pytest.mark.litellm
def test_a_failed_read_of_the_hosts_own_never_withdraws_a_route(
    cluster: Cluster, kube_peer: KubePeer, litellm_peer: LiteLLMPeer
) -> None:
    # The host's own reads go through a cable this test can cut; the catalog's do not.
    example = _example()
    direct = example.KubeReader.from_environment(str(kube_peer.kubeconfig))
    server = httpx.URL(kube_peer.server)
    proxy = ProxyThread(server.host, server.port or 443)
    kube = example.KubeReader(f"https://{server.host}:{proxy.port}", direct._token, direct._context)
    name = f"{TEST_PREFIX}readfail-{uuid.uuid4().hex[:6]}"
    row_id = f"ai-appliance-external-{name}"
    cluster.create_activation(name)
    catalog = BlockingModelCatalog(
        cluster.config(litellm_base_url=litellm_peer.base_url),
        litellm_master_key=litellm_peer.master_key,
        kubeconfig=str(kube_peer.kubeconfig),
        host_sources={SourceKind.MODEL_ACTIVATIONS},
        kube_settings=FAST,
        litellm_resync_seconds=1.0,
        catalog_min_write_interval=0.0,
    )
    operator = example.Operator(catalog, kube, cluster.appliance_namespace)
    try:
        with catalog:
            _passes_until(
                catalog,
                kube,
                cluster,
                lambda v: _record(v, name) == ("published", "Published") and _written(v),
                operator=operator,
            )
            hash_before = catalog.view().catalog_hash
            proxy.refuse()  # the host's list fails on every pass from now on
            with RowWatch(litellm_peer, row_id) as rows:
                for _ in range(10):
                    view = operator.reconcile()
                    assert view is not None and view.ready
                    assert _record(view, name) == ("published", "Published")
                    assert operator.statuses[name] == "Published"
                    time.sleep(0.2)
            assert rows.polls > 5 and rows.missing == [], rows.missing
            assert catalog.view().catalog_hash == hash_before  # nothing rewritten either
            state = catalog._catalog.state  # type: ignore[union-attr]
            assert state.source(SourceKind.MODEL_ACTIVATIONS).status is SourceStatus.FAILING
            assert "listing ModelActivations: URLError" in state.source(SourceKind.MODEL_ACTIVATIONS).detail
            # The cable is mended: the next pass lists, and the source is read again.
            proxy.heal()
            _passes_until(
                catalog,
                kube,
                cluster,
                lambda v: (
                    catalog._catalog.state.source(SourceKind.MODEL_ACTIVATIONS).status  # type: ignore[union-attr]
                    is SourceStatus.LISTED
                ),
            )
    finally:
        _close_proxy(proxy)
        delete_test_rows(litellm_peer, name)


def test_after_a_failure_on_the_catalog_thread_restart_starts_a_new_catalog(
    cluster: Cluster, kube_peer: KubePeer
) -> None:
    threads_before = _threads()
    catalog = BlockingModelCatalog(
        cluster.config(),
        litellm_master_key="sk-test",
        kubeconfig=str(kube_peer.kubeconfig),
        host_sources={SourceKind.MODEL_ACTIVATIONS},
        kube_settings=FAST,
        recorder=_FailingRecorder("mct-poison"),
        **_fake_litellm(),
    )
    with catalog:
        catalog.listed(SourceKind.MODEL_ACTIVATIONS, [b.activation("mct-poison")])  # fails on its thread
        with pytest.raises(CatalogFailedError):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                catalog.view()
                time.sleep(0.05)
        catalog.restart()
        # A new catalog, from nothing: its view is not ready (it says nothing about any model) until the
        # host has listed its source again and every other source was read.
        view = catalog.view()
        assert not view.ready and view.routes == () and view.catalog is None
        catalog.listed(SourceKind.MODEL_ACTIVATIONS, [b.activation("mct-fine", external={"model": "x/y"})])
        assert catalog.wait_ready(30)
        deadline = time.monotonic() + 30
        while _record(catalog.view(), "mct-fine") != ("published", "Published"):
            assert time.monotonic() < deadline, catalog.view()
            time.sleep(0.1)
        assert catalog.view().ready
    assert _threads() - threads_before == set()  # the first catalog's thread went with it too


def test_without_a_master_key_it_is_read_from_litellms_secret_and_a_missing_one_stops_the_start(
    cluster: Cluster, kube_peer: KubePeer
) -> None:
    threads_before = _threads()
    catalog = BlockingModelCatalog(
        cluster.config(),
        kubeconfig=str(kube_peer.kubeconfig),  # no litellm_master_key
        host_sources={SourceKind.MODEL_ACTIVATIONS},
        kube_settings=FAST,
        master_key_timeout=5.0,
        **_fake_litellm(),
    )
    with pytest.raises(MasterKeyError, match=f"Secret {cluster.namespace}/litellm-masterkey-secret"):
        catalog.start()
    assert _threads() - threads_before == set()
    # The Secret appears (LiteLLM installed after the host started): a restart reads it.
    cluster.create_master_key_secret("sk-test")  # the key the fake LiteLLM accepts
    with catalog.restart():
        catalog.listed(SourceKind.MODEL_ACTIVATIONS, [])
        assert catalog.wait_ready(30)  # LiteLLM observed: it accepted the key read from the Secret
    assert _threads() - threads_before == set()


def test_a_catalog_that_cannot_start_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    threads_before = _threads()
    missing = tmp_path / "no-such-kubeconfig"
    catalog = BlockingModelCatalog(CatalogConfig(), litellm_master_key="sk-unused", kubeconfig=str(missing))
    with pytest.raises(Exception, match="no-such-kubeconfig"):
        catalog.start()
    with pytest.raises(CatalogClosedError):
        catalog.listed(SourceKind.MODEL_ACTIVATIONS, [])
    catalog.close()
    assert _threads() - threads_before == set()


# --- embedded defaults: what a single-replica host gets unless it asks


def _listening_sockets() -> set[str]:
    """The sockets of this process that listen (TCP, either family)."""
    mine = _socket_inodes()
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and f"socket:[{fields[9]}]" in mine:  # 0A: LISTEN
                found.add(fields[9])
    return found


def _fake_litellm() -> dict[str, Any]:
    from tests.fakes.litellm import FakeLiteLLM

    return {"litellm_transport": httpx.MockTransport(FakeLiteLLM().handle)}


def _leases(cluster: Cluster) -> list[dict[str, Any]]:
    with cluster._http() as http:
        answer = http.get(f"/apis/coordination.k8s.io/v1/namespaces/{cluster.namespace}/leases")
    return list(answer.json()["items"])


def test_embedded_defaults_no_lease_no_server_the_hosts_logging_no_metrics(
    cluster: Cluster, kube_peer: KubePeer, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from opentelemetry import metrics

    root_handlers = list(logging.getLogger().handlers)
    listening = _listening_sockets()
    caplog.set_level(logging.INFO, logger="model_catalog")
    with BlockingModelCatalog(
        cluster.config(),
        litellm_master_key="sk-test",
        kubeconfig=str(kube_peer.kubeconfig),
        host_sources={SourceKind.MODEL_ACTIVATIONS},
        kube_settings=FAST,
        catalog_min_write_interval=0.0,
        **_fake_litellm(),
    ) as catalog:
        catalog.listed(
            SourceKind.MODEL_ACTIVATIONS, [b.activation("mct-defaults", external={"model": "x/y"})]
        )
        assert catalog.wait_ready(30)
        deadline = time.monotonic() + 30
        while _record(catalog.view(), "mct-defaults") != ("published", "Published"):
            assert time.monotonic() < deadline, catalog.view()
            time.sleep(0.1)
        assert catalog.wait_ready(0)  # a probe: answered at once
        assert catalog.view().leading  # the only writer: no Lease to wait for
        assert _leases(cluster) == []
        assert _listening_sockets() == listening  # no HTTP server
    # Its log lines went through the host's logging configuration, which it left as it was.
    assert any(r.name == "model_catalog.loop" and r.getMessage() == "command issued" for r in caplog.records)
    assert logging.getLogger().handlers == root_handlers
    # No meter provider given: nothing was registered with the global one either.
    assert not isinstance(metrics.get_meter_provider(), type(_sdk_provider()[0]))


def _sdk_provider() -> tuple[Any, Any]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader]), reader


def test_asked_for_a_lease_probes_and_given_a_meter_provider(cluster: Cluster, kube_peer: KubePeer) -> None:
    from model_catalog import LeaseConfig

    provider, reader = _sdk_provider()
    listening = _listening_sockets()
    lease = LeaseConfig(
        "mct-operator", cluster.namespace, "host-a", duration=3.0, renew_deadline=2.0, retry_period=0.2
    )
    with BlockingModelCatalog(
        cluster.config(),
        litellm_master_key="sk-test",
        kubeconfig=str(kube_peer.kubeconfig),
        host_sources={SourceKind.MODEL_ACTIVATIONS},
        lease=lease,
        meter_provider=provider,
        probes=("127.0.0.1", 0),
        kube_settings=FAST,
        **_fake_litellm(),
    ) as catalog:
        probes = f"http://127.0.0.1:{catalog.probe_port}"
        assert httpx.get(f"{probes}/healthz").text == "ok\n"
        not_yet = httpx.get(f"{probes}/readyz")  # the host has not listed its ModelActivations yet
        assert not_yet.status_code == 503 and "model-activations" in not_yet.text
        catalog.listed(SourceKind.MODEL_ACTIVATIONS, [])
        deadline = time.monotonic() + 30
        while not catalog.view().leading:
            assert time.monotonic() < deadline, "never took the Lease"
            time.sleep(0.1)
        assert [x["spec"]["holderIdentity"] for x in _leases(cluster)] == ["host-a"]
        assert catalog.wait_ready(10)
        assert httpx.get(f"{probes}/readyz").text == "ok (leader)\n"
        data = reader.get_metrics_data()
        names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
        assert {"model_catalog_events", "model_catalog_leader", "model_catalog_queue_depth"} <= names
    # Released on close, so another replica need not wait out the lease duration.
    assert [x["spec"].get("holderIdentity") or "" for x in _leases(cluster)] == [""]
    assert _listening_sockets() == listening  # the probe server is gone with it
    provider.shutdown()  # the host's provider: the catalog left it running


# --- the public import


def test_the_public_package_exports_exactly_the_supported_api() -> None:
    import model_catalog
    from app.blocking import BlockingModelCatalog as Internal
    from app.library import ModelCatalog

    assert sorted(model_catalog.__all__) == sorted(
        [
            "BlockingModelCatalog",
            "CallTimeoutError",
            "CatalogClosedError",
            "CatalogConfig",
            "CatalogError",
            "CatalogFailedError",
            "CatalogOptions",
            "CatalogView",
            "ConfigError",
            "KubeSettings",
            "LeaseConfig",
            "LiteLLMOptions",
            "MasterKeyError",
            "ModelCatalog",
            "SourceKind",
            "WriteOptions",
            "__version__",
            "read_litellm_master_key",
        ]
    )
    assert all(hasattr(model_catalog, name) for name in model_catalog.__all__)
    assert model_catalog.BlockingModelCatalog is Internal and model_catalog.ModelCatalog is ModelCatalog
    assert (Path(model_catalog.__file__).parent / "py.typed").is_file()


def test_the_wheel_installs_model_catalog_and_names_a_host_module_that_shadows_ours(tmp_path: Path) -> None:
    import shutil
    import sysconfig
    import zipfile

    source = tmp_path / "source"  # a copy, so the build's own files stay out of the checkout
    for name in ("model_catalog", "app", "adapters", "contracts", "catalog_core"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(tmp_path), str(source)], check=True, timeout=240)
    (wheel,) = tmp_path.glob("model_catalog-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"model_catalog/__init__.py", "model_catalog/py.typed", "app/blocking.py"} <= names
    site = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True, timeout=240)

    def import_it(*path: Path) -> subprocess.CompletedProcess[str]:
        # -S: no .pth files, so the checkout's editable install stays out; the dependencies from the venv
        dependencies = sysconfig.get_paths()["purelib"]
        return subprocess.run(
            [sys.executable, "-S", "-c", "import model_catalog; print(model_catalog.__file__)"],
            check=False,
            cwd=tmp_path,
            env={"PYTHONPATH": ":".join([*map(str, path), dependencies])},
            capture_output=True,
            text=True,
            timeout=60,
        )

    installed = import_it(site)
    assert installed.stdout.strip() == str(site / "model_catalog" / "__init__.py"), installed.stderr
    host = tmp_path / "host"
    (host / "app").mkdir(parents=True)
    (host / "app" / "__init__.py").write_text("")  # the host's own `app` package, ahead on sys.path
    shadowed = import_it(host, site)
    assert shadowed.returncode == 1
    assert f"{host}/app" in shadowed.stderr and "shadows it" in shadowed.stderr, shadowed.stderr
