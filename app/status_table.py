"""``model-catalog status`` as text: a header line and a ``kubectl get``-style table."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from app.status_view import Item, Status
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


def table(status: Status, now: dt.datetime, *, wide: bool = False) -> list[str]:
    """The lines to print: header, column titles, one row per routes.json record, notes."""
    titles = list(WIDE_COLUMNS if wide else COLUMNS)
    rows = [_row(item, now, wide) for item in status.items]
    lines = [header(status, now), *_aligned([titles, *rows])]
    if not rows:
        lines.append("(routes.json holds no records)")
    lines += [f"note: {one_line(note)}" for note in status.notes]
    return lines


def _aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
