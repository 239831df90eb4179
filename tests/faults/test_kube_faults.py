"""Kubernetes faults against a running controller process: watch connections cut, the API server out of
reach while objects are deleted and the deletions compacted away (410 Gone), the API server restarted
on the same data, a second writer racing on the catalog ConfigMap, and the leader's Lease stolen.

The controller reaches the API server through a TCP proxy the test can cut (``ProxyThread``); the
LiteLLM is the fake on loopback.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import httpx
import pytest

from tests.faults import results
from tests.faults.conftest import PROFILE, Suite
from tests.faults.kube import ApiError
from tests.faults.results import Outcome
from tests.faults.scenario import Samples, hold, scenario
from tests.faults.stage import CATALOG, Stage, wait_until

pytestmark = [pytest.mark.faults]


@pytest.fixture
def stage(shared_stage: Stage) -> Stage:
    return shared_stage


def gone_total(stage: Stage) -> float:
    return sum(c.metric("model_catalog_kube_watch_gone_total") for c in stage.running())


def relists_total(stage: Stage) -> float:
    return sum(c.metric("model_catalog_kube_watch_relists_total") for c in stage.running())


def user_sees(samples: Samples, what: str) -> str:
    kept = "catalog kept as it was" if samples.catalog_kept else "catalog kept up to date"
    return f"{kept}; {what}"


def _delete_during_gap(stage: Stage, churn: int) -> None:
    """Deletions the controller cannot see as they happen, and ``churn`` writes that push its watches'
    resourceVersions out of the watch cache (100 events for a custom resource) and, with the peer's
    3 s compaction, out of etcd's history."""
    stage.admin.delete("kubeai.org/v1", "Model", stage.ns, "doomed")
    act = stage.admin.get("appliance.magicstick.dev/v1alpha1", "ModelActivation", stage.app_ns, "act-good")
    if act is not None:
        stage.admin.delete("appliance.magicstick.dev/v1alpha1", "ModelActivation", stage.app_ns, "act-good")
    stage.add_kubeai("churn", ready=False)
    for i in range(churn):
        stage.admin.merge_patch(
            "kubeai.org/v1", "Model", stage.ns, "churn", {"metadata": {"annotations": {"n": str(i)}}}
        )
    cm = stage.admin.get("v1", "ConfigMap", stage.ns, "ai-external-models")
    assert cm is not None
    models = json.loads(cm["data"]["models.json"])["models"]
    cm["data"]["models.json"] = json.dumps({"models": [m for m in models if m["name"] != "ext-plain"]})
    stage.admin.replace(cm)


def _restore(stage: Stage) -> None:
    """Put back what ``_delete_during_gap`` took away (the next scenario starts from the baseline)."""
    from tests.faults.stage import PROVIDER_SECRET, activation

    stage.admin.apply(
        activation(
            stage.app_ns,
            "act-good",
            {"model": "openai/act-good", "apiKeySecretRef": {"name": PROVIDER_SECRET, "key": "k"}},
        )
    )
    cm = stage.admin.get("v1", "ConfigMap", stage.ns, "ai-external-models")
    assert cm is not None
    models = json.loads(cm["data"]["models.json"])["models"]
    if all(m["name"] != "ext-plain" for m in models):
        models.append(
            {"name": "ext-plain", "model": "openai/ext-plain", "apiBase": "https://api.example.com/v1"}
        )
        cm["data"]["models.json"] = json.dumps({"models": models})
        stage.admin.replace(cm)


def _withdrawn(stage: Stage) -> None:
    rows = stage.owned_rows()
    for rid in (
        "ai-appliance-kubeai-doomed",
        "ai-appliance-external-act-good",
        "ai-appliance-external-ext-plain",
    ):
        assert rid not in rows, f"{rid} deleted during the gap is still in LiteLLM"


