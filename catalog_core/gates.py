"""Planning gates: rules that decide differently, for the same inputs, than the code before them did.

A gate is named here once. The running controller plans with every gate (``ALL_GATES``: nothing turns
one off, it is not a setting); the event log's header records the gates a run planned with, and
``model-catalog replay`` plans a log with exactly those (``CatalogConfig.gates``, read from the header),
so a log recorded before a rule existed replays as it ran (docs/event-log.md, "Replay compatibility").

A change to planning that would make a recorded log replay differently is a new gate: a member below,
checked where the rule decides (``Gate.X in state.config.gates``), with the old decision kept beside it.
What an object is (a parser refusing a name or a value) is not a gate: it is decided before planning,
from the object alone.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class Gate(StrEnum):
    # A missing catalog ConfigMap is created as the bootstrap placeholder (READY false) while no catalog
    # can be written yet (behaviour §5.1).
    CATALOG_PLACEHOLDER = "catalog-placeholder"
    # A provider Secret's key goes only to its provider's own API and the API bases its annotation names
    # (SecretApiBaseNotAllowed, behaviour §1.5).
    SECRET_API_BASES = "secret-api-bases"
    # A route to a custom API base never relies on LiteLLM's own credentials: a keyless OpenAI-compatible
    # one sends the key "none", any other is refused (AmbientCredentialRejected, behaviour §1.5).
    AMBIENT_CREDENTIALS = "ambient-credentials"
    # A last good route keeps its Secret's key only while the Secret still allows it: losing that right
    # withdraws the route at once, past write damping (behaviour §8).
    SECRET_REVOCATION = "secret-revocation"
    # Consumers roll only through an ownership chain verified by uid to a workload that is a consumer
    # itself; other pods are left alone (behaviour §9.2).
    VERIFIED_ROLLOUTS = "verified-rollouts"
    # Among runtimes, the one its ModelActivation owns wins a model name, else the one holding it keeps it
    # (NameHeld, NameContested, behaviour §3).
    STICKY_RUNTIME_NAMES = "sticky-runtime-names"
    # With auto (or a configured model that is not published), the default the written catalog holds stays
    # while it is published (behaviour §5.1).
    STICKY_DEFAULTS = "sticky-defaults"
    # A catalog entry's metadata comes from the routes it owns before any LiteLLM row it does not own
    # (behaviour §6).
    OWNED_METADATA = "owned-metadata"
    # A KubeAI Model that KubeAI scales up from zero on a request is published while no replica is ready
    # (ScalesFromZero), and a start that outlasts its deadline is reported (StartDeadlineExceeded); without
    # it a Model is published only while a replica is ready (behaviour §1.1).
    SCALE_FROM_ZERO = "scale-from-zero"
    # The re-read of LiteLLM after writes (and after a write's answer left what LiteLLM holds, or its
    # status, unknown) is a command the core plans (ObserveLiteLLM); without it the observer chose it.
    PLANNED_LITELLM_READS = "planned-litellm-reads"
    # Rows whose change reaches the core in one tick are held like a pair, as rows of one moment delivered
    # in later ticks are; a moment stays marked as one of many rows once a later one begins; and a pair
    # waits for the whole burst window, by which a third moment would make a burst (damping._arrived,
    # _pair_hold). Without it rows of one tick go out once the probe has passed, a moment's mark is lost
    # at the next moment, and a pair waits half the window: rows went out before the burst behind them
    # was seen (P4).
    MOMENTS_OF_MANY_ROWS = "moments-of-many-rows"
    # While a burst lasts, and for a settle window after it was last seen, a deferred LiteLLM write waits
    # (up to the cap), though its row has been still for the settle window: a model flapping with the rest
    # is still now and then for longer than the window when the API server is slow, and was written out
    # and back (damping.write_due); and a pair's hold ends at the cap too (a burst window longer than the
    # cap held it past). Without it a row is written once still for the settle window, and a pair waits
    # the whole burst window.
    CALM_AFTER_BURSTS = "calm-after-bursts"
    # A row is held like a pair when another row changed within two probes of it: a moment is known by its
    # first row, and a row changing 11 ms after it, 9 ms after the moment's last row, went out alone at
    # P4's start (damping._pair_hold). A pair waits the burst window less those two probes, so the pairs a
    # stall makes of isolated changes go out within P1's 100 ms (damping.pair_hold_of). Without it, within one
    # probe, and a pair waits the whole window.
    PAIRS_BY_PROBES = "pairs-by-probes"


ALL_GATES: Final = frozenset(Gate)
NO_GATES: Final[frozenset[Gate]] = frozenset()
