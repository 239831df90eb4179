"""Tunables of the Kubernetes adapters, and the counters they keep for the shell to export."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import attrs


@attrs.frozen
class KubeSettings:
    """Timing of watches and requests. The defaults suit a cluster; tests shorten them."""

    # Server-side timeoutSeconds of each watch request. It bounds how long a half-open connection (a NAT
    # or conntrack entry dropped, a node suspended and resumed) leaves a source blind: a watch that has
    # not ended timeout + grace after it was opened is presumed dead and replaced, resuming from its last
    # resourceVersion. An HTTP/1.1 watch cannot be pinged, and the v1.20 API server sends a bookmark only
    # just before that deadline, so the deadline is the liveness signal. The cost: one watch request per
    # source every ~5 s at idle (README, "Idle cost").
    watch_timeout_seconds: int = 5
    timeout_grace_seconds: float = 1.5  # the client gives up this long after the server should have
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


Listener = Callable[[str, dict[str, str]], None]


class KubeStats:
    """Counters by (metric, sorted labels). ``listeners`` are called on every increment (metric hooks).

    ``stale`` holds the watches that are not streaming (presumed dead, reconnecting, failing) and since
    when (wall-clock seconds): what /readyz and ``model_catalog_source_stale_seconds`` report.
    """

    def __init__(self) -> None:
        self.counters: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()
        self.listeners: list[Listener] = []
        self.stale: dict[str, float] = {}

    def mark_stale(self, watch: str, since: float) -> None:
        self.stale.setdefault(watch, since)

    def mark_fresh(self, watch: str) -> None:
        self.stale.pop(watch, None)

    def inc(self, metric: str, **labels: str) -> None:
        self.counters[(metric, tuple(sorted(labels.items())))] += 1
        for listener in self.listeners:
            listener(metric, dict(labels))

    def total(self, metric: str, **labels: str) -> int:
        """The sum over every series of ``metric`` whose labels include ``labels``."""
        wanted = set(labels.items())
        return sum(n for (name, lbls), n in self.counters.items() if name == metric and wanted <= set(lbls))


# Metric names (Prometheus style; the shell's exporter adds its prefix).
FORBIDDEN_TOTAL = "kube_forbidden_total"  # labels: source|key, verb, resource, namespace
RELISTS_TOTAL = "kube_watch_relists_total"  # labels: source
GONE_TOTAL = "kube_watch_gone_total"  # labels: source (410: the resourceVersion was compacted)
RECONNECTS_TOTAL = "kube_watch_reconnects_total"  # labels: source
WATCH_REQUESTS_TOTAL = "kube_watch_requests_total"  # labels: source (every watch request: the idle cost)
ERRORS_TOTAL = "kube_errors_total"  # labels: source|key, status