def test_watch_410_after_compaction_with_deletes_during_the_gap(stage: Stage) -> None:
    """Every open connection freezes (the watches hear nothing), objects are deleted, hundreds of writes
    and etcd's compaction make the watches' resourceVersions too old; then the frozen connections are
    reset: the watches come back to 410 Gone, relist, and must notice the deletions."""
    assert stage.proxy is not None
    outcome = Outcome(
        "watch-410-gone",
        "fault",
        "watches silenced while objects are deleted and compacted away, then reset: 410 Gone on reconnect",
        PROFILE.name,
        hold_s=max(PROFILE.hold, 8.0),
        bound_s=PROFILE.kube_bound,
    )
    with scenario(stage, outcome):
        _restore(stage)
        stage.add_kubeai("doomed")
        stage.wait_converged(30)
        gone = gone_total(stage)
        outcome.measured["frozen_connections"] = stage.proxy.freeze()
        began = time.monotonic()
        _delete_during_gap(stage, churn=150)
        samples = Samples()
        hold(max(0.0, (outcome.hold_s or 0) - (time.monotonic() - began)), stage, samples)
        stage.proxy.heal()  # the frozen connections are reset: the watches reconnect from their old RVs
        outcome.recovery_s = round(stage.wait_converged(PROFILE.kube_bound), 2)
        _withdrawn(stage)
        outcome.measured["gone_410"] = gone_total(stage) - gone
        assert outcome.measured["gone_410"] > 0, "no watch came back to 410 Gone: the fault was not injected"
        outcome.user_sees = user_sees(
            samples,
            f"deletions made during the gap withdrawn {outcome.recovery_s:.1f} s after the reset "
            f"({outcome.measured['gone_410']:.0f} watches got 410 Gone and relisted)",
        )
        _restore(stage)


def test_watch_connections_cut(stage: Stage) -> None:
    """Every connection to the API server is reset once a second for the hold; changes keep coming."""
    assert stage.proxy is not None
    outcome = Outcome(
        "watch-cut",
        "fault",
        "every connection between controller and API server reset once a second",
        PROFILE.name,
        hold_s=PROFILE.hold,
        bound_s=PROFILE.kube_bound,
    )
    with scenario(stage, outcome):
        relists = relists_total(stage)
        samples = Samples()
        end = time.monotonic() + PROFILE.hold
        name = ""
        while time.monotonic() < end:
            stage.proxy.drop()
            if not name:
                name = stage.change()
            samples.take(stage, ("kubeai", name))
            time.sleep(1.0)
        outcome.recovery_s = round(stage.wait_converged(PROFILE.kube_bound), 2)
        outcome.measured["relists"] = relists_total(stage) - relists
        outcome.user_sees = user_sees(
            samples, f"a model added meanwhile shows {samples.last_record()} in routes.json between the cuts"
        )


def test_api_server_out_of_reach_while_objects_are_deleted(stage: Stage) -> None:
    """The controller is cut off (connections refused) while objects are deleted: its watches fail,
    its sources are reported failing (the last good content is kept), and the relist after the heal
    must notice the deletions."""
    assert stage.proxy is not None
    outcome = Outcome(
        "apiserver-unreachable",
        "fault",
        "API server out of reach (connections refused) while objects are deleted",
        PROFILE.name,
        hold_s=max(PROFILE.hold, 8.0),
        bound_s=PROFILE.kube_bound,
    )
    with scenario(stage, outcome):
        _restore(stage)
        stage.add_kubeai("doomed")
        stage.wait_converged(30)
        stage.proxy.refuse()
        began = time.monotonic()
        _delete_during_gap(stage, churn=10)
        samples = Samples()
        hold(max(0.0, (outcome.hold_s or 0) - (time.monotonic() - began)), stage, samples)
        stage.proxy.heal()
        outcome.recovery_s = round(stage.wait_converged(PROFILE.kube_bound), 2)
        _withdrawn(stage)
        outcome.user_sees = user_sees(
            samples, f"deletions made meanwhile withdrawn {outcome.recovery_s:.1f} s after the heal"
        )


# Issue 35: a half-open or black-holed connection is noticed, and every watch back, within this long of the
# heal, by the watches' liveness signal (the Lease's renewals; watches themselves last 5-10 minutes).
WATCH_RECOVERY_S = 10.0


@pytest.mark.faults_full
def test_half_open_watch_connections(stage: Stage) -> None:
    """Every open connection freezes (stays up, carries nothing: a NAT or conntrack drop); changes made
    meanwhile reach the controller only once its watches notice. The watches are long (5-10 minutes): the
    Lease's watch going silent is what brings them all back."""
    assert stage.proxy is not None
    outcome = Outcome(
        "watch-half-open",
        "fault",
        "every open connection to the API server frozen (half-open), new connections work",
        PROFILE.name,
        hold_s=None,
        bound_s=90.0,
    )
    with scenario(stage, outcome):
        verdicts = verdicts_total(stage)
        frozen = stage.proxy.freeze()
        began = time.monotonic()
        name = stage.change()
        wait_until(lambda: name in stage.catalog_models(), outcome.bound_s or 90.0, 0.5, f"{name} published")
        outcome.recovery_s = round(time.monotonic() - began, 2)
        outcome.measured["frozen_connections"] = frozen
        outcome.measured["liveness_verdicts"] = verdicts_total(stage) - verdicts
        stage.proxy.heal()
        outcome.check(f"published within {WATCH_RECOVERY_S:.0f} s", outcome.recovery_s <= WATCH_RECOVERY_S)
        outcome.user_sees = (
            f"a change made after the freeze is published {outcome.recovery_s:.1f} s later (the Lease's "
            "watch falls silent; every watch resumes over a new connection)"
        )


