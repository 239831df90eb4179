"""Stable reason codes (behaviour §7). A code, once published, keeps its meaning."""

from __future__ import annotations

from enum import StrEnum


class RouteState(StrEnum):
    PUBLISHED = "published"
    WITHHELD = "withheld"
    ERROR = "error"
    CONFLICT = "conflict"


class LiteLLMWait(StrEnum):
    """The words a LiteLLM write's ``retry`` outcome gives for a wait that is not the input's fault (not a
    ``Reason``: nothing is reported for them). The planner reads them to know what a write's answer left
    unknown (``ObserveLiteLLM``)."""

    UNREACHABLE = "LiteLLMUnreachable"  # no answer: a timeout, a refused or reset connection
    SERVER_ERROR = "LiteLLMServerError"  # a 5xx, a 408 or 429, an answer past the client's bounds
    DUPLICATE_ID = "LiteLLMDuplicateId"  # a create answered with LiteLLM's 500 for an existing id


class Reason(StrEnum):
    # published
    PUBLISHED = "Published"
    # a KubeAI Model that KubeAI scales up from zero on a request: published whether or not a replica is
    # ready (a request may wait for one to start), so its readiness flapping never rewrites anything
    SCALES_FROM_ZERO = "ScalesFromZero"
    # withheld: a real state of the world, not bad input
    NOT_READY = "NotReady"
    HEALTH_CHECK_PENDING = "HealthCheckPending"
    HEALTH_CHECK_FAILED = "HealthCheckFailed"
    DISABLED = "Disabled"
    DELETING = "Deleting"
    PENDING = "Pending"  # waiting for LiteLLM to accept the route
    ACTIVATION_NOT_FOUND = "ActivationNotFound"
    ACTIVATION_DISABLED = "ActivationDisabled"
    ENDPOINT_NOT_FOUND = "EndpointNotFound"
    # error: bad input; the item keeps its last good route, if it had one
    INVALID_JSON = "InvalidJSON"
    INVALID_FIELD = "InvalidField"
    MISSING_FIELD = "MissingField"
    SECRET_NOT_FOUND = "SecretNotFound"
    SECRET_KEY_NOT_FOUND = "SecretKeyNotFound"
    SECRET_NOT_ALLOWED = "SecretNotAllowed"
    # the Secret does not allow its key to be sent to the item's apiBase (behaviour §1.5)
    SECRET_API_BASE_NOT_ALLOWED = "SecretApiBaseNotAllowed"
    SECRET_VALUE_INVALID = "SecretValueInvalid"  # empty, or not UTF-8 text
    INLINE_KEY_REJECTED = "InlineKeyRejected"
    # a value LiteLLM would resolve from its own environment (os.environ/...): never published
    # (behaviour §1.5)
    ENV_REFERENCE_REJECTED = "EnvReferenceRejected"
    # a route to an apiBase the cluster admin did not allow, on which LiteLLM would use its own
    # credentials (its environment, its cloud identity) (behaviour §1.5)
    AMBIENT_CREDENTIAL_REJECTED = "AmbientCredentialRejected"
    NESTED_TOO_DEEPLY = "NestedTooDeeply"  # an object nested deeper than the adapters read
    UNTRUSTED_ENDPOINT = "UntrustedEndpoint"
    LITELLM_REJECTED = "LiteLLMRejected"
    LITELLM_UNAUTHORIZED = "LiteLLMUnauthorized"
    UNEXPECTED_SHAPE = "UnexpectedShape"
    FORBIDDEN = "Forbidden"  # the API server refused a write (RBAC)
    WRITE_REJECTED = "WriteRejected"  # the API server rejected a write for another reason
    WRITE_FAILED = "WriteFailed"  # a write got no answer: a timeout, a refused connection, a 5xx or a 429
    CATALOG_IMMUTABLE = "CatalogImmutable"  # the catalog ConfigMap is immutable: it must be deleted first
    CATALOG_TOO_LARGE = "CatalogTooLarge"  # the rendered catalog does not fit in one ConfigMap
    # a local ModelActivation whose engine runs on KubeAI, while KubeAI's CRD is not installed
    KUBEAI_NOT_INSTALLED = "KubeAINotInstalled"
    # a Model published while it scales from zero has had pods for longer than the start deadline and
    # none is ready: its route stays (KubeAI keeps starting it), and it is reported
    START_DEADLINE_EXCEEDED = "StartDeadlineExceeded"
    # conflict: another item owns the name or the id
    CONFLICT = "Conflict"
    DUPLICATE_NAME = "DuplicateName"
    ID_COLLISION = "IdCollision"
    ID_TAKEN = "IdTaken"
    NAME_HELD = "NameHeld"  # another runtime holds the name (or its activation owns the other runtime)
    NAME_CONTESTED = "NameContested"  # runtimes claim the name at once, none holds it: none is published


# Reasons that describe bad input: the item's last good route stays published, while the Secret its key
# came from still allows it (rules/candidates: losing the right to a Secret withdraws the key).
# SecretNotAllowed too: a last good route never used a refused Secret (the master key, a token).
KEEPS_LAST_GOOD: frozenset[Reason] = frozenset(
    {
        Reason.INVALID_JSON,
        Reason.INVALID_FIELD,
        Reason.MISSING_FIELD,
        Reason.SECRET_NOT_FOUND,
        Reason.SECRET_KEY_NOT_FOUND,
        Reason.SECRET_NOT_ALLOWED,
        Reason.SECRET_API_BASE_NOT_ALLOWED,
        Reason.SECRET_VALUE_INVALID,
        Reason.INLINE_KEY_REJECTED,
        Reason.ENV_REFERENCE_REJECTED,
        Reason.AMBIENT_CREDENTIAL_REJECTED,
        Reason.NESTED_TOO_DEEPLY,
        Reason.UNTRUSTED_ENDPOINT,
    }
)

# Reasons of a claim that carries the item's current route, from good input: the route LiteLLM is to hold
# (and the item's last good route from then on). The rest carry no route, or the last good one.
CURRENT_ROUTE: frozenset[Reason] = frozenset(
    {Reason.PUBLISHED, Reason.SCALES_FROM_ZERO, Reason.START_DEADLINE_EXCEEDED}
)

STATE_OF: dict[Reason, RouteState] = {
    Reason.PUBLISHED: RouteState.PUBLISHED,
    Reason.SCALES_FROM_ZERO: RouteState.PUBLISHED,
    **dict.fromkeys(
        (
            Reason.NOT_READY,
            Reason.HEALTH_CHECK_PENDING,
            Reason.HEALTH_CHECK_FAILED,
            Reason.DISABLED,
            Reason.DELETING,
            Reason.PENDING,
            Reason.ACTIVATION_NOT_FOUND,
            Reason.ACTIVATION_DISABLED,
            Reason.ENDPOINT_NOT_FOUND,
        ),
        RouteState.WITHHELD,
    ),
    **dict.fromkeys(
        (
            Reason.CONFLICT,
            Reason.DUPLICATE_NAME,
            Reason.ID_COLLISION,
            Reason.ID_TAKEN,
            Reason.NAME_HELD,
            Reason.NAME_CONTESTED,
        ),
        RouteState.CONFLICT,
    ),
}


# The reason of the Normal Event that follows a write's reported failures once it succeeds, or once its
# target needs no write any more (an Event reason, never a routes.json one).
WRITE_RECOVERED = "WriteRecovered"


def state_of(reason: Reason) -> RouteState:
    return STATE_OF.get(reason, RouteState.ERROR)
