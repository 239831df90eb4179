"""Service settings: the decision-affecting ``CatalogConfig`` plus how this process runs.

Names and defaults of behaviour §10 are kept; new settings are ``CATALOG_*``
variables, each also a ``run`` flag. Every value is checked before anything
starts; the first problem is reported as one line (exit 2).
"""

from __future__ import annotations

import math
import re
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from adapters.litellm.bounds import DEFAULT_MAX_ANSWER_BYTES, DEFAULT_MAX_ANSWER_VALUES
from app.lease_timing import (
    LEASE_DURATION_SECONDS,
    LEASE_RENEW_DEADLINE_SECONDS,
    LEASE_RETRY_PERIOD_SECONDS,
)
from catalog_core.config import CatalogConfig, ConfigError, quoted_setting

if TYPE_CHECKING:
    from adapters.eventlog.recorder import RecorderSettings
    from app.leader import LeaseConfig
    from app.options import CatalogOptions


@attrs.frozen(repr=False)
class Secret:
    """A value that must never be printed (the LiteLLM master key)."""

    value: str

    def __repr__(self) -> str:
        return "Secret(***)"


@attrs.frozen
class ServiceSettings:
    catalog: CatalogConfig
    litellm_master_key: Secret
    litellm_resync_seconds: float = 30.0
    litellm_max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    litellm_max_answer_values: int = DEFAULT_MAX_ANSWER_VALUES
    http_host: str = "0.0.0.0"
    http_port: int = 8080
    leader_election: bool = True
    lease_name: str = "ai-model-catalog-controller"
    lease_namespace: str = "ai"
    lease_duration_seconds: float = LEASE_DURATION_SECONDS
    lease_renew_deadline_seconds: float = LEASE_RENEW_DEADLINE_SECONDS
    lease_retry_period_seconds: float = LEASE_RETRY_PERIOD_SECONDS
    identity: str = ""
    max_concurrent_writes: int = 4
    catalog_min_write_interval: float = 0.5
    write_retry_max_seconds: float = 300.0  # the cap of every failed write's backoff
    gc_freeze: bool = True  # freeze the heap once the first convergence settled (app.heap)
    crd_recheck_seconds: float = 30.0
    watch_timeout_seconds: int = 300
    event_log_path: str = ""
    event_log_max_bytes: int = 4 * 1024 * 1024
    event_log_ring: int = 1000
    event_log_ring_bytes: int = 8 * 1024 * 1024
    event_log_files: int = 4
    event_log_snapshot_every: int = 10_000
    shutdown_grace_seconds: float = 10.0
    probe_resolve: tuple[tuple[str, str], ...] = ()
    kubeconfig: str = ""
    otlp_endpoint: str = ""
    log_level: str = "INFO"
    debug_token: Secret | None = None  # CATALOG_DEBUG_TOKEN: lets non-loopback clients read /debug/eventlog

    # The settings of each part, nested as that part takes them (imported when asked for: loading the
    # settings stays cheap for commands that start none of them).
    def catalog_options(self) -> CatalogOptions:
        """How ``ModelCatalog``'s adapters run."""
        from adapters.kube.settings import KubeSettings, Liveness
        from adapters.litellm.bounds import AnswerBounds
        from app.options import CatalogOptions, HeapOptions, LiteLLMOptions, WriteOptions
        from app.process_memory import TLS_READ_BUFFER_BYTES

        # The watches' liveness signal is a watch of the Lease: its renewals under leader election, else a
        # short probe watch of it (adapters/kube/liveness.py).
        renewed = self.lease_retry_period_seconds if self.leader_election else None
        return CatalogOptions(
            litellm=LiteLLMOptions(
                resync_seconds=self.litellm_resync_seconds,
                bounds=AnswerBounds(self.litellm_max_answer_bytes, self.litellm_max_answer_values),
            ),
            kube=KubeSettings(
                crd_recheck_seconds=self.crd_recheck_seconds,
                watch_timeout_seconds=self.watch_timeout_seconds,
                liveness=Liveness(self.lease_namespace, self.lease_name, renewed_every=renewed),
            ),
            writes=WriteOptions(
                self.max_concurrent_writes, self.catalog_min_write_interval, self.write_retry_max_seconds
            ),
            probe_resolve=self.probe_resolve,
            heap=HeapOptions(freeze_after_sync=self.gc_freeze, tls_read_buffer_bytes=TLS_READ_BUFFER_BYTES),
        )

    def lease(self) -> LeaseConfig | None:
        """The Lease to take (None: no leader election, this replica leads at once)."""
        from app.leader import LeaseConfig

        if not self.leader_election:
            return None
        return LeaseConfig(
            name=self.lease_name,
            namespace=self.lease_namespace,
            identity=self.identity,
            duration=self.lease_duration_seconds,
            renew_deadline=self.lease_renew_deadline_seconds,
            retry_period=self.lease_retry_period_seconds,
        )

    def event_log(self) -> RecorderSettings | None:
        """Where and how the event log is recorded (None: it is not)."""
        if not self.event_log_path:
            return None
        # Imported only when the log is on: the recorder brings the event log's wire format (cattrs).
        from pathlib import Path

        from adapters.eventlog.recorder import RecorderSettings

        return RecorderSettings(
            Path(self.event_log_path),
            max_bytes=self.event_log_max_bytes,
            max_files=self.event_log_files,
            snapshot_every=self.event_log_snapshot_every,
            ring_size=self.event_log_ring,
            ring_bytes=self.event_log_ring_bytes,
        )


