"""The ``model-catalog`` command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import orjson

from adapters.eventlog import DEFAULT_MAX_LINE_BYTES
from app.terminal import one_line, terminal_safe
from catalog_core.config import MAX_INTEGER_DIGITS, CatalogConfig, ConfigError, quoted_setting
from catalog_core.reasons import RouteState

# Each command imports what only it needs when it runs (replay and explain bring tqdm, render YAML and
# the planner, run the Kubernetes client and OpenTelemetry): a process pays in memory and start time
# for its own command only. tests/app/test_imports.py holds each command to its imports.

EXIT_USAGE = 2


def _config() -> CatalogConfig:
    config = CatalogConfig.from_env(os.environ)
    if isinstance(config, ConfigError):
        _fail(f"invalid configuration: {config}")
    assert isinstance(config, CatalogConfig)
    return config


def _fail(message: str) -> None:
    print(f"model-catalog: {one_line(message)}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _render(args: argparse.Namespace) -> int:
    from app.inputs import InputError, read_model_info, read_objects
    from app.render import render

    config = _config()
    try:
        objects = read_objects(args.file)
        rows = read_model_info(args.litellm_info) if args.litellm_info else None
    except InputError as exc:
        _fail(str(exc))
        return EXIT_USAGE
    result = render(
        objects, config, model_info=rows, healthy=tuple(args.healthy), show_secrets=args.show_secrets
    )
    for warning in result.warnings:
        print(one_line(warning), file=sys.stderr)
    text = orjson.dumps(result.output, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
    sys.stdout.buffer.write(terminal_safe(text).encode() + b"\n")  # still JSON: \uXXXX escapes
    return 0


def _placeholder(args: argparse.Namespace) -> int:
    from app.placeholder import placeholder_yaml

    sys.stdout.write(placeholder_yaml(_config()))
    return 0


def _run(args: argparse.Namespace) -> int:
    import anyio

    from app import logs
    from app.service import serve
    from app.settings import FLAGS, load

    overrides = {var: getattr(args, flag.lstrip("-").replace("-", "_")) for flag, var, _ in FLAGS}
    settings = load(os.environ, {k: str(v) for k, v in overrides.items() if v is not None})
    if isinstance(settings, ConfigError):
        _fail(f"invalid configuration: {settings}")
        return EXIT_USAGE
    from app.kube_client import ClusterConfigError

    logs.setup(settings.log_level)
    try:
        anyio.run(serve, settings)
    except ClusterConfigError as exc:
        _fail(f"cannot load the cluster configuration: {exc}")
        return EXIT_USAGE
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="model-catalog", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)
    render_cmd = commands.add_parser(
        "render",
        help="show what the controller would publish for a cluster snapshot (no cluster needed)",
        description="Read Kubernetes objects (kubectl get -o yaml|json) and print, as JSON, the LiteLLM "
        "deployments, the plan against a saved /model/info, the catalog ConfigMap data, the AgentTemplate "
        "content and the routes.json records the controller would publish.",
    )
    render_cmd.add_argument(
        "-f", "--file", action="append", required=True, metavar="FILE", help="YAML or JSON; - is stdin"
    )
    render_cmd.add_argument(
        "--litellm-info", metavar="FILE", help="a saved GET /model/info response; enables the plan"
    )
    render_cmd.add_argument(
        "--healthy",
        action="append",
        default=[],
        metavar="NAME",
        help="treat this FreeToken runtime as healthy",
    )
    render_cmd.add_argument(
        "--show-secrets", action="store_true", help="print API keys instead of redacting them"
    )
    render_cmd.set_defaults(func=_render)

    placeholder_cmd = commands.add_parser(
        "placeholder",
        help="print the bootstrap ai-model-catalog ConfigMap (every key, empty values) for this environment",
        description="Print, as YAML, the ConfigMap that lets consumers start before the first catalog is "
        "written: every data key of the catalog with empty values (READY false, hash bootstrap). "
        "deploy/bootstrap/configmap-ai-model-catalog.yaml is its output for the default environment.",
    )
    placeholder_cmd.set_defaults(func=_placeholder)

    from app.settings import FLAGS

    run_cmd = commands.add_parser(
        "run",
        help="run the controller (configuration from the environment, behaviour §10; flags override)",
        description="Watch the cluster and LiteLLM and keep the catalog true until SIGTERM.",
    )
    for flag, variable, text in FLAGS:
        run_cmd.add_argument(flag, metavar="VALUE", help=f"{text} [env {variable}]")
    run_cmd.set_defaults(func=_run)

    status_cmd = commands.add_parser(
        "status",
        help="is the catalog published, and if not why: problems, every routes.json record, the leader",
        description="Read ConfigMap/ai-model-catalog and the controller's Lease (get only) and print the "
        "catalog hash, the leader, one line per problem that stops or limits publishing (catalog never "
        "written, no leader, LiteLLM unreachable, a CRD not installed, a source forbidden or failing, a "
        "watch reconnecting, the catalog too large), one row per routes.json record and why each one in "
        "error or conflict is. With MODEL: whether that model is published, and why not. Exit 0 when "
        "nothing stops publishing and no record shown is in error or conflict (each MODEL published), "
        "1 otherwise, 2 when the catalog cannot be read.",
    )
    status_cmd.add_argument(
        "model", nargs="*", metavar="MODEL", help="only this model (a model name or logical name)"
    )
    status_cmd.add_argument(
        "--state",
        action="append",
        type=_states,
        default=[],
        metavar="STATE[,STATE]",
        help=f"only records in these states ({', '.join(_STATES)})",
    )
    status_cmd.add_argument(
        "-o", "--output", choices=("wide", "json"), default="", help="wide: ids, api_base hosts, messages"
    )
    status_cmd.add_argument(
        "-w", "--watch", action="store_true", help="read again every --interval and redraw on change"
    )
    status_cmd.add_argument(
        "--interval", type=_positive_seconds, default=2.0, metavar="SECONDS", help="for --watch (2)"
    )
    status_cmd.add_argument("-n", "--namespace", metavar="NS", help="the catalog's namespace [env NAMESPACE]")
    _cluster_flags(status_cmd)
    status_cmd.set_defaults(func=_status)

    check_cmd = commands.add_parser(
        "check",
        help="are the controller's prerequisites in place: CRDs, permissions, master key, LiteLLM, catalog",
        description="Check, read-only, what the controller needs: the API server; each CRD it reads and "
        "the version served; every permission of docs/rbac.md granted to the controller's identity "
        "(SelfSubjectAccessReview: one line per missing one, with the Role to add it to; outside a pod the "
        "ServiceAccount system:serviceaccount:NAMESPACE:ai-model-catalog-controller is impersonated); the "
        "LiteLLM master key (LITELLM_MASTER_KEY, else its Secret); LiteLLM reachable, its version, the key "
        "accepted; the catalog ConfigMap writable (server-side dry run). Works before the first install. "
        "Exit 0 when all is ok, 1 with warnings only, 2 with a failure.",
    )
    check_cmd.add_argument(
        "-n", "--namespace", metavar="NS", help="the controller's namespace [env NAMESPACE]"
    )
    check_cmd.add_argument(
        "--as",
        dest="identity",
        metavar="USER",
        help="whose permissions to check (impersonated; empty: your own) [the controller's ServiceAccount; "
        "in a pod, the pod's]",
    )
    check_cmd.add_argument(
        "--litellm-url",
        default="",
        metavar="URL",
        help="LiteLLM's admin API, e.g. through kubectl port-forward [env LITELLM_BASE_URL]",
    )
    check_cmd.add_argument("-o", "--output", choices=("json",), default="", help="json: the findings as JSON")
    _cluster_flags(check_cmd)
    check_cmd.set_defaults(func=_check)

    replay_cmd = commands.add_parser(
        "replay",
        help="fold a recorded event log again, offline, and print or verify its commands",
        description="Stream an event log (CATALOG_EVENT_LOG_PATH of a running controller) and fold every "
        "event again from the header's configuration (or from a snapshot), printing the commands each step "
        "emits. Exit 0 when replayed (identical, with --verify), 1 when the replay diverges from the "
        "recording, 2 when the log is unreadable or of a format version this one cannot read.",
    )
    replay_cmd.add_argument("log", metavar="LOG", help="an event log file (or a ring dump)")
    replay_cmd.add_argument("--until", type=_seq, metavar="SEQ", help="stop after the record with this seq")
    replay_cmd.add_argument(
        "--from-snapshot",
        action="store_true",
        help="start from the latest snapshot at or before --until instead of the beginning",
    )
    replay_cmd.add_argument(
        "--verify",
        action="store_true",
        help="compare every step's commands (and each snapshot's state) with the recording; "
        "report the first difference with both versions",
    )
    replay_cmd.add_argument("--json", action="store_true", help="print the commands as JSON Lines")
    replay_cmd.add_argument(
        "-j",
        "--jobs",
        type=_jobs,
        default="auto",
        metavar="N|auto",
        help="with --verify: cut a large log at its snapshots and verify up to N parts at once, each in "
        f"its own process; auto: one per usable CPU, at most {AUTO_JOBS_CAP}; 1: all in this process "
        "(default: auto)",
    )
    _max_line_bytes(replay_cmd)
    replay_cmd.set_defaults(func=_replay)

    explain_cmd = commands.add_parser(
        "explain",
        help="tell the story of one model in an event log: what changed its publication, and why",
        description="Replay an event log and print, in order, each event that changed how MODEL (a model "
        "name or logical name) is published -- its routes.json record, catalog entry, LiteLLM rows -- with "
        "the reason codes and the commands issued for it, ending with its final state and why. "
        "Exit 0 when MODEL appears in the log, 1 when it never does, 2 when the log is unreadable.",
    )
    explain_cmd.add_argument("log", metavar="LOG", help="an event log file (or a ring dump)")
    explain_cmd.add_argument("model", metavar="MODEL", help="a model name or logical name")
    explain_cmd.add_argument("--until", type=_seq, metavar="SEQ", help="stop after the record with this seq")
    explain_cmd.add_argument("--json", action="store_true", help="print the story as JSON Lines")
    _max_line_bytes(explain_cmd)
    explain_cmd.set_defaults(func=_explain)

    get_cmd = commands.add_parser(
        "get",
        help="GET an endpoint of the controller in this container (/readyz, /metrics, /debug/eventlog)",
        description="Read an endpoint of the model-catalog run server in the same container (the image has "
        "no curl): kubectl exec deploy/ai-model-catalog-controller -- model-catalog get /readyz. Asks "
        "CATALOG_HTTP_HOST (loopback when it binds every address) on CATALOG_HTTP_PORT (8080), with "
        "CATALOG_DEBUG_TOKEN when set. A 2xx body goes to stdout; exit 1 (the body on stderr) for any "
        "other status, 2 when nothing answers.",
    )
    get_cmd.add_argument("path", type=_endpoint_path, metavar="PATH", help="/healthz, /readyz, /metrics, ...")
    get_cmd.add_argument("--port", type=_port, metavar="PORT", help="[env CATALOG_HTTP_PORT; else 8080]")
    get_cmd.add_argument(
        "--timeout", type=_positive_seconds, default=30.0, metavar="SECONDS", help="for the answer (30)"
    )
    get_cmd.set_defaults(func=_get)
    return top


def _endpoint_path(text: str) -> str:
    from app.local_get import valid_path

    try:
        return valid_path(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _port(text: str) -> int:
    port = _positive(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port")
    return port


def _get(args: argparse.Namespace) -> int:
    from app import local_get

    return local_get.main(args.path, args.port, args.timeout)


def _cluster_flags(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="[else as kubectl: the files of KUBECONFIG, ~/.kube/config, the pod's ServiceAccount]",
    )
    command.add_argument(
        "--context", default="", metavar="NAME", help="a kubeconfig context (its current one)"
    )


_STATES = tuple(state.value for state in RouteState)


def _states(text: str) -> frozenset[str]:
    states = frozenset(s.strip() for s in text.split(",") if s.strip())
    unknown = sorted(states - set(_STATES))
    if unknown or not states:
        raise argparse.ArgumentTypeError(f"{text!r}: states are {', '.join(_STATES)}")
    return states


def _max_line_bytes(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--max-line-bytes",
        type=_positive,
        default=DEFAULT_MAX_LINE_BYTES,
        metavar="N",
        help=f"refuse (exit 2) a line longer than N bytes, newline included ({DEFAULT_MAX_LINE_BYTES})",
    )


def _digits(text: str) -> bool:
    """ASCII digits, few enough for ``int`` (which refuses more than 4,300 with an exception of its own)."""
    return text.isascii() and text.isdigit() and len(text) <= MAX_INTEGER_DIGITS


def _positive(text: str) -> int:
    if not _digits(text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{quoted_setting(text)} is not a positive integer")
    return int(text)


AUTO_JOBS_CAP = 8  # each part is a process of its own (~35 MiB for the bench log's): a bound on a big machine


def _jobs(text: str) -> int:
    """A positive count, or ``auto``: the CPUs this process may run on, at most ``AUTO_JOBS_CAP``."""
    if text == "auto":
        affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere every CPU counts
        usable = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
        return max(1, min(usable, AUTO_JOBS_CAP))
    return _positive(text)


def _seq(text: str) -> int:
    if not _digits(text):
        raise argparse.ArgumentTypeError(f"{quoted_setting(text)} is not a sequence number")
    return int(text)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0.1 <= value <= 3600:
        raise argparse.ArgumentTypeError(
            f"{quoted_setting(text)} is not a number of seconds between 0.1 and 3600"
        )
    return value


def _status(args: argparse.Namespace) -> int:
    from app import status

    target = status.Target.from_env(os.environ)
    if args.namespace:
        lease_ns = os.environ.get("CATALOG_LEASE_NAMESPACE") or args.namespace
        target = status.Target(args.namespace, target.configmap, lease_ns, target.lease_name)
    options = status.Options(
        output=args.output,
        watch=args.watch,
        interval=args.interval,
        models=tuple(args.model),
        states=frozenset().union(*args.state),
    )
    return status.main(args.kubeconfig or "", args.context, target, options)


def _check(args: argparse.Namespace) -> int:
    from app import check

    env = dict(os.environ)
    if args.namespace:
        env["NAMESPACE"] = args.namespace
    config = CatalogConfig.from_env(env)
    if isinstance(config, ConfigError):
        _fail(f"invalid configuration: {config}")
    assert isinstance(config, CatalogConfig)
    options = check.Options(
        kubeconfig=args.kubeconfig or "",
        context=args.context,
        identity=args.identity,
        litellm_url=args.litellm_url,
        as_json=args.output == "json",
    )
    return check.main(config, options, env)


def _replay(args: argparse.Namespace) -> int:
    from app import replay

    return replay.run(
        args.log,
        until=args.until,
        from_snapshot=args.from_snapshot,
        verify=args.verify,
        as_json=args.json,
        max_line_bytes=args.max_line_bytes,
        jobs=args.jobs,
    )


def _explain(args: argparse.Namespace) -> int:
    from app import explain

    return explain.run(
        args.log, args.model, until=args.until, as_json=args.json, max_line_bytes=args.max_line_bytes
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, like other command-line tools.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
