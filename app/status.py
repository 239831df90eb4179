"""``model-catalog status``: the live catalog at a glance, read-only.

It reads two objects with ``get`` — ``ConfigMap/<CATALOG_CONFIGMAP>`` and the controller's Lease — and
prints a header (catalog hash, when it was written, who leads), one line per problem that stops or limits
publishing (the catalog never written, no leader, and what the leader reports on its Lease: LiteLLM
unreachable, a CRD not installed, a source forbidden or failing, a watch reconnecting, the catalog too
large), one row per ``routes.json`` record and why each one in error or conflict is. ``status MODEL``
answers for one model: published or not, and why. ``deploy/status-reader`` is the Role that allows exactly
that. The exit status lets scripts use it: 0 when nothing stops publishing and no item shown is in
``error`` or ``conflict`` (with MODEL: each one is published), 1 otherwise, 2 when the catalog could not
be read. ``--watch`` reads again every ``--interval`` seconds and redraws when something changed
(polling: a watch would need the ``watch`` verb too), until interrupted; its exit status is that of the
last view.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sys
from collections.abc import Mapping
from typing import IO, Any, cast
from urllib.parse import quote

import anyio
import attrs
import orjson

from adapters.kube.api import KubeApi, KubeError
from app.status_table import matching, model_view, published, table
from app.status_view import Item, Leader, Status, leader_from_lease, status_from_configmap
from app.terminal import TerminalSafe, one_line

EXIT_OK = 0
EXIT_FAILING = 1
EXIT_UNREADABLE = 2
REQUEST_TIMEOUT_SECONDS = 10.0
_CLEAR = "\x1b[H\x1b[2J"


@attrs.frozen
class Target:
    """Where the catalog and the Lease are."""

    namespace: str = "ai"
    configmap: str = "ai-model-catalog"
    lease_namespace: str = "ai"
    lease_name: str = "ai-model-catalog-controller"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Target:
        namespace = env.get("NAMESPACE") or "ai"
        return cls(
            namespace=namespace,
            configmap=env.get("CATALOG_CONFIGMAP") or "ai-model-catalog",
            lease_namespace=env.get("CATALOG_LEASE_NAMESPACE") or namespace,
            lease_name=env.get("CATALOG_LEASE_NAME") or "ai-model-catalog-controller",
        )


class UnreadableError(Exception):
    """The catalog ConfigMap could not be read (the message says why, in one line)."""


async def read_leader(api: KubeApi, target: Target) -> Leader:
    path = (
        f"/apis/coordination.k8s.io/v1/namespaces/{_q(target.lease_namespace)}/leases/{_q(target.lease_name)}"
    )
    try:
        lease = await api.request("GET", path, timeout=REQUEST_TIMEOUT_SECONDS)
    except KubeError as exc:
        if exc.status == 404:
            return Leader("", None, None, exists=False)  # no replica has ever led (or election is off)
        return Leader("", None, None, problem=f"Lease {target.lease_namespace}/{target.lease_name}: {exc}")
    return leader_from_lease(lease)


async def read_status(api: KubeApi, target: Target, previous: Status | None = None) -> Status:
    path = f"/api/v1/namespaces/{_q(target.namespace)}/configmaps/{_q(target.configmap)}"
    try:
        configmap = await api.request("GET", path, timeout=REQUEST_TIMEOUT_SECONDS)
    except KubeError as exc:
        raise UnreadableError(f"ConfigMap {target.namespace}/{target.configmap}: {exc}") from None
    return status_from_configmap(
        configmap,
        await read_leader(api, target),
        previous,
        configmap_ref=f"{target.namespace}/{target.configmap}",
        lease_ref=f"{target.lease_namespace}/{target.lease_name}",
    )


def _q(segment: str) -> str:
    return quote(segment, safe="")


def _say(err: IO[str], message: str) -> None:
    err.write(one_line(message))
    err.write("\n")  # a write of its own: TerminalSafe escapes line breaks inside a write
    err.flush()


@attrs.frozen
class Options:
    output: str = ""  # "" (table), "wide" or "json"
    watch: bool = False
    interval: float = 2.0
    models: tuple[str, ...] = ()  # status MODEL...: only these, by name or logical name
    states: frozenset[str] = frozenset()  # --state: only records in these states (empty: all)

    def shown(self, status: Status) -> tuple[Item, ...]:
        items = status.items
        if self.models:
            items = tuple(item for model in self.models for item in matching(status, model))
        if self.states:
            items = tuple(item for item in items if item.state in self.states)
        return items


def exit_code(status: Status, options: Options = Options(), now: dt.datetime | None = None) -> int:
    """0 when nothing stops publishing and every item shown is fine (each MODEL published), else 1."""
    if status.problems(now or _now()):
        return EXIT_FAILING
    if options.models:
        ok = all(published(matching(status, model)) for model in options.models)
        return EXIT_OK if ok else EXIT_FAILING
    return EXIT_FAILING if any(item.failing for item in options.shown(status)) else EXIT_OK


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def show(status: Status, options: Options, out: IO[str], *, redraw: bool) -> None:
    now = _now()
    if options.output == "json":
        flags = 0 if options.watch else orjson.OPT_INDENT_2
        doc = status.as_json(now)
        if options.models or options.states:
            doc["items"] = [item.as_json() for item in options.shown(status)]
        text = orjson.dumps(doc, option=flags | orjson.OPT_SORT_KEYS).decode()
        for line in text.split("\n"):  # line by line: the stream escapes a line break inside a write
            out.write(line)
            out.write("\n")
        out.flush()
        return
    if redraw:
        out.flush()
        sys.stdout.write(_CLEAR)  # our own control sequence: straight to the stream, not escaped
    if options.models and options.output != "wide":
        lines = model_view(status, now, options.models)
    else:
        filtered = options.models or options.states
        lines = table(
            status, now, wide=options.output == "wide", items=options.shown(status) if filtered else None
        )
    for line in lines:
        out.write(line)
        out.write("\n")
    out.flush()


async def run_status(
    api: KubeApi, target: Target, options: Options, out: IO[str], err: IO[str], *, terminal: bool = False
) -> int:
    try:
        status = await read_status(api, target)
    except UnreadableError as exc:
        _say(err, f"model-catalog: {exc}")
        return EXIT_UNREADABLE
    show(status, options, out, redraw=terminal and options.watch)
    if not options.watch:
        return exit_code(status, options)
    views = [status]
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signal, tg.cancel_scope)
        await _watch(api, target, options, out, err=err, views=views, terminal=terminal)
    return exit_code(views[-1], options)


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


async def _watch(
    api: KubeApi,
    target: Target,
    options: Options,
    out: IO[str],
    *,
    err: IO[str],
    views: list[Status],
    terminal: bool,
) -> None:
    """Read again every interval; show each view that differs from the last one (appended to ``views``)."""
    while True:
        await anyio.sleep(options.interval)
        try:
            latest = await read_status(api, target, views[-1])
        except UnreadableError as exc:
            _say(err, f"model-catalog: {exc} (trying again)")
            continue
        changed = not latest.same_view(views[-1], _now())
        views.append(latest)
        del views[:-1]
        if changed:
            if not terminal and options.output != "json":
                out.write("\n")
            show(latest, options, out, redraw=terminal)


async def _main(kubeconfig: str, context: str, target: Target, options: Options) -> int:
    from app.kube_client import ClusterConfigError, load_cli_client

    out: Any = TerminalSafe(sys.stdout)
    try:
        client, _ = await load_cli_client(kubeconfig, os.environ, context=context, connections=2)
    except ClusterConfigError as exc:  # a missing or broken kubeconfig, not in a cluster
        sys.stderr.write(f"model-catalog: cannot load the cluster configuration: {one_line(str(exc))}\n")
        return EXIT_UNREADABLE
    async with client:
        api = KubeApi(client, request_timeout=REQUEST_TIMEOUT_SECONDS)
        return await run_status(
            api, target, options, out, cast(IO[str], TerminalSafe(sys.stderr)), terminal=sys.stdout.isatty()
        )


def main(kubeconfig: str, context: str, target: Target, options: Options) -> int:
    """``kubeconfig``: the --kubeconfig flag ("" to choose as kubectl does: KUBECONFIG, ~/.kube/config,
    in-cluster)."""
    return anyio.run(_main, kubeconfig, context, target, options)
