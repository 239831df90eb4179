"""A synchronous host that embeds the catalog, shaped like the Magic Stick Operator's poll loop.

    KUBECONFIG=... LITELLM_BASE_URL=http://127.0.0.1:4000 LITELLM_MASTER_KEY=sk-... \
        .venv/bin/python examples/blocking_operator.py

No event loop in the host: every ``REQUEUE_SECONDS`` it lists the ModelActivations with a plain
standard-library HTTP client (in the cluster: its ServiceAccount; outside: the token of KUBECONFIG's
current context), hands them to the catalog, and prints what changed in the published view. The
catalog runs on a thread of its own (``model_catalog.BlockingModelCatalog``); each call returns within
``call_timeout`` whatever LiteLLM does. SIGTERM or Ctrl-C close it: its thread, clients and sockets go.
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


def reconcile(
    catalog: BlockingModelCatalog, kube: KubeReader, namespace: str, previous: CatalogView | None
) -> CatalogView:
    """One pass of the host's loop: read what it reads anyway, feed it, look at what is published."""
    catalog.listed(SourceKind.MODEL_ACTIVATIONS, kube.list_activations(namespace))
    view = catalog.view()
    for line in describe_changes(previous, view):
        print(line, flush=True)
    return view


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
        litellm_master_key=env["LITELLM_MASTER_KEY"],
        kubeconfig=env.get("KUBECONFIG"),
        host_sources={SourceKind.MODEL_ACTIVATIONS},
    )
    try:
        with catalog:
            print("catalog started", flush=True)
            previous: CatalogView | None = None
            while True:
                try:
                    previous = reconcile(catalog, kube, config.appliance_namespace, previous)
                except (CallTimeoutError, OSError) as exc:  # the next pass lists everything again
                    print(f"pass skipped: {type(exc).__name__}: {exc}", flush=True)
                time.sleep(requeue)
    finally:
        print(f"catalog closed; threads left: {[t.name for t in threading.enumerate()]}", flush=True)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main(os.environ)
