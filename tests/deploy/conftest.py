"""An API server of the deploy tests' own, with the namespaces ``ai`` and ``ai-system`` the manifests name,
and an audit log (every request's user and User-Agent, as the API server saw them).

The README's commands are run exactly as written, so they install into ``ai``: a server no other test uses
keeps them from meeting the end-to-end test's objects there. It starts in the background as soon as
collection shows a test that needs it (~6 s, overlapping the other tests) and stops after this package.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.peers import OwnKubePeer
from tests.unavailable import skip_or_fail

FIXTURE = "appliance_peer"
_AUDIT_DIR = Path(tempfile.mkdtemp(prefix="model-catalog-deploy-audit-"))
AUDIT_LOG = _AUDIT_DIR / "audit.jsonl"
_POLICY = _AUDIT_DIR / "policy.yaml"
_POLICY.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n  - level: Metadata\n")
_PEER = OwnKubePeer(
    {
        "EXTRA_APISERVER_FLAGS": (
            f"--audit-policy-file={_POLICY} --audit-log-path={AUDIT_LOG} --audit-log-format=json"
        ),
    }
)


_KICKED: list[bool] = []


@pytest.hookimpl(trylast=True)  # after -k and -m deselected what will not run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(FIXTURE in getattr(item, "fixturenames", ()) for item in items):
        _KICKED.append(True)
        _PEER.kick()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _KICKED:
        _PEER.wait()  # a start still under way would otherwise write into a ROOT being deleted
    _PEER.destroy()
    shutil.rmtree(_AUDIT_DIR, ignore_errors=True)


@pytest.fixture(scope="package")
def appliance_peer() -> Iterator[OwnKubePeer]:
    """Stopped after the last test of this package, so its memory and CPU are back for the rest of a run."""
    peer = _PEER.wait()
    if isinstance(peer, str):
        skip_or_fail(peer)
        raise AssertionError("unreachable")
    yield peer
    _PEER.destroy()
