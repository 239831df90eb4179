"""FreeToken runtimes for a stage: a runtime's /health on loopback, and the objects (a local
ModelActivation, its Service and Deployment) that make one, shared by the bad-input cases and the soak
(``bench/soak.py``)."""

from __future__ import annotations

import socket
import threading
from typing import Any

from tests.faults.stage import Stage, deployment


class HealthEndpoint:
    """A runtime's /health on loopback: ``ok`` (200), ``hang`` (accepts, never answers) or ``garbage``
    (answers bytes that are not HTTP)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.hits = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self._open: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(5)
            conn.recv(4096)
            if self.mode == "ok":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            elif self.mode == "garbage":
                conn.sendall(b"\x00\xff\x13garbage, not HTTP at all\r\n\r\n" * 20)
            else:
                self._open.append(conn)  # hang: keep it open, say nothing
                return
        except OSError:
            pass
        conn.close()

    def close(self) -> None:
        self.sock.close()
        for conn in self._open:
            conn.close()


def runtime_objects(stage: Stage, name: str) -> list[dict[str, Any]]:
    labels = {
        "app": f"{name}-rt",
        "appliance.magicstick.dev/runtime": "freetoken",
        "appliance.magicstick.dev/modelactivation": name,
    }
    return [
        {
            "apiVersion": "appliance.magicstick.dev/v1alpha1",
            "kind": "ModelActivation",
            "metadata": {"name": name, "namespace": stage.app_ns},
            "spec": {"type": "local", "engine": "freetoken", "modelType": "chat"},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": f"{name}-rt", "namespace": stage.ns},
            "spec": {
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                "selector": {"app": f"{name}-rt"},
            },
        },
        deployment(stage.ns, f"{name}-rt", labels),
    ]


def ready_runtime(stage: Stage, name: str, ready: bool = True) -> None:
    """The runtime's Deployment reports itself ready (available), or not."""
    got = stage.admin.get("apps/v1", "Deployment", stage.ns, f"{name}-rt")
    assert got is not None
    stage.admin.patch_status(
        "apps/v1",
        "Deployment",
        stage.ns,
        f"{name}-rt",
        {
            "observedGeneration": got["metadata"]["generation"],
            "replicas": 1,
            "readyReplicas": 1 if ready else 0,
            "conditions": [{"type": "Available", "status": "True" if ready else "False"}],
        },
    )
