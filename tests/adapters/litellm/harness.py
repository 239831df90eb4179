"""Drives the real core fold with the real LiteLLM executor and observer, against the fake or the real proxy.

The loop is the shell's, made deterministic: fold events, ``Ticked(now)``, run the commands (LiteLLM
ones with ``LiteLLMExecutor``, the rest with ``catalog_core.simulate.SimulatedWorld``), fold their
outcomes, poll ``/model/info`` whenever the observer asks for it (after writes, after a 500 on create),
and advance a virtual clock to the next retry when nothing else is due — until a fixed point.

On a shared real proxy, a harness sees only the rows whose model name starts with its test's prefix
(other tests' rows and foreign rows left on the proxy are not part of its world).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import anyio
import attrs
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from adapters.litellm.client import Answer, LiteLLMClient, LiteLLMTransportError
from adapters.litellm.executor import LiteLLMExecutor
from adapters.litellm.observer import LiteLLMObserver
from adapters.vault import SecretVault
from catalog_core import registry
from catalog_core.commands import Command, ObserveLiteLLM
from catalog_core.config import CatalogConfig
from catalog_core.events import (
    CommandCompleted,
    Event,
    LiteLLMRowsObserved,
    ObjectUpserted,
    SourceKind,
    SourceListed,
    Ticked,
)
from catalog_core.fold import initial_state, step
from catalog_core.redact import redact_configmap, redact_for_source, redact_secret
from catalog_core.simulate import SimulatedWorld
from catalog_core.state import CatalogState
from tests.adapters.litellm.conftest import Peer

NAMESPACE = "ai"


def kubeai_object(
    name: str,
    *,
    ready: bool = True,
    context_window: int | None = None,
    max_output_tokens: int | None = None,
    features: Sequence[str] = ("TextGeneration",),
) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    if context_window is not None:
        annotations["ai-appliance.io/context-window"] = str(context_window)
    if max_output_tokens is not None:
        annotations["ai-appliance.io/max-output-tokens"] = str(max_output_tokens)
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}", "annotations": annotations},
        "spec": {
            "features": list(features),
            "engine": "VLLM",
            "url": f"hf://x/{name}",
            "resourceProfile": "cpu:1",
            "minReplicas": 1,  # published only while ready
        },
        "status": {"replicas": {"all": 1, "ready": 1 if ready else 0}},
    }


PROVIDER_LABELS = {"appliance.magicstick.dev/model-provider-secret": "true"}


API_BASES_ANNOTATION = "appliance.magicstick.dev/model-provider-api-bases"


def secret_object(
    name: str,
    data: Mapping[str, str],
    labels: Mapping[str, str] | None = None,
    api_bases: str | None = None,
    resource_version: str = "1",
) -> dict[str, Any]:
    """A model-provider Secret (labelled, behaviour §1.5) unless ``labels`` says otherwise; ``api_bases``:
    where its key may be sent besides its provider's own API."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": NAMESPACE,
        "uid": f"uid-{name}",
        "resourceVersion": resource_version,
        "labels": dict(PROVIDER_LABELS if labels is None else labels),
    }
    if api_bases is not None:
        meta["annotations"] = {API_BASES_ANNOTATION: api_bases}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "stringData": dict(data)}


# LiteLLM reloads its router from its database this often, and on every /model/new. On 1.84.0 a reload
# that read the database before a delete and applies it after puts the deleted row back in the router
# (so in /model/info) until the next reload; a create can be dropped from it the same way. 1.108.7
# orders its deletes after any such reload (its MODEL_RECONCILE_LOCK).
ROUTER_RELOAD_SECONDS = 30.0

# These scenarios prove one write per change against LiteLLM, with changes a tick apart on a still
# clock: the settle windows (issue 14, proven in tests/core/test_write_damping.py) are off here.
_NO_DAMPING = CatalogConfig(litellm_settle_seconds=0.0, litellm_settle_cap_seconds=0.0)


