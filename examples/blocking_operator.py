"""A synchronous host that embeds the catalog, in the shape of the Magic Stick Operator's own loop.

    KUBECONFIG=... LITELLM_BASE_URL=http://127.0.0.1:4000 .venv/bin/python examples/blocking_operator.py

The operator's loop: standard library only, one thread, ``while True: reconcile(); time.sleep(...)``.
Every ``REQUEUE_SECONDS`` it lists its ModelActivations with a plain HTTP client (in the cluster: its
ServiceAccount; outside: the token of KUBECONFIG's current context), hands them to the catalog, and
prints what changed in the published view. The catalog runs on a thread of its own
(``model_catalog.BlockingModelCatalog``); each call returns within ``call_timeout`` whatever LiteLLM
or the API server do. What it does at each of the points where a host can go wrong:

- the LiteLLM master key: read by the catalog from LiteLLM's own Secret in LiteLLM's namespace
  (``LITELLM_MASTER_KEY`` in the environment, if set, is used instead);
- a pass whose own read fails says so (``read_failed``): the catalog keeps what was listed last, with
  its routes; it never lists an empty cache for a failed read;
- a view that is not ``ready`` (after a start, before every source was read) says nothing about any
  model: the host acts on none, so a restart never reads as every route withdrawn;
- ``CatalogFailedError`` (the catalog stopped on its thread): the pass ``restart()``s it, and a restart
  that fails is tried again on the next pass (the catalog's own start, in ``with``, is not: a
  configuration that cannot start is an error of the deployment, better seen as a crash);
- SIGTERM (the pod stopping) leaves the loop like Ctrl-C, so ``with`` closes the catalog: its thread,
  clients and sockets go, and the process exits 0. Without a handler the signal kills the process,
  which loses nothing (the catalog keeps no state of its own the next start needs), but a process that
  is PID 1 in its container ignores SIGTERM until the kubelet's SIGKILL: keep the handler.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import ssl
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from model_catalog import (
    BlockingModelCatalog,
    CallTimeoutError,
    CatalogConfig,
    CatalogError,
    CatalogView,
    ConfigError,
    SourceKind,
)

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
ACTIVATIONS = "/apis/appliance.magicstick.dev/v1alpha1/namespaces/{namespace}/modelactivations"
REQUEST_TIMEOUT = 10.0


class KubeReader:
    """The operator's own reads: one GET per pass, standard library only."""

    def __init__(self, server: str, token: str, context: ssl.SSLContext) -> None:
        self.server, self._token, self._context = server.rstrip("/"), token, context

    @classmethod
    def from_environment(cls, kubeconfig: str | None) -> KubeReader:
        if not kubeconfig:  # in the cluster
            host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
            context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
            return cls(f"https://{host}:{port}", (SERVICE_ACCOUNT / "token").read_text().strip(), context)
        import yaml  # comes with model-catalog; only a kubeconfig outside the cluster needs it

        doc = yaml.safe_load(Path(kubeconfig).read_text())
        current = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == current["cluster"])
        user = next(u["user"] for u in doc["users"] if u["name"] == current["user"])
        context = ssl.create_default_context()
        if "certificate-authority-data" in cluster:
            context.load_verify_locations(
                cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
            )
        elif "certificate-authority" in cluster:
            context.load_verify_locations(cafile=cluster["certificate-authority"])
        return cls(cluster["server"], user["token"], context)  # this example reads token users only

    def list_activations(self, namespace: str) -> list[dict[str, Any]]:
        path = ACTIVATIONS.format(namespace=urllib.parse.quote(namespace))
        request = urllib.request.Request(
            self.server + path, headers={"Authorization": f"Bearer {self._token}"}
        )
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT, context=self._context) as answer:
            return list(json.load(answer)["items"])


def route_states(view: CatalogView | None) -> dict[str, tuple[str, str]]:
    """Each route's state and reason, by source and name."""
    if view is None:
        return {}
    return {f"{r['source']}/{r['name']}": (r["state"], r["reason"]) for r in view.routes}


