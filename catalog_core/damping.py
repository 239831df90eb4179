"""Write economy under churn: a key that keeps changing is written once it settles.

A LiteLLM row whose desired value changes after it has been still goes out at once (P1). One that
changes again while it is *damped* (written or changed less than a settle window ago) waits until its
desired value has been still for the settle window, or until the cap has passed since the write was
first deferred, so a key that never settles is still written at that rate. During a *burst* (the desired
values of rows changed at ``burst_rows`` distinct moments within ``burst_window``: many models flapping
at once, as when a node or an operator restarts) a still row is treated as damped too, and a deferred
write waits for the burst to calm (none seen for a settle window) or the cap: a model that flaps and
returns within the burst is never written, one that ends changed once. So that the first rows of a burst
are not written before it is seen, a still row's change is *probed* first: held for ``burst_probe`` (a
few ms, well inside P1's budget). If the burst rule sees a burst within that time, the row waits to
settle with the rest. If only one other row changed within two probes of it (a pair: two isolated
changes can coincide, e.g. delivered back to back after the loop was busy), the row is held once more,
both rows until the burst window less two probes has passed since the first of them (``pair_hold_of``):
changes at ``burst_rows`` moments by then are a burst, else both go out. Changes delivered back to back
(within a quarter of the probe, or after the loop was busy folding, within as long as it was busy) are
one moment for the burst rule, and held like such a pair, as are many rows changing in one tick (a
relist, the first sync, or what queued while the loop was busy). An isolated change goes out once the
probe has passed. Two writes of a key are always a settle window apart. A change back to what LiteLLM
holds needs no write: the deferred one is cancelled. Consumers are rolled, and AgentTemplates patched,
only onto a catalog that has been stable for its own settle window, at most once per window each.

Pure: time is the ``now`` of the tick; every decision is a function of the state and that ``now``.
"""

from __future__ import annotations

import attrs

from catalog_core.config import CatalogConfig
from catalog_core.evolve import evolve
from catalog_core.gates import Gate
from catalog_core.memo import LastCall
from catalog_core.pmap import PMap, empty

HELD = ""  # the "write" of a key whose target already holds what is wanted


@attrs.frozen
class KeyChurn:
    """One damped key: its desired value, when that last changed, and its writes."""

    desired: str  # a token of the desired value ("" when nothing is wanted)
    changed_at: float
    written: str = HELD  # id of the last write emitted for the key
    written_at: float | None = None  # None: never written (a snapshot holds no infinities)
    deferred_since: float | None = None  # a write is waiting for the key to settle
    # The first deferral since the last write: the cap runs from it, through cancellations, so a key
    # that flaps for ever is still written at the cap's rate.
    unsettled_since: float | None = None
    burst: bool = False  # its first change arrived in a burst, so it waits although it was still
    # Its first change since it was still is held for the burst probe: written when the probe passes
    # with no other row changing, else it waits to settle as part of the burst.
    probing: bool = False
    # Another row changed near it (``Windows.pair_reach``): held once more (``_pair_hold``), so more
    # changes can tell a burst from two coincident isolated ones (None: the probe runs from ``changed_at``).
    probe_until: float | None = None


@attrs.frozen
class Damping:
    # "litellm/<id>" -> its churn. A key still for a settle window is treated as new, and forgotten at
    # the next sweep (so a tick costs O(keys with a deferred write), not O(keys written lately)).
    keys: PMap[KeyChurn] = attrs.field(factory=empty)
    waiting: PMap[float] = attrs.field(factory=empty)  # key with a deferred write -> when it is due
    sweep_at: float = 0.0
    stable_hash: str = ""  # the written catalog's hash, which rollouts wait on
    stable_since: float = 0.0
    desired_hash: str = ""  # the rendered catalog's hash, which AgentTemplate patches wait on
    desired_since: float = 0.0
    last_done: PMap[float] = attrs.field(factory=empty)  # rollout / template key -> when last emitted
    wake_at: float | None = None  # a rollout, template patch or catalog write waits until then
    catalog_held_since: float | None = None  # the catalog waits for deferred LiteLLM writes since then
    deferred_total: int = 0  # writes deferred (each wait counted once)
    burst_deferred_total: int = 0  # of them, first changes of still rows held back by a burst
    # The latest distinct moments at which some row's desired value changed (at most ``burst_rows``); the
    # latest listed twice when rows joined it in later ticks (delivered back to back).
    arrivals: tuple[float, ...] = ()
    # A burst holds until a settle window after it was last seen: a loaded loop, folding many changes
    # per tick, sees fewer distinct moments, which must not end it while the rows still flap.
    burst_until: float | None = None
    # (since, until): the loop was busy folding for ``until - since`` seconds before its tick at ``since``;
    # changes reaching the core by ``until`` may have waited behind it, so they are one moment (``_arrived``).
    backlog: tuple[float, float] | None = None
    cancelled_total: int = 0  # deferred writes no longer needed: the key returned to what LiteLLM holds


