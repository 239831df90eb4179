"""OpenTelemetry metrics (exported as Prometheus text) and traces (OTLP, only when configured).

Attributes carry kinds, keys, names and reason codes only — never a value from
a Secret, never a request body.
"""

from __future__ import annotations

import platform
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, get_args

import attrs
from opentelemetry import metrics, trace
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Counter, Meter, Observation
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

from adapters.kube.settings import COUNTERS as KUBE_COUNTERS
from adapters.kube.settings import KubeStats, stale_watch_label
from catalog_core import damping as churn
from catalog_core.commands import READ_COMMANDS, Command
from catalog_core.events import (
    CommandCompleted,
    Event,
    ObjectDeleted,
    ObjectUpserted,
    Outcome,
    RuntimeProbed,
    SourceKind,
    SourceListed,
    SourceUnavailable,
)
from catalog_core.plan import all_records
from catalog_core.reasons import Reason, RouteState, state_of
from catalog_core.state import CatalogState, SourceStatus

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from adapters.eventlog.recorder import RecorderStats

REJECTED_STATES = (RouteState.ERROR, RouteState.CONFLICT)
REJECTED_REASONS = tuple(reason for reason in Reason if state_of(reason) in REJECTED_STATES)

# The kinds of command that write (what ``model_catalog_failing_writes`` counts, each always reported).
WRITE_KINDS = tuple(sorted(k.__name__ for k in get_args(Command) if not issubclass(k, READ_COMMANDS)))

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


ANSWERED = "answered"  # the outcome label of a read command: it answers with an observation


def _fixed_source(event_type: type) -> str:
    """The ``source`` label of an event that has no ``source`` field of its own."""
    if event_type is RuntimeProbed:
        return "health"
    if event_type is CommandCompleted:
        return "outcome"
    return "litellm" if event_type.__name__.startswith("LiteLLM") else "shell"


def _event_source(event: Event) -> str:
    source = getattr(event, "source", None)
    if source is not None:
        return str(source.value if hasattr(source, "value") else source)
    return _fixed_source(type(event))


def event_series() -> list[dict[str, str]]:
    """Every (source, type) an event can be counted under: the series of ``model_catalog_events_total``
    and ``model_catalog_step_failures_total`` that exist, at 0, from the start."""
    series = []
    for event_type in get_args(Event):
        if "source" in attrs.fields_dict(event_type):
            series += [{"source": kind.value, "type": event_type.__name__} for kind in SourceKind]
        else:
            series.append({"source": _fixed_source(event_type), "type": event_type.__name__})
    return series


def command_series() -> list[dict[str, str]]:
    """Every (kind, outcome) a command can end with: the series of ``model_catalog_commands_total``."""
    series = []
    for command_type in get_args(Command):
        outcomes = [o.value for o in Outcome]
        if issubclass(command_type, READ_COMMANDS):
            outcomes.append(ANSWERED)
        series += [{"kind": command_type.__name__, "outcome": outcome} for outcome in outcomes]
    return series


def _describe(event: Event) -> str:
    if isinstance(event, ObjectUpserted | ObjectDeleted):
        meta = event.object.get("metadata") or {}
        return f"{type(event).__name__} {event.source.value}/{meta.get('name', '?')}"
    if isinstance(event, SourceListed | SourceUnavailable):
        return f"{type(event).__name__} {event.source.value}"
    if isinstance(event, CommandCompleted):
        return f"CommandCompleted {event.key} {event.outcome.value}"
    return type(event).__name__