def describe_changes(before: CatalogView | None, after: CatalogView) -> list[str]:
    old, new = route_states(before), route_states(after)
    lines = []
    for route in sorted(old.keys() | new.keys()):
        if old.get(route) == new.get(route):
            continue
        if route not in new:
            lines.append(f"removed {route}")
            continue
        state, reason = new[route]
        was = old.get(route, ("absent", ""))[0]
        verb = "published" if state == "published" else "withdrawn" if was == "published" else state
        lines.append(f"{verb} {route} ({reason})")
    if after.catalog_hash != (before.catalog_hash if before is not None else None):
        lines.append(f"catalog written: hash {after.catalog_hash}")
    return lines


class Operator:
    """The host's loop state: the last view it acted on, and the status it gave each ModelActivation
    (the real operator writes it to the object's status; this one prints it when it changes)."""

    def __init__(self, catalog: BlockingModelCatalog, kube: KubeReader, namespace: str) -> None:
        self.catalog, self.kube, self.namespace = catalog, kube, namespace
        self.view: CatalogView | None = None
        self.activations: list[str] = []  # names in the last listing that succeeded
        self.statuses: dict[str, str] = {}

    def reconcile(self) -> CatalogView | None:
        """One pass: read what it reads anyway, feed it, act on what is published. Returns the view it
        acted on (None until the catalog was first ready)."""
        try:
            listed = self.kube.list_activations(self.namespace)
        except OSError as exc:  # urllib's errors, HTTP ones included: keep what was listed last
            self.catalog.read_failed(
                SourceKind.MODEL_ACTIVATIONS, f"listing ModelActivations: {type(exc).__name__}"
            )
            print(f"read failed, last listing kept: {type(exc).__name__}", flush=True)
        else:
            self.catalog.listed(SourceKind.MODEL_ACTIVATIONS, listed)
            self.activations = [a["metadata"]["name"] for a in listed]
        view = self.catalog.view()
        if not view.ready:  # nothing is decided yet: no status is set from it
            if self.view is None:
                print("waiting for the catalog's first sync", flush=True)
            return self.view
        for line in describe_changes(self.view, view):
            print(line, flush=True)
        self.view = view
        self.set_statuses(view)
        return view

    def set_statuses(self, view: CatalogView) -> None:
        """Each ModelActivation's status: its route's reason, or WaitingForCatalog while it has none."""
        reasons = {r["name"]: r["reason"] for r in view.routes if r["source"] == "modelactivation"}
        for name in self.activations:
            status = reasons.get(name, "WaitingForCatalog")
            if self.statuses.get(name) != status:
                self.statuses[name] = status
                print(f"status modelactivation/{name}: {status}", flush=True)


def main(env: Mapping[str, str]) -> None:
    config = CatalogConfig.from_env(env)
    if isinstance(config, ConfigError):
        raise SystemExit(f"invalid configuration: {config}")
    requeue = float(env.get("REQUEUE_SECONDS", "30"))
    kube = KubeReader.from_environment(env.get("KUBECONFIG"))
    # SIGTERM (the pod stopping) leaves the loop like Ctrl-C does, so `with` closes the catalog.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    catalog = BlockingModelCatalog(
        config,
        litellm_master_key=env.get("LITELLM_MASTER_KEY"),  # None: read from LiteLLM's Secret
        kubeconfig=env.get("KUBECONFIG"),
        host_sources={SourceKind.MODEL_ACTIVATIONS},
    )
    try:
        with catalog:
            print("catalog started", flush=True)
            operator = Operator(catalog, kube, config.appliance_namespace)
            while True:
                try:
                    operator.reconcile()
                except CallTimeoutError as exc:  # nothing delivered: the next pass lists everything again
                    print(f"pass skipped: {exc}", flush=True)
                except CatalogError as exc:  # it stopped on its thread (or a restart failed): start anew
                    print(f"catalog stopped ({exc}); restarting it", flush=True)
                    try:
                        catalog.restart()
                    except Exception as failed:  # e.g. the API server unreachable: the next pass tries again
                        print(f"restart failed: {type(failed).__name__}: {failed}", flush=True)
                time.sleep(requeue)
    finally:
        print(f"catalog closed; threads left: {[t.name for t in threading.enumerate()]}", flush=True)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main(os.environ)
