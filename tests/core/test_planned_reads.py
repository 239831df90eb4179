"""The re-read of LiteLLM is the core's to plan (``ObserveLiteLLM``): from what the LiteLLM view holds
unobserved or unknown, never from the event that brought it; a burst of writes is one read."""

from __future__ import annotations

import attrs

from catalog_core.commands import (
    Command,
    CreateLiteLLMModel,
    ObserveLiteLLM,
    ReadReason,
    RecreateLiteLLMModel,
    UpdateLiteLLMModel,
)
from catalog_core.config import CatalogConfig
from catalog_core.events import CommandCompleted, LiteLLMUnreachable, Outcome, Ticked
from catalog_core.evolve import evolve
from catalog_core.fold import step
from catalog_core.gates import ALL_GATES, Gate
from catalog_core.jsonval import Json
from catalog_core.keys import LITELLM_READ_KEY
from catalog_core.plan import REREAD_MAX_DELAY, next_deadline
from catalog_core.reasons import LiteLLMWait, Reason
from tests.core import builders as b
from tests.core.harness import Cluster

# Writes go out as soon as planned: the write damping is tested on its own (test_write_damping).
UNDAMPED = CatalogConfig(
    litellm_settle_seconds=0.0, litellm_settle_cap_seconds=0.0, litellm_burst_probe_seconds=0.0
)
MODELS = [f"m{i}" for i in range(6)]


def _tick(c: Cluster, now: float) -> list[Command]:
    c.now = now
    result = step(c.state, Ticked(now))
    c.state = result.state
    return list(result.commands)


def _reads(commands: list[Command]) -> list[ObserveLiteLLM]:
    return [command for command in commands if isinstance(command, ObserveLiteLLM)]


def _answer(c: Cluster, command: Command) -> None:
    """The command carried out by the simulated world; its events folded (no tick)."""
    c.feed(*c.world.execute(command))


def _started(config: CatalogConfig = UNDAMPED) -> Cluster:
    c = Cluster(config)
    c.start(*(b.kubeai_model(m, args=["--max-model-len=4096"]) for m in MODELS))
    assert len(c.world.rows) == len(MODELS)
    return c


def _changed_everything(c: Cluster) -> list[Command]:
    """Every model's limit changes at once (one burst the watch delivers): the tick plans every update."""
    for m in MODELS:
        c.feed(*c.upserts(b.kubeai_model(m, args=["--max-model-len=8192"])))
    updates = _tick(c, c.now + 1.0)
    assert [type(x) for x in updates] == [UpdateLiteLLMModel] * len(MODELS)
    return updates


def test_a_burst_of_writes_is_one_read_planned_once_the_last_is_answered() -> None:
    c = _started()
    updates = _changed_everything(c)
    planned: list[Command] = []
    for update in updates:  # the answers come one by one, each followed by a tick (as the loop does)
        _answer(c, update)
        planned += _tick(c, c.now + 0.01)
    # one read, planned by the tick after the last answer: none while writes were still in flight
    assert planned == [ObserveLiteLLM(ReadReason.AFTER_WRITES)]
    assert c.state.litellm.unobserved_writes  # the catalog waits for the read: LiteLLM fills limits in
    _answer(c, planned[0])
    assert not c.state.litellm.unobserved_writes and LITELLM_READ_KEY not in c.state.control.inflight
    after = _tick(c, c.now + 0.01)
    assert _reads(after) == [] and [type(x).__name__ for x in after] == ["WriteCatalog"]


def test_writes_in_flight_for_long_are_read_at_most_a_delay_after_the_first_answer() -> None:
    c = _started()
    first, *others = _changed_everything(c)
    _answer(c, first)
    assert _tick(c, c.now + 0.01) == []
    since = c.state.litellm.unobserved_since
    assert since == c.now
    # the loop sleeps until the read falls due, even if no other answer comes
    assert next_deadline(c.state) == since + REREAD_MAX_DELAY
    assert _tick(c, since + REREAD_MAX_DELAY - 0.001) == []
    assert _tick(c, since + REREAD_MAX_DELAY) == [ObserveLiteLLM(ReadReason.AFTER_WRITES)]
    # the read in flight is the only one: more answers plan none until an observation answers it
    for update in others[:2]:
        _answer(c, update)
        assert _tick(c, c.now + 0.01) == []
    _answer(c, ObserveLiteLLM(ReadReason.AFTER_WRITES))
    assert c.state.litellm.unobserved_since is None
    for update in others[2:]:
        _answer(c, update)
    assert _reads(_tick(c, c.now + 0.01)) == [ObserveLiteLLM(ReadReason.AFTER_WRITES)]


def test_any_observation_answers_a_planned_read_that_has_not_run() -> None:
    """A resync that reaches the core first covers the writes (it is at least as new as every outcome
    folded before it): the queued read is no longer held in flight, so the shell skips it."""
    c = _started()
    updates = _changed_everything(c)
    for update in updates:
        _answer(c, update)
    [read] = _tick(c, c.now + 0.01)
    assert c.state.control.inflight.get(LITELLM_READ_KEY) == read
    c.feed(c.world.rows_event())  # the observer's own resync
    assert LITELLM_READ_KEY not in c.state.control.inflight and not c.state.litellm.unobserved_writes
    assert _reads(_tick(c, c.now + 0.01)) == []