class Telemetry:
    """Implements the loop's telemetry hooks; ``metrics_text()`` serves /metrics."""

    def __init__(
        self,
        *,
        otlp_endpoint: str = "",
        service_version: str = "",
        clock: Callable[[], float] = time.monotonic,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        resource = Resource.create({"service.name": "model-catalog", "service.version": service_version})
        # An embedding host may hand over its own provider: the instruments register there, and the
        # host exports them (and shuts its provider down). Otherwise ours, read as Prometheus text.
        self.registry: CollectorRegistry | None = None
        self._owns_meter_provider = meter_provider is None
        if meter_provider is None:
            self.registry = CollectorRegistry(auto_describe=True)
            # The standard process_* series (CPU, resident and virtual memory, open and maximum file
            # descriptors, start time), read from /proc by the Prometheus client the exporter is built on.
            ProcessCollector(registry=self.registry)
            reader = PrometheusMetricReader(registry=self.registry)
            histogram = ExplicitBucketHistogramAggregation(LATENCY_BUCKETS)
            meter_provider = MeterProvider(
                metric_readers=[reader],
                resource=resource,
                views=[
                    View(instrument_type=Histogram, instrument_name="model_catalog_*", aggregation=histogram)
                ],
            )
        self.meter_provider = meter_provider
        meter = self.meter_provider.get_meter("model_catalog")
        self._meter = meter
        self._kube_counters: dict[str, Counter] = {}
        self._events = meter.create_counter(
            "model_catalog_events", description="Events folded, by source and type"
        )
        self._commands = meter.create_counter(
            "model_catalog_commands", description="Commands executed, by kind and outcome"
        )
        self._step_failures = meter.create_counter(
            "model_catalog_step_failures",
            description="Events the fold raised on: skipped, the last good state kept (a bug; see the log)",
        )
        # Every series an alert may read exists from the start, at 0 (as controller-runtime's initMetrics
        # does): Prometheus' increase() cannot see the first increment of a series born with it.
        for labels in event_series():
            self._events.add(0, labels)
            self._step_failures.add(0, labels)
        for labels in command_series():
            self._commands.add(0, labels)
        self._latency = meter.create_histogram(
            "model_catalog_reconcile_latency",
            unit="s",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,  # a host's provider has no view of ours
            description="From the arrival of the events that caused a command to the start of its execution",
        )
        self._duration = meter.create_histogram(
            "model_catalog_command_duration",
            unit="s",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
            description="Execution time per command kind (LiteLLM request latency for the LiteLLM kinds)",
        )
        self._gauges: dict[str, Callable[[], Iterable[tuple[float, dict[str, str]]]]] = {}
        for name, description in (
            ("model_catalog_queue_depth", "Commands queued or executing"),
            (
                "model_catalog_rejected_items",
                "routes.json records in error or conflict (an unreadable models document's too), by reason",
            ),
            ("model_catalog_published_models", "Catalog entries currently published"),
            ("model_catalog_leader", "1 while this replica leads, else 0"),
            (
                "model_catalog_tasks",
                "Tasks running in the process's event loop: flat while it runs (one that grows leaks tasks)",
            ),
            ("model_catalog_source_status", "1 for each source's current status, 0 for its other statuses"),
            ("model_catalog_litellm_reachable", "1 while LiteLLM answers"),
            (
                "model_catalog_failing_writes",
                "Targets whose write failed twice or more in a row (or for good) and has not succeeded "
                "since, by command kind: retried with backoff, reported in routes.json and Events",
            ),
            ("model_catalog_items", "Source items (routes.json records) by state"),
            ("model_catalog_catalog_bytes", "Bytes of data of the catalog the current state renders"),
            ("model_catalog_catalog_limit_bytes", "Bytes of data one ConfigMap holds at most (1 MiB)"),
            (
                "model_catalog_catalog_too_large",
                "1 while the catalog is too large to write (apps keep the last)",
            ),
            (
                "model_catalog_source_stale_seconds",
                "How long each watch has not streamed (presumed dead, reconnecting); 0 while it streams",
            ),
        ):
            meter.create_observable_gauge(name, callbacks=[self._observer(name)], description=description)
        self._damping_metrics(meter)
        build = {"version": service_version or "unknown", "python_version": platform.python_version()}
        meter.create_observable_gauge(
            "model_catalog_build_info",
            callbacks=[lambda options: [Observation(1, build)]],
            description="Always 1; the version of model-catalog and of Python, as labels",
        )
        self._state: CatalogState | None = None
        self._clock = clock
        # The tracing SDK and the OTLP exporter are imported only when traces are exported.
        self.tracer_provider: TracerProvider | None = None
        self.tracer: trace.Tracer = trace.NoOpTracer()
        if otlp_endpoint:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            provider = TracerProvider(resource=resource)
            provider.add_span_processor(
                BatchSpanProcessor(OTLPSpanExporter(endpoint=_traces_url(otlp_endpoint)))
            )
            self.tracer = provider.get_tracer("model_catalog")
            self.tracer_provider = provider
        self._plan_context: dict[str, trace.SpanContext] = {}
        self.set_gauge("model_catalog_leader", lambda: [(0.0, {})])

    def _damping_metrics(self, meter: Meter) -> None:
        """Write economy under churn, read from the core's state."""

        def reading(
            value: Callable[[CatalogState], int],
        ) -> Callable[[CallbackOptions], Iterable[Observation]]:
            def observe(options: CallbackOptions) -> Iterable[Observation]:
                return [Observation(value(self._state))] if self._state is not None else []

            return observe

        meter.create_observable_counter(
            "model_catalog_writes_deferred",
            callbacks=[reading(lambda s: s.damping.deferred_total)],
            description="LiteLLM writes deferred because their row changed again soon after a write",
        )
        meter.create_observable_counter(
            "model_catalog_writes_deferred_burst",
            callbacks=[reading(lambda s: s.damping.burst_deferred_total)],
            description="Of the deferred writes, first changes of still rows held back by a burst of changes",
        )
        meter.create_observable_counter(
            "model_catalog_writes_cancelled",
            callbacks=[reading(lambda s: s.damping.cancelled_total)],
            description="Deferred LiteLLM writes dropped: the row flapped back to what LiteLLM holds",
        )
        meter.create_observable_gauge(
            "model_catalog_keys_damped",
            callbacks=[reading(lambda s: churn.damped(s.damping, s.now, churn.Windows.of(s.config)))],
            description="LiteLLM rows written or changed less than a settle window ago (their writes wait)",
        )

    # --- gauges
    def _observer(self, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            source = self._gauges.get(name)
            return [Observation(v, a) for v, a in (source() if source else [])]

        return observe

    def set_gauge(self, name: str, source: Callable[[], Iterable[tuple[float, dict[str, str]]]]) -> None:
        self._gauges[name] = source

    def metrics_text(self) -> bytes:
        if self.registry is None:
            raise RuntimeError("metrics go to the host's meter provider: there is no Prometheus text here")
        return generate_latest(self.registry)

    # --- the loop's hooks
    def event_folded(self, event: Event) -> None:
        self._events.add(1, {"source": _event_source(event), "type": type(event).__name__})

    def step_failed(self, event: Event) -> None:
        self._step_failures.add(1, {"source": _event_source(event), "type": type(event).__name__})

    def commands_planned(
        self, commands: Sequence[Command], oldest_event_at: float, events: Sequence[Event] = ()
    ) -> None:
        if not commands or isinstance(self.tracer, trace.NoOpTracer):
            return
        with self.tracer.start_as_current_span("model_catalog.plan") as span:
            span.set_attribute("model_catalog.commands", len(commands))
            span.set_attribute("model_catalog.events", [_describe(e) for e in list(events)[:20]])
            context = span.get_span_context()
        for command in commands:
            self._plan_context[command.id] = context
        if len(self._plan_context) > 10_000:
            self._plan_context.clear()

    def command_done(
        self, command: Command, submitted_at: float, started_at: float, events: Sequence[Event]
    ) -> None:
        kind = type(command).__name__
        now = self._clock()
        outcome = next((e.outcome.value for e in events if isinstance(e, CommandCompleted)), ANSWERED)
        self._commands.add(1, {"kind": kind, "outcome": outcome})
        self._latency.record(max(0.0, started_at - submitted_at), {"kind": kind})
        self._duration.record(max(0.0, now - started_at), {"kind": kind})
        context = self._plan_context.pop(command.id, None)
        if not isinstance(self.tracer, trace.NoOpTracer):
            end_ns = time.time_ns()
            start_ns = end_ns - int((now - started_at) * 1e9)
            links = [trace.Link(context)] if context is not None else []
            span = self.tracer.start_span(f"model_catalog.{kind}", start_time=start_ns, links=links)
            span.set_attribute("model_catalog.key", str(command.key))
            span.set_attribute("model_catalog.command_id", command.id)
            span.set_attribute("model_catalog.outcome", outcome)
            span.end(end_time=end_ns)

    def state_changed(self, state: CatalogState) -> None:
        self._state = state

    def kube_stat(self, metric: str, labels: Mapping[str, str], amount: int = 1) -> None:
        """A counter of the Kubernetes adapters (``adapters.kube.settings``: relists, 410s, reconnects,
        403s, errors) went up by ``amount`` (0: the series was declared): exported as
        ``model_catalog_<metric>``."""
        counter = self._kube_counters.get(metric)
        if counter is None:
            name = "model_catalog_" + metric.removesuffix("_total")
            counter = self._meter.create_counter(name, description=KUBE_COUNTERS[metric])
            self._kube_counters[metric] = counter
        counter.add(amount, labels)

    def bind_kube(self, stats: KubeStats) -> None:
        """The Kubernetes adapters' counters and how long each watch has not been streaming (0 while it
        streams), labelled so that no object's name is a label: the watches of Secrets read by name are one
        ``watch``, the longest stale of them."""
        stats.subscribe(self.kube_stat)
        stale = stats.stale

        def stale_watches() -> list[tuple[float, dict[str, str]]]:
            now = time.time()
            longest = dict.fromkeys(stats.watch_labels, 0.0)
            for watch, since in list(stale.items()):
                label = stale_watch_label(watch)
                longest[label] = max(longest.get(label, 0.0), 0.0, now - since)
            return [(seconds, {"watch": label}) for label, seconds in sorted(longest.items())]

        self.set_gauge("model_catalog_source_stale_seconds", stale_watches)

    def bind_event_log(self, stats: RecorderStats) -> None:
        """The event log's dropped records, a count since start (disk full, write errors)."""
        self._meter.create_observable_counter(
            "model_catalog_event_log_dropped_records",
            callbacks=[lambda options: [Observation(stats.records_dropped)]],
            description="Event log records dropped since start (disk full, write errors, the writer behind)",
        )

    def bind_state(self) -> None:
        """Gauges read from the latest state."""

        def rejected() -> list[tuple[float, dict[str, str]]]:
            """routes.json records in error or conflict (an unreadable models.json's own record too), by
            reason: every such reason, zeros included."""
            state = self._state
            if state is None:
                return []
            tally = Tally(r.reason for r in all_records(state) if r.state in REJECTED_STATES)
            reasons = [*REJECTED_REASONS, *sorted(set(tally) - set(REJECTED_REASONS))]
            return [(float(tally[reason]), {"reason": reason.value}) for reason in reasons]

        def published() -> list[tuple[float, dict[str, str]]]:
            return [(float(len(self._state.derived.entries)), {})] if self._state is not None else []

        def sources() -> list[tuple[float, dict[str, str]]]:
            """1 for each source's current status, 0 for its other statuses."""
            state = self._state
            if state is None:
                return []
            samples = []
            for kind in sorted(SourceKind, key=lambda k: k.value):
                current = state.source(kind).status
                samples += [
                    (1.0 if status is current else 0.0, {"source": kind.value, "status": status.value})
                    for status in SourceStatus
                ]
            return samples

        def litellm() -> list[tuple[float, dict[str, str]]]:
            return (
                [(1.0 if self._state.litellm.status.reachable else 0.0, {})]
                if self._state is not None
                else []
            )

        def failing() -> list[tuple[float, dict[str, str]]]:
            state = self._state
            tally = Tally(f.kind for f in state.control.failing.values() if f.reported) if state else Tally()
            # every kind, 0 too: the series exists from the start (an alert's rate and absence both work)
            return [(float(tally.get(kind, 0)), {"kind": kind}) for kind in WRITE_KINDS]

        self.set_gauge("model_catalog_rejected_items", rejected)
        self.set_gauge("model_catalog_failing_writes", failing)
        self.set_gauge("model_catalog_published_models", published)
        self.set_gauge("model_catalog_source_status", sources)
        self.set_gauge("model_catalog_litellm_reachable", litellm)

    def shutdown(self) -> None:
        if self.tracer_provider is not None:
            self.tracer_provider.shutdown()
        if self._owns_meter_provider and isinstance(self.meter_provider, MeterProvider):
            self.meter_provider.shutdown()


def _traces_url(endpoint: str) -> str:
    return endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"
