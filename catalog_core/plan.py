"""Planning at each tick: desired state versus observed state -> commands.

Source events only record observations and mark what they touched. A tick
re-derives exactly the touched parts — candidates, shared names, LiteLLM rows,
routes.json records, catalog entries — and emits a command only where desired
and observed differ, nothing is in flight for that key, and the same command is
not already known to have been applied, failed terminally, or be backing off.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from typing import assert_never

from catalog_core import damping as churn
from catalog_core import failing, registry
from catalog_core.commands import (
    READ_COMMANDS,
    Command,
    CreateCatalogPlaceholder,
    EmitKubernetesEvent,
    EvictPod,
    ObjectRef,
    ObserveLiteLLM,
    PatchAgentTemplate,
    ProbeRuntime,
    ReadReason,
    RollWorkload,
    SecretKey,
    SecretWatch,
    WatchSecrets,
    WriteCatalog,
)
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind
from catalog_core.evolve import evolve, evolver
from catalog_core.gates import Gate
from catalog_core.jsonval import Json
from catalog_core.keys import (
    LITELLM_READ_KEY,
    CommandKey,
    CommandKind,
    ItemKey,
    RefKey,
    RefKind,
    agent_template_announcement,
    agent_template_key,
    catalog_key,
    configmap_announcement,
    event_key,
    evict_key,
    failure_announcement,
    is_litellm_key,
    litellm_key,
    recovery_announcement,
    rollout_key,
)
from catalog_core.kinds import rollout_sources_known
from catalog_core.pmap import PMap, empty
from catalog_core.reasons import CURRENT_ROUTE, KEEPS_LAST_GOOD, WRITE_RECOVERED, Reason, RouteState
from catalog_core.rules import health as health_rules
from catalog_core.rules import starts as start_rules
from catalog_core.rules.agent_templates import is_target, template_patch
from catalog_core.rules.entries import entry_for
from catalog_core.rules.litellm_plan import litellm_command
from catalog_core.rules.records import record_for
from catalog_core.rules.render import (
    OversizedCatalog,
    RenderedCatalog,
    render_catalog,
    render_incremental,
    render_within,
)
from catalog_core.rules.resolution import resolve
from catalog_core.rules.rollouts import targets
from catalog_core.sources.agent_template import API_VERSION as AGENT_TEMPLATE_API_VERSION
from catalog_core.sources.catalog_configmap import (
    CONFIGMAP_DATA_LIMIT,
    NO_DEFAULTS,
    HeldDefaults,
    held_defaults,
)
from catalog_core.sources.secret import allowed_by_name
from catalog_core.state import (
    NO_MARKS,
    Candidate,
    CatalogEntry,
    CatalogState,
    Control,
    DesiredRoute,
    LiteLLMView,
    RouteRecord,
    mark,
    mark_all,
    marked,
)
from catalog_core.values import ModelType, logical_name


class _Out:
    """Commands emitted during one tick, and the bookkeeping that keeps re-planning idempotent."""

    def __init__(self, state: CatalogState) -> None:
        self.state = state
        self.commands: list[Command] = []
        self._grouped: list[tuple[str, EmitKubernetesEvent]] | None = None

    def emit(self, key: str, command: Command | None) -> bool:
        """Emit unless pointless now; True when emitted. ``None`` withdraws a queued write for ``key``."""
        control, now = self.state.control, self.state.now
        if command is None:
            queued = control.inflight.get(key)
            if queued is not None and not isinstance(queued, READ_COMMANDS):
                # Desired and observed agree again: a write still queued for this key must not run.
                control = evolve(control, inflight=control.inflight.delete(key))
            if key in control.retries:
                control = evolve(control, retries=control.retries.delete(key))  # re-planned when due
            if control is not self.state.control:
                self.state = evolve(self.state, control=control)
            return False
        if not _admit(control, control.inflight, now, key, command):
            return False
        # The command goes now: a backoff it waited out is spent (its outcome says what comes next).
        retries = control.retries.delete(key) if key in control.retries else control.retries
        control = evolve(control, inflight=control.inflight.set(key, command), retries=retries)
        self.state = evolve(self.state, control=control)
        self.commands.append(command)
        return True

    def not_needed(self, key: str) -> None:
        """Nothing is to be written for ``key`` (desired and observed agree, or there is no target): a
        failure it reported is over and a backoff it waited for is moot."""
        control = self.state.control
        if key in control.retries:
            self.state = evolve(self.state, control=evolve(control, retries=control.retries.delete(key)))
        self.state = failing.recovered(self.state, key)

    def announce(self, key: str, involved: ObjectRef | None, reason: str, message: str) -> None:
        """One Warning Event per distinct problem of an object (the adapter aggregates repeats). Inside
        ``grouped()``, the problems of one object with one reason go out as one Event."""
        if involved is None:
            return
        event = EmitKubernetesEvent(involved, reason, message)
        if self.state.control.announced.get(key) == event.id:
            return
        if self._grouped is not None:
            self._grouped.append((key, event))
            return
        self.send(((key, event),), event)

    @contextlib.contextmanager
    def grouped(self) -> Iterator[None]:
        """Announcements made inside are sent per (object, reason, type), in the order each group first
        appeared: one Event about the many items of one document, with a count and the first messages,
        never one per item (``grouped_message``)."""
        self._grouped = []
        try:
            yield
            groups: dict[tuple[ObjectRef, str, str], list[tuple[str, EmitKubernetesEvent]]] = {}
            for key, event in self._grouped:
                groups.setdefault((event.involved, event.reason, event.event_type), []).append((key, event))
        finally:
            self._grouped = None
        for (involved, reason, event_type), members in groups.items():
            if len(members) == 1:
                self.send(members, members[0][1])
            else:
                message = grouped_message([event.message for _, event in members])
                self.send(members, EmitKubernetesEvent(involved, reason, message, event_type))

    def send(self, members: Sequence[tuple[str, EmitKubernetesEvent]], event: EmitKubernetesEvent) -> None:
        if self.emit(event.key, event):
            announced = self.state.control.announced
            for key, alone in members:  # each problem is announced as it would be alone: a repeat is seen
                announced = announced.set(key, alone.id)
            self.state = evolve(self.state, control=evolve(self.state.control, announced=announced))

    def forget(self, key: str) -> None:
        control = self.state.control
        if key in control.announced:
            control = evolve(control, announced=control.announced.delete(key))
            self.state = evolve(self.state, control=control)

    def retract(self, key: str) -> None:
        """Forget an announcement, and that its Event was written, so the same Event may go again."""
        control = self.state.control
        event_id = control.announced.get(key)
        if event_id is None:
            return
        settled = control.settled.delete(event_key(event_id))
        self.state = evolve(
            self.state, control=evolve(control, announced=control.announced.delete(key), settled=settled)
        )


# An Event about many items of one object names this many of them; the rest are counted.
GROUPED_MESSAGES_SHOWN = 3


def grouped_message(messages: Sequence[str]) -> str:
    """``3 items: a: ...; b: ...; c: ...`` or, past the first few, ``... (and 4997 more)``."""
    shown = list(messages[:GROUPED_MESSAGES_SHOWN])
    more = len(messages) - len(shown)
    text = f"{len(messages)} items: " + "; ".join(shown)
    return text + (f" (and {more} more)" if more else "")


def _admit(control: Control, inflight: PMap[Command] | None, now: float, key: str, command: Command) -> bool:
    """Whether ``command`` for ``key`` is worth emitting now (``inflight``: what is in flight; None when
    nothing is in flight for ``key``)."""
    if not control.leading and not isinstance(command, READ_COMMANDS):
        return False  # a standby keeps planning (its state stays warm) but never writes
    if inflight is not None and (current := inflight.get(key)) is not None and current.id == command.id:
        return False
    if control.settled.get(key) == command.id:
        return False  # already applied; wait until the target is observed again
    # (an empty map is not searched: nothing fails or waits most of the time, and a probe is admitted
    # a few times a minute per runtime)
    failure = control.failures.get(key) if control.failures else None
    if failure is not None and failure.command_id == command.id:
        return False  # failed for good; a change of input gives a new command
    retry = control.retries.get(key) if control.retries else None
    return not (retry is not None and retry.command_id == command.id and now < retry.not_before)


def catalog_inputs_known(state: CatalogState) -> bool:
    for kind in state.waits_for:
        if kind is SourceKind.SECRETS:
            continue
        if not state.source(kind).known:
            return False
    return wanted_secret_names(state) <= state.observed.secrets_scope and state.litellm.status.observed_once


def wanted_secret_names(state: CatalogState) -> frozenset[str]:
    """The Secrets to read: every one referenced, except the master key's (refused without being read)."""
    wanted = state.derived.wanted_secrets
    master = state.config.litellm_master_key_secret
    return wanted - {master} if master in wanted else wanted


