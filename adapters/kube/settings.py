"""Tunables of the Kubernetes adapters, and the counters they keep for the shell to export."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs


@attrs.frozen
class Liveness:
    """One signal that the watches' connections still deliver, for all of them at once: a watch of one
    Lease, by name (``adapters.kube.liveness``).

    With ``renewed_every`` (leader election: some replica renews the Lease that often), the watch is as
    long as the others and the renewals are the signal: silence for ``stale_after`` seconds means the
    connections are presumed dead. Without it (nobody renews the Lease), the watch is a probe that must
    end, as the API server ends it, ``probe_seconds`` after it was opened: one that does not, or fails,
    means the same. Either way every watch then resumes from its resourceVersion over a new connection.
    """

    namespace: str
    name: str
    renewed_every: float | None = None
    probe_seconds: int = 5
    # How much later than due a renewal may arrive before its silence is a verdict: a renewal is a request
    # (made a retry period after the last one answered), late by what a loaded API server takes to answer.
    late_allowance: float = 3.0

    @property
    def stale_after(self) -> float:
        """Silence that means the Lease's watch (and so every watch opened as long ago) is dead: the next
        renewal is due ``renewed_every`` after the last one heard, and did not come ``late_allowance``
        after that. A connection that dies just after a renewal is given up this long later."""
        assert self.renewed_every is not None
        return self.renewed_every + self.late_allowance


@attrs.frozen
class KubeSettings:
    """Timing of watches and requests. The defaults suit a cluster; tests shorten them."""

    # Server-side timeoutSeconds of each watch request, drawn per request from [t, t * (1 + jitter)] (as
    # client-go's reflectors do: 5 to 10 minutes), so watches, of one replica or of many, do not renew
    # together. A renewal resumes from the last resourceVersion (bookmarks keep it recent) and costs the
    # API server one request: ~2 a minute for all the sources at idle. What notices a dead connection
    # sooner than this deadline is the ``liveness`` signal (a half-open or frozen connection, for every
    # watch at once) and TCP keepalive (a peer or route that vanished), not a short timeout per watch.
    watch_timeout_seconds: int = 300
    watch_timeout_jitter: float = 1.0
    timeout_grace_seconds: float = 1.5  # the client gives up this long after the server should have
    # The API server answers a watch request's headers at once: one unanswered this long (connect, TLS,
    # headers) is given up, so a black-holed new connection cannot hold a source for the watch's timeout.
    watch_response_seconds: float = 10.0
    # TCP keepalive on every watch connection: a peer that vanished (a NAT or conntrack entry dropped, a
    # node gone, a black-holed route) ends the connection within idle + interval * probes seconds of its
    # last byte (TCP_USER_TIMEOUT bounds unacknowledged data by the same). It costs the API server nothing.
    keepalive_idle_seconds: int = 5
    keepalive_interval_seconds: int = 2
    keepalive_probes: int = 3
    liveness: Liveness | None = None  # None: keepalive and the watch timeout only (see ``Liveness``)
    request_timeout_seconds: float = 30.0  # client-side timeout of every other request
    list_page_size: int = 500
    crd_recheck_seconds: float = 30.0  # how often an absent CRD is looked for again
    retry_base_seconds: float = 0.5  # backoff of relists and reconnects: base ...
    # ... and cap (jitter in [c/2, c]): during an outage each source tries every 1.5-3 s, so a healed API
    # server is seen within a few seconds, never in a tight loop.
    retry_cap_seconds: float = 3.0
    forbidden_recheck_seconds: float = 60.0  # cap of the backoff while a list is forbidden
    failing_after: int = 3  # consecutive failures before a source is reported FAILING
    # A watch that streamed this long before it broke was healthy: its break starts a new incident (the
    # shortest reconnect backoff, failures counted from zero), not the next failure of an old one.
    watch_stable_seconds: float = 10.0
    secret_listing_wait_seconds: float = 10.0  # WatchSecrets waits this long for the new set's listing
    # Secrets read by name (ai-model-provider-*, maybe unlabelled): at most this many get a watch of their
    # own (each holds a connection of the shared pool); the rest are re-listed one at a time, this often.
    secret_name_watches: int = 32
    secret_poll_seconds: float = 30.0


# A listener of the counters: (metric, labels, amount). ``amount`` is 0 when a series is declared.
Listener = Callable[[str, Mapping[str, str], int], None]
Labels = tuple[tuple[str, str], ...]

# The label set a series gets once the table is full: an unforeseen label value cannot grow memory or the
# number of exported series without bound (the labels are bounded by construction; this is the backstop).
OVERFLOW_LABELS: Mapping[str, str] = {"overflow": "true"}


class KubeStats:
    """Counters by (metric, sorted labels), at most ``max_series`` of them. Label values are bounded by
    construction (source kinds, command kinds, verbs, resources, HTTP statuses): never an object's name.

    ``declare`` makes a series exist at 0 before anything happened (a counter first seen at 1 is invisible
    to ``increase()`` in Prometheus), ``subscribe`` replays every series to a new listener (metric hooks).
    ``stale`` holds the watches that are not streaming (presumed dead, reconnecting, failing) and since
    when (wall-clock seconds): what /readyz and ``model_catalog_source_stale_seconds`` report.
    """

    def __init__(self, max_series: int = 1024) -> None:
        self.counters: dict[tuple[str, Labels], int] = {}
        self.max_series = max_series
        self._listeners: list[Listener] = []
        self.stale: dict[str, float] = {}
        self.watch_labels: set[str] = set()  # the ``watch`` label of every watch there was (bounded)

    def declare_watch(self, watch: str) -> None:
        self.watch_labels.add(stale_watch_label(watch))

    def mark_stale(self, watch: str, since: float) -> None:
        self.stale.setdefault(watch, since)

    def mark_fresh(self, watch: str) -> None:
        self.stale.pop(watch, None)

    def subscribe(self, listener: Listener) -> None:
        """``listener`` hears of every series there is (with its count so far) and every change from now."""
        for (metric, labels), count in list(self.counters.items()):
            listener(metric, dict(labels), count)
        self._listeners.append(listener)

    def declare(self, metric: str, **labels: str) -> None:
        """The series exists from now on, at 0 until it is counted."""
        self._add(metric, labels, 0)

    def inc(self, metric: str, **labels: str) -> None:
        self._add(metric, labels, 1)

    def _add(self, metric: str, labels: Mapping[str, str], amount: int) -> None:
        if metric not in COUNTERS:
            raise ValueError(f"{metric} is not one of the counters of adapters.kube.settings.COUNTERS")
        key = (metric, tuple(sorted(labels.items())))
        if key not in self.counters and len(self.counters) >= self.max_series:
            labels = OVERFLOW_LABELS
            key = (metric, tuple(sorted(labels.items())))
        if amount == 0 and key in self.counters:
            return  # declared already
        self.counters[key] = self.counters.get(key, 0) + amount
        for listener in self._listeners:
            listener(metric, dict(labels), amount)

    def total(self, metric: str, **labels: str) -> int:
        """The sum over every series of ``metric`` whose labels include ``labels``."""
        wanted = set(labels.items())
        return sum(n for (name, lbls), n in self.counters.items() if name == metric and wanted <= set(lbls))


# The watches of Secrets read by name are named after the Secret, a name that whoever edits models.json or
# a ModelActivation chooses: as a metric label they are all one watch, ``kube/secrets/by-name``.
SECRET_LABELLED_WATCH = "kube/secrets/labelled"
SECRET_BY_NAME_WATCHES = "kube/secrets/by-name"


def secret_watch_name(secret: str) -> str:
    """The name of the watch of one Secret read by name (in logs and /readyz)."""
    return f"{SECRET_BY_NAME_WATCHES}/{secret}"


def stale_watch_label(watch: str) -> str:
    """The ``watch`` label of a stale watch: its name, or ``kube/secrets/by-name`` for a Secret's own."""
    return SECRET_BY_NAME_WATCHES if watch.startswith(SECRET_BY_NAME_WATCHES + "/") else watch