def verdicts_total(stage: Stage) -> float:
    return sum(c.metric("model_catalog_kube_watch_liveness_verdicts_total") for c in stage.running())


def test_black_holed_connections(stage: Stage) -> None:
    """Every connection to the API server, open or new, carries nothing for the hold (accepted, then
    silent, as on a route that drops every packet); then new connections work again while the frozen
    ones stay frozen, as nobody tells the controller. A change made during the hole is published soon
    after the heal: the liveness signal keeps giving up on the frozen connections until new ones work."""
    assert stage.proxy is not None
    outcome = Outcome(
        "watch-black-hole",
        "fault",
        "every connection to the API server black-holed (open and new ones carry nothing), then new "
        "connections work again",
        PROFILE.name,
        hold_s=max(PROFILE.hold, 8.0),
        bound_s=PROFILE.kube_bound,
    )
    with scenario(stage, outcome):
        verdicts = verdicts_total(stage)
        outcome.measured["frozen_connections"] = stage.proxy.black_hole(True)
        name = stage.change()
        samples = Samples()
        hold(outcome.hold_s or 8.0, stage, samples)
        outcome.measured["verdicts_in_the_hole"] = verdicts_total(stage) - verdicts
        stage.proxy.black_hole(False)
        healed = time.monotonic()
        wait_until(lambda: name in stage.catalog_models(), PROFILE.kube_bound, 0.2, f"{name} published")
        outcome.recovery_s = round(time.monotonic() - healed, 2)
        stage.proxy.heal()  # the connections still frozen are reset: the next scenario starts clean
        if PROFILE.name == "full":
            outcome.check(
                f"published within {WATCH_RECOVERY_S:.0f} s of the heal",
                outcome.recovery_s <= WATCH_RECOVERY_S,
            )
        outcome.user_sees = user_sees(
            samples,
            f"a model added during the hole is published {outcome.recovery_s:.1f} s after the heal "
            f"({outcome.measured['verdicts_in_the_hole']:.0f} liveness verdicts during the hole)",
        )


@pytest.mark.parametrize(
    "how",
    ["crash", pytest.param("graceful", marks=pytest.mark.faults_full)],
)
def test_api_server_restarted(stage: Stage, suite: Suite, how: str) -> None:
    """kube-apiserver killed (crash) or stopped (graceful: ~17 s, it waits for open watches), with etcd,
    then both started again on the same data."""
    outcome = Outcome(
        f"apiserver-restart-{how}",
        "fault",
        "kube-apiserver SIGKILLed, then restarted with etcd on the same data"
        if how == "crash"
        else "kube-apiserver and etcd stopped gracefully, then started again on the same data",
        PROFILE.name,
        bound_s=PROFILE.kube_bound,
    )
    with scenario(stage, outcome):
        name = stage.change()
        wait_until(lambda: name in stage.catalog_models(), 30, what=f"{name} published")
        stopped = suite.peer.crash() if how == "crash" else suite.peer.stop()
        outcome.measured["apiserver_stop_s"] = round(stopped, 1)
        samples = Samples()
        hold(PROFILE.hold, stage, samples)  # nothing can be read or changed meanwhile
        outcome.measured["apiserver_start_s"] = round(suite.peer.start(), 1)
        outcome.hold_s = round(stopped + PROFILE.hold + outcome.measured["apiserver_start_s"], 1)
        began = time.monotonic()
        stage.admin.delete("kubeai.org/v1", "Model", stage.ns, name)
        after = stage.change()
        stage.wait_converged(PROFILE.kube_bound)
        outcome.recovery_s = round(time.monotonic() - began, 2)
        assert after in stage.catalog_models()
        outcome.user_sees = (
            "catalog and LiteLLM unchanged while it is down (/readyz names the stale watches); changes "
            "made right after the "
            f"restart published {outcome.recovery_s:.1f} s later"
        )