_evolve_state = evolver(CatalogState)  # a tick's clock and its probes: the copies of most ticks
_evolve_control = evolver(Control)


def tick(state: CatalogState, now: float, *, busy: float = 0.0) -> tuple[CatalogState, list[Command]]:
    state = _evolve_state(state, now=max(state.now, now))
    if busy > 0:
        windows = churn.Windows.of(state.config)
        state = evolve(state, damping=churn.loop_was_busy(state.damping, state.now, busy, windows))
    state, resend = _due_retries(state)
    state = _due_damped(state)
    state = _due_starts(state)
    wanted_before = state.derived.wanted_secrets
    state = _refresh_candidates(state)
    out = _Out(state)
    # The watch depends on the referenced names only (kept identical while they do not change).
    if state.derived.wanted_secrets is not wanted_before or not state.control.secret_watch:
        _secret_watch(out)
    _probes(out)
    _placeholder(out)
    _reread(out)
    if not out.state.pending.idle and catalog_inputs_known(out.state):
        _routes(out)
        _catalog(out)
        _templates(out)
        _rollouts(out)
        _report_failures(out)
    for command in resend:
        out.emit(command.key, command)
    return out.state, out.commands


def next_deadline(state: CatalogState) -> float | None:
    """When the next tick is due even if no event arrives: a retry's backoff ends, a probe is due, a
    deferred write may go, or a start deadline passes. A retry already due was planned again at the tick
    that found it due (what it waits for now, an answer or a settle window, brings its own event or
    deadline): the loop never sleeps until a past moment."""
    now = state.now
    times = [retry.not_before for retry in state.control.retries.values() if retry.not_before > now]
    damped = churn.next_due(state.damping, state.now)
    if damped is not None:
        times.append(damped)
    for record in state.health.values():
        times.append(
            record.probing_since + health_rules.PROBE_STUCK_SECONDS
            if record.probing_since is not None
            else record.next_probe_at
        )
    times.extend(watch.due for watch in state.starts.values() if not watch.overdue)
    view = state.litellm
    if view.unobserved_since is not None and LITELLM_READ_KEY not in state.control.inflight:
        due = _reread_due(view)
        if due > now:
            times.append(due)
    return min(times) if times else None


