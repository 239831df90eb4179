"""The peers of the fault suite, each one something a test can break and mend.

- ``OwnKubePeer``: a kube-apiserver + etcd of the suite's own (its ROOT and ports fixed, so it can be
  stopped and started again on the same data, ~6 s), started in the background at collection time.
- ``ServedFake``: the LiteLLM fake (``tests.fakes.litellm``) served on a loopback port from a thread,
  so a controller *process* talks to it over TCP while the test injects faults, or stops and restarts
  the listener (connection refused in between; the rows survive, as in LiteLLM's database).
- ``RealLiteLLMRestarter``: stop and start the session's real LiteLLM peer on its ROOT and ports.
- ``ProxyThread``: ``tests.adapters.kube.helpers.TcpProxy`` on its own event loop, between the controller
  and the API server: drop every connection, refuse new ones, freeze open ones (half-open), heal.
- ``OtlpSink``: an OTLP/HTTP receiver that keeps every exported trace body, for the canary scan.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import anyio.from_thread

from tests.adapters.kube.helpers import TcpProxy
from tests.e2e.harness import LoopbackHTTPServer, QuietHandler
from tests.fakes.litellm import FakeLiteLLM
from tests.fixtures.kube_peer import BUILD_TIMEOUT
from tests.fixtures.litellm_peer import database_url
from tests.fixtures.shared import shared_dir

T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _last_line(path: Path) -> str:
    try:
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


class OwnKubePeer:
    """An API server only one suite uses: it may be restarted, have its CRDs deleted, be cut off.

    ``extra_env``: more of ``kube-peer/start``'s settings (e.g. ``EXTRA_APISERVER_FLAGS``)."""

    def __init__(self, extra_env: Mapping[str, str] | None = None) -> None:
        self.extra_env = dict(extra_env or {})
        self.root: Path | None = None
        self.ports: dict[str, int] = {}
        self.error = ""
        self.ready = False
        self.first_start_seconds = 0.0
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # --- lifecycle
    def kick(self) -> None:
        """Start in the background (idempotent)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._first_start, name="fault-kube-peer", daemon=True)
                self._thread.start()

    def wait(self) -> OwnKubePeer | str:
        self.kick()
        assert self._thread is not None
        self._thread.join()
        return self if self.ready else self.error

    def _first_start(self) -> None:
        if not (shared_dir() / "kube-peer" / "start").exists():
            self.error = f"kube-peer not found under {shared_dir()} (set MODEL_CATALOG_SHARED)"
            return
        began = time.monotonic()
        error = ""
        for _ in range(3):  # a port picked free can be taken by a client's ephemeral port before use
            self.root = Path(tempfile.mkdtemp(prefix="model-catalog-fault-kube-"))
            ports: set[int] = set()
            while len(ports) < 3:
                ports.add(free_port())
            api, etcd, etcd_peer = sorted(ports)
            self.ports = {"PORT": api, "ETCD_PORT": etcd, "ETCD_PEER_PORT": etcd_peer}
            error = self._run("start", BUILD_TIMEOUT)  # a first start on a fresh machine builds it
            if not error:
                break
            self._run("stop", 120)
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        self.first_start_seconds = time.monotonic() - began
        if error:
            self.error = error
            return
        self.ready = True

    def _run(self, script: str, timeout: float) -> str:
        """Run ``start`` or ``stop`` for this ROOT; an error message, or '' when it worked."""
        assert self.root is not None
        env = {
            **os.environ,
            **self.extra_env,
            "ROOT": str(self.root),
            **{k: str(v) for k, v in self.ports.items()},
        }
        env.pop("KUBECONFIG", None)
        log = self.root / f"{script}.out"
        try:
            with log.open("w") as out:
                done = subprocess.run(
                    [str(shared_dir() / "kube-peer" / script)],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                    check=False,
                )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"kube-peer {script} failed: {type(exc).__name__}"
        if done.returncode != 0:
            text = log.read_text(errors="replace")
            for name in ("etcd.log", "apiserver.log"):
                text += f"\n--- {name}: " + _last_line(self.root / name)
            return f"kube-peer {script} failed (exit {done.returncode}): {text[-1500:]}"
        return ""

    def stop(self) -> float:
        """Stop the apiserver and etcd (their data stays); seconds taken."""
        began = time.monotonic()
        error = self._run("stop", 120)
        if error:
            raise RuntimeError(error)
        return time.monotonic() - began

    def crash(self) -> float:
        """SIGKILL the kube-apiserver (etcd stays up until ``start`` restarts both); seconds taken."""
        assert self.root is not None
        began = time.monotonic()
        pid = int((self.root / "apiserver.pid").read_text().strip())
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        while time.monotonic() - began < 10:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().split()[2]
            except OSError:
                break
            if state == "Z":  # a zombie holds no port (its parent, the start script, is gone)
                break
            time.sleep(0.05)
        return time.monotonic() - began

    def start(self) -> float:
        """Start again on the same ROOT and ports; seconds until /readyz is ok."""
        began = time.monotonic()
        error = self._run("start", 180)
        if error:
            raise RuntimeError(error)
        return time.monotonic() - began

    def destroy(self) -> None:
        if self.root is None:
            return
        with contextlib.suppress(RuntimeError):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    # --- how to reach it
    @property
    def kubeconfig(self) -> Path:
        assert self.root is not None
        return self.root / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['PORT']}"

    @property
    def port(self) -> int:
        return self.ports["PORT"]

    @property
    def token(self) -> str:
        assert self.root is not None
        return (self.root / "token").read_text().strip()

    @property
    def ca_file(self) -> str:
        assert self.root is not None
        return str(self.root / "certs" / "ca.crt")


class ServedFake:
    """``FakeLiteLLM`` on 127.0.0.1:<port>, served by an event loop in a thread of the test process."""

    def __init__(self, master_key: str) -> None:
        self.fake = FakeLiteLLM(master_key)
        self.master_key = master_key
        self.port = free_port()
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self.portal = self._portal_cm.__enter__()
        self._serving: Any = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Listen again on the same port (rows kept; the fake's model map restarts like LiteLLM's)."""
        if self._serving is not None:
            return
        self.call(self.fake.restart)
        serving = self.portal.wrap_async_context_manager(self.fake.serving("127.0.0.1", self.port))
        serving.__enter__()
        self._serving = serving

    def stop(self) -> None:
        """Close the listener and every open connection: the next connect is refused."""
        if self._serving is None:
            return
        serving, self._serving = self._serving, None
        serving.__exit__(None, None, None)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` on the fake's own event loop thread (the fake is not thread-safe)."""
        return self.portal.call(fn, *args)

    def close(self) -> None:
        self.stop()
        self._portal_cm.__exit__(None, None, None)


class RealLiteLLMRestarter:
    """Stop and start the session's real LiteLLM peer (``tests/fixtures/litellm_peer.py``) on its ROOT."""

    def __init__(self, root: str, base_url: str, start_env: Mapping[str, str]) -> None:
        """``start_env``: what the fixture started it with besides ROOT and ports (its release, config)."""
        self.root = Path(root)
        self.start_env = dict(start_env)
        self.port = int(base_url.rsplit(":", 1)[1].rstrip("/"))
        pgport = urllib.parse.urlsplit(database_url(self.root)).port
        if pgport is None:
            raise RuntimeError(f"no PGPORT in {self.root}/env.sh")
        self.pgport = pgport

    def _run(self, script: str, timeout: float) -> float:
        began = time.monotonic()
        env = {
            **os.environ,
            **self.start_env,
            "ROOT": str(self.root),
            "PORT": str(self.port),
            "PGPORT": str(self.pgport),
        }
        env.pop("LITELLM_MASTER_KEY", None)
        with (self.root / f"fault-{script}.log").open("w") as log:
            done = subprocess.run(
                [str(shared_dir() / "litellm-peer" / script)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            )
        if done.returncode != 0:
            raise RuntimeError(
                f"litellm-peer {script} failed: {_last_line(self.root / f'fault-{script}.log')}"
            )
        return time.monotonic() - began

    def stop(self) -> float:
        return self._run("stop", 120)

    def start(self) -> float:
        return self._run("start", 600)


class ProxyThread:
    """A cuttable TCP proxy to the API server, run on its own asyncio loop."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fault-proxy", daemon=True)
        self.thread.start()
        self.proxy = TcpProxy(target_host, target_port)
        self.port = self._run(self.proxy.start())

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def _call(self, fn: Callable[[], T]) -> T:
        async def wrapper() -> T:
            return fn()

        return self._run(wrapper())  # type: ignore[no-any-return]

    def drop(self) -> None:
        """Reset every open connection (new ones still work)."""
        self._call(self.proxy.drop_all)

    def refuse(self) -> None:
        """Stop listening and reset every open connection."""
        self._run(self.proxy.refuse())

    def freeze(self) -> int:
        """Half-open every open connection: they stay up but carry nothing."""
        return self._call(self.proxy.freeze_all)

    def hold(self) -> int:
        """Half-open every connection, those opened from now on too: nothing reaches the target."""
        return self._call(self.proxy.hold_all)

    def black_hole(self, on: bool) -> int:
        """On: every connection, open or new, carries nothing. Off: new connections work again and the
        frozen ones stay frozen (nobody tells the client). How many are frozen."""
        return self._call(lambda: self.proxy.black_hole(on))

    def heal(self) -> None:
        """Listen again on the same port (frozen connections are reset)."""
        self._call(self.proxy.drop_all)
        if self.proxy._server is None:
            self._run(self.proxy.start())

    def close(self) -> None:
        self._run(self.proxy.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class OtlpSink(LoopbackHTTPServer):
    """Receives OTLP/HTTP exports (protobuf bodies, kept raw: strings in them are plain UTF-8)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        owner = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                owner.bodies.append(self.rfile.read(length))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        super().__init__(Handler)
