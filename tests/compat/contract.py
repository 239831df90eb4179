"""Literal names from ``../shared/contracts.md`` that consumers on the appliance read.

Copied by hand from the contract text (sections named beside each), never from this project's output:
a test that compares our output with these catches a renamed key before an appliance does.
"""

from __future__ import annotations

# behaviour §5.1, data keys of ConfigMap/ai-model-catalog ("| data key | content |" table).
JSON_KEYS = (
    "catalog.json",
    "chat-models.json",
    "embedding-models.json",
    "openclaw.json",
    "hermes.yaml",
    "opencode-providers.json",
    "paperclip-opencode-providers.json",
    "paperclip-adapter-models.json",
)
DEFAULTS_ENV = "defaults.env"
# behaviour §5.1, "scalar keys (literal names)".
SCALAR_KEYS = (
    "AI_APPLIANCE_MODEL_CATALOG_READY",
    "AI_APPLIANCE_MODEL_CATALOG_HASH",
    "AI_APPLIANCE_DEFAULT_CHAT_MODEL",
    "AI_APPLIANCE_DEFAULT_OPENCODE_MODEL",
    "AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL",
)
# behaviour §7: the extra key with one record per source item.
ROUTES_KEY = "routes.json"
ALL_DATA_KEYS = frozenset((*JSON_KEYS, DEFAULTS_ENV, *SCALAR_KEYS, ROUTES_KEY))

# behaviour §5.1, defaults.env: "exactly these lines, in this order, then a trailing newline".
DEFAULTS_ENV_NAMES = (
    "AI_APPLIANCE_MODEL_CATALOG_READY",
    "AI_APPLIANCE_MODEL_CATALOG_HASH",
    "AI_APPLIANCE_DEFAULT_CHAT_MODEL",
    "AI_APPLIANCE_DEFAULT_OPENCODE_MODEL",
    "AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL",
    "AI_APPLIANCE_MODEL_COUNT",
    "AI_APPLIANCE_CHAT_MODEL_COUNT",
    "AI_APPLIANCE_EMBEDDING_MODEL_COUNT",
)

# behaviour §5.1, catalog entry fields.
ENTRY_FIELDS = frozenset(
    {
        "id",
        "name",
        "type",
        "provider",
        "modelRef",
        "source",
        "managed",
        "litellm",
        "contextWindow",
        "maxOutputTokens",
    }
)

# behaviour §5.1, literal values inside the agent fragments.
OPENCLAW_API_KEY = "${LITELLM_API_KEY}"
OPENCODE_API_KEY = "{env:OPENAI_API_KEY}"
OPENCODE_NPM = "@ai-sdk/openai-compatible"
HERMES_KEY_ENV = "OPENAI_API_KEY"

# behaviour §5.2, deployment names and the master key Secret.
CONTROLLER_NAME = "ai-model-catalog-controller"
MASTER_KEY_SECRET = "litellm-masterkey-secret"
MASTER_KEY_KEY = "LITELLM_MASTER_KEY"
CATALOG_HASH_ANNOTATION = "ai-appliance.io/catalog-hash"
BOOTSTRAP_HASH = "bootstrap"

# behaviour §10, default base URLs (behaviour §5.2: used without a trailing slash).
LITELLM_API_BASE = "http://litellm.ai.svc.cluster.local:4000/v1"