def leadership_changed(state: CatalogState, leading: bool) -> CatalogState:
    """A new leader re-plans everything (it may have seen writes it never made); a former leader
    forgets what it had in flight (another replica owns execution now)."""
    control = state.control
    if control.leading == leading:
        return state
    if not leading:
        reads: PMap[Command] = PMap.of(
            (k, c) for k, c in control.inflight.items() if isinstance(c, READ_COMMANDS)
        )
        control = evolve(
            control, leading=False, inflight=reads, retries=empty(), settled=empty(), failing=empty()
        )
        return evolve(state, control=control)
    pending = state.pending
    ids = mark_all(pending.ids, state.litellm.rows)
    ids = mark_all(ids, state.derived.winners)
    records = mark_all(pending.records, state.derived.candidates)
    pending = evolve(pending, ids=ids, records=records, catalog=True, templates=True, rollouts=True)
    control = evolve(control, leading=True, announced=empty())
    return evolve(state, control=control, pending=pending)


def _due_retries(state: CatalogState) -> tuple[CatalogState, list[Command]]:
    """Keys whose backoff has passed are planned again; a Kubernetes Event, which nothing plans anew, is
    sent again as it was."""
    resend: list[Command] = []
    if not state.control.retries:  # most ticks: nothing backs off
        return state, resend
    for key, retry in state.control.retries.items():
        if state.now >= retry.not_before:
            if retry.command is not None:
                resend.append(retry.command)
            else:
                state = mark_key(state, key)
    return state, resend


def _due_damped(state: CatalogState) -> CatalogState:
    """Deferred writes whose key settled (or hit the cap) are planned again; so are rollouts and
    template patches whose wait is over."""
    damping = state.damping
    if not damping.waiting and damping.wake_at is None and state.now < damping.sweep_at:
        return state
    damping, due = churn.due_keys(damping, state.now, churn.Windows.of(state.config))
    if damping.wake_at is not None and state.now >= damping.wake_at:
        damping = evolve(damping, wake_at=None)
        state = evolve(state, pending=evolve(state.pending, rollouts=True, templates=True))
    if damping is not state.damping:
        state = evolve(state, damping=damping)
    for key in due:
        state = mark_key(state, key)
    return state


def _due_starts(state: CatalogState) -> CatalogState:
    """Items whose runtime has been starting for longer than its deadline are derived again (and
    reported)."""
    if not state.starts:
        return state
    starts, items = state.starts, state.pending.items
    for item, watch in state.starts.items():
        if start_rules.falls_due(watch, state.now):
            starts = starts.set(item, start_rules.overdue(watch))
            items = mark(items, item)
    if starts is state.starts:
        return state
    return evolve(state, starts=starts, pending=evolve(state.pending, items=items))


def mark_key(state: CatalogState, key: str) -> CatalogState:
    """Mark the target of a command key for re-planning."""
    parsed = CommandKey.parse(key)
    if parsed is None:
        return state
    pending = state.pending
    match parsed.kind:
        case CommandKind.LITELLM:
            pending = evolve(pending, ids=mark(pending.ids, parsed.last))
        case CommandKind.CATALOG:
            pending = evolve(pending, catalog=True)
        case CommandKind.AGENT_TEMPLATE:
            pending = evolve(pending, templates=True)
        case CommandKind.ROLLOUT | CommandKind.EVICT:
            pending = evolve(pending, rollouts=True)
        case CommandKind.PROBE:
            pending = evolve(pending, items=mark(pending.items, registry.health_item(parsed.last).text))
        case CommandKind.WATCH:
            # The secret watch is planned from its id: forget it so the next tick asks again.
            return evolve(state, control=evolve(state.control, secret_watch=""))
        case CommandKind.EVENT | CommandKind.READ:
            return state  # an Event is sent again as it was; a re-read is planned from the LiteLLM view
        case _:
            assert_never(parsed.kind)
    return evolve(state, pending=pending)


def _index(index: PMap[frozenset[str]], key: str, item: str, add: bool) -> PMap[frozenset[str]]:
    members = index.get(key, frozenset())
    members = members | {item} if add else members - {item}
    return index.set(key, members) if members else index.delete(key)


