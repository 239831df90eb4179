"""Passages of ``../shared/contracts.md`` quoted verbatim (line breaks aside), each under the name of its
section, and the literal names parsed out of them.

The names the appliance's manifests and apps use (labels, annotations, ConfigMap and Secret names, data
keys, ``model_info`` keys, id prefixes, settings) are read from these quotes, never from this project's
constants or output, so a test that compares the two catches a renamed name. ``test_contract_names``
checks that every quote is still the contract's text when the contract is at hand.
"""

from __future__ import annotations

import re

from tests.fixtures.shared import shared_dir

# Where the peers are found too: a clone outside /work (the stop hook's scratch clone) skipped this before.
CONTRACT = shared_dir() / "contracts.md"

QUOTES: dict[str, str] = {
    "A.1": """- Context window: annotation `ai-appliance.io/context-window` first, else the
  first `--max-model-len=N` or `--max-model-len N` in `spec.args`.
- Max output tokens: annotation `ai-appliance.io/max-output-tokens`.""",
    "A.1 route": """- LiteLLM deployment: `litellm_params {model: "openai/<name>", api_base:
  KUBEAI_API_BASE, api_key: "none"}`; `model_info {id, ai_appliance_managed:
  true, ai_appliance_source: "kubeai", ai_appliance_type, source: "kubeai",
  features, max_input_tokens?, max_output_tokens?}`.""",
    "A.2": """### A.2 `ConfigMap/ai-external-models`, key `models.json` (namespace `NAMESPACE`)""",
    "A.3": """### A.3 `ModelActivation` (`appliance.magicstick.dev/v1alpha1`, plural `modelactivations`,
namespace `APPLIANCE_NAMESPACE`)""",
    "A.1 kind": """### A.1 KubeAI `Model` (`kubeai.org/v1`, plural `models`, namespace `NAMESPACE`)""",
    "A.4": """Ids: `ai-appliance-kubeai-<slug>` / `ai-appliance-external-<slug>`; slug = name""",
    "A.5 hash": """Annotation `ai-appliance.io/catalog-hash` carries it.""",
    "A.5 catalog.json": """| `catalog.json` | `{hash, models, defaultChatModel, defaultEmbeddingModel}` |
| `chat-models.json`, `embedding-models.json` | `{models, defaultModel}` |""",
    "A.5 paperclip": """| `paperclip-adapter-models.json` |
`{opencode_local: [{id: "litellm/<id>", label: name}]}` |""",
    "A.6 templates": """- AgentTemplates (`kubeopencode.io/v1alpha1`, `NAMESPACE`): targets are
  `AGENT_TEMPLATE_NAMES` (default `litellm-default`) plus every template with the
  label `appliance.magicstick.dev/appinstance`.""",
    "A.6 consumers": """- Consumers (pods in `NAMESPACE`): label or annotation
  `ai-appliance.io/model-catalog-consumer: "true"`, or `app=anything-llm`, or
  `app.kubernetes.io/instance=hermes` + `app.kubernetes.io/name=hermes-agent`,
  or `.../instance=openclaw` + `.../name=openclaw`, or
  `.../instance=paperclip` + `.../component=server`.""",
    "A.7": """`NAMESPACE=ai`, `APPLIANCE_NAMESPACE=ai-system`,
`LITELLM_BASE_URL=http://litellm.ai.svc.cluster.local:4000`,
`LITELLM_API_BASE=<LITELLM_BASE_URL>/v1`,
`KUBEAI_API_BASE=http://kubeai.ai.svc.cluster.local/openai/v1`,
`CATALOG_CONFIGMAP=ai-model-catalog`, `EXTERNAL_MODELS_CONFIGMAP=ai-external-models`,
`AI_APPLIANCE_DEFAULT_CHAT_MODEL=auto`, `AI_APPLIANCE_DEFAULT_EMBEDDING_MODEL=auto`,
`OPENCODE_DEFAULT_CONTEXT_TOKENS=131072`, `OPENCODE_DEFAULT_OUTPUT_TOKENS=8192`,
`PAPERCLIP_OPENCODE_MAX_OUTPUT_TOKENS=4096`, `PAPERCLIP_OPENCODE_CONTEXT_HEADROOM_TOKENS=4096`,
`CONSUMER_RESTART_ENABLED=true`, `AGENT_TEMPLATE_SYNC_ENABLED=true`,
`AGENT_TEMPLATE_NAMES=litellm-default`, `LITELLM_MASTER_KEY` (required for the
controller).""",
    "B.1": """LiteLLM rows the catalog owns carry `model_info.ai_appliance_owner:
"model-catalog"` (plus `ai_appliance_managed: true` for compatibility). Rows with
`ai_appliance_managed: true` and no owner are legacy rows of ours and may be
adopted. Every other row — Private Mesh rows (`ai_appliance_owner:
"private-mesh"`), rows added by hand or in LiteLLM's config — is never updated,""",
    "B.2": """`litellm_params.order: 0` and `model_info.ai_appliance_scheduler: {trusted:
true, locality: "local", engine, computeTarget, contextWindow?,
maxOutputTokens?, maxNumSeqs?}` (engine from `spec.engine` or the
`ai-appliance.io/engine` annotation; computeTarget `cpu | nvidia-gpu | amd-gpu |
intel-gpu` from the `ai-appliance.io/compute-target` annotation or the""",
    "B.3 source": """- Source: Deployments in `NAMESPACE` labelled
  `appliance.magicstick.dev/runtime=freetoken`, matched by the label
  `appliance.magicstick.dev/modelactivation=<name>` to an enabled, non-deleting""",
    "B.3 endpoint": """- Endpoint: annotation `ai-appliance.io/endpoint` on the Deployment, else the""",
    "B.3 health": """  every `CATALOG_RUNTIME_HEALTH_SECONDS` (15). Publish after one success;""",
    "B.3 route": """  `order: 0`; id `ai-appliance-freetoken-<slug>`; source `freetoken`.""",
    "B.4": """- Logical name: `model_info.ai_appliance_logical_name` when set by a trusted
  owner, else the model name without a leading `local/`, `share/` or `mesh/`.
- Export-only rows (name `share/...` or `model_info.ai_appliance_export_only:
  true`) are hidden from every output (and never deleted).""",
    "B.5": """An extra data key with one record per source item: `{source, name, logicalName,
state: published | withheld | error | conflict, reason}`; reasons such as""",
    "C.2": """   AgentTemplate. → write only on a real difference (a spec hash in
   `model_info.ai_appliance_spec_hash`; a Secret contributes its uid and""",
    "C.8": """   source, may name only Secrets labelled
   `appliance.magicstick.dev/model-provider-secret=true` or named
   `ai-model-provider-*`, and never the Secret holding the LiteLLM master key or a""",
}


def literals(section: str) -> list[str]:
    """The backquoted literals of a quoted passage, in order, with line breaks read as spaces."""
    return [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", QUOTES[section])]


def assignments(section: str) -> dict[str, str]:
    """``NAME=value`` literals of a passage (labels, settings) as a mapping."""
    return dict(s.split("=", 1) for s in literals(section) if "=" in s and " " not in s)


def fields(literal: str) -> set[str]:
    """The field names of a ``{a, b: "x", c?}`` literal at its outer level."""
    body, depth, names, token = literal.strip()[1:-1], 0, set(), ""
    for ch in body + ",":
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            name = re.match(r"\s*([A-Za-z_]+)", token)
            if name:
                names.add(name.group(1))
            token = ""
        else:
            token += ch
    return names