@attrs.frozen
class Windows:
    """The settle windows, in seconds (``CatalogConfig``)."""

    settle: float
    cap: float
    rollout: float
    burst_rows: int = 0  # 0: no burst rule
    burst_window: float = 0.0
    burst_probe: float = 0.0  # 0: a still row's first change is written at once
    # Changes reaching the core less than this after a moment began are that moment: rows delivered back
    # to back after the loop was busy (a poll at 10,000 rows) changed at different times, and counting
    # them apart made a false burst of two isolated changes and the next one (P1 at 10,000 models).
    burst_moment: float = 0.0
    # Rows changing in one tick are a moment of many rows, held like a pair (``Gate.MOMENTS_OF_MANY_ROWS``).
    hold_moments: bool = False
    # A deferred write waits for the burst to calm too (``Gate.CALM_AFTER_BURSTS``, ``write_due``).
    calm_bursts: bool = False
    # How near another row's change makes a pair (``_pair_hold``), and how long after the first of them
    # the rows of a pair wait (``pair_hold_of``): both set by the gates in ``of``.
    pair_reach: float = 0.0
    pair_hold: float = 0.0

    @classmethod
    def of(cls, config: CatalogConfig) -> Windows:
        return _WINDOWS(config)

    @classmethod
    def _of(cls, config: CatalogConfig) -> Windows:
        probe = config.litellm_burst_probe_seconds if config.litellm_burst_rows >= 2 else 0.0
        by_probes = Gate.PAIRS_BY_PROBES in config.gates
        reach = probe * 2 if by_probes else probe
        return cls(
            config.litellm_settle_seconds,
            config.litellm_settle_cap_seconds,
            config.rollout_settle_seconds,
            config.litellm_burst_rows,
            config.litellm_burst_window_seconds,
            probe,
            burst_moment=probe / 4,
            hold_moments=Gate.MOMENTS_OF_MANY_ROWS in config.gates,
            calm_bursts=Gate.CALM_AFTER_BURSTS in config.gates,
            pair_reach=reach,
            pair_hold=pair_hold_of(
                config.litellm_burst_window_seconds,
                reach,
                by_probes=by_probes,
                hold_moments=Gate.MOMENTS_OF_MANY_ROWS in config.gates,
            ),
        )


# Performance (bench P6): the plan reads the windows a few times per tick, and a run has one configuration
# (~1.3 us to build them, ~0.1 us to find them here).
_WINDOWS: LastCall[CatalogConfig, Windows] = LastCall(Windows._of)