def _key_withdrawn(candidate: Candidate, kept: DesiredRoute) -> bool:
    """Whether the rules withdrew ``kept``, a last good route with a Secret's key, that ``candidate``'s
    reason would keep: the Secret no longer allows it (rules/candidates)."""
    return (
        candidate.route is None
        and isinstance(kept.api_key, SecretKey)
        and (candidate.reason in KEEPS_LAST_GOOD or candidate.reason is Reason.PENDING)
    )


def _refresh_candidates(state: CatalogState) -> CatalogState:
    if not state.pending.items:
        return state
    d = state.derived
    cands, last_good, by_name, by_id, refs = d.candidates, d.last_good, d.by_name, d.by_id, d.refs
    withdrawn = d.withdrawn
    health = state.health
    p = state.pending
    names, ids, records = p.names, p.ids, p.records
    sticky = Gate.STICKY_RUNTIME_NAMES in state.config.gates
    for item in marked(p.items):
        old = cands.get(item)
        key = ItemKey.parse(item)
        # The start watch first, since the claim reads it: kept while the item's runtime keeps starting,
        # dropped once it is ready, scaled to zero or gone.
        watch = state.starts.get(item)
        started = start_rules.track(watch, registry.start_deadline(state, key), state.now)
        if started is not watch:
            starts = state.starts.set(item, started) if started is not None else state.starts.delete(item)
            state = evolve(state, starts=starts)
        new = registry.claim(state, item)
        if registry.health_gated(key):
            gate = registry.health_key(key)
            tracked = health_rules.track(health.get(gate), new.health_url if new else None, state.now)
            if tracked is None:
                health = health.delete(gate)
            elif tracked is not health.get(gate):
                health = health.set(gate, tracked)
        records = mark(records, item)
        if old == new:
            continue
        for cand, add in ((old, False), (new, True)):
            if cand is None:
                continue
            for ref in cand.refs:
                refs = _index(refs, ref, item, add)
            if cand.route is not None:
                by_name = _index(by_name, cand.route.model_name, item, add)
                by_id = _index(by_id, cand.route.id, item, add)
                names = mark(names, cand.route.model_name)
                ids = mark(ids, cand.route.id)
            elif sticky and registry.sticky_names(cand.source):
                # A runtime claims its name even while withheld: holding it, it keeps it (behaviour §3).
                by_name = _index(by_name, cand.name, item, add)
                names = mark(names, cand.name)
        if new is None:
            cands, last_good = cands.delete(item), last_good.delete(item)
        else:
            cands = cands.set(item, new)
            if new.reason in CURRENT_ROUTE and new.route is not None:
                last_good = last_good.set(item, new.route)
            elif (kept := last_good.get(item)) is not None and _key_withdrawn(new, kept):
                # Not kept any more, so not restored later either: the item publishes again once good.
                withdrawn = withdrawn.set(kept.id, item)
                last_good = last_good.delete(item)
    wanted = d.wanted_secrets
    if refs is not d.refs:
        now_wanted = frozenset(
            parsed.name
            for parsed in map(RefKey.parse, refs)
            if parsed is not None and parsed.kind is RefKind.SECRET
        )
        wanted = wanted if now_wanted == wanted else now_wanted
    return evolve(
        state,
        derived=evolve(
            d,
            candidates=cands,
            last_good=last_good,
            withdrawn=withdrawn,
            by_name=by_name,
            by_id=by_id,
            refs=refs,
            wanted_secrets=wanted,
        ),
        health=health,
        pending=evolve(p, items=NO_MARKS, names=names, ids=ids, records=records),
    )


def secret_watches(state: CatalogState) -> tuple[SecretWatch, ...]:
    """How each wanted Secret is read, in name order (behaviour §1.5). A Secret allowed by its name
    (``ai-model-provider-*``) need not be labelled, so it is read by name; any other is usable only when
    labelled, so the shell's one label-selected watch covers it (``provider_only``). How many by-name
    reads hold a connection at once is the shell's budget, not a decision of the core."""
    return tuple(
        SecretWatch(n, provider_only=not allowed_by_name(n)) for n in sorted(wanted_secret_names(state))
    )


def _secret_watch(out: _Out) -> None:
    state = out.state
    command = WatchSecrets(state.config.namespace, secret_watches(state))
    if command.id != state.control.secret_watch:
        out.state = evolve(state, control=evolve(state.control, secret_watch=command.id))
        out.emit(command.key, command)


def _probes(out: _Out) -> None:
    # Performance: the probes due at one tick (every runtime, every few seconds) update the
    # health records and the in-flight map locally and copy the state once, not twice per probe.
    state = out.state
    now, control = state.now, state.control
    health, inflight = state.health, control.inflight
    for runtime, record in state.health.items():
        if health_rules.probe_due(record, now):
            command = _probe(runtime, record.url)
            key = command.key
            health = health.set(runtime, health_rules.started(record, now))
            # A probe whose answer was lost is not "in flight" forever: the new one replaces it, or
            # nothing is left in flight for the key (one map update, not a delete and then a set).
            if _admit(control, None, now, key, command):
                inflight = inflight.set(key, command)
                out.commands.append(command)
            else:
                inflight = inflight.delete(key)
    if health is not state.health:  # most ticks probe nothing: no copy then
        if inflight is not control.inflight:
            control = _evolve_control(control, inflight=inflight)
        out.state = _evolve_state(state, health=health, control=control)


