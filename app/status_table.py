"""``model-catalog status`` as text: a header line, one line per problem, a ``kubectl get``-style table
and why each item in error or conflict is; ``status MODEL`` answers for one model instead."""

from __future__ import annotations

import datetime as dt
import difflib
from collections.abc import Sequence

from app.status_view import Item, Problem, Status
from app.terminal import one_line

COLUMNS = ("MODEL", "SOURCE", "STATE", "REASON", "ROUTES", "SINCE")
WIDE_COLUMNS = (*COLUMNS, "NAME", "ID", "API-BASE", "MESSAGE")


def age(seconds: float) -> str:
    """kubectl's short age: 45s, 12m, 3h, 2d."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 2 * 3600:
        return f"{seconds // 60}m"
    if seconds < 2 * 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _when(value: dt.datetime | None, now: dt.datetime) -> str:
    if value is None:
        return "never"
    return f"{value.strftime('%Y-%m-%dT%H:%M:%SZ')} ({age((now - value).total_seconds())} ago)"


def header(status: Status, now: dt.datetime) -> str:
    ready = "" if status.ready else " (not ready: bootstrap placeholder)"
    leader = status.leader
    if leader.problem:
        holder = f"unknown ({leader.problem})"
    elif not leader.holder:
        holder = "none"
    elif leader.expired(now):
        assert leader.renewed is not None
        holder = f"none ({leader.holder}'s lease expired, last renewed {_when(leader.renewed, now)})"
    else:
        renewed = f", renewed {age((now - leader.renewed).total_seconds())} ago" if leader.renewed else ""
        holder = f"{leader.holder}{renewed}"
    failing = len(status.failing)
    counts = f"{len(status.items)} items, {failing} in error or conflict"
    return one_line(
        f"catalog {status.catalog_hash or '?'}{ready}  written {_when(status.written, now)}  "
        f"leader {holder}  {counts}"
    )


def _since(item: Item, now: dt.datetime) -> str:
    if item.since is None:
        return "?"
    text = age((now - item.since).total_seconds())
    # Without a watch we know only that the state held when the catalog was written: at least this long.
    return text if item.since_exact else f">={text}"


def _row(item: Item, now: dt.datetime, wide: bool) -> list[str]:
    cells = [
        item.logical_name or item.name,
        item.source,
        item.state,
        item.reason,
        "+".join(item.routes) or "-",
        _since(item, now),
    ]
    if wide:
        cells += [item.name, item.id or "-", item.api_base_host or "-", item.message or "-"]
    return [one_line(cell) for cell in cells]


def problem_line(problem: Problem, now: dt.datetime) -> str:
    since = f" (since {_when(problem.since, now)})" if problem.since is not None else ""
    consequence = f"; {problem.consequence}" if problem.consequence else ""
    subject = f" {problem.subject}" if problem.subject else ""
    return one_line(f"problem: {problem.type}{subject}: {problem.message}{since}{consequence}")


def _why(item: Item) -> str:
    why = item.message or item.reason
    last_good = " (LiteLLM keeps serving its last good route)" if item.serving_last_good else ""
    return one_line(f"  {item.logical_name or item.name} ({item.source}/{item.name}): {why}{last_good}")


def table(
    status: Status, now: dt.datetime, *, wide: bool = False, items: Sequence[Item] | None = None
) -> list[str]:
    """The lines to print: header, problems, column titles, one row per routes.json record (``items``:
    those a filter kept), why each one in error or conflict is, notes."""
    shown = status.items if items is None else tuple(items)
    titles = list(WIDE_COLUMNS if wide else COLUMNS)
    rows = [_row(item, now, wide) for item in shown]
    lines = [header(status, now), *(problem_line(p, now) for p in status.problems(now))]
    lines += _aligned([titles, *rows])
    if not rows:
        lines.append("(routes.json holds no records)" if items is None else "(no record matches)")
    failing = [item for item in shown if item.failing]
    if failing and not wide:  # wide has a MESSAGE column
        lines.append("why:")
        lines += [_why(item) for item in failing]
    lines += [f"note: {one_line(note)}" for note in status.notes]
    return lines


def matching(status: Status, model: str) -> tuple[Item, ...]:
    """The records of ``model``: by item name or logical name."""
    return tuple(item for item in status.items if model in (item.name, item.logical_name))


def published(items: Sequence[Item]) -> bool:
    """The model is published, and no claim on it is in error or conflict."""
    return any(item.state == "published" for item in items) and not any(item.failing for item in items)


def model_view(status: Status, now: dt.datetime, models: Sequence[str]) -> list[str]:
    """``status MODEL``: is each model published, and if not, why; the problems that stop publishing."""
    lines = [header(status, now), *(problem_line(p, now) for p in status.problems(now))]
    for model in models:
        items = matching(status, model)
        if not items:
            known = sorted({i.logical_name or i.name for i in status.items} | {i.name for i in status.items})
            close = difflib.get_close_matches(model, known, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            lines.append(
                one_line(
                    f"{model}: not published: no source item has this name or logical name "
                    f"(routes.json holds {len(status.items)} records){hint}"
                )
            )
            continue
        verdict = "published" if published(items) else "NOT published"
        if published(items) and status.problems(now):
            verdict += ", but the problems above stop changes to it from being published"
        lines.append(one_line(f"{model}: {verdict}"))
        for item in items:
            lines.append(
                one_line(
                    f"  {item.source}/{item.name}: {item.state} ({item.reason}), since {_since(item, now)}"
                )
            )
            if item.message:
                lines.append(one_line(f"    why: {item.message}"))
            if item.serving_last_good:
                lines.append("    LiteLLM keeps serving its last good route until the input is fixed")
            lines += [one_line(f"    warning: {warning}") for warning in item.warnings]
            route = "+".join(item.routes) or "none"
            lines.append(
                one_line(
                    f"    routes: {route}   LiteLLM id: {item.id or '-'}   api_base host: "
                    f"{item.api_base_host or '-'}"
                )
            )
            lines += [one_line(f"    {key}: {value}") for key, value in item.extra]
    lines += [f"note: {one_line(note)}" for note in status.notes]
    return lines


def _aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
