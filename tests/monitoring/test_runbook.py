"""docs/runbook.md works in the shipped image (issue 33, item 7).

Its ``kubectl exec … curl`` commands failed: the slim image has no curl. Every command the runbook (and
the README) runs inside the controller's container is one the image has, and ``model-catalog get``
reads the endpoints of ``model-catalog run`` as the runbook says; on a controller process against the
real peers in ``tests/e2e/test_metrics_at_start.py``.
"""

from __future__ import annotations

import io
import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from app import local_get
from app.service import Service
from app.settings import ServiceSettings, load

REPO = Path(__file__).resolve().parents[2]
RUNBOOK = REPO / "docs" / "runbook.md"
# What the image's PATH holds that a runbook may run: /opt/model-catalog/bin (Containerfile).
IN_THE_IMAGE = ("model-catalog", "python")
_EXEC = re.compile(r"kubectl exec [^`\n]*?--\s+([\w.-]+)")


def _commands(text: str) -> list[str]:
    return _EXEC.findall(text.replace("\n", " "))


def test_the_runbook_runs_only_what_the_image_has_in_it() -> None:
    for doc in (RUNBOOK, REPO / "README.md"):
        text = doc.read_text()
        ran = _commands(text)
        assert ran, f"{doc.name}: no kubectl exec found (the pattern is stale)"
        assert set(ran) <= set(IN_THE_IMAGE), f"{doc.name} runs {sorted(set(ran) - set(IN_THE_IMAGE))}"
    runbook = RUNBOOK.read_text()
    code = re.findall(r"```.*?```|`[^`]*`", runbook, flags=re.DOTALL)  # what a reader copies and runs
    assert code and not [c for c in code if re.search(r"\b(curl|wget)\b", c)]
    assert "model-catalog get /readyz" in runbook and "model-catalog get /debug/eventlog" in runbook


def test_the_image_puts_model_catalog_and_python_on_its_path() -> None:
    containerfile = (REPO / "Containerfile").read_text()
    assert "ENV PATH=/opt/model-catalog/bin:$PATH" in containerfile
    assert 'ENTRYPOINT ["model-catalog"]' in containerfile  # the console script lives in that bin


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    env = {
        "LITELLM_MASTER_KEY": "sk-x",
        "CATALOG_HTTP_HOST": "0.0.0.0",
        "CATALOG_HTTP_PORT": "0",
        "CATALOG_EVENT_LOG_PATH": str(tmp_path / "events.jsonl"),
    }
    settings = load(env)
    assert isinstance(settings, ServiceSettings)
    service = Service(settings, api_client=object())
    service.telemetry.state_changed(service.loop.state)
    try:
        yield service
    finally:
        service.telemetry.shutdown()


def _get_all(service: Service, paths: list[str]) -> list[tuple[int, bytes, str]]:
    """``model-catalog get`` of each path, as a process in the container would (its environment: the
    server binds every address on the port it took)."""

    async def run() -> list[tuple[int, bytes, str]]:
        answers = []
        async with anyio.create_task_group() as tg:
            port = await tg.start(service.http.run)
            env = {"CATALOG_HTTP_HOST": "0.0.0.0", "CATALOG_HTTP_PORT": str(port)}
            for path in paths:
                out, err = io.BytesIO(), io.StringIO()
                code = await anyio.to_thread.run_sync(
                    lambda p=path, o=out, e=err: local_get.get(p, env, timeout=10, out=o, err=e)
                )
                answers.append((code, out.getvalue(), err.getvalue()))
            tg.cancel_scope.cancel()
        return answers

    return anyio.run(run)


def test_model_catalog_get_reads_each_endpoint_as_the_runbook_says(service: Service) -> None:
    assert service.recorder is not None
    healthz, readyz, metrics, ring = _get_all(service, ["/healthz", "/readyz", "/metrics", "/debug/eventlog"])
    assert healthz == (0, b"ok\n", "")
    code, out, err = readyz  # nothing listed yet: not ready, and why
    assert code == local_get.EXIT_ANSWERED_NOT_OK and out == b""
    assert err.startswith("model-catalog: GET /readyz: HTTP 503: not ready: waiting for ")
    code, out, _ = metrics
    assert code == 0 and b"\nmodel_catalog_leader{" in out and b"process_open_fds" in out
    code, out, _ = ring  # loopback: allowed; NDJSON that explain reads
    assert code == 0
    for line in out.splitlines():
        json.loads(line)


def test_model_catalog_get_says_when_nothing_answers() -> None:
    out, err = io.BytesIO(), io.StringIO()
    code = local_get.get("/readyz", {"CATALOG_HTTP_PORT": "9"}, timeout=5, out=out, err=err)
    assert code == local_get.EXIT_NO_ANSWER and out.getvalue() == b""
    assert "no answer from model-catalog run on 127.0.0.1:9" in err.getvalue()
    assert "\n" not in err.getvalue().rstrip("\n")


def test_model_catalog_get_refuses_what_is_not_a_path() -> None:
    for bad in ("readyz", "/ready z", "/\x1b[2J", "http://evil/"):
        with pytest.raises(ValueError):
            local_get.valid_path(bad)
    assert shlex.split("model-catalog get /readyz")[-1] == local_get.valid_path("/readyz")