def test_a_steady_state_plans_no_read_and_a_resync_changes_nothing() -> None:
    c = _started()
    assert _tick(c, c.now + 60.0) == []
    state = c.state
    c.feed(c.world.rows_event())
    assert c.state is state  # the usual resync: nothing new
    assert _tick(c, c.now + 60.0) == []
    assert c.commands and not _reads(c.commands[-1:])  # the start ended on the catalog, not a read


def _one_write(c: Cluster) -> Command:
    c.feed(*c.upserts(b.kubeai_model("m0", args=["--max-model-len=16384"])))
    [update] = _tick(c, c.now + 1.0)
    return update


def _completed(command: Command, outcome: Outcome, reason: str = "") -> CommandCompleted:
    return CommandCompleted(
        command.key, command.id, outcome, 1.0 if outcome is Outcome.RETRY else 0.0, reason
    )


def test_a_create_answered_with_the_duplicate_id_500_is_read_again_at_once() -> None:
    c = _started()
    c.feed(*c.upserts(b.kubeai_model("new", args=["--max-model-len=4096"])))
    c.feed(*c.upserts(b.kubeai_model("m1", args=["--max-model-len=16384"])))
    commands = _tick(c, c.now + 1.0)
    create = next(x for x in commands if isinstance(x, CreateLiteLLMModel))
    assert any(isinstance(x, UpdateLiteLLMModel) for x in commands)  # still in flight below
    c.feed(_completed(create, Outcome.RETRY, LiteLLMWait.DUPLICATE_ID))
    assert c.state.litellm.unconfirmed is ReadReason.ROW_PROBABLY_EXISTS
    # at once, though a write is still in flight: the row probably exists
    assert _tick(c, c.now + 0.01) == [ObserveLiteLLM(ReadReason.ROW_PROBABLY_EXISTS)]
    c.feed(c.world.rows_event())
    assert c.state.litellm.unconfirmed is None


def test_a_recreate_that_did_not_complete_is_read_again() -> None:
    c = _started()
    row = c.world.rows["ai-appliance-kubeai-m0"]
    recreate = RecreateLiteLLMModel(
        "ai-appliance-kubeai-m0", "m0", Json.of(row["litellm_params"]), Json.of(row["model_info"]), None
    )
    control = c.state.control  # as if the tick had planned it
    c.state = evolve(c.state, control=evolve(control, inflight=control.inflight.set(recreate.key, recreate)))
    c.feed(_completed(recreate, Outcome.RETRY, LiteLLMWait.SERVER_ERROR))
    assert c.state.litellm.unconfirmed is ReadReason.RECREATE_UNFINISHED
    assert _reads(_tick(c, c.now + 0.01)) == [ObserveLiteLLM(ReadReason.RECREATE_UNFINISHED)]


def test_a_write_that_sees_litellm_failing_is_confirmed_by_a_read_and_one_that_sees_it_back_too() -> None:
    c = _started()
    update = _one_write(c)
    c.feed(_completed(update, Outcome.RETRY, LiteLLMWait.UNREACHABLE))
    assert _reads(_tick(c, c.now + 0.01)) == [ObserveLiteLLM(ReadReason.WRITE_SAW_FAILURE)]
    c.feed(LiteLLMUnreachable("unreachable", "connect: refused"))  # the read's answer
    assert not c.state.litellm.status.reachable and c.state.litellm.unconfirmed is None
    assert LITELLM_READ_KEY not in c.state.control.inflight
    # the retry of the write, while LiteLLM is known to be down: no read for a failure already known
    [again] = [x for x in _tick(c, c.now + 5.0) if not isinstance(x, ObserveLiteLLM)]
    c.feed(_completed(again, Outcome.RETRY, Reason.LITELLM_UNAUTHORIZED))
    assert c.state.litellm.unconfirmed is None
    # a write answered while LiteLLM was last seen down: it is back, read it at once
    [third] = _tick(c, c.now + 5.0)
    c.feed(_completed(third, Outcome.TERMINAL, Reason.LITELLM_REJECTED))
    assert _reads(_tick(c, c.now + 0.01)) == [ObserveLiteLLM(ReadReason.WRITE_SAW_ANSWER)]


def test_without_the_gate_no_read_is_planned_as_a_log_of_an_older_version_ran() -> None:
    older = _started(attrs.evolve(UNDAMPED, gates=ALL_GATES - {Gate.PLANNED_LITELLM_READS}))
    first, *updates = _changed_everything(older)
    older.feed(_completed(first, Outcome.RETRY, LiteLLMWait.UNREACHABLE))  # a write saw LiteLLM failing
    planned = _tick(older, older.now + 0.01)
    for update in updates:
        _answer(older, update)
        planned += _tick(older, older.now + 0.01)
    assert older.state.litellm.unobserved_writes  # the observer of that version read LiteLLM by itself
    assert _reads(planned) == [] and not _reads(older.commands)
    assert older.state.litellm.unconfirmed is None and older.state.litellm.unobserved_since is None
