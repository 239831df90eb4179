"""How large an answer of LiteLLM's admin API may be (``LiteLLMClient`` reads and parses no larger one).

Its own module, free of httpx: the settings read its defaults without loading the client.
"""

from __future__ import annotations

import attrs

# What one answer may hold. 10,000 rows of LiteLLM 1.84.0 are ~35 MB and ~1.2 million JSON values (one
# per ~29 bytes); a parsed value costs up to ~72 bytes (an empty list or object), so the values, not the
# bytes, bound what parsing costs: 2,000,000 values are ~150 MB at worst.
DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_ANSWER_VALUES = 2_000_000


@attrs.frozen
class AnswerBounds:
    """The largest answer read, in bytes as sent (the client asks for no content coding and refuses
    one), and parsed, in JSON values (counted as the separators and brackets that introduce them; one in
    a string counts too, erring on the safe side). ``CATALOG_LITELLM_MAX_ANSWER_BYTES`` and
    ``CATALOG_LITELLM_MAX_ANSWER_VALUES``."""

    max_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    max_values: int = DEFAULT_MAX_ANSWER_VALUES

    def values_problem(self, content: bytes) -> str | None:
        if len(content) <= self.max_values:  # fewer bytes than the bound: fewer values too
            return None
        values = content.count(b",") + content.count(b"[") + content.count(b"{")
        if values <= self.max_values:
            return None
        return (
            f"the answer holds more than {self.max_values:,} JSON values "
            f"(CATALOG_LITELLM_MAX_ANSWER_VALUES); not parsed"
        )
