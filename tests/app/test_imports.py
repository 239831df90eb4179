"""Each command imports what it needs, and no more (issue 15: memory above the floor, start time).

Every case runs one ``model-catalog`` command in a fresh interpreter and reads its ``sys.modules`` at the
end: the offline commands never load the Kubernetes client, aiohttp, httpx or OpenTelemetry; ``status``
loads the Kubernetes client but not the controller's telemetry; ``run`` loads neither the event-log wire
format (the log is off by default) nor the tracing SDK and its OTLP exporter (traces are off by default),
nor the progress bar of ``replay``, nor the generated Kubernetes classes it does not use. Each case
also names a module the command must have loaded, so a driver that saw nothing cannot pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

# Runs the command as the console script does, then writes every loaded module's name to argv[1].
_DRIVER = """
import json, sys
out, argv = sys.argv[1], sys.argv[2:]
try:
    from app.cli import main
    main(argv)
except BaseException:
    pass
with open(out, "w") as f:
    json.dump(sorted(sys.modules), f)
"""

CONTROLLER_ONLY = ("kubernetes_asyncio", "aiohttp", "httpx", "opentelemetry", "app.service", "app.loop")


def loaded(tmp_path: Path, argv: list[str], **env: str) -> set[str]:
    out = tmp_path / "modules.json"
    full = {k: v for k, v in os.environ.items() if not k.startswith(("CATALOG_", "OTEL_", "LITELLM_"))}
    full.update(env)
    subprocess.run(
        [sys.executable, "-c", _DRIVER, str(out), *argv],
        cwd=REPO,
        env=full,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    return set(json.loads(out.read_text()))


def under(modules: set[str], package: str) -> list[str]:
    return sorted(m for m in modules if m == package or m.startswith(package + "."))


@pytest.mark.parametrize(
    ("argv", "needs"),
    [
        (
            [
                "render",
                "-f",
                str(EXAMPLES / "cluster.yaml"),
                "--litellm-info",
                str(EXAMPLES / "litellm-info.json"),
                "--healthy",
                "phi-4-mini",
            ],
            "app.render",
        ),
        (["replay", str(EXAMPLES / "event-log.jsonl"), "--verify"], "app.replay"),
        (["explain", str(EXAMPLES / "event-log.jsonl"), "gpt-4o"], "app.explain"),
        (["placeholder"], "app.placeholder"),
        (["run", "--help"], "app.settings"),
        (["get", "/readyz", "--port", "9", "--timeout", "1"], "app.local_get"),
    ],
    ids=["render", "replay", "explain", "placeholder", "run-help", "get"],
)
def test_offline_commands_never_load_the_controller_libraries(
    tmp_path: Path, argv: list[str], needs: str
) -> None:
    modules = loaded(tmp_path, argv)
    assert needs in modules
    for package in CONTROLLER_ONLY:
        assert not under(modules, package), f"{argv[0]} loaded {under(modules, package)[:5]}"


@pytest.mark.parametrize("command", ["status", "check"])
def test_status_and_check_load_the_kubernetes_client_but_not_the_controller(
    tmp_path: Path, command: str
) -> None:
    modules = loaded(tmp_path, [command, "--kubeconfig", str(tmp_path / "missing-kubeconfig")])
    assert "adapters.kube.client" in modules
    assert f"app.{command}" in modules
    for package in (
        "opentelemetry",
        "app.service",
        "app.loop",
        "tqdm",
        "contracts.eventlog",
        "kubernetes_asyncio",
        "aiohttp",
    ):
        assert not under(modules, package), f"{command} loaded {under(modules, package)[:5]}"


def test_run_loads_neither_the_event_log_nor_tracing_nor_the_progress_bar(tmp_path: Path) -> None:
    # The kubeconfig does not exist: the controller stops right after loading everything it starts with.
    env = {"KUBECONFIG": str(tmp_path / "missing-kubeconfig"), "LITELLM_MASTER_KEY": "sk-test"}
    modules = loaded(tmp_path, ["run", "--leader-election", "false"], **env)
    assert "app.service" in modules
    assert "opentelemetry.sdk.metrics" in modules
    assert "adapters.kube.client" in modules
    for package in (
        # a kubeconfig of static credentials is read by app/kube_client.py; kubernetes-asyncio (and the
        # aiohttp it runs on, ~8 MiB) only for a user that authenticates through a program or a provider
        "kubernetes_asyncio",
        "aiohttp",
        # the version is a literal (adapters/identity.py): ~1.3 MiB with zipfile, csv and the lookup
        "importlib.metadata",
        "contracts.eventlog",
        "cattrs",
        "tqdm",
        "opentelemetry.sdk.trace",
        "opentelemetry.exporter.otlp",
    ):
        assert not under(modules, package), f"run loaded {under(modules, package)[:5]}"


_TELEMETRY = """
import json, sys
from adapters.telemetry import Telemetry
Telemetry(otlp_endpoint=sys.argv[2]).shutdown()
with open(sys.argv[1], "w") as f:
    json.dump(sorted(sys.modules), f)
"""


@pytest.mark.parametrize("endpoint", ["", "http://127.0.0.1:9/"])
def test_the_tracing_sdk_loads_only_when_traces_are_exported(tmp_path: Path, endpoint: str) -> None:
    out = tmp_path / "modules.json"
    subprocess.run([sys.executable, "-c", _TELEMETRY, str(out), endpoint], cwd=REPO, check=True, timeout=120)
    modules = set(json.loads(out.read_text()))
    for package in ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp"):
        assert bool(under(modules, package)) == bool(endpoint), package