@functools.lru_cache(maxsize=1024)
def _probe(runtime: str, url: str) -> ProbeRuntime:
    """The probe command of a runtime. Performance: its id is a SHA-256 over its JSON form
    (~20 us), and a runtime is probed every few seconds with the same command, so it is made once."""
    return ProbeRuntime(runtime, url)


def _placeholder(out: _Out) -> None:
    """A missing catalog ConfigMap is created as the bootstrap placeholder while no catalog can be written
    yet (its inputs are not all read: LiteLLM unreachable, a source not listed), so consumers can start, as
    they do where Flux created it; once the inputs are known, ``_catalog`` writes the real one, created or
    not. An existing ConfigMap, whoever wrote it, is never replaced by the placeholder (create only)."""
    state = out.state
    if state.cluster.catalog is not None or not state.control.leading:
        return
    if Gate.CATALOG_PLACEHOLDER not in state.config.gates:
        return
    if not state.source(SourceKind.CATALOG_CONFIGMAP).known or catalog_inputs_known(state):
        return
    command = _placeholder_command(state.config)
    out.emit(command.key, command)


@functools.lru_cache(maxsize=8)
def _placeholder_command(config: CatalogConfig) -> CreateCatalogPlaceholder:
    rendered = render_catalog((), (), config, placeholder=True)
    return CreateCatalogPlaceholder(
        config.namespace, config.catalog_configmap, rendered.data, rendered.catalog_hash, rendered.fingerprint
    )


def _routes(out: _Out) -> None:
    state = out.state
    state, items, names, ids = resolve(state, marked(state.pending.names), marked(state.pending.ids))
    out.state = state
    touched_items = set(items) | set(marked(state.pending.records))
    logical = {logical_name(n) for n in names} | set(marked(state.pending.logical))
    # Rows whose burst probe ends now are planned after the others, so a change arriving in this same
    # tick counts before they decide whether it is a burst (rows planned in id order saw it only when
    # their id sorted after the changed row's: P4 wrote such rows out and back).
    probing = churn.probing_keys(state.damping)
    for rid in sorted(ids, key=lambda rid: (litellm_key(rid) in probing, rid)):
        _litellm(out, rid)
        for item in state.derived.by_id.get(rid, frozenset()):
            touched_items.add(item)
            logical.add(logical_name(state.derived.candidates[item].name))
        row = state.litellm.rows.get(rid)
        if row is not None:
            logical.add(row.logical_name)
    state = out.state  # records read what is in flight now
    records, entries = state.derived.records, state.derived.entries
    changed = chat_changed = False
    with out.grouped():
        for item in sorted(touched_items):
            record = record_for(state, item)
            if record != records.get(item):
                changed = True
                records = records.set(item, record) if record is not None else records.delete(item)
            _announce_record(out, item, record)
    for name in sorted(logical):
        entry = entry_for(state, name)
        old = entries.get(name)
        if entry != old:
            changed = True
            # AgentTemplates list the chat models only: re-plan them (a pass over every chat model)
            # only when one of those changed.
            chat_changed = chat_changed or any(
                e is not None and e.model_type is ModelType.CHAT for e in (entry, old)
            )
            entries = entries.set(name, entry) if entry is not None else entries.delete(name)
    p = out.state.pending
    out.state = evolve(
        out.state,
        derived=evolve(out.state.derived, records=records, entries=entries),
        pending=evolve(
            p,
            names=NO_MARKS,
            ids=NO_MARKS,
            logical=NO_MARKS,
            records=NO_MARKS,
            catalog=p.catalog or changed,
            templates=p.templates or chat_changed,
        ),
    )


def _litellm(out: _Out, rid: str) -> None:
    """The write of one LiteLLM row, unless it must wait for the row to settle (``damping``)."""
    key = litellm_key(rid)
    state = out.state
    command = litellm_command(state, rid)
    item = state.derived.winners.get(rid)
    route = state.derived.candidates[item].route if item is not None else None
    write = command.id if command is not None else churn.HELD
    if rid in state.derived.withdrawn:
        # A key whose right is lost leaves LiteLLM now: write economy never holds a revocation back.
        derived = evolve(state.derived, withdrawn=state.derived.withdrawn.delete(rid))
        damping = churn.written(state.damping, key, write, state.now) if command else state.damping
        out.state = evolve(state, derived=derived, damping=damping)
        out.emit(key, command)
        return
    damping, go = churn.plan_write(
        state.damping,
        key,
        desired=route.spec_hash if route is not None else churn.HELD,
        write=write,
        now=state.now,
        w=churn.Windows.of(state.config),
    )
    if go:
        damping = churn.written(damping, key, write, state.now)
    if damping is not state.damping:
        out.state = evolve(state, damping=damping)
    if command is None:
        out.not_needed(key)
    out.emit(key, command if go else None)


