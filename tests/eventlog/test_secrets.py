"""No secret value ever reaches the event log: a planted canary, and the recorder's own guard."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest

from adapters.eventlog.guard import guard
from adapters.eventlog.recorder import Recorder, RecorderSettings
from app import explain, replay
from catalog_core.config import CatalogConfig
from catalog_core.events import LiteLLMRowsObserved, ObjectUpserted, SourceKind, SourceListed
from catalog_core.redact import redact_configmap, redact_for_source, redact_secret
from catalog_core.sealing import INVALID_JSON_MARKER, redacted_fingerprint
from tests.eventlog.harness import START
from tests.simulation import SimulatedShell

CANARY = "sk-canary-7f3d9a1e5b2c4d6f8a0b1c2d"
CANARY_INLINE = "sk-inline-canary-0123456789abcdef"
CANARY_ACTIVATION = "sk-activation-canary-fedcba98765"
CANARY_ROW = "sk-litellm-row-canary-55aa55aa55"
CANARIES = (CANARY, CANARY_INLINE, CANARY_ACTIVATION, CANARY_ROW)


def b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def forbidden_forms() -> list[bytes]:
    """Each canary as text, in base64 (as Secret data holds it) and URL-safe base64."""
    out = []
    for value in CANARIES:
        out += [value.encode(), b64(value).encode(), base64.urlsafe_b64encode(value.encode())]
        out.append(b64(value).rstrip("=").encode())
    return out


def _secret(name: str, value: str, provider: bool) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": "ai",
            "uid": f"uid-{name}",
            "resourceVersion": "41",
            "labels": {"appliance.magicstick.dev/model-provider-secret": "true"} if provider else {},
        },
        "data": {"apiKey": b64(value)},
    }
    # kubectl keeps a verbatim copy of what was applied, Secret data included.
    manifest["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(manifest),
    }
    return manifest


def _cluster() -> dict[SourceKind, list[dict[str, Any]]]:
    models_json = json.dumps(
        {
            "models": [
                {
                    "name": "gpt-4o",
                    "model": "openai/gpt-4o",
                    "apiKeySecretRef": {"name": "openai", "key": "apiKey"},
                },
                {"name": "inline-model", "model": "openai/gpt-4o-mini", "apiKey": CANARY_INLINE},
                {"name": "nested", "litellm": {"model": "openai/o3", "api_key": CANARY_INLINE}},
            ]
        }
    )
    external = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "ai-external-models",
            "namespace": "ai",
            "uid": "uid-ext",
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                    {"data": {"models.json": models_json}}
                )
            },
        },
        "data": {"models.json": models_json},
    }
    activation = {
        "apiVersion": "appliance.magicstick.dev/v1alpha1",
        "kind": "ModelActivation",
        "metadata": {"name": "smuggler", "namespace": "ai-system", "uid": "uid-act"},
        "spec": {"type": "external", "external": {"model": "openai/gpt-4o", "apiKey": CANARY_ACTIVATION}},
    }
    model = {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": "llama", "namespace": "ai", "uid": "uid-llama"},
        "spec": {"features": ["TextGeneration"]},
        "status": {"replicas": {"ready": 1}},
    }
    return {
        SourceKind.EXTERNAL_MODELS: [external],
        SourceKind.MODEL_ACTIVATIONS: [activation],
        SourceKind.KUBEAI_MODELS: [model],
    }


def test_a_planted_canary_never_reaches_any_file_the_recorder_writes(tmp_path: Path) -> None:
    config = CatalogConfig()
    shell = SimulatedShell(config, now=START)
    directory = tmp_path / "log"
    settings = RecorderSettings(directory / "events.jsonl", max_bytes=16_000, max_files=50, ring_size=500)
    recorder = Recorder(settings, config, writer="inline", clock=lambda: shell.now, run_id="canary")
    shell.recorder = recorder
    shell.secrets([_secret("openai", CANARY, provider=True)])
    cluster = _cluster()
    for source in SourceKind:
        if source is not SourceKind.SECRETS:
            shell.listed(source, cluster.get(source, []))
    shell.world.rows["hand-made"] = {
        "model_name": "byo",
        "litellm_params": {"model": "openai/byo", "api_key": CANARY_ROW},
        "model_info": {"id": "hand-made"},
    }
    shell.rows_observed()
    shell.settle()
    assert {CANARY, CANARY_INLINE} <= set(shell.vault.values())  # the values were in play
    # A LiteLLM poller that forgot the whitelist: the row's credentials reach the recorder.
    shell.feed(LiteLLMRowsObserved(tuple(shell.world.rows.values())))
    shell.settle()
    # The Secret rotates: a new value, watched and redacted like the first.
    shell.upsert(SourceKind.SECRETS, _secret("openai", CANARY + "-v2", provider=True))
    shell.settle()
    # An adapter that forgot to redact at all: the recorder's guard is the last line.
    raw = _secret("openai", CANARY, provider=True)
    raw["stringData"] = {"apiKey": CANARY}
    shell.feed(ObjectUpserted(SourceKind.SECRETS, raw))
    recorder.close()
    with open(directory / "ring.jsonl", "wb") as dump:
        recorder.dump_ring(dump)

    assert recorder.stats.secrets_stripped >= 2  # the rows event and the raw Secret (counted per object)
    assert recorder.stats.rotations >= 2
    written = sorted(directory.iterdir())
    assert len(written) >= 4
    everything = b""
    for path in written:
        content = path.read_bytes()
        for form in forbidden_forms():
            assert form not in content, f"{path.name} holds {form!r}"
        everything += content
    assert everything.count(b'"$redacted"') >= 4  # fingerprints and stripped markers stand in for values
    # Nor does anything replay or explain print.
    out, err = io.StringIO(), io.StringIO()
    assert (
        replay.run(str(directory / "events.jsonl"), from_snapshot=True, as_json=True, out=out, err=err) == 0
    )
    assert explain.run(str(directory / "ring.jsonl"), "inline-model", out=out, err=err) == 0
    printed = (out.getvalue() + err.getvalue()).encode()
    for form in forbidden_forms():
        assert form not in printed


def test_redacted_events_pass_the_guard_untouched() -> None:
    secret = redact_secret(_secret("openai", CANARY, provider=True)).obj
    event = SourceListed(SourceKind.SECRETS, (secret,), ("openai",))
    checked = guard(event)
    assert checked.stripped == 0 and checked.event is event
    cm = redact_configmap(_cluster()[SourceKind.EXTERNAL_MODELS][0], "models.json").obj
    event2 = ObjectUpserted(SourceKind.EXTERNAL_MODELS, cm)
    assert guard(event2).event is event2


def _sealed(value: object) -> bool:
    fp = redacted_fingerprint(value)
    return fp is not None and CANARY not in fp


def test_the_guard_strips_secret_data_string_data_and_annotations() -> None:
    raw = _secret("openai", CANARY, provider=True)
    raw["stringData"] = {"other": CANARY}
    checked = guard(ObjectUpserted(SourceKind.SECRETS, raw))
    obj = checked.event.object  # type: ignore[union-attr]
    assert _sealed(obj["data"]["apiKey"]) and _sealed(obj["data"]["other"])
    assert "stringData" not in obj and "annotations" not in obj["metadata"]
    assert checked.stripped == 1  # one object was not redacted
    assert CANARY not in json.dumps(obj) and b64(CANARY) not in json.dumps(obj)
    assert raw["data"]["apiKey"] == b64(CANARY)  # the event the core received is left as it was


def test_the_guard_strips_inline_keys_and_raw_invalid_json() -> None:
    external = _cluster()[SourceKind.EXTERNAL_MODELS][0]
    checked = guard(ObjectUpserted(SourceKind.EXTERNAL_MODELS, external))
    text = checked.event.object["data"]["models.json"]  # type: ignore[union-attr]
    assert CANARY_INLINE not in text and checked.stripped == 1
    assert redacted_fingerprint(json.loads(text)["models"][1]["apiKey"]) is not None
    broken = {"metadata": {"name": "ai-external-models"}, "data": {"models.json": '{"apiKey": "' + CANARY}}
    checked = guard(ObjectUpserted(SourceKind.EXTERNAL_MODELS, broken))
    assert checked.event.object["data"]["models.json"].startswith(INVALID_JSON_MARKER)  # type: ignore[union-attr]
    assert CANARY not in json.dumps(checked.event.object)  # type: ignore[union-attr]
    activation = _cluster()[SourceKind.MODEL_ACTIVATIONS][0]
    checked = guard(ObjectUpserted(SourceKind.MODEL_ACTIVATIONS, activation))
    assert redacted_fingerprint(checked.event.object["spec"]["external"]["apiKey"]) is not None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "doc",
    [
        {"models": {"gpt": {"name": "gpt", "apiKey": CANARY}}},  # {"models": {...}}
        {"name": "gpt", "litellm": {"api_key": CANARY}},  # a bare object
        [[{"name": "gpt", "apiKey": CANARY}]],  # nested arrays
        {"providers": [{"credentials": {"token": CANARY, "password": CANARY}}]},
        {"models": [{"name": "gpt", "API-KEY": CANARY, "secret_key": CANARY}]},
    ],
)
def test_mis_shaped_models_json_is_redacted_by_shape_not_by_path(doc: object) -> None:
    """Issue 12 item 8: these shapes were recorded with the key in clear and the guard missed them."""
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ai-external-models", "namespace": "ai"},
        "data": {"models.json": json.dumps(doc)},
    }
    redacted = redact_configmap(cm, "models.json").obj
    assert CANARY not in json.dumps(redacted)
    checked = guard(ObjectUpserted(SourceKind.EXTERNAL_MODELS, cm))  # an adapter that forgot to redact
    assert CANARY not in json.dumps(checked.event.object)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "source", [SourceKind.PODS, SourceKind.DEPLOYMENTS, SourceKind.FREETOKEN_DEPLOYMENTS]
)
def test_workloads_are_recorded_without_their_environment(source: SourceKind) -> None:
    """Issue 12 item 8: whole Pods and workloads were recorded with literal env values."""
    container = {
        "name": "app",
        "env": [{"name": "DATABASE_URL", "value": f"postgres://app:{CANARY}@db/app"}],
        "args": [f"--token={CANARY}"],
    }
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment" if source is not SourceKind.PODS else "Pod",
        "metadata": {
            "name": "anythingllm",
            "namespace": "ai",
            "labels": {"appliance.magicstick.dev/runtime": "freetoken"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": CANARY, "note": CANARY},
        },
        "spec": {"containers": [container], "template": {"spec": {"containers": [container]}}},
    }
    assert CANARY not in json.dumps(redact_for_source(source, obj).obj)
    checked = guard(ObjectUpserted(source, obj))
    assert checked.stripped == 1 and CANARY not in json.dumps(checked.event.object)  # type: ignore[union-attr]


def test_the_guard_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    import adapters.eventlog.guard as guard_module

    def broken(source: object, obj: object) -> object:
        raise RuntimeError(CANARY)

    monkeypatch.setattr(guard_module, "redact_for_source", broken)
    raw = _secret("openai", CANARY, provider=True)
    checked = guard(ObjectUpserted(SourceKind.SECRETS, raw))
    text = json.dumps(checked.event.object)  # type: ignore[union-attr]
    assert checked.stripped == 1 and CANARY not in text and b64(CANARY) not in text
    assert checked.event.object["metadata"]["name"] == "openai"  # type: ignore[union-attr]


def test_the_guard_whitelists_litellm_rows() -> None:
    row = {
        "model_name": "x",
        "litellm_params": {"model": "m", "api_key": CANARY_ROW},
        "model_info": {"id": "x"},
    }
    checked = guard(LiteLLMRowsObserved((row,)))
    assert checked.stripped == 1
    assert checked.event.rows[0] == {
        "model_name": "x",
        "litellm_params": {"model": "m"},
        "model_info": {"id": "x"},
    }  # type: ignore[union-attr]