def plan_write(
    damping: Damping, key: str, *, desired: str, write: str, now: float, w: Windows
) -> tuple[Damping, bool]:
    """Whether the write ``write`` (``HELD``: none needed) for ``key`` may be emitted now.

    ``desired`` identifies the value wanted for the key; a change of it restarts the settle window.
    """
    entry = damping.keys.get(key)
    if entry is None or (entry.deferred_since is None and _still(entry, now, w)):
        if write == HELD or w.settle <= 0:
            return damping, write != HELD
        damping = _arrived(damping, now, w)
        if in_burst(damping, now):
            # Many rows are changing at once: this one waits to settle like a row that flaps.
            entry = KeyChurn(desired, now, deferred_since=now, unsettled_since=now, burst=True)
            damping = evolve(damping, burst_deferred_total=damping.burst_deferred_total + 1)
            return _with(damping, key, entry, w, deferred=1), False
        if w.burst_probe > 0:
            # Held for the probe: another row changing meanwhile makes this the start of a burst.
            entry = KeyChurn(desired, now, deferred_since=now, unsettled_since=now, probing=True)
            return _with(damping, key, entry, w), False
        # A still key: its first change goes out at once; it stays damped for a settle window.
        entry = KeyChurn(desired, now)
        return evolve(damping, keys=damping.keys.set(key, entry)), True
    still = _still(entry, now, w)
    if desired != entry.desired:
        # A probed key that changes again flaps: it waits to settle like any other.
        entry = evolve(entry, desired=desired, changed_at=now, probing=False, probe_until=None)
        damping = _arrived(damping, now, w)
    if write == HELD:
        cancelled = entry.deferred_since is not None
        entry = evolve(entry, deferred_since=None, probing=False, probe_until=None)
        return _with(damping, key, entry, w, cancelled=int(cancelled)), False
    if entry.probing:
        if now < write_due(entry, w):  # a probe never waits for calm: it tells whether there is a burst
            return _with(damping, key, entry, w), False
        if not in_burst(damping, now):
            until = _pair_hold(damping, entry, now, w)
            if until is None:
                return _with(damping, key, entry, w), True  # the probe passed: an isolated change
            return _with(damping, key, evolve(entry, probe_until=until), w), False
        entry = evolve(entry, probing=False, burst=True, probe_until=None)
        damping = evolve(damping, burst_deferred_total=damping.burst_deferred_total + 1)
        return _with(damping, key, entry, w, deferred=1), False
    if write == entry.written:
        # Already emitted: in flight, applied, or backing off; the planner's bookkeeping decides.
        return _with(damping, key, entry, w), True
    if still and entry.deferred_since is None:
        return _with(damping, key, entry, w), True
    since = entry.deferred_since if entry.deferred_since is not None else now
    first = entry.unsettled_since if entry.unsettled_since is not None else now
    entry = evolve(entry, deferred_since=since, unsettled_since=first)
    if now >= write_due(entry, w, calm_at(damping, w)):
        return _with(damping, key, entry, w), True
    return _with(damping, key, entry, w, deferred=int(since == now)), False


def probing_keys(damping: Damping) -> frozenset[str]:
    """The keys held for the burst probe (they wait in ``waiting``, so this is O(waiting))."""
    return frozenset(key for key in damping.waiting if damping.keys[key].probing)


def _arrived(damping: Damping, now: float, w: Windows) -> Damping:
    """Some row's desired value changed at ``now`` (changes in one tick, within ``burst_moment`` of the
    moment's first, or behind the same stall of the loop, are one moment); a burst is seen when rows
    changed at ``burst_rows`` distinct moments within the burst window."""
    if w.burst_rows < 2:
        return damping
    held = damping.arrivals
    if held and (now - held[-1] <= w.burst_moment or _behind_the_same_stall(damping, held[-1], now)):
        # The latest moment. A second row in it (in a later tick: delivered back to back; in the same
        # tick: folded together) is marked by the moment listed twice: its rows are then held like a
        # pair (``_pair_hold``).
        joined = now != held[-1] or w.hold_moments
        if not joined or (len(held) >= 2 and held[-2] == held[-1]):
            return damping
        return evolve(damping, arrivals=(*held, held[-1]))
    if w.hold_moments:
        # The latest moments (one fewer than a burst takes), each once, and now; a moment's second listing
        # stays, so its first row, planned after a later moment began, is still held like a pair.
        moments = (*tuple(dict.fromkeys(held))[1 - w.burst_rows :], now)
        arrivals = (*(a for a in held if a in moments), now)
    else:
        arrivals = moments = (*dict.fromkeys(held), now)[-w.burst_rows :]  # each moment once
    seen = len(moments) >= w.burst_rows and now - moments[0] <= w.burst_window
    until = now + w.settle if seen else damping.burst_until
    return evolve(damping, arrivals=arrivals, burst_until=until)


