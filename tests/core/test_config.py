"""behaviour §10: names and defaults; invalid values are one clear error."""

import pytest

from catalog_core.config import CatalogConfig, ConfigError


def test_defaults():
    c = CatalogConfig.from_env({})
    assert isinstance(c, CatalogConfig)
    assert c.namespace == "ai"
    assert c.appliance_namespace == "ai-system"
    assert c.litellm_base_url == "http://litellm.ai.svc.cluster.local:4000"
    assert c.litellm_api_base == "http://litellm.ai.svc.cluster.local:4000/v1"
    assert c.kubeai_api_base == "http://kubeai.ai.svc.cluster.local/openai/v1"
    assert c.catalog_configmap == "ai-model-catalog"
    assert c.external_models_configmap == "ai-external-models"
    assert (c.default_chat_model, c.default_embedding_model) == ("auto", "auto")
    assert (c.opencode_default_context_tokens, c.opencode_default_output_tokens) == (131072, 8192)
    assert (c.paperclip_max_output_tokens, c.paperclip_headroom_tokens) == (4096, 4096)
    assert c.consumer_restart_enabled and c.agent_template_sync_enabled
    assert c.agent_template_names == ("litellm-default",)
    assert c.runtime_health_seconds == 15


def test_api_base_follows_base_url():
    c = CatalogConfig.from_env({"LITELLM_BASE_URL": "http://gw:4000/"})
    assert isinstance(c, CatalogConfig)
    assert c.litellm_api_base == "http://gw:4000/v1"


def test_values_are_read():
    c = CatalogConfig.from_env(
        {
            "NAMESPACE": "models",
            "AGENT_TEMPLATE_NAMES": "a, b,,a",
            "CONSUMER_RESTART_ENABLED": "false",
            "PAPERCLIP_OPENCODE_CONTEXT_HEADROOM_TOKENS": "0",
        }
    )
    assert isinstance(c, CatalogConfig)
    assert c.namespace == "models"
    assert c.agent_template_names == ("a", "b")
    assert c.consumer_restart_enabled is False
    assert c.paperclip_headroom_tokens == 0


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"OPENCODE_DEFAULT_CONTEXT_TOKENS": "0"}, "OPENCODE_DEFAULT_CONTEXT_TOKENS"),
        ({"OPENCODE_DEFAULT_OUTPUT_TOKENS": "lots"}, "OPENCODE_DEFAULT_OUTPUT_TOKENS"),
        ({"PAPERCLIP_OPENCODE_MAX_OUTPUT_TOKENS": "0"}, "PAPERCLIP_OPENCODE_MAX_OUTPUT_TOKENS"),
        ({"PAPERCLIP_OPENCODE_CONTEXT_HEADROOM_TOKENS": "-1"}, "PAPERCLIP_OPENCODE_CONTEXT_HEADROOM_TOKENS"),
        ({"CONSUMER_RESTART_ENABLED": "maybe"}, "CONSUMER_RESTART_ENABLED"),
        ({"NAMESPACE": "Not_A_Name"}, "NAMESPACE"),
        ({"LITELLM_BASE_URL": "litellm:4000"}, "LITELLM_BASE_URL"),
        ({"AGENT_TEMPLATE_NAMES": "ok,BAD NAME"}, "AGENT_TEMPLATE_NAMES"),
        ({"LITELLM_API_BASE": "http://user:secret@litellm:4000/v1"}, "LITELLM_API_BASE"),
    ],
)
def test_invalid_values_name_the_variable(env, variable):
    error = CatalogConfig.from_env(env)
    assert isinstance(error, ConfigError)
    assert error.variable == variable
    assert "\n" not in str(error)


def test_as_env_round_trips():
    c = CatalogConfig.from_env({"NAMESPACE": "x", "AGENT_TEMPLATE_NAMES": ""})
    assert isinstance(c, CatalogConfig)
    assert CatalogConfig.from_env(c.as_env()) == c
