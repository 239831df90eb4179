"""The invariant checkers catch what they are meant to catch (so a green suite means something).

Runs last on the shared stage, after its scenarios: each check is shown a violation made by hand — a
foreign row edited, a second row of ours with the same name, a rollout onto a hash the catalog never
had, the canary written into a ConfigMap, a divergence from render — and must report it.
"""

from __future__ import annotations

import pytest

from tests.faults.stage import CANARY, CONSUMER, FOREIGN_ROWS, OWNED, Stage

HASH_ANNOTATION = "ai-appliance.io/catalog-hash"

pytestmark = [pytest.mark.faults]


def test_each_invariant_check_reports_a_violation_made_by_hand(shared_stage: Stage) -> None:
    stage = shared_stage
    served = stage.served
    assert served is not None
    stage.wait_converged(30)
    assert stage.divergence() == []
    before = stage.snapshot()

    # foreign rows: an edit behind everyone's back is seen, listed and stored
    foreign_id = FOREIGN_ROWS[1][2]["id"]
    served.call(lambda: served.fake.edit(foreign_id, params={"rpm": 7}))
    assert any(foreign_id in p for p in stage.foreign_rows_kept(before))

    # duplicates: a second row of ours for a name that already has one
    served.call(
        lambda: served.fake.seed(
            "kube-good", {"model": "openai/kube-good"}, {"id": "dup-kube-good", "ai_appliance_owner": OWNED}
        )
    )
    assert any("'kube-good' has 2 rows of ours" in p for p in stage.no_duplicates())
    assert stage.divergence() != []  # and render's plan wants it gone
    served.call(lambda: served.fake.remove("dup-kube-good"))

    # rollouts: the consumer rolled onto a hash the catalog never carried
    stage.admin.merge_patch(
        "apps/v1",
        "Deployment",
        stage.ns,
        CONSUMER,
        {"spec": {"template": {"metadata": {"annotations": {HASH_ANNOTATION: "deadbeef00000000"}}}}},
    )
    assert any("deadbeef00000000" in p for p in stage.rollouts_justified())

    # leaks: the canary in a ConfigMap of the namespace
    stage.admin.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "oops", "namespace": stage.ns},
            "data": {"k": f"token={CANARY}"},
        }
    )
    assert any("provider canary found in ConfigMaps" in p for p in stage.leaks())
    stage.admin.delete("v1", "ConfigMap", stage.ns, "oops")
    assert not any("ConfigMaps" in p for p in stage.leaks())
