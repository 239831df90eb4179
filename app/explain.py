"""``model-catalog explain LOG MODEL``: the story of one model in a recorded run.

The log is replayed (as ``replay`` does) and, at every step, the model's
published state is compared before and after: its ``routes.json`` records, the
catalog entry of its logical name, the LiteLLM rows under its name, and each
source item's claim (candidate) to it. A step that changed any of these is
told, with the reason codes, the events since the previous tick that touched
the model (the causes; planning itself happens on ticks), and the commands
issued for it: LiteLLM writes whose model name or id is its, catalog writes
that changed its entry or its routes.json records, its health probes and
Kubernetes Events. The story ends with its final state and why.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import IO, Any

import attrs

from adapters.eventlog.reader import DEFAULT_MAX_LINE_BYTES, LogReadError
from app.deferrals import deferral_lines
from app.replayer import (
    EXIT_OK,
    Notice,
    SnapshotSeen,
    Step,
    command_streams,
    describe_command,
    describe_event,
    reading,
    unreadable,
)
from catalog_core import registry
from catalog_core.commands import (
    Command,
    CreateLiteLLMModel,
    DeleteLiteLLMModel,
    EmitKubernetesEvent,
    ObjectRef,
    ProbeRuntime,
    RecreateLiteLLMModel,
    UpdateLiteLLMModel,
    WriteCatalog,
)
from catalog_core.events import CommandCompleted, RuntimeProbed, Ticked
from catalog_core.keys import is_litellm_key
from catalog_core.reasons import Reason, RouteState
from catalog_core.sources.litellm_row import LiteLLMRow
from catalog_core.state import Candidate, CatalogEntry, CatalogState, RouteRecord, marked
from catalog_core.values import logical_name
from contracts import eventlog as wire

EXIT_NOT_FOUND = 1

# What each reason code means for a model (behaviour §7), in one sentence.
REASON_TEXT: dict[Reason, str] = {
    Reason.PUBLISHED: "it is published: LiteLLM holds its route and the catalog lists it",
    Reason.SCALES_FROM_ZERO: "it is published whether or not a replica is ready: KubeAI starts one when a "
    "request arrives (the Model scales from zero), so a request may wait for a cold start",
    Reason.NOT_READY: "its runtime is not ready (KubeAI status.replicas.ready, or the Deployment's gates)",
    Reason.HEALTH_CHECK_PENDING: "its runtime is ready but has not yet answered a health probe successfully",
    Reason.HEALTH_CHECK_FAILED: "its runtime failed two health probes in a row, so the route was withdrawn",
    Reason.DISABLED: "its definition is disabled (enabled: false)",
    Reason.DELETING: "its ModelActivation is being deleted",
    Reason.PENDING: "its route is waiting: LiteLLM has not confirmed it yet, or a Secret has not been read",
    Reason.ACTIVATION_NOT_FOUND: "the ModelActivation its runtime points to does not exist",
    Reason.ACTIVATION_DISABLED: "the ModelActivation its runtime points to is disabled",
    Reason.ENDPOINT_NOT_FOUND: "its runtime has no endpoint annotation and no Service of the same name",
    Reason.INVALID_JSON: "models.json is not valid JSON; the last good definitions stay published",
    Reason.INVALID_FIELD: "a field of its definition has an invalid value; the last good route stays",
    Reason.MISSING_FIELD: "its definition lacks a required field; the last good route stays",
    Reason.SECRET_NOT_FOUND: "the Secret holding its API key does not exist; the last good route stays",
    Reason.SECRET_KEY_NOT_FOUND: "the Secret exists but lacks the referenced key; the last good route stays",
    Reason.SECRET_NOT_ALLOWED: "the Secret is not on the model-provider allow-list (label or name), or it "
    "holds the LiteLLM master key or a ServiceAccount token: no source may use it",
    Reason.SECRET_VALUE_INVALID: "the Secret's value is empty or not UTF-8 text; the last good route stays",
    Reason.INLINE_KEY_REJECTED: "a ModelActivation may not carry an inline API key (use apiKeySecretRef)",
    Reason.ENV_REFERENCE_REJECTED: "a value starts with os.environ/, which LiteLLM would read from its own "
    "environment: never published; the last good route stays",
    Reason.NESTED_TOO_DEEPLY: "the object is nested deeper than the controller reads; the last good route "
    "stays",
    Reason.UNTRUSTED_ENDPOINT: "its endpoint is not an in-cluster Service URL: neither probed nor published",
    Reason.LITELLM_REJECTED: "LiteLLM rejected the write for good; it is retried when the input changes",
    Reason.LITELLM_UNAUTHORIZED: "LiteLLM refused the master key; writes resume once it is accepted again",
    Reason.UNEXPECTED_SHAPE: "the object has an unexpected shape and is left alone",
    Reason.CATALOG_TOO_LARGE: "the catalog outgrew one ConfigMap (1 MiB): apps keep the last written catalog",
    Reason.KUBEAI_NOT_INSTALLED: "its ModelActivation's engine runs on KubeAI, which is not installed (no "
    "models.kubeai.org CRD): it is served once KubeAI is installed and its Model is ready",
    Reason.START_DEADLINE_EXCEEDED: "it scales from zero and its pods have been starting for longer than "
    "CATALOG_KUBEAI_START_DEADLINE_SECONDS with none ready: its route stays, requests wait for KubeAI",
    Reason.CONFLICT: "another source publishes the same name and wins (ModelActivation > ConfigMap > local)",
    Reason.DUPLICATE_NAME: "models.json defines the name twice; the last definition counts",
    Reason.ID_COLLISION: "another item's route has the same LiteLLM id",
    Reason.ID_TAKEN: "the LiteLLM id is taken by a row the catalog does not own, which it never touches",
}


@attrs.frozen
class View:
    """Everything about one model that can be published, at one moment."""

    records: tuple[tuple[str, RouteRecord], ...] = ()
    entry: CatalogEntry | None = None
    rows: tuple[tuple[str, LiteLLMRow], ...] = ()
    claims: tuple[tuple[str, Candidate], ...] = ()
    document: str | None = None  # the problem of ConfigMap/ai-external-models, for a model defined there

    @property
    def empty(self) -> bool:
        return not (self.records or self.entry or self.rows or self.claims)

    def ids(self) -> set[str]:
        out = {rid for rid, _ in self.rows}
        out.update(r.id for _, r in self.records if r.id)
        out.update(c.route.id for _, c in self.claims if c.route is not None)
        return out


class _Model:
    def __init__(self, name: str) -> None:
        self.name = name
        self.logical = logical_name(name)

    def matches(self, name: str) -> bool:
        return name in (self.name, self.logical) or logical_name(name) == self.name

    def view(self, state: CatalogState) -> View:
        records = tuple(
            sorted(
                (item, r)
                for item, r in state.derived.records.items()
                if self.matches(r.name) or r.logical_name == self.name
            )
        )
        entry = state.derived.entries.get(self.name) or state.derived.entries.get(self.logical)
        rows = tuple(
            sorted(
                (rid, row)
                for rid, row in state.litellm.rows.items()
                if self.matches(row.model_name) or row.logical_name == self.name
            )
        )
        claims = tuple(
            sorted((item, c) for item, c in state.derived.candidates.items() if self.matches(c.name))
        )
        document = None
        problem = next((p for item, _ in claims if (p := registry.document_problem(state, item))), None)
        if problem is not None:
            document = f"{problem.reason.value} ({problem.message})"
        return View(records, entry, rows, claims, document)

    def item_relevant(self, state: CatalogState, item: str) -> bool:
        cand = state.derived.candidates.get(item)
        if cand is not None and self.matches(cand.name):
            return True
        name = registry.published_name(state, item)
        return name is not None and self.matches(name)


def _record_text(record: RouteRecord | None) -> str:
    if record is None:
        return "(none)"
    text = f"{record.state.value} {record.reason.value}"
    if record.message:
        text += f" ({record.message})"
    if record.serving_last_good:
        text += " [the last good route stays published]"
    return text


def _routes_text(entry: CatalogEntry) -> str:
    return ", ".join(
        f"order {r.order if r.order is not None else '-'} {r.locality} {r.owner}" for r in entry.routes
    )


def _entry_text(entry: CatalogEntry | None) -> str:
    if entry is None:
        return "(not in the catalog)"
    limits = "".join(
        f" {k}={v}"
        for k, v in (("contextWindow", entry.context_window), ("maxOutputTokens", entry.max_output_tokens))
        if v is not None
    )
    aliases = f" aliases={','.join(entry.aliases)}" if entry.aliases else ""
    return (
        f"{entry.model_type.value} via {entry.litellm_model}{limits}; routes: {_routes_text(entry)}{aliases}"
    )


def _row_text(row: LiteLLMRow) -> str:
    owner = row.owner or (
        "model-catalog (legacy row)" if row.ours else "none (not the catalog's: never touched)"
    )
    order = f", order {row.order}" if row.order is not None else ""
    return f"{row.model_name} owner {owner}{order}, {row.locality}"


def _claim_text(cand: Candidate) -> str:
    route = f" route {cand.route.id} spec {cand.route.spec_hash}" if cand.route is not None else " no route"
    message = f" ({cand.message})" if cand.message else ""
    return f"{cand.reason.value}{message};{route}"


def changes(before: View, after: View) -> list[str]:
    """What differs between two views, one line each."""
    out: list[str] = []

    def pairs(a: Iterable[tuple[str, Any]], b: Iterable[tuple[str, Any]]) -> list[tuple[str, Any, Any]]:
        da, db = dict(a), dict(b)
        return [(k, da.get(k), db.get(k)) for k in sorted(da.keys() | db.keys()) if da.get(k) != db.get(k)]

    for item, old, new in pairs(before.claims, after.claims):
        if (
            old is not None
            and new is not None
            and (old.reason, old.message, old.route)
            == (
                new.reason,
                new.message,
                new.route,
            )
        ):
            continue
        old_text = _claim_text(old) if old else "(none)"
        out.append(f"claim {item}: {old_text} -> {_claim_text(new) if new else '(none)'}")
    if before.document != after.document:
        cm = "ConfigMap ai-external-models"
        if after.document is None:
            out.append(f"{cm} is readable again")
        else:
            out.append(f"{cm}: {after.document}; the last good definitions stay published")
    for item, old, new in pairs(before.records, after.records):
        out.append(f"routes.json {item}: {_record_text(old)} -> {_record_text(new)}")
    if before.entry != after.entry:
        if before.entry is None:
            out.append(f"catalog entry added: {_entry_text(after.entry)}")
        elif after.entry is None:
            out.append("catalog entry removed")
        else:
            out.append(f"catalog entry changed: {_entry_text(after.entry)}")
    for rid, old, new in pairs(before.rows, after.rows):
        if old is None:
            out.append(f"LiteLLM row {rid} appeared: {_row_text(new)}")
        elif new is None:
            out.append(f"LiteLLM row {rid} is gone")
        else:
            out.append(f"LiteLLM row {rid} changed: {_row_text(new)}")
    return out


def _catalog_part(
    command: WriteCatalog, model: _Model, document: tuple[str, ObjectRef] | None
) -> tuple[Any, Any]:
    """The model's catalog.json entry and routes.json records in a catalog write (with the record of
    the ``document`` (its source, its object) the model is defined in, if it is)."""
    data = dict(command.data)
    try:
        models = json.loads(data.get("catalog.json", "{}")).get("models", [])
        routes = json.loads(data.get("routes.json", "[]"))
    except (ValueError, AttributeError):
        return None, None
    entry = next((m for m in models if m.get("id") in (model.name, model.logical)), None)
    records = [
        r
        for r in routes
        if model.matches(str(r.get("name", "")))
        or r.get("logicalName") == model.name
        or (document is not None and r.get("source") == document[0] and r.get("name") == document[1].name)
    ]
    return entry, records


@attrs.frozen
class Chapter:
    seq: int
    event: str
    event_type: str
    causes: tuple[tuple[int, str], ...]
    changes: tuple[str, ...]
    commands: tuple[tuple[str, str, Command], ...]  # (tag, text, command)

    def as_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "event": self.event,
            "event_type": self.event_type,
            "causes": [{"seq": s, "event": e} for s, e in self.causes],
            "changes": list(self.changes),
            "commands": wire.unstructure_commands(c for _, _, c in self.commands),
        }


class Story:
    """Follows one model through the steps of a replay."""

    def __init__(self, name: str) -> None:
        self.model = _Model(name)
        self.view = View()
        self.seen = False
        self.causes: list[tuple[int, str]] = []
        self.catalog: tuple[Any, Any] = (None, [])  # its part of the last catalog written
        self.keys: set[str] = set()  # command keys issued for the model, to follow their outcomes
        self.state: CatalogState | None = None
        self.last_seq = 0

    def _view(self, step: Step) -> View:
        b, a = step.before, step.after
        if (
            a.derived.records is b.derived.records
            and a.derived.entries is b.derived.entries
            and a.litellm.rows is b.litellm.rows
            and a.derived.candidates is b.derived.candidates
            and a.observed.external_problem is b.observed.external_problem
        ):
            return self.view
        return self.model.view(a)

    def _relevant(self, command: Command, ids: set[str], state: CatalogState, view: View) -> bool:
        m = self.model
        # the document the model is defined in, if it is (its ConfigMap, and the source of its own record)
        document = next(
            (
                (spec.source.value, ref)
                for item, _ in view.claims
                if (ref := registry.document_of(state, item)) and (spec := registry.spec_of(item))
            ),
            None,
        )
        if isinstance(command, CreateLiteLLMModel | UpdateLiteLLMModel | RecreateLiteLLMModel):
            return m.matches(command.model_name) or command.model_id in ids
        if isinstance(command, DeleteLiteLLMModel):
            return command.model_id in ids
        if isinstance(command, ProbeRuntime):
            return m.item_relevant(state, registry.health_item(command.runtime).text)
        if isinstance(command, EmitKubernetesEvent):
            return (
                m.matches(command.involved.name)
                or command.message.startswith(f"{m.name}:")
                or (
                    document is not None
                    and command.involved.kind == document[1].kind
                    and command.involved.name == document[1].name
                )
            )
        if isinstance(command, WriteCatalog):
            part = _catalog_part(command, m, document)
            if part == self.catalog:
                return False
            self.catalog = part
            return True
        return False

    def _touches(self, step: Step) -> bool:
        """Whether a non-tick event concerns the model (marks it for planning, or answers its command)."""
        event, before, after = step.event, step.before, step.after
        if isinstance(event, CommandCompleted):
            return event.key in self.keys
        if isinstance(event, RuntimeProbed):
            return self.model.item_relevant(after, registry.health_item(event.runtime).text)
        already = set(marked(before.pending.items))
        new_items = [i for i in marked(after.pending.items) if i not in already]
        return any(
            self.model.item_relevant(after, i) or self.model.item_relevant(before, i) for i in new_items
        )

    def follow(self, step: Step) -> Chapter | None:
        view = self._view(step)
        ids = view.ids() | self.view.ids()
        said = changes(self.view, view) + deferral_lines(step.before, step.after, ids, step.commands)
        issued = tuple(
            (wire.COMMAND_TAGS[type(c)], describe_command(c), c)
            for c in step.commands
            if self._relevant(c, ids, step.after, view)
        )
        for _, _, c in issued:
            if is_litellm_key(c.key):
                self.keys.add(c.key)
        self.view = view
        self.state = step.after
        self.last_seq = step.seq
        if not view.empty or issued:
            self.seen = True
        tag = wire.EVENT_TAGS[type(step.event)]
        if not isinstance(step.event, Ticked) and not said and self._touches(step):
            self.causes.append((step.seq, describe_event(step.event)))
            return None
        if not said and not issued:
            return None
        causes = tuple(self.causes) if isinstance(step.event, Ticked) else ()
        if isinstance(step.event, Ticked):
            self.causes = []
        return Chapter(step.seq, describe_event(step.event), tag, causes, tuple(said), issued)

    def final(self) -> dict[str, Any]:
        view = self.view
        published = [
            item for item, r in view.records if r.state is RouteState.PUBLISHED or r.serving_last_good
        ]
        reasons = sorted({r.reason for _, r in view.records}, key=lambda r: r.value)
        why = [f"{r.value}: {REASON_TEXT.get(r, r.value)}" for r in reasons]
        if view.entry is not None and not published:
            owners = sorted({r.owner for r in view.entry.routes})
            why.append(f"the catalog lists it through rows the catalog does not own ({', '.join(owners)})")
        if view.document is not None:
            why.append(f"ConfigMap ai-external-models is unreadable: {view.document}")
        if not view.records and view.entry is None:
            why.append("no source defines it now, and no LiteLLM row carries it")
        return {
            "after_seq": self.last_seq,
            "published": view.entry is not None,
            "records": {item: r.as_json() for item, r in view.records},
            "entry": _entry_text(view.entry) if view.entry is not None else None,
            "rows": {rid: _row_text(row) for rid, row in view.rows},
            "why": why,
        }


def run(
    path: str,
    model: str,
    *,
    until: int | None = None,
    as_json: bool = False,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> int:
    with command_streams(path, out, err) as streams:
        progress, out, err = streams
        story = Story(model)
        names: set[str] = set()
        try:
            replayer = reading(path, progress, until=until, max_line_bytes=max_line_bytes)
            title = (
                f"{model} in {path} (run {replayer.header.run}, "
                f"model-catalog {replayer.header.service_version})"
            )
            for item in replayer:
                if isinstance(item, Notice):
                    print(f"note: {item.message}", file=err)
                    continue
                if isinstance(item, SnapshotSeen):
                    continue
                chapter = story.follow(item)
                after, before = item.after, item.before
                if (
                    after.derived.records is not before.derived.records
                    or after.litellm.rows is not before.litellm.rows
                ):
                    names.update(r.name for r in after.derived.records.values())
                    names.update(row.model_name for row in after.litellm.rows.values())
                if chapter is None:
                    continue
                if as_json:
                    print(wire.dumps(chapter.as_json()).decode(), file=out)
                else:
                    if title:
                        print(title, file=out)
                        title = ""
                    _print_chapter(chapter, out)
        except (LogReadError, wire.LogFormatError) as exc:
            return unreadable(exc, path, err)
        if not story.seen:
            known = ", ".join(sorted(names)) or "(none)"
            print(f"model-catalog: {model} never appears in {path}; models seen: {known}", file=err)
            return EXIT_NOT_FOUND
        final = story.final()
        if as_json:
            print(wire.dumps({"final": final}).decode(), file=out)
        else:
            _print_final(final, out)
        return EXIT_OK


def _print_chapter(chapter: Chapter, out: IO[str]) -> None:
    for seq, text in chapter.causes:
        print(f"  seq {seq}: {text}", file=out)
    print(f"seq {chapter.seq}: {chapter.event}", file=out)
    for line in chapter.changes:
        print(f"    {line}", file=out)
    for tag, text, _ in chapter.commands:
        print(f"    -> {tag} {text}", file=out)


def _print_final(final: dict[str, Any], out: IO[str]) -> None:
    state = "published" if final["published"] else "not published"
    print(f"final state (after seq {final['after_seq']}): {state}", file=out)
    for item, record in final["records"].items():
        message = f" ({record['message']})" if record.get("message") else ""
        print(f"    routes.json {item}: {record['state']} {record['reason']}{message}", file=out)
    if final["entry"] is not None:
        print(f"    catalog entry: {final['entry']}", file=out)
    for rid, text in final["rows"].items():
        print(f"    LiteLLM row {rid}: {text}", file=out)
    for line in final["why"]:
        print(f"    why: {line}", file=out)
