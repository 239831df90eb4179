"""Which Secrets the core asks the shell to read, and how (issue 12 items 2 and 5; behaviour §1.5).

Every referenced Secret is asked for once: by name when its name allows it (``ai-model-provider-*``, it
need not be labelled), else under the label (the shell's one label-selected watch covers it). The Secret
holding LiteLLM's master key is never asked for, and referring to it does not hold up the catalog.
"""

from __future__ import annotations

from catalog_core.commands import SecretWatch, WatchSecrets
from catalog_core.config import CatalogConfig
from catalog_core.events import SourceKind, SourceListed, Ticked
from catalog_core.fold import initial_state, step
from catalog_core.plan import secret_watches
from tests.core import builders as b
from tests.core.harness import Cluster

PROVIDER = b.PROVIDER_LABELS


def _ref(model: str, secret: str) -> dict[str, object]:
    return {"name": model, "model": "openai/x", "apiKeySecretRef": {"name": secret, "key": "k"}}


def _watches(c: Cluster) -> list[WatchSecrets]:
    return [x for x in c.commands if isinstance(x, WatchSecrets)]


def test_each_referenced_secret_is_asked_for_once_by_label_or_by_name_and_never_the_master_keys():
    refs = [_ref(f"p{i}", f"ai-model-provider-{i:02d}") for i in range(40)]
    refs += [_ref(f"o{i}", f"openai-{i:02d}") for i in range(60)]
    refs += [_ref("steal", "litellm-masterkey-secret"), _ref("again", "openai-00")]
    c = Cluster()
    c.start(
        b.external_configmap(refs),
        b.activation(
            "act", external={"model": "openai/y", "apiKeySecretRef": {"name": "act-key", "key": "k"}}
        ),
    )
    (command,) = _watches(c)
    names = [w.name for w in command.secrets]
    assert names == sorted(names) and len(names) == len(set(names)) == 40 + 60 + 1
    assert "litellm-masterkey-secret" not in names
    # the number of names does not change how each is read: that is the shell's connection budget
    assert {w.name for w in command.secrets if not w.provider_only} == {
        f"ai-model-provider-{i:02d}" for i in range(40)
    }
    assert SecretWatch("act-key", provider_only=True) in command.secrets
    assert command.key == "watch/secrets/ai"


def test_the_command_depends_on_the_referenced_names_only():
    """Level-triggered and deterministic: the same names give the same command, whatever refers to them
    and in whatever order; a new name gives a new command."""
    first, second = Cluster(), Cluster()
    first.start(b.external_configmap([_ref("a", "openai-a"), _ref("b", "ai-model-provider-b")]))
    second.start(
        b.external_configmap(
            [_ref("b2", "ai-model-provider-b"), _ref("a2", "openai-a"), _ref("c", "openai-a")]
        )
    )
    assert _watches(first) == _watches(second) and len(_watches(first)) == 1

    second.apply(b.external_configmap([_ref("a", "openai-a"), _ref("b", "ai-model-provider-b")]))
    assert len(_watches(second)) == 1  # the same names: nothing asked again
    second.apply(b.external_configmap([_ref("a", "openai-a"), _ref("d", "openai-d")]))
    latest = _watches(second)[-1]
    assert [(w.name, w.provider_only) for w in latest.secrets] == [("openai-a", True), ("openai-d", True)]


def test_the_configured_master_key_secret_is_never_asked_for_even_when_its_name_is_allowed():
    config = CatalogConfig.from_env({"LITELLM_MASTER_KEY_SECRET_NAME": "ai-model-provider-master"})
    assert isinstance(config, CatalogConfig)
    c = Cluster(config)
    c.start(
        b.external_configmap([_ref("steal", "ai-model-provider-master"), _ref("ok", "ai-model-provider-ok")]),
        b.secret("ai-model-provider-ok", {"k": "sk-ok"}),
    )
    asked = {w.name for command in _watches(c) for w in command.secrets}
    assert asked == {"ai-model-provider-ok"}
    assert secret_watches(c.state) == (SecretWatch("ai-model-provider-ok", provider_only=False),)


def test_a_reference_to_the_master_key_does_not_hold_up_the_catalog():
    """The master key's Secret is never listed, so waiting for it would withhold the catalog forever."""
    c = Cluster()
    c.start(
        b.external_configmap([_ref("steal", "litellm-masterkey-secret"), _ref("ok", "openai-ok")]),
        b.secret("openai-ok", {"k": "sk-ok"}, labels=PROVIDER),
    )
    assert c.model_ids() == ["ok"]
    assert c.record("steal")["reason"] == "SecretNotAllowed"


def test_unlabelled_secrets_allowed_by_name_resolve_however_many_are_referenced():
    """More than the shell watches at once (32): the rest are still read (re-listed by name), so an
    unlabelled ai-model-provider-* Secret is published, never reported missing."""
    refs = [_ref(f"p{i:02d}", f"ai-model-provider-{i:02d}") for i in range(40)]
    secrets = [b.secret(f"ai-model-provider-{i:02d}", {"k": f"sk-{i}"}, labels={}) for i in range(40)]
    c = Cluster()
    c.start(b.external_configmap(refs), *secrets)
    assert c.model_ids() == [f"p{i:02d}" for i in range(40)]


def test_nothing_is_asked_before_an_item_refers_to_a_secret_and_the_empty_set_is_asked_once():
    state = initial_state(CatalogConfig())
    assert secret_watches(state) == ()
    result = step(state, SourceListed(SourceKind.EXTERNAL_MODELS, ()))
    first = step(result.state, Ticked(1.0))
    assert [c for c in first.commands if isinstance(c, WatchSecrets)] == [WatchSecrets("ai", ())]
    again = step(first.state, Ticked(2.0))
    assert not [c for c in again.commands if isinstance(c, WatchSecrets)]