_BOOL = {
    "true": True,
    "1": True,
    "yes": True,
    "on": True,
    "false": False,
    "0": False,
    "no": False,
    "off": False,
}
MIN_DEBUG_TOKEN_LEN = 16
_RESOLVE = re.compile(r"^([^\s:=]+:\d+)=([^\s:=]+:\d+)$")


def load(env: Mapping[str, str], overrides: Mapping[str, str] | None = None) -> ServiceSettings | ConfigError:
    """Settings from the environment; ``overrides`` (from flags) win over it."""
    merged = dict(env)
    merged.update({k: v for k, v in (overrides or {}).items() if v is not None})
    catalog = CatalogConfig.from_env(merged)
    if isinstance(catalog, ConfigError):
        return catalog
    problems: list[ConfigError] = []

    def text(name: str, default: str) -> str:
        value = merged.get(name, "").strip()
        return value or default

    def number(name: str, default: float, minimum: float, integer: bool = False) -> float:
        raw = merged.get(name, "").strip()
        if not raw:
            return default
        try:
            value = int(raw) if integer else float(raw)  # int() refuses more than 4,300 digits: ValueError
        except ValueError:
            problems.append(ConfigError(name, f"must be a number >= {minimum:g}, got {quoted_setting(raw)}"))
            return default
        if not math.isfinite(value) or value < minimum:  # float() reads 5,000 digits as inf, and "nan"
            problems.append(
                ConfigError(name, f"must be a finite number >= {minimum:g}, got {quoted_setting(raw)}")
            )
            return default
        return value

    def boolean(name: str, default: bool) -> bool:
        raw = merged.get(name, "").strip().lower()
        if not raw:
            return default
        if raw not in _BOOL:
            problems.append(ConfigError(name, f"must be true or false, got {quoted_setting(raw)}"))
            return default
        return _BOOL[raw]

    key = merged.get("LITELLM_MASTER_KEY", "").strip()
    if not key:
        problems.append(ConfigError("LITELLM_MASTER_KEY", "is required (the LiteLLM admin key)"))
    resolve: list[tuple[str, str]] = []
    for part in filter(None, (p.strip() for p in merged.get("CATALOG_PROBE_RESOLVE", "").split(","))):
        match = _RESOLVE.match(part)
        if match is None:
            problems.append(
                ConfigError(
                    "CATALOG_PROBE_RESOLVE", f"expected host:port=host:port, got {quoted_setting(part)}"
                )
            )
        else:
            resolve.append((match.group(1), match.group(2)))
    duration = number("CATALOG_LEASE_DURATION_SECONDS", LEASE_DURATION_SECONDS, 2.0)
    renew = number(
        "CATALOG_LEASE_RENEW_DEADLINE_SECONDS", min(LEASE_RENEW_DEADLINE_SECONDS, duration * 2 / 3), 1.0
    )
    retry = number("CATALOG_LEASE_RETRY_PERIOD_SECONDS", min(LEASE_RETRY_PERIOD_SECONDS, renew / 2), 0.1)
    if not retry < renew < duration:
        problems.append(
            ConfigError(
                "CATALOG_LEASE_RENEW_DEADLINE_SECONDS", "needs retry period < renew deadline < lease duration"
            )
        )
    debug_token = merged.get("CATALOG_DEBUG_TOKEN", "").strip()
    if debug_token and len(debug_token) < MIN_DEBUG_TOKEN_LEN:
        # The value itself is never quoted.
        problems.append(
            ConfigError("CATALOG_DEBUG_TOKEN", f"must be at least {MIN_DEBUG_TOKEN_LEN} characters long")
        )
        debug_token = ""
    level = text("LOG_LEVEL", "INFO").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        problems.append(
            ConfigError("LOG_LEVEL", f"must be DEBUG, INFO, WARNING or ERROR, got {quoted_setting(level)}")
        )
    settings = ServiceSettings(
        catalog=catalog,
        litellm_master_key=Secret(key),
        litellm_resync_seconds=number("CATALOG_LITELLM_RESYNC_SECONDS", 30.0, 1.0),
        litellm_max_answer_bytes=int(
            number("CATALOG_LITELLM_MAX_ANSWER_BYTES", DEFAULT_MAX_ANSWER_BYTES, 1024 * 1024, integer=True)
        ),
        litellm_max_answer_values=int(
            number("CATALOG_LITELLM_MAX_ANSWER_VALUES", DEFAULT_MAX_ANSWER_VALUES, 10_000, integer=True)
        ),
        http_host=text("CATALOG_HTTP_HOST", "0.0.0.0"),
        http_port=int(number("CATALOG_HTTP_PORT", 8080, 0, integer=True)),
        leader_election=boolean("CATALOG_LEADER_ELECTION", True),
        lease_name=text("CATALOG_LEASE_NAME", "ai-model-catalog-controller"),
        lease_namespace=text("CATALOG_LEASE_NAMESPACE", catalog.namespace),
        lease_duration_seconds=duration,
        lease_renew_deadline_seconds=renew,
        lease_retry_period_seconds=retry,
        identity=text("POD_NAME", socket.gethostname()),
        max_concurrent_writes=int(number("CATALOG_MAX_CONCURRENT_WRITES", 4, 1, integer=True)),
        catalog_min_write_interval=number("CATALOG_MIN_WRITE_INTERVAL_SECONDS", 0.5, 0.0),
        write_retry_max_seconds=number("CATALOG_WRITE_RETRY_MAX_SECONDS", 300.0, 1.0),
        gc_freeze=boolean("CATALOG_GC_FREEZE", True),
        crd_recheck_seconds=number("CATALOG_CRD_RECHECK_SECONDS", 30.0, 1.0),
        watch_timeout_seconds=int(number("CATALOG_WATCH_TIMEOUT_SECONDS", 300, 2, integer=True)),
        event_log_path=text("CATALOG_EVENT_LOG_PATH", ""),
        event_log_max_bytes=int(
            number("CATALOG_EVENT_LOG_MAX_BYTES", 4 * 1024 * 1024, 64 * 1024, integer=True)
        ),
        event_log_ring=int(number("CATALOG_EVENT_LOG_RING", 1000, 0, integer=True)),
        event_log_ring_bytes=int(
            number("CATALOG_EVENT_LOG_RING_BYTES", 8 * 1024 * 1024, 64 * 1024, integer=True)
        ),
        event_log_files=int(number("CATALOG_EVENT_LOG_FILES", 4, 1, integer=True)),
        event_log_snapshot_every=int(number("CATALOG_EVENT_LOG_SNAPSHOT_EVERY", 10_000, 1, integer=True)),
        shutdown_grace_seconds=number("CATALOG_SHUTDOWN_GRACE_SECONDS", 10.0, 0.0),
        probe_resolve=tuple(resolve),
        kubeconfig=text("KUBECONFIG", ""),
        otlp_endpoint=text("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
        log_level=level,
        debug_token=Secret(debug_token) if debug_token else None,
    )
    if problems:
        return problems[0]
    return settings


# (flag, variable, help) for `model-catalog run`: every new setting is also a flag.
FLAGS: tuple[tuple[str, str, str], ...] = (
    (
        "--litellm-resync-seconds",
        "CATALOG_LITELLM_RESYNC_SECONDS",
        "re-read LiteLLM /model/info this often (30)",
    ),
    (
        "--litellm-max-answer-bytes",
        "CATALOG_LITELLM_MAX_ANSWER_BYTES",
        "refuse a LiteLLM answer larger than this (64 MiB; 10,000 rows of /model/info are ~35 MB)",
    ),
    (
        "--litellm-max-answer-values",
        "CATALOG_LITELLM_MAX_ANSWER_VALUES",
        "refuse to parse a LiteLLM answer of more JSON values (2000000; 10,000 rows are ~1.2 million)",
    ),
    ("--http-port", "CATALOG_HTTP_PORT", "port of /healthz, /readyz, /metrics (8080; 0 picks a free port)"),
    ("--http-host", "CATALOG_HTTP_HOST", "address to listen on (0.0.0.0)"),
    ("--leader-election", "CATALOG_LEADER_ELECTION", "true|false: take a coordination.k8s.io Lease (true)"),
    ("--lease-name", "CATALOG_LEASE_NAME", "Lease name (ai-model-catalog-controller)"),
    ("--lease-namespace", "CATALOG_LEASE_NAMESPACE", "Lease namespace (NAMESPACE)"),
    (
        "--lease-duration-seconds",
        "CATALOG_LEASE_DURATION_SECONDS",
        f"Lease duration ({LEASE_DURATION_SECONDS:g})",
    ),
    ("--identity", "POD_NAME", "this replica's Lease identity (the pod name)"),
    ("--max-concurrent-writes", "CATALOG_MAX_CONCURRENT_WRITES", "writes carried out at once (4)"),
    ("--catalog-min-write-interval", "CATALOG_MIN_WRITE_INTERVAL_SECONDS", "coalesce catalog writes (0.5 s)"),
    (
        "--write-retry-max-seconds",
        "CATALOG_WRITE_RETRY_MAX_SECONDS",
        "a failed write is retried, forever, with a jittered exponential backoff up to this (300)",
    ),
    (
        "--gc-freeze",
        "CATALOG_GC_FREEZE",
        "true|false: freeze the heap once converged, so full collections skip the state (true)",
    ),
    (
        "--litellm-settle-seconds",
        "CATALOG_LITELLM_SETTLE_SECONDS",
        "a LiteLLM row that changes again soon after a write is written once still this long (2; 0: off)",
    ),
    (
        "--litellm-settle-cap-seconds",
        "CATALOG_LITELLM_SETTLE_CAP_SECONDS",
        "...but no later than this after its write was first deferred (10)",
    ),
    (
        "--litellm-burst-rows",
        "CATALOG_LITELLM_BURST_ROWS",
        "rows changing at this many moments within the burst window are a burst, "
        "in which still rows wait to settle too (3; 0: off)",
    ),
    (
        "--litellm-burst-window-seconds",
        "CATALOG_LITELLM_BURST_WINDOW_SECONDS",
        "the burst window (0.1)",
    ),
    (
        "--litellm-burst-probe-seconds",
        "CATALOG_LITELLM_BURST_PROBE_SECONDS",
        "a still row's change waits this long for other rows to change too, which would make it "
        "part of a burst (0.01; 0: written at once)",
    ),
    (
        "--rollout-settle-seconds",
        "CATALOG_ROLLOUT_SETTLE_SECONDS",
        "roll consumers and patch AgentTemplates only onto a catalog stable this long, once per window (5)",
    ),
    (
        "--kubeai-scale-from-zero",
        "CATALOG_KUBEAI_SCALE_FROM_ZERO",
        "true|false: publish a KubeAI Model that scales from zero while no replica is ready (true)",
    ),
    (
        "--kubeai-start-deadline-seconds",
        "CATALOG_KUBEAI_START_DEADLINE_SECONDS",
        "report such a Model when its pods have been starting this long with none ready (600)",
    ),
    ("--event-log", "CATALOG_EVENT_LOG_PATH", "record the event log to this file (off)"),
    ("--event-log-max-bytes", "CATALOG_EVENT_LOG_MAX_BYTES", "rotate the event log at this size (4 MiB)"),
    (
        "--probe-resolve",
        "CATALOG_PROBE_RESOLVE",
        "host:port=host:port,... for health probes run outside the cluster",
    ),
    (
        "--watch-timeout-seconds",
        "CATALOG_WATCH_TIMEOUT_SECONDS",
        "end and resume each watch after this long, stretched by up to as much again per watch (300); "
        "a dead connection is noticed sooner, by the watch of the Lease and TCP keepalive",
    ),
    ("--kubeconfig", "KUBECONFIG", "kubeconfig file (default: in-cluster)"),
)
