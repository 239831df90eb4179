"""What every source's parse can return besides a value: a problem with a reason code."""

from __future__ import annotations

import attrs

from catalog_core.reasons import Reason

ANNOTATION_PREFIX = "ai-appliance.io/"
CONTEXT_WINDOW_ANNOTATION = "ai-appliance.io/context-window"
MAX_OUTPUT_ANNOTATION = "ai-appliance.io/max-output-tokens"
ENGINE_ANNOTATION = "ai-appliance.io/engine"
COMPUTE_TARGET_ANNOTATION = "ai-appliance.io/compute-target"
MAX_NUM_SEQS_ANNOTATION = "ai-appliance.io/max-num-seqs"
ENDPOINT_ANNOTATION = "ai-appliance.io/endpoint"
CATALOG_HASH_ANNOTATION = "ai-appliance.io/catalog-hash"
CONSUMER_MARK = "ai-appliance.io/model-catalog-consumer"
RUNTIME_LABEL = "appliance.magicstick.dev/runtime"
ACTIVATION_LABEL = "appliance.magicstick.dev/modelactivation"
APPINSTANCE_LABEL = "appliance.magicstick.dev/appinstance"
PROVIDER_SECRET_LABEL = "appliance.magicstick.dev/model-provider-secret"
PROVIDER_SECRET_PREFIX = "ai-model-provider-"


@attrs.frozen
class Problem:
    reason: Reason
    message: str
