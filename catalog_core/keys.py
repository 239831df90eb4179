"""Typed keys: the one place key strings are formatted and parsed.

The state, the event log and the shell's queue hold keys as text (``kubeai/llama``, ``litellm/<id>``,
``rollout/<ns>/Deployment/<name>``), and that text must never change (snapshots and recorded outcomes
name it). Everything else builds and reads keys through these values: no module joins or splits a key
string by hand.

- ``ItemKey``: a source item, ``<source prefix>/<name>`` (the prefix is the source's, see ``registry``).
- ``RefKey``: what a claim depends on, ``secret/<name>``, ``service/<name>``, ``activation/<name>``.
- ``CommandKey``: what a command writes or reads; the queue keeps one entry per key.
"""

from __future__ import annotations

import functools
from enum import StrEnum
from typing import assert_never

import attrs


def item_text(prefix: str, name: str) -> str:
    """``ItemKey(prefix, name).text`` without making the key (the watch events' path, bench P5)."""
    return f"{prefix}/{name}"


@attrs.frozen
class ItemKey:
    prefix: str  # the item prefix of its source (registry.SourceSpec.item_prefix)
    name: str

    @property
    def text(self) -> str:
        return item_text(self.prefix, self.name)

    @classmethod
    def parse(cls, text: str) -> ItemKey:
        prefix, _, name = text.partition("/")
        return cls(prefix, name)

    def warnings_key(self) -> str:
        """The key under which the Warning Event about this item's ignored fields is announced."""
        return f"{self.text}#warnings"


class RefKind(StrEnum):
    SECRET = "secret"
    SERVICE = "service"
    ACTIVATION = "activation"


@attrs.frozen
class RefKey:
    kind: RefKind
    name: str

    @property
    def text(self) -> str:
        return f"{self.kind.value}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> RefKey | None:
        kind, sep, name = text.partition("/")
        try:
            return cls(RefKind(kind), name) if sep else None
        except ValueError:
            return None


def secret_ref(name: str) -> str:
    return RefKey(RefKind.SECRET, name).text


def service_ref(name: str) -> str:
    return RefKey(RefKind.SERVICE, name).text


def activation_ref(name: str) -> str:
    return RefKey(RefKind.ACTIVATION, name).text


class CommandKind(StrEnum):
    LITELLM = "litellm"  # litellm/<model id>
    CATALOG = "catalog"  # catalog/<ns>/<name>
    AGENT_TEMPLATE = "agenttemplate"  # agenttemplate/<ns>/<name>
    ROLLOUT = "rollout"  # rollout/<ns>/<Kind>/<name>
    EVICT = "evict"  # evict/<ns>/<name>
    PROBE = "probe"  # probe/<health key>
    WATCH = "watch"  # watch/secrets/<ns>
    EVENT = "event"  # event/<command id>
    READ = "read"  # read/litellm: a re-read of a peer the core plans (not a watch)


@attrs.frozen
class CommandKey:
    kind: CommandKind
    parts: tuple[str, ...]

    @property
    def text(self) -> str:
        return "/".join((self.kind.value, *self.parts))

    @property
    def last(self) -> str:
        """What the key names: a model id, a runtime, an object's name."""
        return self.parts[-1] if self.parts else ""

    @classmethod
    def parse(cls, text: str) -> CommandKey | None:
        kind, sep, rest = text.partition("/")
        try:
            parsed = CommandKind(kind)
        except ValueError:
            return None
        if not sep:
            return None
        match parsed:
            case CommandKind.LITELLM | CommandKind.PROBE | CommandKind.EVENT | CommandKind.READ:
                # a LiteLLM model id or a runtime name may hold a slash: the rest is one part
                return cls(parsed, (rest,))
            case CommandKind.ROLLOUT:
                return cls(parsed, tuple(rest.split("/", 2)))
            case CommandKind.CATALOG | CommandKind.AGENT_TEMPLATE | CommandKind.EVICT | CommandKind.WATCH:
                return cls(parsed, tuple(rest.split("/", 1)))
            case _:
                assert_never(parsed)


def litellm_key(model_id: str) -> str:
    return CommandKey(CommandKind.LITELLM, (model_id,)).text


def is_litellm_key(key: str) -> bool:
    return key.startswith(CommandKind.LITELLM.value + "/")


def is_catalog_key(key: str) -> bool:
    return key.startswith(CommandKind.CATALOG.value + "/")


def litellm_id(key: str) -> str | None:
    """The model id a ``litellm/<id>`` key writes; None for any other key."""
    parsed = CommandKey.parse(key)
    return parsed.last if parsed is not None and parsed.kind is CommandKind.LITELLM else None


def catalog_key(namespace: str, name: str) -> str:
    return CommandKey(CommandKind.CATALOG, (namespace, name)).text


def agent_template_key(namespace: str, name: str) -> str:
    return CommandKey(CommandKind.AGENT_TEMPLATE, (namespace, name)).text


def rollout_key(namespace: str, kind: str, name: str) -> str:
    return CommandKey(CommandKind.ROLLOUT, (namespace, kind, name)).text


def evict_key(namespace: str, name: str) -> str:
    return CommandKey(CommandKind.EVICT, (namespace, name)).text


@functools.lru_cache(maxsize=4096)
def probe_key(health_key: str) -> str:
    """Cached (bench P6): every probe and its answer ask for it; a runtime keeps its key."""
    return CommandKey(CommandKind.PROBE, (health_key,)).text


def secret_watch_key(namespace: str) -> str:
    return CommandKey(CommandKind.WATCH, ("secrets", namespace)).text


LITELLM_READ_KEY = CommandKey(CommandKind.READ, ("litellm",)).text


def event_key(command_id: str) -> str:
    return CommandKey(CommandKind.EVENT, (command_id,)).text


# Announcement keys: one Warning Event per distinct problem of what the key names (control.announced).
def configmap_announcement(which: str) -> str:
    """``configmap/external`` (the unreadable models document) or ``configmap/catalog`` (too large)."""
    return f"configmap/{which}"


def agent_template_announcement(name: str) -> str:
    return f"agenttemplate/{name}"


def failure_announcement(command_key: str) -> str:
    """The Warning Event about a write that keeps failing on its target."""
    return f"{command_key}#failed"


def recovery_announcement(command_key: str) -> str:
    """The Normal Event once that write no longer fails."""
    return f"{command_key}#recovered"
