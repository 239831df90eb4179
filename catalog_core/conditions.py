"""What stops or limits publishing right now, read from the state: the controller's own health.

The leading replica publishes these conditions on its Lease (``app/health.py``) for ``model-catalog
status``, which cannot ask LiteLLM or the watches itself. Each condition names its subject (a source
kind, ``litellm`` or ``catalog``, or the object a failing write is to) and says why in the words the
state holds; ``CONSEQUENCE`` says what it means for publishing, for every type (a type without one fails
``tests/core/test_conditions.py``).
"""

from __future__ import annotations

from enum import StrEnum

import attrs

from catalog_core.events import SourceKind
from catalog_core.keys import CommandKey, CommandKind, is_litellm_key
from catalog_core.plan import written_object
from catalog_core.rules.render import OversizedCatalog
from catalog_core.sources.catalog_configmap import CONFIGMAP_DATA_LIMIT
from catalog_core.state import CatalogState, SourceState, SourceStatus, WriteFailure


class ConditionType(StrEnum):
    WAITING_FOR_SOURCES = "WaitingForSources"  # a source or LiteLLM not read yet: nothing is planned
    LITELLM_UNREACHABLE = "LiteLLMUnreachable"
    CRD_NOT_INSTALLED = "CRDNotInstalled"
    SOURCE_FORBIDDEN = "SourceForbidden"  # 403: the source keeps its last good content
    SOURCE_FAILING = "SourceFailing"  # other errors: the source keeps its last good content
    WATCH_STALE = "WatchStale"  # a watch not streaming (reconnecting): seen by the shell, not the state
    CATALOG_TOO_LARGE = "CatalogTooLarge"
    # A write failed twice or more in a row and is retried with backoff (catalog_core/failing.py): one per
    # Kubernetes object written, one for LiteLLM's rows and one for Kubernetes Events (each counting theirs)
    WRITE_FAILING = "WriteFailing"


CONSEQUENCE: dict[ConditionType, str] = {
    ConditionType.WAITING_FOR_SOURCES: (
        "nothing is written until every source and LiteLLM have been read once"
    ),
    ConditionType.LITELLM_UNREACHABLE: (
        "new, changed or removed models are not written to LiteLLM, so not published; the last catalog stays"
    ),
    ConditionType.CRD_NOT_INSTALLED: "this source is empty until its CRD is installed",
    ConditionType.SOURCE_FORBIDDEN: (
        "the controller may not read it: its last good content is kept and its changes are not seen "
        "(model-catalog check names the missing permission)"
    ),
    ConditionType.SOURCE_FAILING: (
        "reading it keeps failing: its last good content is kept and its changes are not seen"
    ),
    ConditionType.WATCH_STALE: "its watch is reconnecting: changes to it are not seen meanwhile",
    ConditionType.CATALOG_TOO_LARGE: (
        "the catalog no longer fits in one ConfigMap: apps keep the last written catalog, LiteLLM routes "
        "stay current"
    ),
    ConditionType.WRITE_FAILING: (
        "this write is retried with backoff until it goes through: what it writes stays as it was "
        "meanwhile (model-catalog check names a missing permission)"
    ),
}


@attrs.frozen
class Condition:
    type: ConditionType
    subject: str  # a SourceKind's value, "litellm" or "catalog"
    message: str


def conditions(state: CatalogState) -> tuple[Condition, ...]:
    """Every condition of ``state``, in a stable order (sources by kind, then LiteLLM, then the catalog)."""
    out: list[Condition] = []
    waited = {str(kind) for kind in state.waits_for if kind is not SourceKind.SECRETS}  # read on demand
    for subject in sorted(waited | set(state.sources)):
        source = state.sources.get(subject) or SourceState()
        if source.status is SourceStatus.PENDING:
            if subject in waited:
                out.append(Condition(ConditionType.WAITING_FOR_SOURCES, subject, "not listed yet"))
        elif source.status is SourceStatus.NOT_INSTALLED:
            out.append(Condition(ConditionType.CRD_NOT_INSTALLED, subject, source.detail or "not installed"))
        elif source.status is SourceStatus.FORBIDDEN:
            out.append(Condition(ConditionType.SOURCE_FORBIDDEN, subject, source.detail or "forbidden"))
        elif source.status is SourceStatus.FAILING:
            out.append(Condition(ConditionType.SOURCE_FAILING, subject, source.detail or "failing"))
    litellm = state.litellm.status
    if not litellm.reachable:
        if litellm.detail:
            out.append(Condition(ConditionType.LITELLM_UNREACHABLE, "litellm", litellm.detail))
        elif not litellm.observed_once:
            waiting = "GET /model/info not answered yet"
            out.append(Condition(ConditionType.WAITING_FOR_SOURCES, "litellm", waiting))
    if state.derived.desired_catalog_fingerprint == OversizedCatalog.fingerprint:
        too_large = f"the rendered catalog exceeds the {CONFIGMAP_DATA_LIMIT} bytes of data a ConfigMap holds"
        out.append(Condition(ConditionType.CATALOG_TOO_LARGE, "catalog", too_large))
    out += _failing_writes(state)
    return tuple(out)


def _failing_writes(state: CatalogState) -> list[Condition]:
    """One condition per Kubernetes object whose write keeps failing; LiteLLM's rows, and Events, are each
    one condition that counts them (thousands may fail together; routes.json names each row's)."""
    objects: list[Condition] = []
    grouped: dict[str, list[WriteFailure]] = {}
    for key, failure in state.control.failing.items():
        if not failure.reported:
            continue
        target = written_object(state, key)
        if target is not None:
            subject = f"{target.kind}/{target.name}"
            objects.append(Condition(ConditionType.WRITE_FAILING, subject, failure.message))
        elif is_litellm_key(key):
            grouped.setdefault("litellm", []).append(failure)
        elif (parsed := CommandKey.parse(key)) is not None and parsed.kind is CommandKind.EVENT:
            grouped.setdefault("events", []).append(failure)
    out = sorted(objects, key=lambda c: c.subject)
    for subject, what in (("litellm", "LiteLLM rows"), ("events", "Kubernetes Events")):
        failures = sorted(grouped.get(subject, ()), key=lambda f: (f.since, f.command_id))
        if failures:
            message = f"{len(failures)} {what} cannot be written; the first: {failures[0].message}"
            out.append(Condition(ConditionType.WRITE_FAILING, subject, message))
    return out