@attrs.define
class Harness:
    peer: Peer
    client: LiteLLMClient
    vault: SecretVault
    observer: LiteLLMObserver
    executor: LiteLLMExecutor
    state: CatalogState
    world: SimulatedWorld = attrs.field(factory=SimulatedWorld)
    now: float = 1000.0
    kubeai: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    external: list[dict[str, Any]] = attrs.field(factory=list)
    activations: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    executed: list[Command] = attrs.field(factory=list)  # LiteLLM commands, in order
    outcomes: list[CommandCompleted] = attrs.field(factory=list)
    observed: list[Event] = attrs.field(factory=list)  # what the observer sent (filtered)
    reads: list[ObserveLiteLLM] = attrs.field(factory=list)  # the re-reads the core planned, in order
    _settle_client: LiteLLMClient | None = None
    _send: MemoryObjectSendStream[Event] | None = None
    _receive: MemoryObjectReceiveStream[Event] | None = None

    @classmethod
    def build(cls, peer: Peer, *, config: CatalogConfig | None = None, **client_kwargs: Any) -> Harness:
        client = peer.client(**client_kwargs)
        vault = SecretVault()
        observer = LiteLLMObserver(client, resync_seconds=30.0)
        executor = LiteLLMExecutor(client, vault, observer.shared)
        harness = cls(peer, client, vault, observer, executor, initial_state(config or _NO_DAMPING))
        harness._send, harness._receive = anyio.create_memory_object_stream[Event](100)
        return harness

    # --- the world's inputs
    def add_kubeai(self, suffix: str, **kwargs: Any) -> str:
        name = self.peer.name(suffix)
        self.kubeai[name] = kubeai_object(name, **kwargs)
        return name

    def add_external(self, suffix: str, **fields: Any) -> str:
        name = self.peer.name(suffix)
        self.external = [m for m in self.external if m["name"] != name] + [{"name": name, **fields}]
        return name

    def add_activation(self, suffix: str, **external: Any) -> str:
        """An external ModelActivation (behaviour §1.3)."""
        name = self.peer.name(suffix)
        self.activations[name] = {
            "apiVersion": "appliance.magicstick.dev/v1alpha1",
            "kind": "ModelActivation",
            "metadata": {"name": name, "namespace": "ai-system", "uid": f"uid-{name}"},
            "spec": {"type": "external", "external": external},
        }
        return name

    def add_secret(
        self,
        name: str,
        data: Mapping[str, str],
        labels: Mapping[str, str] | None = None,
        api_bases: str | None = None,
    ) -> None:
        redacted = redact_secret(secret_object(name, data, labels, api_bases))
        self.vault.replace_secret(NAMESPACE, name, redacted.secrets)
        self.world.secrets[name] = redacted.obj

    def edit_secret(
        self, name: str, data: Mapping[str, str], *, resource_version: str, api_bases: str | None = None
    ) -> None:
        """An edit of a Secret the core has read, as its watch reports it (a new resourceVersion)."""
        redacted = redact_secret(
            secret_object(name, data, None, api_bases, resource_version=resource_version)
        )
        self.vault.replace_secret(NAMESPACE, name, redacted.secrets)
        self.world.secrets[name] = redacted.obj
        self.fold([ObjectUpserted(SourceKind.SECRETS, redacted.obj)])

    def listings(self) -> list[Event]:
        """Every catalog source, listed in full (Secrets come through the WatchSecrets command)."""
        events: list[Event] = []
        for kind in registry.CATALOG_KINDS:
            if kind is SourceKind.KUBEAI_MODELS:
                events.append(SourceListed(kind, tuple(self.kubeai.values())))
            elif kind is SourceKind.EXTERNAL_MODELS:
                configmap = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "ai-external-models", "namespace": NAMESPACE, "uid": "uid-external"},
                    "data": {"models.json": json.dumps({"models": self.external})},
                }
                redacted = redact_configmap(configmap, "models.json")
                self.vault.update(redacted.secrets)
                events.append(SourceListed(kind, (redacted.obj,)))
            elif kind is SourceKind.MODEL_ACTIVATIONS:
                listed = (redact_for_source(kind, a) for a in self.activations.values())
                events.append(SourceListed(kind, tuple(r.obj for r in listed)))
            elif kind is not SourceKind.SECRETS:
                events.append(SourceListed(kind, ()))
        return events

    # --- the loop
    def fold(self, events: Iterable[Event]) -> None:
        for event in events:
            result = step(self.state, event)
            self.state = result.state
            assert not result.commands  # only ticks plan

    def tick(self) -> list[Command]:
        result = step(self.state, Ticked(self.now))
        self.state = result.state
        return list(result.commands)

    async def tick_litellm(self) -> list[Command]:
        """Tick; carry out the non-LiteLLM commands at once and hand back the LiteLLM ones, unexecuted."""
        mine = []
        for command in self.tick():
            if self.executor.handles(command):
                mine.append(command)
            else:
                await self.execute(command)
        return mine

    async def observe(self, *, planned: bool = False, settle: bool = True) -> None:
        """One poll of /model/info through the observer; its event, scoped to this test's rows.
        ``planned``: the core's re-read (``ObserveLiteLLM``), which the observer always answers.
        ``settle=False``: the listing as it is, a lag of LiteLLM's router included (``settle``)."""
        assert self._send is not None and self._receive is not None
        if settle:
            await self.settle()
        await self.observer.poll_once(self._send, planned=planned)
        while True:
            try:
                event = self._receive.receive_nowait()
            except anyio.WouldBlock:
                break
            if isinstance(event, LiteLLMRowsObserved):
                event = LiteLLMRowsObserved(
                    tuple(r for r in event.rows if str(r.get("model_name", "")).startswith(self.peer.prefix))
                )
            self.observed.append(event)
            self.fold([event])

    async def start(self) -> list[Command]:
        self.fold(self.listings())
        await self.observe()
        return await self.converge()

    async def resync(self) -> list[Command]:
        """What a resync does: list the sources again, poll LiteLLM, tick until quiet."""
        self.fold(self.listings())
        await self.observe()
        return await self.converge()

    async def execute(self, command: Command) -> None:
        if isinstance(command, ObserveLiteLLM):
            self.reads.append(command)
            await self.observe(planned=True)
            return
        if self.executor.handles(command):
            events = list(await self.executor.execute(command))
            self.executed.append(command)
            self.outcomes.extend(e for e in events if isinstance(e, CommandCompleted))
        else:
            events = self.world.execute(command)
        self.fold(events)

    async def rounds(self, count: int) -> list[Command]:
        """Run ``count`` rounds whatever happens (e.g. while LiteLLM is down); the LiteLLM commands run."""
        start = len(self.executed)
        for _ in range(count):
            await self._round()
        return self.executed[start:]

    async def converge(self, max_rounds: int = 40) -> list[Command]:
        """Rounds until nothing is planned, due, in flight or waiting to be observed."""
        start = len(self.executed)
        for _ in range(max_rounds):
            if not await self._round():
                return self.executed[start:]
        raise AssertionError(f"no fixed point after {max_rounds} rounds: {self.executed[start:][-6:]}")

    async def _round(self) -> bool:
        """One round; False when it found nothing to do."""
        commands = self.tick()
        for command in commands:
            await self.execute(command)
        if commands:
            # the loop ticks again at once on the answers (a read the core plans after them goes before
            # a retry waiting out its backoff): the clock moves on only once nothing more is planned now
            return True
        assert not self.state.control.inflight, self.state.control.inflight
        later = [r.not_before for r in self.state.control.retries.values() if r.not_before > self.now]
        if later:
            self.now = min(later)
            return True
        return False

    async def settle(self) -> None:
        """Wait until the real peer's router lists this test's rows as its database holds them.

        Whatever we wrote is in the database when LiteLLM answers; only its router can lag it (see
        ``ROUTER_RELOAD_SECONDS``), and no write of ours mends that. So the scenarios' reads and the
        assertions on them start from LiteLLM's settled view: a row still in the database stays in
        the listing, a deleted row leaves it by LiteLLM's next reload at the latest. Without a database
        of ours to read (the fake, a configured proxy) this returns at once. Its reads go through a
        client of their own, so they are never counted as the observer's or the executor's."""
        if self.peer.database_url is None:
            return
        if self._settle_client is None:
            self._settle_client = self.peer.client()
        began = anyio.current_time()
        lag: tuple[set[str], set[str]] | None = None
        while True:
            try:
                listed = _rows_of(await self._settle_client.info(), self.peer.prefix)
            except LiteLLMTransportError:
                listed = None
            stored = await self.peer.stored_ids()
            if listed is None or stored is None or set(listed) == stored:
                break
            lag = lag or (set(listed) - stored, stored - set(listed))
            if anyio.current_time() - began > ROUTER_RELOAD_SECONDS + 10:
                break  # not a lag LiteLLM mends by itself: the assertions that follow show it
            await anyio.sleep(0.5)
        if lag is not None:
            seconds = anyio.current_time() - began
            print(
                f"LiteLLM's router lagged its database for {seconds:.1f} s: "
                f"listed only {sorted(lag[0])}, stored only {sorted(lag[1])}"
            )

    # --- views for assertions
    async def rows(self) -> dict[str, dict[str, Any]]:
        """This test's rows on the peer, by id, as /model/info shows them once LiteLLM has settled."""
        await self.settle()
        answer = await self.client.info()
        rows = _rows_of(answer, self.peer.prefix)
        assert rows is not None, answer
        return rows

    def kinds(self, commands: Iterable[Command]) -> list[tuple[str, str]]:
        return [(type(c).__name__, c.key) for c in commands]


def _rows_of(answer: Answer, prefix: str) -> dict[str, dict[str, Any]] | None:
    """The rows of a /model/info answer whose names start with ``prefix``, by id; None when it failed."""
    if answer.status == 500 and "not loaded" in json.dumps(answer.body):
        return {}  # LiteLLM with no model at all (observer.py reads it the same way)
    if answer.status != 200:
        return None
    return {
        r["model_info"]["id"]: r
        for r in answer.body["data"]
        if str(r.get("model_name", "")).startswith(prefix)
    }