# Metric names (Prometheus style; the shell's exporter adds its prefix) and their help. Reads are labelled
# by ``source`` (a source kind), writes by ``kind`` (a command kind): never by an object's name.
FORBIDDEN_TOTAL = "kube_forbidden_total"  # labels: source or kind, verb, resource (+ namespace for reads)
RELISTS_TOTAL = "kube_watch_relists_total"  # labels: source
GONE_TOTAL = "kube_watch_gone_total"  # labels: source (410: the resourceVersion was compacted)
RECONNECTS_TOTAL = "kube_watch_reconnects_total"  # labels: source
# labels: source (every watch request: the idle cost; ``liveness`` for the Lease's watch)
WATCH_REQUESTS_TOTAL = "kube_watch_requests_total"
LIVENESS_VERDICTS_TOTAL = "kube_watch_liveness_verdicts_total"  # labels: reason (silent, probe)
ERRORS_TOTAL = "kube_errors_total"  # labels: source or kind, status

COUNTERS: Mapping[str, str] = {
    FORBIDDEN_TOTAL: "Requests the API server refused (403), by source (reads) or command kind (writes), "
    "verb and resource",
    RELISTS_TOTAL: "Complete lists of a source (the first one, and after 410 or failures)",
    GONE_TOTAL: "Watches that got 410 Gone (their resourceVersion was compacted)",
    RECONNECTS_TOTAL: "Watch connections lost and opened again",
    WATCH_REQUESTS_TOTAL: "Watch requests sent, by source (one per watch timeout at idle)",
    LIVENESS_VERDICTS_TOTAL: "Times every watch was presumed dead and resumed over a new connection, by "
    "reason: the Lease's renewals stopped arriving (silent) or the probe watch did not end on time (probe)",
    ERRORS_TOTAL: "Failed API requests other than 403, by source (reads) or command kind (writes) and "
    "HTTP status",
}
