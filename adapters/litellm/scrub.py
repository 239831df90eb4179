"""The last line of defence for text that leaves the LiteLLM adapter (logs, outcome details, Events).

LiteLLM's answers are quoted back to people: an error message becomes a ``CommandCompleted`` detail
(routes.json, Kubernetes Events, the event log) and a log line. Such text may echo a key we sent. The
order matters, and is the whole point of this module: **scrub, then collapse whitespace, then
shorten**. Shortening first lets a key straddling the cut leak its prefix, and collapsing first hides
a key whose value carries whitespace (a trailing newline from a mounted file) from an exact match.

Every known secret value is removed in each of its forms: as it is, trimmed (LiteLLM and HTTP headers
drop surrounding whitespace) and with its inner whitespace collapsed (the form it has after the text
itself is collapsed).
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_TEXT = 300  # characters of LiteLLM text quoted in a detail or a log line
REDACTED = "[redacted]"
_MIN_SECRET_LEN = 4  # shorter "keys" are placeholders; scrubbing them would mangle the text


def secret_forms(secrets: Iterable[str]) -> tuple[str, ...]:
    """Every form of every secret worth replacing, longest first (so a longer form is replaced whole
    before a shorter one could split it)."""
    forms: set[str] = set()
    for secret in secrets:
        for form in (secret, secret.strip(), " ".join(secret.split())):
            if len(form) >= _MIN_SECRET_LEN:
                forms.add(form)
    return tuple(sorted(forms, key=len, reverse=True))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every form of every secret replaced by ``[redacted]``."""
    for form in secret_forms(secrets):
        text = text.replace(form, REDACTED)
    return text


def shorten(text: str, limit: int = MAX_TEXT) -> str:
    """Whitespace collapsed, cut to ``limit`` characters. Only for text already scrubbed."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def safe_text(text: str, secrets: Iterable[str], limit: int = MAX_TEXT) -> str:
    """Scrub, collapse, scrub again (a key whose inner whitespace differs only in kind or amount),
    then shorten: what may be shown of LiteLLM's text."""
    forms = secret_forms(secrets)
    return shorten(scrub(" ".join(scrub(text, forms).split()), forms), limit)
