"""Ownership by id and owner, never by name (behaviour §3); one owned route per name."""

from catalog_core.commands import DeleteLiteLLMModel, UpdateLiteLLMModel
from tests.core import builders as b
from tests.core.harness import Cluster

MESH = b.row("llama", "mesh-llama-peer", owner="private-mesh", order=1, api_base="http://mesh/v1")
HAND = b.row("llama", "3f2a9c", api_base="http://hand/v1")


def _writes_touching(c, rid):
    return [x for x in c.world.writes if getattr(x, "model_id", None) == rid]


def test_mesh_and_hand_rows_with_our_name_are_never_touched():
    c = Cluster()
    c.start(b.kubeai_model("llama"), rows=[MESH, HAND])
    assert _writes_touching(c, "mesh-llama-peer") == []
    assert _writes_touching(c, "3f2a9c") == []
    c.apply(b.kubeai_model("llama", ready=0))  # our route withdrawn: theirs stay
    c.delete(b.kubeai_model("llama"))
    assert set(c.world.rows) == {"mesh-llama-peer", "3f2a9c"}
    assert _writes_touching(c, "mesh-llama-peer") == [] and _writes_touching(c, "3f2a9c") == []


def test_legacy_row_of_ours_is_adopted():
    legacy = b.row("llama", "ai-appliance-kubeai-llama", managed=True, api_base="http://old/v1")
    c = Cluster()
    commands = c.start(b.kubeai_model("llama"), rows=[legacy])
    assert any(
        isinstance(x, UpdateLiteLLMModel | type(x))
        and getattr(x, "model_id", "") == "ai-appliance-kubeai-llama"
        for x in commands
    )
    assert c.world.rows["ai-appliance-kubeai-llama"]["model_info"]["ai_appliance_owner"] == "model-catalog"


def test_stale_owned_and_legacy_rows_are_deleted_by_id():
    c = Cluster()
    commands = c.start(
        rows=[
            b.row("gone", "ai-appliance-kubeai-gone", owner="model-catalog"),
            b.row("old", "ai-appliance-external-old", managed=True),
            b.row("hand", "ai-appliance-foreign", owner="someone"),
        ]
    )
    deleted = sorted(x.model_id for x in commands if isinstance(x, DeleteLiteLLMModel))
    assert deleted == ["ai-appliance-external-old", "ai-appliance-kubeai-gone"]
    assert set(c.world.rows) == {"ai-appliance-foreign"}


def test_managed_row_outside_our_id_family_is_not_ours():
    c = Cluster()
    c.start(rows=[b.row("x", "litellm-generated-id", managed=True)])
    assert "litellm-generated-id" in c.world.rows


def test_source_priority_activation_beats_configmap_beats_local():
    c = Cluster()
    c.world.healthy = frozenset({"llama-rt"})
    c.start(
        b.kubeai_model("llama"),
        b.activation("llama-ft", kind="local"),
        b.external_configmap([{"name": "llama", "model": "openai/llama-cm"}]),
        b.activation("llama", external={"model": "openai/llama-act"}),
    )
    assert set(c.world.rows) == {"ai-appliance-external-llama"}
    assert c.world.rows["ai-appliance-external-llama"]["litellm_params"]["model"] == "openai/llama-act"
    assert c.record("llama", "external")["state"] == "conflict"
    assert c.record("llama", "kubeai")["reason"] == "Conflict"
    # the winner goes away: the next in line takes over
    c.delete(b.activation("llama", external={"model": "openai/llama-act"}))
    assert c.world.rows["ai-appliance-external-llama"]["litellm_params"]["model"] == "openai/llama-cm"
    c.apply(b.external_configmap([]))
    assert set(c.world.rows) == {"ai-appliance-kubeai-llama"}


def test_names_that_collide_after_slugging():
    c = Cluster()
    c.start(
        b.external_configmap([{"name": "My Model", "model": "x/1"}, {"name": "my-model", "model": "x/2"}])
    )
    assert set(c.world.rows) == {"ai-appliance-external-my-model"}
    states = sorted((r["name"], r["state"], r["reason"]) for r in c.routes())
    assert states == [("My Model", "published", "Published"), ("my-model", "conflict", "IdCollision")]


def test_our_id_held_by_a_foreign_row_is_a_conflict_not_a_takeover():
    c = Cluster()
    c.start(b.kubeai_model("llama"), rows=[b.row("llama", "ai-appliance-kubeai-llama", owner="private-mesh")])
    assert c.world.rows["ai-appliance-kubeai-llama"]["model_info"]["ai_appliance_owner"] == "private-mesh"
    assert c.record("llama")["reason"] == "IdTaken"
    assert c.world.writes == [w for w in c.world.writes if not hasattr(w, "model_id")]


def test_writes_backing_off_from_a_litellm_outage_are_due_when_litellm_answers_again():
    """Regression (fault suite): after an outage the controller waited out each write's exponential
    backoff (up to minutes) although the observer already saw LiteLLM answering again; a 30 s outage
    took 10-19 s more to recover. Seeing LiteLLM answer again makes those retries due at once."""
    from catalog_core.commands import CreateLiteLLMModel
    from catalog_core.events import CommandCompleted, LiteLLMUnreachable, Outcome, Ticked
    from catalog_core.fold import step

    c = Cluster()
    c.start(b.kubeai_model("llama"))
    c.feed(LiteLLMUnreachable("unreachable", "connect: refused"))
    state = c.state
    for event in c.upserts(b.kubeai_model("qwen")):
        state = step(state, event).state
    probed = step(state, Ticked(c.now)).state  # a still row's change waits out the burst probe
    result = step(probed, Ticked(c.now + c.config.litellm_burst_probe_seconds))
    create = next(x for x in result.commands if isinstance(x, CreateLiteLLMModel))
    state = step(
        result.state, CommandCompleted(create.key, create.id, Outcome.RETRY, retry_after=120.0)
    ).state
    waiting = step(state, Ticked(c.now + 5))
    assert not any(isinstance(x, CreateLiteLLMModel) for x in waiting.commands)  # backing off
    state = step(waiting.state, c.world.rows_event()).state  # the observer sees LiteLLM answer again
    again = step(state, Ticked(c.now + 6)).commands
    assert [x.id for x in again if isinstance(x, CreateLiteLLMModel)] == [create.id]