def _announce_record(out: _Out, item: str, record: RouteRecord | None) -> None:
    warnings_key = ItemKey.parse(item).warnings_key()
    if record is not None and record.warnings:
        # Published without the fields it could not use: say so once (behaviour §5.2).
        text = "; ".join(f"{w.field}: {w.message}" for w in record.warnings)
        reason = record.warnings[0].reason.value
        out.announce(warnings_key, registry.warning_target(out.state, item), reason, f"{record.name}: {text}")
    else:
        out.forget(warnings_key)
    if record is None or record.state not in (RouteState.ERROR, RouteState.CONFLICT):
        out.forget(item)
        return
    message = f"{record.name}: {record.message}" if record.message else record.name
    out.announce(item, registry.warning_target(out.state, item), record.reason.value, message)


def all_records(state: CatalogState) -> list[RouteRecord]:
    """routes.json: one record per source item, plus each document source's document while unreadable."""
    return [*state.derived.records.values(), *_document_records(state)]


def _document_records(state: CatalogState) -> tuple[RouteRecord, ...]:
    """The record of each document a source reads its items from, while that document is unreadable."""
    return tuple(
        RouteRecord(
            doc.spec.source.value,
            doc.ref.name,
            doc.ref.name,
            RouteState.ERROR,
            doc.problem.reason,
            doc.problem.message + (" (the last good models stay published)" if doc.keeping else ""),
        )
        for doc in registry.unreadable_documents(state)
    )


def sticky_defaults(state: CatalogState) -> HeldDefaults:
    """The defaults the written catalog holds, which stay while they are published (none without
    ``Gate.STICKY_DEFAULTS``: the first model of each type then)."""
    if Gate.STICKY_DEFAULTS not in state.config.gates:
        return NO_DEFAULTS
    return held_defaults(state.cluster.catalog)


def rendered_catalog(state: CatalogState) -> RenderedCatalog:
    """The catalog ConfigMap's data for ``state``: re-rendered only where entries or records changed
    since the last call (``render_incremental``); ``full_catalog`` is the same, from scratch."""
    d = state.derived
    held = sticky_defaults(state)
    return render_incremental(d.entries, d.records, _document_records(state), state.config, held=held)


def catalog_within(state: CatalogState, limit: int) -> RenderedCatalog | OversizedCatalog:
    """``rendered_catalog``, or ``OversizedCatalog`` (its hash only) when its data exceeds ``limit`` bytes
    (``render_within``): what the plan writes, or says it cannot."""
    d = state.derived
    held = sticky_defaults(state)
    return render_within(d.entries, d.records, _document_records(state), state.config, limit, held=held)


def full_catalog(state: CatalogState) -> RenderedCatalog:
    """``rendered_catalog`` rendered from scratch: the oracle the incremental render is tested against."""
    return render_catalog(
        state.derived.entries.values(),
        all_records(state),
        state.config,
        held=sticky_defaults(state),
    )


def _litellm_in_flight(state: CatalogState) -> bool:
    return any(is_litellm_key(key) for key in state.control.inflight)


# The longest a re-read after writes waits for the writes still in flight, from the tick that first
# found a write unobserved: a long burst is observed every so often, not only at its end.
REREAD_MAX_DELAY = 2.0


def _reread(out: _Out) -> None:
    """Plan the re-read of LiteLLM (``ObserveLiteLLM``), level-triggered from the LiteLLM view: at once
    when a write's answer left something unknown, or when writes were applied that no observation covers
    and none is in flight any more (the catalog waits for this read: LiteLLM fills in a new row's limits);
    while writes are still in flight, once they have waited ``REREAD_MAX_DELAY``. So a burst of writes
    is one read, and a steady state plans none (the observer's periodic resync is its own, as a watch's
    relist is). One read at a time: an observation folded later answers it."""
    state = out.state
    view = state.litellm
    if Gate.PLANNED_LITELLM_READS not in state.config.gates:
        return
    if not view.unobserved_writes and view.unconfirmed is None:
        return
    if view.unobserved_writes and view.unobserved_since is None:
        view = evolve(view, unobserved_since=state.now)
        out.state = state = evolve(state, litellm=view)
    if LITELLM_READ_KEY in state.control.inflight:
        return
    reason = view.unconfirmed
    if reason is None:
        if _litellm_in_flight(state) and state.now < _reread_due(view):
            return  # the deadline (next_deadline) brings the tick that plans it
        reason = ReadReason.AFTER_WRITES
    out.emit(LITELLM_READ_KEY, _observe_litellm(reason))


def _reread_due(view: LiteLLMView) -> float:
    return (view.unobserved_since or 0.0) + REREAD_MAX_DELAY


@functools.lru_cache(maxsize=len(ReadReason))
def _observe_litellm(reason: ReadReason) -> ObserveLiteLLM:
    return ObserveLiteLLM(reason)


