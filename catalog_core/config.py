"""Decision-affecting configuration, read from an environment *mapping* (behaviour §10).

The core never reads ``os.environ``: the shell passes the mapping in, and the
event log's header records the resulting values so a replay decides the same.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from catalog_core.catalog_files import KEYS
from catalog_core.gates import ALL_GATES, Gate
from catalog_core.urls import DestinationPattern, pattern_entries

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


@attrs.frozen
class ConfigError:
    variable: str
    message: str

    def __str__(self) -> str:
        return f"{self.variable}: {self.message}"


@attrs.frozen
class CatalogConfig:
    namespace: str = "ai"
    appliance_namespace: str = "ai-system"
    litellm_base_url: str = "http://litellm.ai.svc.cluster.local:4000"
    litellm_api_base: str = "http://litellm.ai.svc.cluster.local:4000/v1"
    kubeai_api_base: str = "http://kubeai.ai.svc.cluster.local/openai/v1"
    catalog_configmap: str = "ai-model-catalog"
    external_models_configmap: str = "ai-external-models"
    default_chat_model: str = "auto"
    default_embedding_model: str = "auto"
    opencode_default_context_tokens: int = 131072
    opencode_default_output_tokens: int = 8192
    paperclip_max_output_tokens: int = 4096
    paperclip_headroom_tokens: int = 4096
    consumer_restart_enabled: bool = True
    agent_template_sync_enabled: bool = True
    agent_template_names: tuple[str, ...] = ("litellm-default",)
    runtime_health_seconds: int = 15
    openclaw_tools_profile: str = "coding"
    # The Secret that holds LiteLLM's master key (behaviour §1.5): never handed out as a provider key.
    litellm_master_key_secret: str = "litellm-masterkey-secret"
    # API bases toward which a route may rely on LiteLLM's own credentials (its environment's keys, e.g.
    # AZURE_API_KEY, or its cloud identity), as DestinationPattern entries (behaviour §1.5). Empty: none.
    ambient_credential_api_bases: tuple[str, ...] = ()
    # Write economy under churn: a LiteLLM row that changes again soon after a write waits
    # until it has been still this long, but no longer than the cap; consumers roll (and AgentTemplates
    # are patched) only onto a catalog that has been stable for its own window.
    litellm_settle_seconds: float = 2.0
    litellm_settle_cap_seconds: float = 10.0
    rollout_settle_seconds: float = 5.0
    # ...and during a burst (rows changing at this many distinct moments within the window: many
    # models flapping at once) a row that was still waits to settle too (0: no burst rule).
    litellm_burst_rows: int = 4
    litellm_burst_window_seconds: float = 0.1
    # A still row's change is held this long first; another row changing meanwhile is a burst too, so
    # the burst's first rows wait with the rest (0: written at once; P1 allows 20 ms at the median).
    litellm_burst_probe_seconds: float = 0.01
    # The planning rules in force (catalog_core.gates): every one, always, in a running controller; fewer
    # only when a replay plans a log recorded before some existed (its header says which). Not a setting:
    # ``from_env`` never reads it and ``as_env`` never writes it.
    gates: frozenset[Gate] = ALL_GATES
    # The data keys of the catalog ConfigMap the run renders (catalog_core.catalog_files): every declared
    # one, always, in a running controller; fewer only when a replay plans a log recorded before some
    # were declared (its header says which), whose writes held only those. Not a setting either.
    catalog_keys: frozenset[str] = KEYS
    # A KubeAI Model that KubeAI scales up from zero on a request (autoscaling on, minReplicas 0 or absent)
    # is published while no replica is ready (false: only while a replica is ready)...
    kubeai_scale_from_zero: bool = True
    # ...and reported (StartDeadlineExceeded) when it has had pods this long with none ready. Kubernetes'
    # own default for a Deployment that makes no progress (progressDeadlineSeconds).
    kubeai_start_deadline_seconds: float = 600.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> CatalogConfig | ConfigError:
        reader = _Reader(env)
        d = cls()  # the defaults (class attributes of a slotted class are descriptors, not values)
        base_url = reader.url("LITELLM_BASE_URL", d.litellm_base_url)
        values: dict[str, Any] = {
            "namespace": reader.dns("NAMESPACE", d.namespace, _DNS_LABEL),
            "appliance_namespace": reader.dns("APPLIANCE_NAMESPACE", d.appliance_namespace, _DNS_LABEL),
            "litellm_base_url": base_url,
            "litellm_api_base": reader.url("LITELLM_API_BASE", f"{base_url}/v1"),
            "kubeai_api_base": reader.url("KUBEAI_API_BASE", d.kubeai_api_base),
            "catalog_configmap": reader.dns("CATALOG_CONFIGMAP", d.catalog_configmap, _DNS_SUBDOMAIN),
            "external_models_configmap": reader.dns(
                "EXTERNAL_MODELS_CONFIGMAP", d.external_models_configmap, _DNS_SUBDOMAIN
            ),
            "default_chat_model": reader.text("AI_APPLIANCE_DEFAULT_CHAT_MODEL", d.default_chat_model),
            "default_embedding_model": reader.text(
                "AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL", d.default_embedding_model
            ),
            "opencode_default_context_tokens": reader.integer(
                "OPENCODE_DEFAULT_CONTEXT_TOKENS", d.opencode_default_context_tokens, minimum=1
            ),
            "opencode_default_output_tokens": reader.integer(
                "OPENCODE_DEFAULT_OUTPUT_TOKENS", d.opencode_default_output_tokens, minimum=1
            ),
            "paperclip_max_output_tokens": reader.integer(
                "PAPERCLIP_OPENCODE_MAX_OUTPUT_TOKENS", d.paperclip_max_output_tokens, minimum=1
            ),
            "paperclip_headroom_tokens": reader.integer(
                "PAPERCLIP_OPENCODE_CONTEXT_HEADROOM_TOKENS", d.paperclip_headroom_tokens, minimum=0
            ),
            "consumer_restart_enabled": reader.boolean(
                "CONSUMER_RESTART_ENABLED", d.consumer_restart_enabled
            ),
            "agent_template_sync_enabled": reader.boolean(
                "AGENT_TEMPLATE_SYNC_ENABLED", d.agent_template_sync_enabled
            ),
            "agent_template_names": reader.names("AGENT_TEMPLATE_NAMES", d.agent_template_names),
            "runtime_health_seconds": reader.integer(
                "CATALOG_RUNTIME_HEALTH_SECONDS", d.runtime_health_seconds, minimum=1
            ),
            "litellm_master_key_secret": reader.dns(
                "LITELLM_MASTER_KEY_SECRET_NAME", d.litellm_master_key_secret, _DNS_SUBDOMAIN
            ),
            "ambient_credential_api_bases": reader.patterns(
                "CATALOG_AMBIENT_CREDENTIAL_API_BASES", d.ambient_credential_api_bases
            ),
            "litellm_settle_seconds": reader.seconds(
                "CATALOG_LITELLM_SETTLE_SECONDS", d.litellm_settle_seconds
            ),
            "litellm_settle_cap_seconds": reader.seconds(
                "CATALOG_LITELLM_SETTLE_CAP_SECONDS", d.litellm_settle_cap_seconds
            ),
            "rollout_settle_seconds": reader.seconds(
                "CATALOG_ROLLOUT_SETTLE_SECONDS", d.rollout_settle_seconds
            ),
            "litellm_burst_rows": reader.integer(
                "CATALOG_LITELLM_BURST_ROWS", d.litellm_burst_rows, minimum=0
            ),
            "litellm_burst_window_seconds": reader.seconds(
                "CATALOG_LITELLM_BURST_WINDOW_SECONDS", d.litellm_burst_window_seconds
            ),
            "litellm_burst_probe_seconds": reader.seconds(
                "CATALOG_LITELLM_BURST_PROBE_SECONDS", d.litellm_burst_probe_seconds, limit=1.0
            ),
            "kubeai_scale_from_zero": reader.boolean(
                "CATALOG_KUBEAI_SCALE_FROM_ZERO", d.kubeai_scale_from_zero
            ),
            "kubeai_start_deadline_seconds": reader.seconds(
                "CATALOG_KUBEAI_START_DEADLINE_SECONDS", d.kubeai_start_deadline_seconds, limit=86400.0
            ),
        }
        if values["kubeai_start_deadline_seconds"] < 1.0:
            reader.fail_once("CATALOG_KUBEAI_START_DEADLINE_SECONDS", "must be at least 1")
        if values["litellm_settle_cap_seconds"] < values["litellm_settle_seconds"]:
            reader.fail_once(
                "CATALOG_LITELLM_SETTLE_CAP_SECONDS", "must be at least CATALOG_LITELLM_SETTLE_SECONDS"
            )
        if values["litellm_burst_rows"] == 1:
            reader.fail_once("CATALOG_LITELLM_BURST_ROWS", "must be 0 (off) or at least 2")
        if reader.error is not None:
            return reader.error
        return cls(**values)

    def as_env(self) -> dict[str, str]:
        """The settings in their environment spelling (for the event log header, which records ``gates``
        and ``catalog_keys`` beside them)."""
        return {
            "NAMESPACE": self.namespace,
            "APPLIANCE_NAMESPACE": self.appliance_namespace,
            "LITELLM_BASE_URL": self.litellm_base_url,
            "LITELLM_API_BASE": self.litellm_api_base,
            "KUBEAI_API_BASE": self.kubeai_api_base,
            "CATALOG_CONFIGMAP": self.catalog_configmap,
            "EXTERNAL_MODELS_CONFIGMAP": self.external_models_configmap,
            "AI_APPLIANCE_DEFAULT_CHAT_MODEL": self.default_chat_model,
            "AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL": self.default_embedding_model,
            "OPENCODE_DEFAULT_CONTEXT_TOKENS": str(self.opencode_default_context_tokens),
            "OPENCODE_DEFAULT_OUTPUT_TOKENS": str(self.opencode_default_output_tokens),
            "PAPERCLIP_OPENCODE_MAX_OUTPUT_TOKENS": str(self.paperclip_max_output_tokens),
            "PAPERCLIP_OPENCODE_CONTEXT_HEADROOM_TOKENS": str(self.paperclip_headroom_tokens),
            "CONSUMER_RESTART_ENABLED": str(self.consumer_restart_enabled).lower(),
            "AGENT_TEMPLATE_SYNC_ENABLED": str(self.agent_template_sync_enabled).lower(),
            "AGENT_TEMPLATE_NAMES": ",".join(self.agent_template_names),
            "CATALOG_RUNTIME_HEALTH_SECONDS": str(self.runtime_health_seconds),
            "LITELLM_MASTER_KEY_SECRET_NAME": self.litellm_master_key_secret,
            "CATALOG_AMBIENT_CREDENTIAL_API_BASES": ",".join(self.ambient_credential_api_bases),
            "CATALOG_LITELLM_SETTLE_SECONDS": f"{self.litellm_settle_seconds:g}",
            "CATALOG_LITELLM_SETTLE_CAP_SECONDS": f"{self.litellm_settle_cap_seconds:g}",
            "CATALOG_ROLLOUT_SETTLE_SECONDS": f"{self.rollout_settle_seconds:g}",
            "CATALOG_LITELLM_BURST_ROWS": str(self.litellm_burst_rows),
            "CATALOG_LITELLM_BURST_WINDOW_SECONDS": f"{self.litellm_burst_window_seconds:g}",
            "CATALOG_LITELLM_BURST_PROBE_SECONDS": f"{self.litellm_burst_probe_seconds:g}",
            "CATALOG_KUBEAI_SCALE_FROM_ZERO": str(self.kubeai_scale_from_zero).lower(),
            "CATALOG_KUBEAI_START_DEADLINE_SECONDS": f"{self.kubeai_start_deadline_seconds:g}",
        }


# An integer setting is a count or a number of tokens or seconds: more digits than this is a mistake, and
# int() refuses strings past 4,300 digits with an exception of its own.
MAX_INTEGER_DIGITS = 18
_QUOTED_CHARS = 64


def quoted_setting(value: str) -> str:
    """A value quoted in an error message, cut short: the message is one line of a terminal or a log."""
    if len(value) <= _QUOTED_CHARS:
        return repr(value)
    return f"{value[: _QUOTED_CHARS - 3]!r}... ({len(value):,} characters)"


class _Reader:
    """Reads variables, remembering the first error (reported as one line)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.error: ConfigError | None = None

    def _raw(self, name: str) -> str | None:
        value = self.env.get(name)
        if value is None or value.strip() == "":
            return None
        return value.strip()

    def _fail(self, name: str, message: str) -> None:
        if self.error is None:
            self.error = ConfigError(name, message)

    def text(self, name: str, default: str) -> str:
        return self._raw(name) or default

    def dns(self, name: str, default: str, pattern: re.Pattern[str]) -> str:
        value = self._raw(name)
        if value is None:
            return default
        if not pattern.match(value):
            self._fail(name, f"{quoted_setting(value)} is not a valid Kubernetes name")
        return value

    def url(self, name: str, default: str) -> str:
        """An http(s) URL without a trailing ``/`` (behaviour §5.2: it is used without one everywhere)."""
        value = self._raw(name)
        if value is None:
            return default
        if not re.match(r"^https?://[^\s/]+", value):
            shown = (
                "the value" if "@" in value else quoted_setting(value)
            )  # never echo what may hold a password
            self._fail(name, f"{shown} is not an http(s) URL")
        elif "@" in value.split("://", 1)[1].split("/", 1)[0]:
            # These URLs are published in the catalog ConfigMap and recorded in the event log.
            self._fail(name, "must not carry credentials (user:password@)")
        return value.rstrip("/")

    def integer(self, name: str, default: int, minimum: int) -> int:
        value = self._raw(name)
        if value is None:
            return default
        if value.isascii() and value.isdigit() and len(value) > MAX_INTEGER_DIGITS:
            self._fail(
                name,
                f"must be an integer of at most {MAX_INTEGER_DIGITS} digits, got {quoted_setting(value)}",
            )
            return default
        if not (value.isascii() and value.isdigit()) or int(value) < minimum:
            self._fail(name, f"must be an integer >= {minimum}, got {quoted_setting(value)}")
            return default
        return int(value)

    def fail_once(self, name: str, message: str) -> None:
        self._fail(name, message)

    def seconds(self, name: str, default: float, limit: float = 3600.0) -> float:
        """A duration in seconds, 0 to ``limit``, decimals allowed."""
        value = self._raw(name)
        if value is None:
            return default
        try:
            number = float(value) if value.isascii() else -1.0
        except ValueError:
            number = -1.0
        if not 0.0 <= number <= limit:  # also refuses nan and inf
            self._fail(name, f"must be a number of seconds from 0 to {limit:g}, got {quoted_setting(value)}")
            return default
        return number

    def boolean(self, name: str, default: bool) -> bool:
        value = self._raw(name)
        if value is None:
            return default
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
        self._fail(name, f"must be true or false, got {quoted_setting(value)}")
        return default

    def patterns(self, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
        """Destination patterns (``DestinationPattern``), separated by commas or spaces."""
        value = self.env.get(name)
        if value is None:
            return default
        entries = pattern_entries(value)
        for entry in entries:
            if DestinationPattern.parse(entry) is None:
                self._fail(
                    name, f"{entry[:80]!r} is not an API base pattern (https://host[:port][/path], *.domain)"
                )
        return entries

    def names(self, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self.env.get(name)
        if value is None:
            return default
        items = tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
        for item in items:
            if not _DNS_SUBDOMAIN.match(item):
                self._fail(name, f"{quoted_setting(item)} is not a valid Kubernetes name")
        return items