def _rival(stage: Stage, stop: threading.Event, stale: dict[str, Any], counts: dict[str, int]) -> None:
    """Another writer: puts back the bootstrap placeholder or a stale catalog, and labels the ConfigMap."""
    n = 0
    while not stop.is_set():
        n += 1
        try:
            cm = stage.admin.get("v1", "ConfigMap", stage.ns, CATALOG)
            assert cm is not None
            meta = cm["metadata"]
            meta.setdefault("labels", {})["rival.example.com/writes"] = str(n)
            if n % 2:
                cm["data"] = {
                    "AI_APPLIANCE_MODEL_CATALOG_READY": "false",
                    "AI_APPLIANCE_MODEL_CATALOG_HASH": "bootstrap",
                }
                meta.setdefault("annotations", {})["ai-appliance.io/catalog-hash"] = "bootstrap"
            else:
                cm["data"] = stale["data"]
                meta.setdefault("annotations", {})["ai-appliance.io/catalog-hash"] = stale["hash"]
            stage.admin.replace(cm)
            counts["writes"] += 1
        except ApiError as exc:
            counts[f"HTTP {exc.status}"] = counts.get(f"HTTP {exc.status}", 0) + 1
        except httpx.HTTPError:
            counts["transport"] = counts.get("transport", 0) + 1
        time.sleep(0.05)


def test_second_writer_races_on_the_catalog(stage: Stage) -> None:
    outcome = Outcome(
        "catalog-second-writer",
        "fault",
        "a second writer overwrites ConfigMap/ai-model-catalog ~20 times a second (bootstrap or stale)",
        PROFILE.name,
        hold_s=PROFILE.hold,
        bound_s=PROFILE.kube_bound,
    )
    with scenario(stage, outcome):
        stale = {"data": stage.catalog_data(), "hash": stage.catalog_hash()}
        stop, counts = threading.Event(), {"writes": 0}
        rival = threading.Thread(target=_rival, args=(stage, stop, stale, counts), daemon=True)
        rival.start()
        name = stage.change()
        time.sleep(PROFILE.hold)
        stop.set()
        rival.join(10)
        outcome.recovery_s = round(stage.wait_converged(PROFILE.kube_bound), 2)
        labels = (stage.admin.get("v1", "ConfigMap", stage.ns, CATALOG) or {})["metadata"].get("labels") or {}
        outcome.check("the rival's own label kept", "rival.example.com/writes" in labels)
        outcome.measured["rival"] = counts
        assert name in stage.catalog_models()
        outcome.user_sees = (
            f"the ConfigMap flips between the rival's content and the catalog ({counts['writes']} rival "
            f"writes); consumers are rolled only onto catalogs the controller wrote; restored "
            f"{outcome.recovery_s:.1f} s after the rival stops"
        )


def _thief(stage: Stage, stop: threading.Event) -> None:
    """Another holder takes the Lease and renews it every 0.5 s until told to stop."""
    while not stop.is_set():
        try:
            lease = stage.admin.get(
                "coordination.k8s.io/v1", "Lease", stage.ns, "ai-model-catalog-controller"
            )
            if lease is not None:
                now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
                lease["spec"].update({"holderIdentity": "thief", "renewTime": now, "leaseDurationSeconds": 4})
                stage.admin.replace(lease)
        except (ApiError, httpx.HTTPError):
            pass
        time.sleep(0.5)


def test_lease_stolen(stage: Stage) -> None:
    outcome = Outcome(
        "lease-stolen",
        "fault",
        "another holder takes the leader's Lease and keeps renewing it",
        PROFILE.name,
        hold_s=PROFILE.steal_hold,
        bound_s=PROFILE.kube_bound,
    )
    with scenario(stage, outcome):
        controller = stage.running()[0]
        stop = threading.Event()
        thief = threading.Thread(target=_thief, args=(stage, stop), daemon=True)
        thief.start()
        began = time.monotonic()
        _, _ = wait_until(lambda: not controller.leading(), 15, 0.1, "the leader to step down")
        outcome.measured["step_down_s"] = round(time.monotonic() - began, 2)
        writes, cm_rv = stage.litellm.writes(), _rv(stage)
        name = stage.change()
        time.sleep(PROFILE.steal_hold)
        outcome.check(
            "no write while another holder has the Lease",
            [] if (stage.litellm.writes(), _rv(stage)) == (writes, cm_rv) else ["the standby wrote"],
        )
        assert name not in stage.catalog_models()
        stop.set()
        thief.join(5)
        healed = time.monotonic()
        wait_until(controller.leading, 30, 0.1, "the controller to lead again")
        outcome.measured["reacquired_s"] = round(time.monotonic() - healed, 2)
        outcome.recovery_s = round(
            stage.wait_converged(PROFILE.kube_bound) + outcome.measured["reacquired_s"], 2
        )
        outcome.user_sees = (
            f"the controller stops writing {outcome.measured['step_down_s']:.1f} s after the theft; a change "
            f"made meanwhile waits; leads again {outcome.measured['reacquired_s']:.1f} s after the other "
            "holder stops renewing"
        )