def _catalog(out: _Out) -> None:
    state = out.state
    if not state.pending.catalog or _litellm_in_flight(state) or state.litellm.unobserved_writes:
        # LiteLLM writes in flight, or applied but not observed yet (LiteLLM fills in limits), will change
        # what is published: write the catalog once, after them.
        return
    damping = churn.hold_catalog(state.damping, state.now, churn.Windows.of(state.config))
    if damping is not state.damping:
        out.state = state = evolve(state, damping=damping)
    if damping.catalog_held_since is not None:
        return  # LiteLLM writes wait for their rows to settle: write the catalog after them too
    rendered = catalog_within(state, CONFIGMAP_DATA_LIMIT)
    cfg = state.config
    # Rollouts read the catalog only through its hash and fingerprint: re-plan them when those moved.
    moved = (rendered.catalog_hash, rendered.fingerprint) != (
        state.derived.desired_catalog_hash,
        state.derived.desired_catalog_fingerprint,
    )
    out.state = evolve(
        state,
        damping=churn.catalog_rendered(state.damping, rendered.catalog_hash, state.now),
        pending=evolve(state.pending, catalog=False, rollouts=state.pending.rollouts or moved),
        derived=evolve(
            state.derived,
            desired_catalog_hash=rendered.catalog_hash,
            desired_catalog_fingerprint=rendered.fingerprint,
        ),
    )
    unreadable = {doc.spec.item_prefix: doc for doc in registry.unreadable_documents(state)}
    for spec in registry.DOCUMENT_SPECS:
        doc = unreadable.get(spec.item_prefix)
        if doc is not None:
            announcement = configmap_announcement(spec.item_prefix)
            out.announce(announcement, doc.ref, doc.problem.reason.value, doc.problem.message)
        else:
            out.forget(configmap_announcement(spec.item_prefix))
    observed = state.cluster.catalog
    key = catalog_key(cfg.namespace, cfg.catalog_configmap)
    if (
        observed is not None
        and observed.fingerprint == rendered.fingerprint
        and observed.catalog_hash == rendered.catalog_hash
    ):
        out.forget(configmap_announcement("catalog"))
        out.not_needed(key)
        return
    if isinstance(rendered, OversizedCatalog):
        out.not_needed(key)  # not written while too large: CatalogTooLarge says so instead
        # The API server would refuse it: keep the catalog apps already read (LiteLLM still routes the
        # new models) and say why, once, instead of a write that can only fail.
        ref = ObjectRef("v1", "ConfigMap", cfg.namespace, cfg.catalog_configmap, "")
        # No sizes or counts in the text: one Event while it stays too big, not one per change.
        message = (
            f"the catalog no longer fits in one ConfigMap (at most {CONFIGMAP_DATA_LIMIT} bytes of data); "
            "apps keep the last written catalog, LiteLLM routes stay current"
        )
        out.announce(configmap_announcement("catalog"), ref, Reason.CATALOG_TOO_LARGE.value, message)
        return
    out.forget(configmap_announcement("catalog"))
    command = WriteCatalog(
        cfg.namespace, cfg.catalog_configmap, rendered.data, rendered.catalog_hash, rendered.fingerprint
    )
    out.emit(command.key, command)


def _templates(out: _Out) -> None:
    state = out.state
    cfg = state.config
    if not state.pending.templates or state.pending.catalog:
        return  # patch onto the catalog about to stay (its hash is known once it is rendered)
    out.state = evolve(state, pending=evolve(state.pending, templates=False))
    if not cfg.agent_template_sync_enabled or not state.source(SourceKind.AGENT_TEMPLATES).known:
        return
    entries: list[CatalogEntry] | None = None  # built once a patch may go: most ticks only wait
    windows = churn.Windows.of(cfg)
    for name in sorted(state.cluster.templates):
        template = state.cluster.templates[name]
        if not is_target(template, cfg):
            out.not_needed(agent_template_key(cfg.namespace, name))
            continue
        key = agent_template_announcement(name)
        if template.shape_problem is not None:
            ref = ObjectRef(AGENT_TEMPLATE_API_VERSION, "AgentTemplate", cfg.namespace, name, template.uid)
            out.announce(key, ref, Reason.UNEXPECTED_SHAPE.value, f"{name}: {template.shape_problem}")
            continue
        out.forget(key)
        since = out.state.damping.desired_since
        wait = churn.may_act(
            out.state.damping, agent_template_key(cfg.namespace, name), since, state.now, windows
        )
        if wait is not None:
            # The patch is a pass over every chat model: while the catalog is settling, only plan the
            # tick it may go (a change every tick at 10,000 models made it most of each tick's work).
            _wait(out, wait, "templates")
            continue
        if entries is None:
            entries = list(state.derived.entries.values())
        patch = template_patch(template, entries, cfg, sticky_defaults(state).chat)
        if patch is not None:
            command = PatchAgentTemplate(cfg.namespace, name, template.resource_version, Json.of(patch))
            _settled_emit(out, command, since, windows, "templates")
        else:
            out.not_needed(agent_template_key(cfg.namespace, name))