def loop_was_busy(damping: Damping, now: float, busy: float, w: Windows) -> Damping:
    """The tick at ``now`` came after the loop had been folding for ``busy`` seconds (``Ticked.busy``).

    Changes made meanwhile reach the core after it, one after the other as the watch delivers them, next to
    those made on time: counted as moments of their own, a stall of ~0.1 s (a 10,000-row LiteLLM observation)
    made three isolated changes 100 ms apart a burst, and every change for a settle window waited 2 s (P1 at
    10,000 models). A stall of less than half the burst window cannot squeeze changes made slower than a
    burst into one (three changes 100 ms apart still span 150 ms): it is left alone, as moments merged
    behind the short folds of a real burst (a few ms each, folding what queued) would hide it."""
    if w.burst_rows < 2 or busy <= w.burst_window / 2:
        return damping
    return evolve(damping, backlog=(now, now + busy))


def _behind_the_same_stall(damping: Damping, latest: float, now: float) -> bool:
    """The latest moment and ``now`` both fall after the last stall, within as long as it lasted."""
    backlog = damping.backlog
    return backlog is not None and backlog[0] <= latest and now <= backlog[1]


def _pair_hold(damping: Damping, entry: KeyChurn, now: float, w: Windows) -> float | None:
    """Until when a row whose probe has just passed with no burst seen is held once more, because
    another row changed within ``pair_reach`` of it (None: none did, or the row was already held once).
    A moment is known by its first row, so the reach is two probes: a row 11 ms after a moment that had
    a second row at 2.3 ms was alone within one probe and went out, then flapped back (P4's start).

    Two changes a few ms apart are not yet a burst: isolated changes coincide (the API server or a busy
    loop delivers two back to back), and writing both costs nothing extra. Only more tell, so both rows
    of the pair wait until ``w.pair_hold`` has passed since the first of them (a P4 start had three rows
    within 10 ms and the next 65 ms later) and until the other's probe has passed. Rows of one moment
    (delivered within ``burst_moment``, or folded in one tick) are such a pair too: the moment counts
    once towards a burst, but a burst behind it must still find its rows unwritten (P4 wrote two rows
    out and back without this)."""
    if entry.probe_until is not None:
        return None
    changed = entry.changed_at
    near = [a for a in damping.arrivals if a != changed and abs(a - changed) <= w.pair_reach]
    if damping.arrivals.count(changed) > 1:
        near.append(changed)  # its moment's first row, and another row joined the moment (``_arrived``)
    if not near:
        return None
    until = max(min(*near, changed) + w.pair_hold, max(near) + w.burst_probe)
    if w.calm_bursts:
        until = min(until, changed + w.cap)  # no wait outlasts the cap (a burst window longer than it)
    return until if until > now else None


def pair_hold_of(window: float, reach: float, *, by_probes: bool, hold_moments: bool) -> float:
    """How long after the first of them the rows of a pair wait: the burst window less the pair's reach
    (``Gate.PAIRS_BY_PROBES``; at least half the window), by which enough moments would have made a burst.

    Less than the whole window, because a pair is mostly isolated changes that a stall delivered back to
    back (P1 at 10,000 models: the 30 s re-read of LiteLLM folds for ~115 ms), and P1 gives each 100 ms;
    a burst shows its moments sooner (P4's starts on this host: four within 15-45 ms). The whole window
    in runs before that gate, half of it in runs before ``Gate.MOMENTS_OF_MANY_ROWS``."""
    if by_probes:
        return max(window - reach, window / 2)
    return window if hold_moments else window / 2


def in_burst(damping: Damping, now: float) -> bool:
    """A burst was seen less than a settle window ago."""
    return damping.burst_until is not None and damping.burst_until >= now


def _still(entry: KeyChurn, now: float, w: Windows) -> bool:
    return now - entry.changed_at >= w.settle and (
        entry.written_at is None or now - entry.written_at >= w.settle
    )


def written(damping: Damping, key: str, write: str, now: float) -> Damping:
    """The planner emitted ``write`` for ``key``."""
    entry = damping.keys.get(key)
    if entry is None:
        return damping
    # Written: nothing waits, probes or bursts for it any more (the defaults); its value and write stay.
    entry = KeyChurn(entry.desired, entry.changed_at, written=write, written_at=now)
    waiting = damping.waiting.delete(key) if key in damping.waiting else damping.waiting
    return evolve(damping, keys=damping.keys.set(key, entry), waiting=waiting)


