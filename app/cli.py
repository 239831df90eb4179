"""The ``model-catalog`` command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import orjson

from app.inputs import InputError, read_model_info, read_objects
from app.render import render
from catalog_core.config import CatalogConfig, ConfigError

EXIT_USAGE = 2


def _config() -> CatalogConfig:
    config = CatalogConfig.from_env(os.environ)
    if isinstance(config, ConfigError):
        _fail(f"invalid configuration: {config}")
    assert isinstance(config, CatalogConfig)
    return config


def _fail(message: str) -> None:
    print(f"model-catalog: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _render(args: argparse.Namespace) -> int:
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
        print(warning, file=sys.stderr)
    sys.stdout.buffer.write(
        orjson.dumps(result.output, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
    )
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
    logs.setup(settings.log_level)
    anyio.run(serve, settings)
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

    from app.settings import FLAGS

    run_cmd = commands.add_parser(
        "run",
        help="run the controller (configuration from the environment, contracts A.7; flags override)",
        description="Watch the cluster and LiteLLM and keep the catalog true until SIGTERM.",
    )
    for flag, variable, text in FLAGS:
        run_cmd.add_argument(flag, metavar="VALUE", help=f"{text} [env {variable}]")
    run_cmd.set_defaults(func=_run)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
