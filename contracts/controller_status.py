"""The leader's health report on its Lease: the conditions that stop or limit publishing right now.

The leading replica writes one annotation on the ``coordination.k8s.io`` Lease it renews (every retry
period, so the report costs no write of its own and is as fresh as the Lease):

    ai-appliance.io/controller-status: {"conditions": [{"type": "LiteLLMUnreachable", "subject": "litellm",
                                        "message": "unreachable: ...", "since": "2026-12-04T05:34:06Z"}]}

An empty list is a healthy report; no annotation means no report (a controller that does not write one,
or leader election off). ``model-catalog status`` reads it with ``get`` on the Lease, which
``deploy/status-reader`` already allows. Readers ignore keys they do not know and show condition types
they do not know as they are. The appliance's consumers read the catalog ConfigMap, never the Lease, so
the report changes nothing they read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import orjson

ANNOTATION = "ai-appliance.io/controller-status"
MAX_CONDITIONS = 32  # one per source, LiteLLM and the catalog fit many times over
MAX_MESSAGE = 300  # a Lease is read every renewal: keep it small whatever a detail holds


@attrs.frozen
class ReportedCondition:
    type: str
    subject: str
    message: str
    since: str | None = None  # RFC 3339, when this replica first saw it

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "subject": self.subject, "message": self.message}
        if self.since is not None:
            out["since"] = self.since
        return out


def encode(conditions: Iterable[ReportedCondition]) -> str:
    listed = [
        attrs.evolve(c, message=_shorten(c.message)).as_json() for c in list(conditions)[:MAX_CONDITIONS]
    ]
    return orjson.dumps({"conditions": listed}, option=orjson.OPT_SORT_KEYS).decode()


def _shorten(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


class ReportUnreadableError(ValueError):
    """The annotation is there but not a report this reader understands (the message says why)."""


def decode(annotations: Mapping[str, Any]) -> tuple[ReportedCondition, ...] | None:
    """The conditions of a Lease's annotations; None when there is no report. Raises
    ``ReportUnreadableError`` for an annotation that is not one (someone else's edit, a newer format)."""
    text = annotations.get(ANNOTATION)
    if text is None:
        return None
    try:
        doc = orjson.loads(text) if isinstance(text, str) else None
    except orjson.JSONDecodeError:
        doc = None
    listed = doc.get("conditions") if isinstance(doc, Mapping) else None
    if not isinstance(listed, list):
        raise ReportUnreadableError(f"annotation {ANNOTATION} holds no conditions array")
    out = []
    for entry in listed:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("type"), str):
            raise ReportUnreadableError(f"annotation {ANNOTATION} holds a condition without a type")
        since = entry.get("since")
        out.append(
            ReportedCondition(
                type=entry["type"],
                subject=_text(entry.get("subject")),
                message=_text(entry.get("message")),
                since=since if isinstance(since, str) else None,
            )
        )
    return tuple(out)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