def write_due(entry: KeyChurn, w: Windows, calm: float | None = None) -> float:
    """When a deferred write may go: still for the settle window, and the cluster calm (``calm``: a
    settle window after a burst was last seen, ``calm_at``), or the cap reached; and a settle window after
    the key's last write. A probed key's write may go when its probe has passed.

    Calm matters when the API server is slow: P4's models, flapping with 99 others through a loaded API
    server, were each still now and then for longer than the settle window (a patch answered after 2-3 s),
    written then, and written back when they flapped on. A burst's rows wait for the burst instead, and
    the cap still bounds the wait."""
    assert entry.unsettled_since is not None
    if entry.probing:
        return entry.probe_until if entry.probe_until is not None else entry.changed_at + w.burst_probe
    settled = entry.changed_at + w.settle if calm is None else max(entry.changed_at + w.settle, calm)
    due = min(settled, entry.unsettled_since + w.cap)
    return due if entry.written_at is None else max(entry.written_at + w.settle, due)


def calm_at(damping: Damping, w: Windows) -> float | None:
    """When the last burst seen will have calmed (None: no burst rule for calm, or none seen)."""
    return damping.burst_until if w.calm_bursts else None


SWEEP_EVERY = 60.0  # seconds between two sweeps of the keys that are still


def due_keys(damping: Damping, now: float, w: Windows) -> tuple[Damping, list[str]]:
    """Keys whose deferred write is due (to plan again); now and then, the keys that are still are
    forgotten."""
    due = [key for key, at in damping.waiting.items() if now >= at]
    if now >= damping.sweep_at:
        keys = damping.keys
        for key, entry in damping.keys.items():
            if entry.deferred_since is None and _still(entry, now, w):
                keys = keys.delete(key)
        damping = evolve(damping, keys=keys, sweep_at=now + SWEEP_EVERY)
    return damping, due


def next_due(damping: Damping, after: float) -> float | None:
    """When the next deferred write, or a waiting rollout or template patch, is due after the tick at
    ``after`` (which planned what was due by then: a write it could not plan stays marked for the next
    tick, and is no reason to tick again at once)."""
    times = [t for t in damping.waiting.values() if t > after]
    if damping.wake_at is not None and damping.wake_at > after:
        times.append(damping.wake_at)
    return min(times) if times else None


def waiting_until(damping: Damping) -> float | None:
    """When the next write, rollout or template patch held back by damping may go (None: none is)."""
    times = list(damping.waiting.values())
    if damping.wake_at is not None:
        times.append(damping.wake_at)
    return min(times) if times else None


def damped(damping: Damping, now: float, w: Windows) -> int:
    """Keys written or changed less than a settle window ago, or with a write waiting."""
    return sum(1 for e in damping.keys.values() if e.deferred_since is not None or not _still(e, now, w))


def churning(damping: Damping) -> bool:
    """Some LiteLLM write is waiting for its key to settle: the catalog it leads to is not final yet."""
    return bool(damping.waiting)


def deferral_reason(entry: KeyChurn, now: float, w: Windows, calm: float | None = None) -> str:
    """Why a write waits, in words (``explain``, the route's record); ``calm``: ``calm_at``."""
    due = write_due(entry, w, calm)
    if entry.probing and entry.probe_until is not None:
        why = (
            f"it changed after being still, and so did another row within {w.pair_reach * 1000:g} ms of "
            f"it; held {w.pair_hold * 1000:g} ms at least, as changes at {w.burst_rows} moments by then "
            "would make it a burst"
        )
    elif entry.probing:
        why = (
            f"it changed after being still; held {w.burst_probe * 1000:g} ms to tell an isolated change "
            "from the start of a burst"
        )
    elif entry.unsettled_since is not None and due == entry.unsettled_since + w.cap:
        why = f"it keeps changing; written at the {w.cap:g} s cap"
    elif calm is not None and due == calm and calm > entry.changed_at + w.settle:
        why = (
            f"rows are changing in a burst (at {w.burst_rows} moments within {w.burst_window:g} s); "
            f"written once none has been seen for {w.settle:g} s"
        )
    elif entry.burst:
        why = (
            f"it changed during a burst (rows changing at {w.burst_rows} moments within "
            f"{w.burst_window:g} s); written once still for {w.settle:g} s"
        )
    else:
        why = (
            f"it changed again within {w.settle:g} s of its last change or write; "
            f"written once still for {w.settle:g} s"
        )
    left = max(0.0, due - now)
    return (
        f"write deferred: {why} (due in {left:.1f} s)"
        if left >= 1
        else (f"write deferred: {why} (due in {left * 1000:.0f} ms)")
    )


