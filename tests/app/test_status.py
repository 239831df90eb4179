"""``model-catalog status`` offline: the view of a catalog ConfigMap and its table (issue 16), the problems
that stop publishing, ``status MODEL`` and the filters (issue 33).

The live behaviour (the real API server, the read-only Role, exit codes, --watch) is in
tests/e2e/test_operating.py; here the parsing of what the ConfigMap and the Lease hold, which come from
people and programs we do not control.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from app.status import Options, exit_code
from app.status_table import age, model_view, table
from app.status_view import Leader, Status, leader_from_lease, status_from_configmap
from catalog_core.conditions import CONSEQUENCE, ConditionType
from contracts.controller_status import ANNOTATION, ReportedCondition, encode

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


LEADER = Leader("replica-a", NOW - dt.timedelta(seconds=3), 15.0, report=())  # a healthy report


def test_the_example_catalog_as_a_table() -> None:
    status = status_from_configmap(configmap(example()), LEADER)
    lines = table(status, NOW)
    assert lines[0] == (
        f"catalog {example()['AI_APPLIANCE_MODEL_CATALOG_HASH']}  written 2026-12-04T05:48:00Z (12m ago)  "
        "leader replica-a, renewed 3s ago  12 items, 2 in error or conflict"
    )
    assert lines[1].split() == ["MODEL", "SOURCE", "STATE", "REASON", "ROUTES", "SINCE"]
    why = lines.index("why:")
    rows = {line.split()[0]: line.split() for line in lines[2:why]}
    assert len(rows) == 12
    assert rows["llama-3.1-8b"] == ["llama-3.1-8b", "kubeai", "published", "Published", "local+mesh", ">=12m"]
    assert rows["groq-llama"][1:5] == ["external", "error", "SecretNotAllowed", "-"]
    # scaled to zero, and listed: the reason says why there is no pod (behaviour §1.1)
    assert rows["gemma-3-4b"] == ["gemma-3-4b", "kubeai", "published", "ScalesFromZero", "local", ">=12m"]
    assert [i.name for i in status.failing] == ["borrowed-key", "groq-llama"]
    # why each one in error is, in the default table: its message, with the command that fixes it
    assert [line.split()[0] for line in lines[why + 1 :]] == ["borrowed-key", "groq-llama"]
    groq = lines[why + 2]
    assert groq.startswith("  groq-llama (external/groq-llama): ")
    assert "kubectl label secret -n ai groq-credentials" in groq


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
    assert not second.same_view(first, NOW)
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
    data = {"routes.json": json.dumps(routes), "AI_APPLIANCE_MODEL_CATALOG_READY": "true"}
    status = status_from_configmap(configmap(data), LEADER)
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


# --- what stops publishing: problems in the header and the exit status (issue 33, item 4)


def lease(
    holder: str = "replica-a", renewed: str = "2026-12-04T05:59:57Z", **annotations: str
) -> dict[str, Any]:
    return {
        "metadata": {"annotations": annotations},
        "spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": 15},
    }


def reported(*conditions: ReportedCondition) -> Leader:
    return leader_from_lease(lease(**{ANNOTATION: encode(conditions)}))


def problem_lines(status: Status) -> list[str]:
    return [line for line in table(status, NOW) if line.startswith("problem: ")]


def test_a_healthy_report_and_a_written_catalog_exit_0_once_no_item_fails() -> None:
    healthy = reported()
    assert healthy.report == () and healthy.leads(NOW)
    data = example()
    routes = [r for r in json.loads(data["routes.json"]) if r["state"] not in ("error", "conflict")]
    data["routes.json"] = json.dumps(routes)
    status = status_from_configmap(configmap(data), healthy)
    assert status.problems(NOW) == () and problem_lines(status) == []
    assert exit_code(status, Options(), NOW) == 0
    with_errors = status_from_configmap(configmap(example()), healthy)
    assert exit_code(with_errors, Options(), NOW) == 1


def test_each_condition_the_leader_reports_is_a_line_that_says_what_it_means_and_exits_1() -> None:
    since = "2026-12-04T05:57:00Z"
    cases = [
        ReportedCondition("LiteLLMUnreachable", "litellm", "unreachable: connect: refused", since),
        ReportedCondition("CRDNotInstalled", "kubeai-models", "models.kubeai.org/v1 is not installed", since),
        ReportedCondition("SourceForbidden", "external-models", "forbidden: list configmaps", since),
        ReportedCondition("SourceFailing", "pods", "HTTP 500", since),
        ReportedCondition("WatchStale", "kube/pods", "not streaming; reconnecting", since),
        ReportedCondition("CatalogTooLarge", "catalog", "exceeds 1048576 bytes", since),
        ReportedCondition("WaitingForSources", "litellm", "not answered yet", since),
        ReportedCondition(
            "WriteFailing", "AgentTemplate/litellm-default", "forbidden: patch agenttemplates/...", since
        ),
    ]
    assert {c.type for c in cases} == {t.value for t in ConditionType}  # every type the controller reports
    for condition in cases:
        status = status_from_configmap(configmap(example()), reported(condition))
        (line,) = problem_lines(status)
        meaning = CONSEQUENCE[ConditionType(condition.type)]
        assert line == (
            f"problem: {condition.type} {condition.subject}: {condition.message} "
            f"(since 2026-12-04T05:57:00Z (3m ago)); {meaning}"
        )
        data = example()
        data["routes.json"] = "[]"
        assert exit_code(status_from_configmap(configmap(data), reported(condition)), Options(), NOW) == 1
    unknown = reported(ReportedCondition("SomethingNewer", "x", "a newer controller's condition"))
    status = status_from_configmap(configmap(example()), unknown)
    assert problem_lines(status) == ["problem: SomethingNewer x: a newer controller's condition"]


def test_the_placeholder_no_leader_and_an_unreadable_lease_are_problems() -> None:
    placeholder = {
        "AI_APPLIANCE_MODEL_CATALOG_READY": "false",
        "AI_APPLIANCE_MODEL_CATALOG_HASH": "bootstrap",
    }
    no_lease = Leader("", None, None, exists=False)
    status = status_from_configmap(
        {"metadata": {}, "data": placeholder}, no_lease, configmap_ref="ns/cat", lease_ref="ns/lease"
    )
    assert [(p.type, p.subject) for p in status.problems(NOW)] == [
        ("CatalogNotWritten", "ns/cat"),
        ("NoLeader", "ns/lease"),
    ]
    lines = problem_lines(status)
    assert "the catalog is the bootstrap placeholder (hash bootstrap" in lines[0]
    assert "no Lease: no replica has led yet" in lines[1]
    assert exit_code(status, Options(), NOW) == 1
    assert json.loads(json.dumps(status.as_json(NOW)))["problems"][1]["type"] == "NoLeader"

    released = leader_from_lease(lease(holder=""))
    assert "nobody holds the Lease" in problem_lines(status_from_configmap(configmap(example()), released))[0]
    expired = leader_from_lease(lease(renewed="2026-12-04T05:59:00Z"))
    (line,) = problem_lines(status_from_configmap(configmap(example()), expired))
    assert "replica-a's lease expired" in line and "(since 2026-12-04T05:59:00Z (60s ago))" in line
    unreadable = Leader("", None, None, problem="Lease ai/x: HTTP 403 Forbidden")
    (line,) = problem_lines(status_from_configmap(configmap(example()), unreadable))
    assert line.startswith("problem: LeaseUnreadable ai/ai-model-catalog-controller: Lease ai/x: HTTP 403")


def test_a_leader_that_reports_nothing_or_nonsense_is_a_problem_not_a_crash() -> None:
    silent = leader_from_lease(lease())
    assert silent.report is None
    (line,) = problem_lines(status_from_configmap(configmap(example()), silent))
    assert "the leader replica-a publishes no health report" in line
    for text in ("not json", '{"conditions": 3}', '{"conditions": [{"subject": "x"}]}'):
        broken = leader_from_lease(lease(**{ANNOTATION: text}))
        (line,) = problem_lines(status_from_configmap(configmap(example()), broken))
        assert line.startswith("problem: NoHealthReport "), line


def test_status_model_answers_published_or_why_not_in_one_screen() -> None:
    status = status_from_configmap(configmap(example()), LEADER)
    lines = model_view(status, NOW, ["groq-llama"])
    assert lines[1] == "groq-llama: NOT published"
    assert lines[2] == "  external/groq-llama: error (SecretNotAllowed), since >=12m"
    assert lines[3].startswith("    why: ") and "kubectl label secret -n ai groq-credentials" in lines[3]
    assert exit_code(status, Options(models=("groq-llama",)), NOW) == 1

    lines = model_view(status, NOW, ["llama-3.1-8b"])
    assert lines[1] == "llama-3.1-8b: published"
    assert "routes: local+mesh   LiteLLM id: ai-appliance-kubeai-llama-3.1-8b" in "\n".join(lines)
    assert exit_code(status, Options(models=("llama-3.1-8b",)), NOW) == 0  # other items' errors aside
    assert len(lines) <= 10

    lines = model_view(status, NOW, ["llama-3.1"])
    assert lines[1].startswith("llama-3.1: not published: no source item has this name or logical name")
    assert "did you mean llama-3.1-8b" in lines[1]
    assert exit_code(status, Options(models=("llama-3.1",)), NOW) == 1

    down = reported(ReportedCondition("LiteLLMUnreachable", "litellm", "unreachable: refused"))
    limited = status_from_configmap(configmap(example()), down)
    lines = model_view(limited, NOW, ["llama-3.1-8b"])
    assert lines[1].startswith("problem: LiteLLMUnreachable litellm: unreachable: refused")
    assert lines[2] == (
        "llama-3.1-8b: published, but the problems above stop changes to it from being published"
    )
    assert exit_code(limited, Options(models=("llama-3.1-8b",)), NOW) == 1


def test_state_filter_and_newer_record_fields() -> None:
    data = example()
    routes = json.loads(data["routes.json"])
    routes[0]["lastWrite"] = {"outcome": "retry", "reason": "Forbidden"}  # a field this version does not know
    data["routes.json"] = json.dumps(routes)
    status = status_from_configmap(configmap(data), LEADER)
    errors = Options(states=frozenset({"error"}))
    shown = errors.shown(status)
    assert [i.name for i in shown] == ["borrowed-key", "groq-llama"]
    rows = table(status, NOW, items=shown)
    assert [line.split()[0] for line in rows[2:4]] == ["borrowed-key", "groq-llama"]
    published_only = Options(states=frozenset({"published"}))
    assert exit_code(status, published_only, NOW) == 0
    first = next(i for i in status.items if i.name == routes[0]["name"])
    assert first.extra == (("lastWrite", '{"outcome":"retry","reason":"Forbidden"}'),)
    lines = model_view(status, NOW, [first.logical_name])
    assert '    lastWrite: {"outcome":"retry","reason":"Forbidden"}' in lines