def _rv(stage: Stage) -> str:
    cm = stage.admin.get("v1", "ConfigMap", stage.ns, CATALOG) or {}
    return str(cm.get("metadata", {}).get("resourceVersion"))


IDLE_MODELS = 100
IDLE_WINDOW_S = 60.0


@pytest.mark.faults_full
def test_idle_cost_of_the_watches(stage: Stage) -> None:
    """What the watches cost the API server while nothing changes (issue 35; ``just bench`` measures every
    request by verb on an audited API server): 100 KubeAI Models, then a minute in which nothing changes.
    Watches last 5-10 minutes, so in a minute each is renewed at most once (and every watch once more per
    liveness verdict); the leader counts its own watch requests (the Lease's included) and relists."""
    outcome = results.record(
        Outcome(
            "idle-watch-cost",
            "fault",
            f"nothing changes for a minute, {IDLE_MODELS} models: watch requests per minute per replica",
            PROFILE.name,
            hold_s=IDLE_WINDOW_S,
            bound_s=None,
        )
    )
    names = [f"idle-{i:03d}" for i in range(IDLE_MODELS)]
    for name in names:
        stage.add_kubeai(name)
    try:
        stage.wait_converged(120)
        time.sleep(5)
        now = stage.leader

        def counts() -> dict[str, dict[str, float]]:
            text = now.metrics()
            out: dict[str, dict[str, float]] = {}
            for metric in ("watch_requests", "watch_relists"):
                series = f"model_catalog_kube_{metric}_total"
                for line in text.splitlines():
                    match = re.match(rf'^{series}{{[^}}]*source="([^"]+)"[^}}]*}}\s+(\S+)$', line)
                    if match:
                        out.setdefault(metric, {})[match.group(1)] = float(match.group(2))
            out["verdicts"] = {"all": now.metric("model_catalog_kube_watch_liveness_verdicts_total", text)}
            return out

        start = counts()
        time.sleep(IDLE_WINDOW_S)
        end = counts()
        delta = {
            metric: {k: end[metric].get(k, 0.0) - v for k, v in start[metric].items()} for metric in start
        }
        per_minute = 60.0 / IDLE_WINDOW_S
        requests = sum(delta["watch_requests"].values()) * per_minute
        relists = sum(delta["watch_relists"].values()) * per_minute
        verdicts = delta["verdicts"]["all"]
        outcome.measured.update(
            {
                "models": IDLE_MODELS,
                "watch_requests_per_min": round(requests, 1),
                "relists_per_min": round(relists, 1),
                "liveness_verdicts": verdicts,
                "watch_requests_by_source": {k: v for k, v in delta["watch_requests"].items() if v},
            }
        )
        outcome.user_sees = (
            f"{requests:.0f} watch requests and {relists:.0f} relists a minute per replica at idle "
            f"({verdicts:.0f} liveness verdicts); with a 5 s timeout per watch it was ~170 watch requests"
        )
        # every source's watch (one per source; the Secrets' up to 33) renewed at most once in the minute,
        # and once more for each verdict
        bound = {
            source: (33.0 if source == "secrets" else 1.0) * (1 + verdicts)
            for source in delta["watch_requests"]
        }
        over = [f"{k}: {v:.0f}" for k, v in delta["watch_requests"].items() if v > bound[k]]
        outcome.check("each watch renewed at most once a minute (5-10 min watches)", over)
    finally:
        for name in names:
            stage.admin.delete("kubeai.org/v1", "Model", stage.ns, name)
        stage.wait_converged(120)
    assert not outcome.failed(), outcome.failed()
