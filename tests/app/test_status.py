"""``model-catalog status`` offline: the view of a catalog ConfigMap and its table (issue 16).

The live behaviour (the real API server, the read-only Role, exit codes, --watch) is in
tests/e2e/test_operating.py; here the parsing of what the ConfigMap and the Lease hold, which come from
people and programs we do not control.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from app.status_table import age, table
from app.status_view import Leader, leader_from_lease, status_from_configmap

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "render-example.json"
NOW = dt.datetime(2026, 12, 4, 6, 0, 0, tzinfo=dt.UTC)
WRITTEN = "2026-12-04T05:48:00Z"


def configmap(data: dict[str, str], rv: str = "41", written: str = WRITTEN) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "ai-model-catalog",
            "resourceVersion": rv,
            "annotations": {"ai-appliance.io/last-sync": written},
        },
        "data": data,
    }


def example() -> dict[str, str]:
    return dict(json.loads(GOLDEN.read_text())["catalog"])


LEADER = Leader("replica-a", NOW - dt.timedelta(seconds=3), 15.0)


def test_the_example_catalog_as_a_table() -> None:
    status = status_from_configmap(configmap(example()), LEADER)
    lines = table(status, NOW)
    assert lines[0] == (
        f"catalog {example()['AI_APPLIANCE_MODEL_CATALOG_HASH']}  written 2026-12-04T05:48:00Z (12m ago)  "
        "leader replica-a, renewed 3s ago  11 items, 2 in error or conflict"
    )
    assert lines[1].split() == ["MODEL", "SOURCE", "STATE", "REASON", "ROUTES", "SINCE"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert rows["llama-3.1-8b"] == ["llama-3.1-8b", "kubeai", "published", "Published", "local+mesh", ">=12m"]
    assert rows["groq-llama"][1:5] == ["external", "error", "SecretNotAllowed", "-"]
    assert [i.name for i in status.failing] == ["borrowed-key", "groq-llama"]


def test_wide_adds_name_id_api_base_host_and_message() -> None:
    status = status_from_configmap(configmap(example()), LEADER)
    lines = table(status, NOW, wide=True)
    assert lines[1].split() == [
        "MODEL", "SOURCE", "STATE", "REASON", "ROUTES", "SINCE", "NAME", "ID", "API-BASE", "MESSAGE"
    ]  # fmt: skip
    llama = next(line for line in lines if line.startswith("llama-3.1-8b "))
    assert "ai-appliance-kubeai-llama-3.1-8b" in llama and "kubeai.ai.svc.cluster.local" in llama
    groq = next(line for line in lines if line.startswith("groq-llama "))
    assert "kubectl label secret -n ai groq-credentials" in groq


def test_an_api_base_host_never_shows_credentials_or_path() -> None:
    data = example()
    catalog = json.loads(data["catalog.json"])
    for model in catalog["models"]:
        if model["name"] == "llama-3.1-8b":
            model["litellm"]["apiBase"] = "https://user:hunter2@gpu.example:8443/v1?key=abc"
    data["catalog.json"] = json.dumps(catalog)
    status = status_from_configmap(configmap(data), LEADER)
    (llama,) = [i for i in status.items if i.name == "llama-3.1-8b"]
    assert llama.api_base_host == "gpu.example:8443"
    assert "hunter2" not in "\n".join(table(status, NOW, wide=True))


def test_since_is_a_lower_bound_until_a_watch_sees_the_change() -> None:
    first = status_from_configmap(configmap(example()), LEADER)
    assert all(not i.since_exact for i in first.items)
    data = example()
    routes = json.loads(data["routes.json"])
    for record in routes:
        if record["name"] == "qwen2.5-coder-7b":
            record.update(state="published", reason="Published", id="ai-appliance-kubeai-qwen2.5-coder-7b")
    data["routes.json"] = json.dumps(routes)
    later = "2026-12-04T05:58:30Z"
    second = status_from_configmap(configmap(data, rv="42", written=later), LEADER, previous=first)
    changed = [i for i in second.items if i.since_exact]
    assert [i.name for i in changed] == ["qwen2.5-coder-7b"]
    assert changed[0].as_json()["since"] == later
    same = next(i for i in second.items if i.name == "llama-3.1-8b")
    assert same.since == first.items[0].since and not same.since_exact
    assert not second.same_view(first)
    row = next(line for line in table(second, NOW) if line.startswith("qwen2.5-coder-7b "))
    assert row.split()[-1] == "90s"


def test_the_bootstrap_placeholder_and_broken_keys_are_said_not_raised() -> None:
    placeholder = {
        "AI_APPLIANCE_MODEL_CATALOG_READY": "false",
        "AI_APPLIANCE_MODEL_CATALOG_HASH": "bootstrap",
    }
    status = status_from_configmap({"metadata": {}, "data": placeholder}, Leader("", None, None))
    lines = table(status, NOW)
    assert lines[0].startswith(
        "catalog bootstrap (not ready: bootstrap placeholder)  written never  leader none"
    )
    assert "(routes.json holds no records)" in lines
    broken = status_from_configmap(
        configmap({"routes.json": "[1, {", "catalog.json": "{}"}), Leader("", None, None, problem="HTTP 403")
    )
    assert broken.items == ()
    assert broken.notes == (
        "routes.json is not a JSON array; its records are not shown",
        "catalog.json has no models array; routes are not shown",
    )
    assert "leader unknown (HTTP 403)" in table(broken, NOW)[0]


def test_names_from_the_cluster_cannot_drive_the_terminal() -> None:
    routes = [{"source": "external", "name": "x\x1b[2Jy\nforged", "logicalName": "x\x1b[2Jy\nforged",
               "state": "error", "reason": "InvalidField"}]  # fmt: skip
    status = status_from_configmap(configmap({"routes.json": json.dumps(routes)}), LEADER)
    lines = table(status, NOW, wide=True)
    assert len(lines) == 3  # header, titles, one row: the line feed forged no line
    assert lines[2].startswith("x\\u001b[2Jy\\u000aforged ")
    assert not any("\x1b" in line or "\n" in line for line in lines)


def test_an_expired_lease_means_no_leader() -> None:
    lease = {
        "spec": {
            "holderIdentity": "replica-b",
            "renewTime": "2026-12-04T05:59:00.000000Z",
            "leaseDurationSeconds": 15,
        }
    }
    leader = leader_from_lease(lease)
    assert leader.holder == "replica-b" and leader.expired(NOW)
    status = status_from_configmap(configmap(example()), leader)
    assert "leader none (replica-b's lease expired, last renewed" in table(status, NOW)[0]


def test_age_reads_like_kubectl() -> None:
    assert [age(s) for s in (0, 59, 119, 120, 7199, 7200, 172799, 172800)] == [
        "0s", "59s", "119s", "2m", "119m", "2h", "47h", "2d"
    ]  # fmt: skip