# --- rollouts and AgentTemplate patches


def hold_catalog(damping: Damping, now: float, w: Windows) -> Damping:
    """Hold the catalog write while LiteLLM writes wait for their rows to settle (it would be written
    again once they go: the records of the rows flapping change it each time), but no longer than the
    cap. ``catalog_held_since`` is set while held."""
    if churning(damping):
        since = damping.catalog_held_since if damping.catalog_held_since is not None else now
        if now < since + w.cap:
            held = (
                damping if since == damping.catalog_held_since else evolve(damping, catalog_held_since=since)
            )
            return wake_later(held, since + w.cap)
    if damping.catalog_held_since is None:
        return damping
    return evolve(damping, catalog_held_since=None)


def catalog_written(damping: Damping, catalog_hash: str, now: float) -> Damping:
    """Track since when the written catalog has had this hash."""
    if catalog_hash == damping.stable_hash:
        return damping
    return evolve(damping, stable_hash=catalog_hash, stable_since=now, last_done=_recent(damping, now))


def catalog_rendered(damping: Damping, catalog_hash: str, now: float) -> Damping:
    """Track since when the rendered (desired) catalog has had this hash."""
    if catalog_hash == damping.desired_hash:
        return damping
    return evolve(damping, desired_hash=catalog_hash, desired_since=now)


def settled_at(since: float, damping: Damping, w: Windows) -> float:
    """When a catalog stable since ``since`` may be acted on: after the rollout window, and after the
    LiteLLM writes still waiting for their keys to settle (they would change it again), up to the cap."""
    at = since + w.rollout
    if churning(damping):
        at = max(at, min(since + w.cap, *damping.waiting.values()))
    return at


def may_act(damping: Damping, key: str, since: float, now: float, w: Windows) -> float | None:
    """None when ``key`` (a rollout or a template patch) may act now on a catalog stable since
    ``since``, else when it may: at most once per rollout window per key."""
    at = max(settled_at(since, damping, w), damping.last_done.get(key, float("-inf")) + w.rollout)
    return None if now >= at else at


def acted(damping: Damping, key: str, now: float) -> Damping:
    return evolve(damping, last_done=damping.last_done.set(key, now))


def wake_later(damping: Damping, at: float | None) -> Damping:
    """Remember the earliest time a rollout or patch that waits may go (``None``: nothing waits)."""
    if at is None or (damping.wake_at is not None and damping.wake_at <= at):
        return damping
    return evolve(damping, wake_at=at)


def _recent(damping: Damping, now: float) -> PMap[float]:
    """Forget when keys last acted once that no longer limits them (any window is below an hour)."""
    last = damping.last_done
    for key, at in damping.last_done.items():
        if now - at > 3600.0:
            last = last.delete(key)
    return last


def _with(
    damping: Damping, key: str, entry: KeyChurn, w: Windows, *, deferred: int = 0, cancelled: int = 0
) -> Damping:
    waiting = damping.waiting
    if entry.deferred_since is not None:
        waiting = waiting.set(key, write_due(entry, w, calm_at(damping, w)))
    elif key in waiting:
        waiting = waiting.delete(key)
    return evolve(
        damping,
        keys=damping.keys.set(key, entry),
        waiting=waiting,
        deferred_total=damping.deferred_total + deferred,
        cancelled_total=damping.cancelled_total + cancelled,
    )
