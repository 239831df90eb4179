"""Token limits for agent configs (behaviour §5.1)."""

from __future__ import annotations

from typing import Protocol


class RenderSettings(Protocol):
    """The settings the generated catalog files read (``CatalogConfig`` has them). Named here rather than
    imported: the configuration imports the catalog files' declarations (the keys it renders), which use
    these limits, so importing it back would close a circle."""

    @property
    def litellm_api_base(self) -> str: ...
    @property
    def opencode_default_context_tokens(self) -> int: ...
    @property
    def opencode_default_output_tokens(self) -> int: ...
    @property
    def paperclip_max_output_tokens(self) -> int: ...
    @property
    def paperclip_headroom_tokens(self) -> int: ...
    @property
    def openclaw_tools_profile(self) -> str: ...


def opencode_limits(
    context_window: int | None, max_output: int | None, config: RenderSettings
) -> tuple[int, int]:
    """context = C or the default; output = min(O or the default, context)."""
    context = context_window or config.opencode_default_context_tokens
    output = min(max_output or config.opencode_default_output_tokens, context)
    return context, output


def paperclip_limits(
    context_window: int | None, max_output: int | None, config: RenderSettings
) -> tuple[int, int]:
    """From the OpenCode pair (P, o): leave headroom, cap output (20000/8192 -> 15904/3976)."""
    p, o = opencode_limits(context_window, max_output, config)
    h = config.paperclip_headroom_tokens
    headroom = min(h, max(1, p // 4), p - 1) if p > 1 and h > 0 else 0
    context = p - headroom
    output = min(o, config.paperclip_max_output_tokens, max(1, context // 4))
    return context, output


def openclaw_compaction(context_window: int | None) -> dict[str, int]:
    """From the default chat model's context window (20000 -> 4096/0, 8192 -> 2048/0, else floor 20000)."""
    if context_window is not None and 0 < context_window <= 32768:
        return {"reserveTokens": max(1024, min(4096, context_window // 4)), "reserveTokensFloor": 0}
    return {"reserveTokensFloor": 20000}
