"""Bursts (issue 14): when many rows change at once, a row that was still waits to settle too.

A still row's first change goes out after the burst probe (10 ms: P1) unless rows have changed at
``burst_rows`` distinct moments within the burst window (a pair within the probe holds it once more, to
see whether a third change follows): then the cluster is in flux (a node or an operator restarting,
many models flapping), and the row is written once it has been still for the settle window, so a model
that flaps and comes back costs no write and one that ends changed costs one.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog_core import damping as churn
from catalog_core.config import CatalogConfig
from catalog_core.damping import Windows
from catalog_core.fold import step
from catalog_core.gates import ALL_GATES, Gate
from catalog_core.keys import litellm_key
from tests.core import builders as b
from tests.core.harness import Cluster
from tests.core.test_write_damping import Driver, _ready, _rid, _started, _writes, check_flaps


def _started_with(config: CatalogConfig, names: list[str]) -> tuple[Cluster, Driver]:
    c = Cluster(config)
    c.start(*(b.kubeai_model(n) for n in names))
    d = Driver(c)
    d.until(c.now + 100.0)
    return c, d


def _writes_of(d: Driver, rid: str) -> int:
    return sum(1 for w in _writes(d.commands) if w.model_id == rid)


def _p4_in_small(**env: str) -> tuple[Any, Any, dict[str, str], list[str], list[str]]:
    """P4 in small: 40 models, 10 flaps each at ~200 changes a second in a shuffled order; half end
    changed. Returns the cluster, the driver, the row ids, and the changed and unchanged models."""
    names = [f"m{i:02d}" for i in range(40)]
    c, d = _started(names, **env)
    rid = {n: _rid(c, n) for n in names}
    rng = random.Random(7)
    flips = {n: 10 + (i % 2) for i, n in enumerate(names)}  # odd index: an odd number of flips, ends changed
    order = [n for n in names for _ in range(flips[n])]
    rng.shuffle(order)
    ready = dict.fromkeys(names, True)
    t = c.state.now + 1.0
    for k, name in enumerate(order):
        ready[name] = not ready[name]
        d.send(t + 0.005 * k, _ready(c, name, ready[name]))
    d.until(t + 0.005 * len(order) + 60.0)
    changed = [n for n in names if not ready[n]]
    unchanged = [n for n in names if ready[n]]
    assert len(changed) == 20
    assert {row["model_name"] for row in c.world.rows.values()} == set(unchanged)
    return c, d, rid, changed, unchanged


def test_a_burst_of_flaps_writes_each_changed_model_once_and_the_others_never():
    c, d, rid, changed, unchanged = _p4_in_small()
    assert sum(_writes_of(d, rid[n]) for n in unchanged) == 0
    assert all(_writes_of(d, rid[n]) == 1 for n in changed)
    # Every first change was held by the burst, but for a row of the first two moments that flapped
    # back within its probe, before the third moment made the burst (it cost nothing and is not counted).
    assert len(rid) - 2 <= c.state.damping.burst_deferred_total <= len(rid)


def test_without_the_probe_the_first_rows_of_a_burst_go_out_before_it_is_seen():
    # CATALOG_LITELLM_BURST_PROBE_SECONDS=0: only the burst rule tells a burst, after burst_rows moments.
    c, d, rid, changed, unchanged = _p4_in_small(CATALOG_LITELLM_BURST_PROBE_SECONDS="0")
    rows = churn.Windows.of(c.config).burst_rows
    assert sum(_writes_of(d, rid[n]) for n in unchanged) <= 2 * (rows - 1)
    assert sum(_writes_of(d, rid[n]) for n in changed) <= len(changed) + (rows - 1)
    assert c.state.damping.burst_deferred_total >= len(rid) - (rows - 1)


def test_isolated_changes_ten_a_second_go_out_once_the_probe_passes():
    # P1's shape: a different model every 100 ms is not a burst; each waits the probe and no more.
    names = [f"m{i:02d}" for i in range(30)]
    c, d = _started(names)
    probe = Windows.of(c.config).burst_probe
    t = c.state.now + 1.0
    for k, name in enumerate(names):
        d.send(t + 0.1 * k, _ready(c, name, False))
        assert len(_writes(d.commands)) == k, f"change {k} was not held for the probe"
        d.until(t + 0.1 * k + probe)
        assert len(_writes(d.commands)) == k + 1, f"change {k} was held back after the probe"
    assert c.state.damping.deferred_total == 0
    assert c.state.damping.burst_deferred_total == 0


def test_changes_delivered_back_to_back_after_a_stall_are_one_moment():
    # P1 at 10,000 models: changes made 100 ms apart; a busy loop (a poll of 10,000 rows) delivers two of
    # them 1 ms apart in two ticks, and the next comes 97 ms later. Three moments within the burst
    # window would be a burst (every row then waits a settle window); the two delivered together are one.
    names = ["a", "b", "c", "d"]
    c, d = _started(names)
    w = Windows.of(c.config)
    assert 0 < w.burst_moment < w.burst_probe
    t = c.state.now + 1.0
    d.send(t, _ready(c, "a", False))
    d.until(t + w.burst_probe)
    assert len(_writes(d.commands)) == 1
    late = t + 0.25  # b and c were made 100 ms apart, before and during the stall
    d.send(late, _ready(c, "b", False))
    d.send(late + 0.001, _ready(c, "c", False))
    d.send(late + 0.097, _ready(c, "d", False))
    d.until(late + 0.097 + w.burst_probe)
    assert len(_writes(d.commands)) == 4
    assert c.state.damping.burst_deferred_total == 0
    assert c.state.damping.deferred_total == 0


def _behind_a_stall(busy: float) -> tuple[Any, Driver, dict[str, float], dict[str, float]]:
    """P1 at 10,000 models as a run recorded it: changes 100 ms apart; the loop folds a 10,000-row LiteLLM
    observation for 115 ms; the change made meanwhile (a) arrives after it, 4 ms before the next one (b),
    and the one after (c) 34 ms later: three moments within the burst window. ``busy``: what the tick
    after the observation says of the fold. Returns when each change arrived and its write went."""
    names = ["before", "a", "b", "c", "d"]
    c, d = _started(names, CATALOG_LITELLM_BURST_ROWS="3")
    rid = {n: _rid(c, n) for n in names}
    w = Windows.of(c.config)
    t = c.state.now + 1.0
    d.send(t, _ready(c, "before", False))
    d.until(t + w.burst_probe)
    observed = t + 0.3
    d.send(observed, [c.world.rows_event()], busy=busy)
    at = {"a": observed + 0.030, "b": observed + 0.034, "c": observed + 0.068, "d": observed + 0.168}
    for name, when in at.items():
        d.send(when, _ready(c, name, False))
    d.until(at["d"] + 3.0)
    sent = {}
    for name in at:
        emitted = zip(d.commands, d.at, strict=True)
        times = [t for cmd, t in emitted if getattr(cmd, "model_id", None) == rid[name]]
        assert len(times) == 1, f"{name}: {len(times)} writes"
        sent[name] = times[0]
    return c, d, at, sent


def test_changes_that_waited_behind_a_busy_fold_are_one_moment_not_a_burst():
    # Counted apart (no busy time known: busy=0), the three make a burst and every change for a settle
    # window waits 2 s; behind the 115 ms the loop says it was busy they are one moment.
    c, _, at, sent = _behind_a_stall(busy=0.0)
    assert c.state.damping.burst_deferred_total > 0, "the shape no longer reproduces the false burst"
    assert max(sent[n] - at[n] for n in at) >= 1.0
    c, _, at, sent = _behind_a_stall(busy=0.115)
    assert c.state.damping.burst_deferred_total == 0
    w = Windows.of(c.config)
    for name, when in at.items():
        held = sent[name] - when
        assert held <= w.pair_hold + w.burst_probe, f"{name} held {held:.3f} s"


def test_a_busy_fold_of_up_to_half_the_burst_window_changes_nothing():
    w = Windows.of(CatalogConfig())
    damping = churn.Damping()
    assert churn.loop_was_busy(damping, 10.0, w.burst_window / 2, w) is damping
    busy = w.burst_window * 0.6
    assert churn.loop_was_busy(damping, 10.0, busy, w).backlog == (10.0, 10.0 + busy)


def test_rows_of_one_moment_are_held_like_a_pair_so_a_burst_behind_them_is_seen():
    # P4's start: two rows delivered 1 ms apart (one moment), a third 30 ms later. The first two are held
    # like a pair, the third makes the burst, and the first, flapping back, is never written.
    c, d = _started(["a", "b", "c", "e"])
    rid = {n: _rid(c, n) for n in ("a", "b", "c", "e")}
    w = Windows.of(c.config)
    t = c.state.now + 1.0
    d.send(t, _ready(c, "a", False))
    d.send(t + 0.001, _ready(c, "b", False))
    d.until(t + w.burst_probe + 0.002)
    assert _writes(d.commands) == []  # held past the probe: another row changed with them
    d.send(t + 0.03, _ready(c, "c", False))
    d.send(t + 0.035, _ready(c, "e", False))  # the third moment within the burst window: a burst
    d.send(t + 0.04, _ready(c, "a", True))  # a flaps back
    d.until(t + 30.0)
    assert _writes_of(d, rid["a"]) == 0
    assert all(_writes_of(d, rid[n]) == 1 for n in ("b", "c", "e"))


def test_many_changes_found_in_one_tick_go_out_a_burst_window_later():
    # A relist (or the first sync, or what queued while the loop was busy) brings many changes at one moment:
    # one arrival, not a burst, held like a pair so a burst behind them is still seen.
    names = [f"m{i:02d}" for i in range(12)]
    c, d = _started(names)
    w = Windows.of(c.config)
    t = c.state.now + 1.0
    d.send(t, [e for n in names for e in _ready(c, n, False)])
    d.until(t + w.burst_probe)
    assert _writes(d.commands) == []
    d.until(t + w.pair_hold - 0.001)
    assert _writes(d.commands) == []
    d.until(t + w.pair_hold)
    assert len(_writes(d.commands)) == len(names)
    assert c.state.damping.deferred_total == 0
    assert c.state.damping.burst_deferred_total == 0


def test_without_the_gate_many_changes_of_one_tick_go_out_once_the_probe_passes():
    # How a log recorded before Gate.MOMENTS_OF_MANY_ROWS planned, and replays.
    names = [f"m{i:02d}" for i in range(12)]
    c, d = _started_with(attrs.evolve(CatalogConfig(), gates=ALL_GATES - {Gate.MOMENTS_OF_MANY_ROWS}), names)
    t = c.state.now + 1.0
    d.send(t, [e for n in names for e in _ready(c, n, False)])
    d.until(t + Windows.of(c.config).burst_probe)
    assert len(_writes(d.commands)) == len(names)


def test_rows_folded_in_one_tick_with_a_burst_behind_them_are_never_written_out_and_back():
    # P4 as a run recorded it: the first row alone, four rows folded in one tick 40 ms later (the loop was
    # busy), further rows 38 and 56 ms after those. The four wait with the burst; those that flap back cost
    # no write.
    names = ["first", "r0", "r1", "r2", "r3", "n0", "n1"]
    c, d = _started(names)
    rid = {n: _rid(c, n) for n in names}
    t = c.state.now + 1.0
    d.send(t, _ready(c, "first", False))
    d.send(t + 0.040, [e for n in ("r0", "r1", "r2", "r3") for e in _ready(c, n, False)])
    d.send(t + 0.078, _ready(c, "n0", False))
    d.send(t + 0.096, _ready(c, "n1", False))
    d.send(t + 0.300, [e for n in ("r0", "r1", "r2", "r3") for e in _ready(c, n, True)])
    d.until(t + 30.0)
    assert c.state.damping.burst_deferred_total > 0
    assert [_writes_of(d, rid[n]) for n in ("r0", "r1", "r2", "r3")] == [0, 0, 0, 0]
    assert _writes_of(d, rid["n0"]) == _writes_of(d, rid["n1"]) == 1


def test_a_flap_that_returns_within_the_probe_costs_no_write():
    c, d = _started(["llama"])
    t = c.state.now + 1.0
    d.send(t, _ready(c, "llama", False))
    d.send(t + 0.004, _ready(c, "llama", True))  # back to what LiteLLM holds before the probe passed
    d.until(t + 30.0)
    assert _writes(d.commands) == []
    assert c.state.damping.cancelled_total == 1


def test_two_rows_changing_within_the_probe_both_go_out_a_pair_hold_later():
    # Two isolated changes can coincide (delivered back to back after the loop was busy): not a burst.
    c, d = _started(["a", "b", "c"])
    w = Windows.of(c.config)
    t = c.state.now + 1.0
    d.send(t, _ready(c, "a", False))
    d.send(t + 0.005, _ready(c, "b", False))  # another moment within a's probe
    d.until(t + w.burst_probe)
    assert _writes(d.commands) == []  # a is held once more
    entry = c.state.damping.keys[litellm_key(_rid(c, "a"))]
    hold = w.pair_hold
    assert hold == pytest.approx(w.burst_window - 2 * w.burst_probe)  # 80 ms: inside P1's 100 ms
    assert entry.probing and entry.probe_until == pytest.approx(t + hold)
    assert churn.deferral_reason(entry, c.state.now, w) == (
        "write deferred: it changed after being still, and so did another row within 20 ms of it; held "
        "80 ms at least, as changes at 4 moments by then would make it a burst (due in 70 ms)"
    )
    d.until(t + hold - 0.001)
    assert _writes(d.commands) == []
    d.until(t + hold)
    assert len(_writes(d.commands)) == 2  # b, too, was held until then
    assert c.state.damping.burst_deferred_total == 0
    assert c.state.damping.deferred_total == 0


def _a_pair() -> tuple[Any, Driver, float, float]:
    """Rows a, b and c, still; a changes at t and b 5 ms later (a pair). Returns c, d, t, settle."""
    c, d = _started(["a", "b", "c"], CATALOG_LITELLM_BURST_ROWS="3")
    t = c.state.now + 1.0
    d.send(t, _ready(c, "a", False))
    d.send(t + 0.005, _ready(c, "b", False))
    return c, d, t, Windows.of(c.config).settle


def test_a_third_row_changing_while_a_pair_is_held_makes_a_burst_from_the_first():
    c, d, t, settle = _a_pair()
    d.send(t + 0.03, _ready(c, "c", False))  # after both probes, within the pair's hold: the third moment
    d.until(t + settle - 0.001)
    assert _writes(d.commands) == []  # none went out: all wait to settle with the burst
    entry = c.state.damping.keys[litellm_key(_rid(c, "a"))]
    assert entry.burst and not entry.probing
    d.until(t + 0.03 + settle)
    assert len(_writes(d.commands)) == 3
    assert c.state.damping.burst_deferred_total == 3


def test_a_change_planned_in_the_same_tick_as_a_held_probe_counts_first():
    # The loop was busy: c's change and the end of a's held probe are planned in one tick. Rows are
    # planned in id order, and a sorts before c, so a must not decide before c's change is counted.
    c, d, t, settle = _a_pair()
    d.until(t + 0.014)
    for event in _ready(c, "c", False):
        c.state = step(c.state, event).state
    d.tick(t + 0.016)
    d.until(t + settle - 0.001)
    assert _writes(d.commands) == []  # all three wait with the burst
    assert c.state.damping.burst_deferred_total == 3


def test_a_pair_is_held_once_however_many_pairs_follow():
    # With a burst window shorter than two probes, changes 9 ms apart never make a burst; each row is
    # held for its probe and at most once more, never for ever.
    names = [f"m{i}" for i in range(8)]
    c, d = _started(names, CATALOG_LITELLM_BURST_WINDOW_SECONDS="0.01")
    probe = Windows.of(c.config).burst_probe
    t = c.state.now + 1.0
    for k, name in enumerate(names):
        d.send(t + 0.009 * k, _ready(c, name, False))
        d.until(t + 0.009 * k)
        # every row whose probe and one more have passed was written
        assert len(_writes(d.commands)) >= max(0, k - 2)
    d.until(t + 0.009 * len(names) + 2 * probe)
    assert len(_writes(d.commands)) == len(names)
    assert c.state.damping.burst_deferred_total == 0


def test_a_row_held_back_by_a_burst_says_why_and_goes_once_still():
    # Without the probe, the burst rule alone: rows changing at 3 moments within 0.1 s.
    names = ["a", "b", "c", "d"]
    c, d = _started(names, CATALOG_LITELLM_BURST_PROBE_SECONDS="0", CATALOG_LITELLM_BURST_ROWS="3")
    t = c.state.now + 1.0
    for k, name in enumerate(names):
        d.send(t + 0.01 * k, _ready(c, name, False))
    assert len(_writes(d.commands)) == 2  # a and b before the burst was seen; c and d wait
    windows = Windows.of(c.config)
    entry = c.state.damping.keys[litellm_key(_rid(c, "d"))]
    assert entry.burst
    assert churn.deferral_reason(entry, c.state.now, windows).startswith(
        "write deferred: it changed during a burst (rows changing at 3 moments within 0.1 s); "
        "written once still for 2 s"
    )
    d.until(t + 0.02 + windows.settle - 0.005)  # c changed at t + 0.02, d at t + 0.03
    assert len(_writes(d.commands)) == 2
    d.until(t + 0.03 + windows.settle)
    assert len(_writes(d.commands)) == 4
    assert not c.world.rows


def test_a_probed_row_says_why_it_waits():
    c, d = _started(["llama"])
    t = c.state.now + 1.0
    d.send(t, _ready(c, "llama", False))
    entry = c.state.damping.keys[litellm_key(_rid(c, "llama"))]
    assert entry.probing
    assert churn.deferral_reason(entry, c.state.now, Windows.of(c.config)) == (
        "write deferred: it changed after being still; held 10 ms to tell an isolated change from the "
        "start of a burst (due in 10 ms)"
    )


def test_burst_rows_zero_turns_the_burst_rule_off():
    names = [f"m{i}" for i in range(6)]
    c, d = _started(names, CATALOG_LITELLM_BURST_ROWS="0")
    t = c.state.now + 1.0
    for k, name in enumerate(names):
        d.send(t + 0.001 * k, _ready(c, name, False))
    assert len(_writes(d.commands)) == len(names)


def test_burst_settings_are_read_checked_and_recorded():
    cfg = CatalogConfig.from_env(
        {"CATALOG_LITELLM_BURST_ROWS": "5", "CATALOG_LITELLM_BURST_WINDOW_SECONDS": "0.25"}
    )
    assert isinstance(cfg, CatalogConfig)
    assert (cfg.litellm_burst_rows, cfg.litellm_burst_window_seconds) == (5, 0.25)
    assert CatalogConfig.from_env(cfg.as_env()) == cfg
    defaults = CatalogConfig()
    assert (defaults.litellm_burst_rows, defaults.litellm_burst_window_seconds) == (4, 0.1)
    assert defaults.litellm_burst_probe_seconds == 0.01
    probe = CatalogConfig.from_env({"CATALOG_LITELLM_BURST_PROBE_SECONDS": "0.02"})
    assert isinstance(probe, CatalogConfig) and probe.litellm_burst_probe_seconds == 0.02
    assert CatalogConfig.from_env(probe.as_env()) == probe
    off = CatalogConfig.from_env({"CATALOG_LITELLM_BURST_ROWS": "0"})
    assert isinstance(off, CatalogConfig) and Windows.of(off).burst_probe == 0.0  # no burst rule, no probe
    for env in (
        {"CATALOG_LITELLM_BURST_ROWS": "1"},
        {"CATALOG_LITELLM_BURST_ROWS": "-2"},
        {"CATALOG_LITELLM_BURST_ROWS": "many"},
        {"CATALOG_LITELLM_BURST_WINDOW_SECONDS": "-0.1"},
        {"CATALOG_LITELLM_BURST_PROBE_SECONDS": "1.5"},
        {"CATALOG_LITELLM_BURST_PROBE_SECONDS": "-0.01"},
    ):
        assert not isinstance(CatalogConfig.from_env(env), CatalogConfig), env


@st.composite
def _bursts(draw: Any) -> tuple[int, list[tuple[float, int, bool]], dict[str, str]]:
    models = draw(st.integers(2, 6))
    settle = draw(st.sampled_from([0.5, 2.0]))
    env = {
        "CATALOG_LITELLM_SETTLE_SECONDS": str(settle),
        "CATALOG_LITELLM_SETTLE_CAP_SECONDS": str(settle * draw(st.sampled_from([1.0, 2.5, 5.0]))),
        "CATALOG_LITELLM_BURST_ROWS": str(draw(st.sampled_from([0, 2, 3, 5]))),
        "CATALOG_LITELLM_BURST_WINDOW_SECONDS": str(draw(st.sampled_from([0.05, 0.1, 1.0]))),
        "CATALOG_LITELLM_BURST_PROBE_SECONDS": str(draw(st.sampled_from([0, 0.01, 0.05]))),
    }
    gaps = st.one_of(st.floats(0.0, 0.05), st.floats(0.0, 3.0))
    steps = draw(
        st.lists(st.tuples(gaps, st.integers(0, models - 1), st.booleans()), min_size=1, max_size=40)
    )
    return models, steps, env


@settings(max_examples=150, deadline=None)
@given(_bursts())
def test_any_bursts_end_where_render_does_with_few_writes(case):
    check_flaps(*case)


def test_a_burst_holds_for_a_settle_window_after_it_was_last_seen():
    names = [f"m{i}" for i in range(8)]
    c, d = _started(names, CATALOG_LITELLM_BURST_ROWS="3")
    settle = Windows.of(c.config).settle
    t = c.state.now + 1.0
    for k, name in enumerate(names[:3]):  # three moments within 10 ms: a burst from the first
        d.send(t + 0.005 * k, _ready(c, name, False))
    assert len(_writes(d.commands)) == 0
    # A loaded loop sees the rest of the burst as slower moments: they still wait.
    d.send(t + 0.5, _ready(c, names[3], False))
    d.send(t + 1.0, _ready(c, names[4], False))
    assert c.state.damping.keys[litellm_key(_rid(c, names[4]))].burst
    d.until(t + 0.01 + settle + 5.0)
    assert len(_writes(d.commands)) == 5
    # Calm for longer than a settle window: an isolated change goes out after the probe again.
    before = len(_writes(d.commands))
    d.send(t + 0.01 + settle + 5.0, _ready(c, names[5], False))
    d.until(t + 0.01 + settle + 5.0 + Windows.of(c.config).burst_probe)
    assert len(_writes(d.commands)) == before + 1


def test_a_moment_of_two_rows_stays_marked_when_the_next_moment_is_planned_first():
    # P4 as a run recorded it: two rows 1.2 ms apart (one moment), and the tick that found the first one's
    # probe passed came late, with a third row's change 16.9 ms after the first. That new moment was
    # planned before the first row: it must still be held like a pair, and, flapping back, never written.
    names = ["m1", "m2", "m0", "m3"]
    c, d = _started(names)
    rid = {n: _rid(c, n) for n in names}
    t = c.state.now + 1.0
    d.send(t, _ready(c, "m1", False))
    d.send(t + 0.0012, _ready(c, "m2", False))
    for event in _ready(c, "m0", False):  # no tick at m1's probe: the loop was busy
        c.state = step(c.state, event).state
    d.tick(t + 0.0169)
    assert _writes(d.commands) == []
    d.send(t + 0.030, _ready(c, "m3", False))  # the third moment within the burst window: a burst
    d.send(t + 0.060, [e for n in ("m1", "m2") for e in _ready(c, n, True)])
    d.until(t + 30.0)
    assert _writes_of(d, rid["m1"]) == _writes_of(d, rid["m2"]) == 0


def _slow_flap(config: CatalogConfig) -> tuple[Driver, dict[str, str], list[str], list[str]]:
    """P4 on a loaded API server: 40 models flap (10 or 11 times each, a change every 8 ms in a shuffled
    order), and the two patches of m00 and m01, which end where they began, are answered 2.6 s apart
    (longer than the settle window) while the other models go on flapping. Returns the driver, the
    row ids, and the models that end changed and those that end where they began."""
    names = [f"m{i:02d}" for i in range(40)]
    c, d = _started_with(config, names)
    rid = {n: _rid(c, n) for n in names}
    rng = random.Random(11)
    flips = {n: 10 + (i % 2) for i, n in enumerate(names)}
    slow = ["m00", "m01"]
    order = [n for n in names if n not in slow for _ in range(flips[n])]
    rng.shuffle(order)
    ready = dict.fromkeys(names, True)
    t = c.state.now + 1.0
    pace = 0.008
    for k, name in enumerate(order):
        ready[name] = not ready[name]
        d.send(t + pace * k, _ready(c, name, ready[name]))
        if k in (20, 350):  # the slow ones' two patches, 2.6 s apart
            for s in slow:
                ready[s] = not ready[s]
                d.send(t + pace * k + 0.001, _ready(c, s, ready[s]))
    d.until(t + pace * len(order) + 60.0)
    assert all(ready[s] for s in slow)  # out and back: they end where they began
    changed = [n for n in names if not ready[n]]
    unchanged = [n for n in names if ready[n]]
    assert pace * (350 - 20) > Windows.of(c.config).settle
    return d, rid, changed, unchanged


def test_a_row_still_for_a_settle_window_in_a_burst_waits_for_the_burst_to_calm():
    # A P4 run on this host: 3, 12 and 4 writes on models that ended where they began, each a model whose
    # patches were answered more than 2 s apart while the other models flapped on: written when still for
    # the settle window, then written back.
    d, rid, changed, unchanged = _slow_flap(CatalogConfig())
    assert sum(_writes_of(d, rid[n]) for n in unchanged) == 0
    assert all(_writes_of(d, rid[n]) == 1 for n in changed)


def test_without_calm_a_row_still_for_a_settle_window_in_a_burst_is_written_out_and_back():
    # How a log recorded before Gate.CALM_AFTER_BURSTS planned, and replays.
    d, rid, changed, _ = _slow_flap(attrs.evolve(CatalogConfig(), gates=ALL_GATES - {Gate.CALM_AFTER_BURSTS}))
    assert {n: _writes_of(d, rid[n]) for n in ("m00", "m01")} == {"m00": 2, "m01": 2}
    assert all(_writes_of(d, rid[n]) == 1 for n in changed)


def test_a_write_waiting_for_a_burst_to_calm_says_so():
    w = Windows.of(CatalogConfig())
    entry = churn.KeyChurn("x", 10.0, deferred_since=10.0, unsettled_since=10.0, burst=True)
    assert churn.deferral_reason(entry, 12.5, w, calm=13.0) == (
        "write deferred: rows are changing in a burst (at 4 moments within 0.1 s); written once none has "
        "been seen for 2 s (due in 500 ms)"
    )
    assert "none has been seen" not in churn.deferral_reason(entry, 11.5, w, calm=11.0)


def _p4_start(config: CatalogConfig) -> tuple[Driver, dict[str, str]]:
    """P4's start as a run recorded it: two rows 2.3 ms apart (one moment, known by its first row), a third
    (m3) 11.1 ms after the first, then a change every ~10 ms; m3 flaps back 60 ms in."""
    names = ["m0", "m1", "m3", "m4", "m5", "m6"]
    c, d = _started_with(config, names)
    rid = {n: _rid(c, n) for n in names}
    t = c.state.now + 1.0
    for name, at in (("m0", 0.0), ("m1", 0.0023), ("m3", 0.0111), ("m4", 0.0256), ("m5", 0.0441)):
        d.send(t + at, _ready(c, name, False))
    d.send(t + 0.060, _ready(c, "m3", True))
    d.send(t + 0.070, _ready(c, "m6", False))
    d.until(t + 30.0)
    return d, rid


def test_a_row_changing_just_after_a_moment_of_two_rows_waits_for_the_burst():
    d, rid = _p4_start(CatalogConfig())
    assert _writes_of(d, rid["m3"]) == 0


def test_without_pairs_by_probes_a_row_just_past_a_probe_of_a_moment_goes_out_alone():
    # How a log recorded before Gate.PAIRS_BY_PROBES planned, and replays.
    d, rid = _p4_start(attrs.evolve(CatalogConfig(), gates=ALL_GATES - {Gate.PAIRS_BY_PROBES}))
    assert _writes_of(d, rid["m3"]) == 2


def test_three_isolated_changes_squeezed_into_the_burst_window_are_not_a_burst():
    # P1 at 10,000 models on this host: changes made 100 ms apart, and a stall (a 10,000-row LiteLLM
    # re-read, a loaded host) delivers three of them within 100 ms, 22 ms and 60 ms apart. Read as a burst
    # (CATALOG_LITELLM_BURST_ROWS=3), every change for a settle window waited 2 s (P1's p99 2,005 ms); a
    # burst takes four moments, which a stall squeezes into the window only if it lasts twice as long.
    def run(**env: str) -> tuple[Cluster, list[float]]:
        names = ["a", "b", "c", "d"]
        c, d = _started(names, **env)
        rid = {n: _rid(c, n) for n in names}
        t = c.state.now + 1.0
        at = {"a": t, "b": t + 0.022, "c": t + 0.082, "d": t + 0.182}
        for name, when in at.items():
            d.send(when, _ready(c, name, False))
        d.until(t + 5.0)
        emitted = list(zip(d.commands, d.at, strict=True))
        return c, [
            next(x for cmd, x in emitted if getattr(cmd, "model_id", None) == rid[n]) - at[n] for n in names
        ]

    c, waits = run(CATALOG_LITELLM_BURST_ROWS="3")
    assert c.state.damping.burst_deferred_total > 0 and max(waits) >= 1.0, (
        "no longer reproduces the false burst"
    )
    c, waits = run()
    assert c.state.damping.burst_deferred_total == 0
    w = Windows.of(c.config)
    assert max(waits) <= w.pair_hold + w.burst_probe  # a and b a pair, c and d after the probe
    assert waits[2:] == [pytest.approx(w.burst_probe)] * 2