def _rollouts(out: _Out) -> None:
    state = out.state
    if not state.pending.rollouts or state.pending.catalog:
        return  # roll consumers only onto the catalog that is about to stay
    out.state = evolve(state, pending=evolve(state.pending, rollouts=False))
    observed = state.cluster.catalog
    if (
        not state.config.consumer_restart_enabled
        or observed is None
        or not observed.ready
        or not observed.catalog_hash
        or observed.fingerprint != state.derived.desired_catalog_fingerprint
        or not rollout_sources_known(
            lambda kind: state.sources.get(kind.value) is not None, lambda kind: state.source(kind).known
        )
    ):
        return  # roll only onto a catalog that is written and current
    births = state.cluster.pod_birth
    for pod in state.cluster.pods.values():
        if pod.uid not in births:
            births = births.set(pod.uid, state.cluster.initial_catalog_hash or "")
    out.state = evolve(out.state, cluster=evolve(out.state.cluster, pod_birth=births))
    ns = state.config.namespace
    now, windows = state.now, churn.Windows.of(state.config)
    out.state = evolve(
        out.state, damping=churn.catalog_written(out.state.damping, observed.catalog_hash, now)
    )
    for target in targets(out.state):
        if target.current_hash == observed.catalog_hash:
            out.not_needed(
                evict_key(ns, target.name)
                if target.kind == "Pod"
                else rollout_key(ns, target.kind, target.name)
            )
            continue
        if target.kind == "Pod":
            command: Command = EvictPod(ns, target.name, target.uid, observed.catalog_hash)
        else:
            command = RollWorkload(ns, target.kind, target.name, observed.catalog_hash)
        _settled_emit(out, command, out.state.damping.stable_since, windows, "rollouts")


def _report_failures(out: _Out) -> None:
    """A Warning Event on the object a write keeps failing on, and a Normal one once it no longer does
    (a LiteLLM row's failures are told by its items' records instead, and so announced with them)."""
    marks = out.state.pending.failures
    if not marks:
        return
    out.state = evolve(out.state, pending=evolve(out.state.pending, failures=NO_MARKS))
    for key in marked(marks):
        involved = written_object(out.state, key)
        failure = out.state.control.failing.get(key)
        failed, recovered = failure_announcement(key), recovery_announcement(key)
        if failure is not None and failure.reported:
            out.retract(recovered)
            out.announce(failed, involved, failure.reason.value, failure.message)
        elif failure is None and failed in out.state.control.announced:
            out.retract(failed)
            message = "the write that failed succeeds again, or is no longer needed"
            if involved is not None:
                event = EmitKubernetesEvent(involved, WRITE_RECOVERED, message, "Normal")
                out.send(((recovered, event),), event)


def written_object(state: CatalogState, key: str) -> ObjectRef | None:
    """The Kubernetes object a command key writes (None: a LiteLLM row, an Event, a read)."""
    parsed = CommandKey.parse(key)
    if parsed is None:
        return None
    cluster = state.cluster
    match parsed.kind:
        case CommandKind.CATALOG:
            namespace, name = parsed.parts
            return ObjectRef("v1", "ConfigMap", namespace, name, "")
        case CommandKind.AGENT_TEMPLATE:
            namespace, name = parsed.parts
            template = cluster.templates.get(name)
            uid = template.uid if template is not None else ""
            return ObjectRef(AGENT_TEMPLATE_API_VERSION, "AgentTemplate", namespace, name, uid)
        case CommandKind.ROLLOUT:
            namespace, kind, name = parsed.parts
            workload = cluster.workloads.get(f"{kind}/{name}")
            return ObjectRef("apps/v1", kind, namespace, name, workload.uid if workload is not None else "")
        case CommandKind.EVICT:
            namespace, name = parsed.parts
            pod = cluster.pods.get(name)
            return ObjectRef("v1", "Pod", namespace, name, pod.uid if pod is not None else "")
        case (
            CommandKind.LITELLM | CommandKind.EVENT | CommandKind.PROBE | CommandKind.WATCH | CommandKind.READ
        ):
            return None
        case _:
            assert_never(parsed.kind)


def _wait(out: _Out, at: float, flag: str) -> None:
    """Plan the rollouts or template patches (``flag``) again at ``at``."""
    state = out.state
    out.state = evolve(
        state,
        damping=churn.wake_later(state.damping, at),
        pending=(
            evolve(state.pending, rollouts=True)
            if flag == "rollouts"
            else evolve(state.pending, templates=True)
        ),
    )


def _settled_emit(out: _Out, command: Command, since: float, windows: churn.Windows, flag: str) -> None:
    """Emit a rollout or template patch only onto a catalog stable since ``since`` for its window, at
    most once per window per target; otherwise plan it again when it may go."""
    state = out.state
    current = state.control.inflight.get(command.key)
    if current is not None and current.id == command.id:
        return  # already on its way
    wait = churn.may_act(state.damping, command.key, since, state.now, windows)
    if wait is not None:
        _wait(out, wait, flag)
        return
    if out.emit(command.key, command):
        out.state = evolve(out.state, damping=churn.acted(out.state.damping, command.key, state.now))
