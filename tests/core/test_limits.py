"""behaviour §5.1 limits, with the contract's worked examples."""

import pytest

from catalog_core.config import CatalogConfig
from catalog_core.rules.limits import openclaw_compaction, opencode_limits, paperclip_limits

CFG = CatalogConfig()


@pytest.mark.parametrize(
    ("c", "o", "expected"),
    [
        (20000, 8192, (20000, 8192)),
        (4096, 32000, (4096, 4096)),  # output capped by the context window
        (None, None, (131072, 8192)),  # defaults
        (None, 1024, (131072, 1024)),
    ],
)
def test_opencode_limits(c, o, expected):
    assert opencode_limits(c, o, CFG) == expected


@pytest.mark.parametrize(
    ("c", "o", "expected"),
    [
        (20000, 8192, (15904, 3976)),  # contract example
        (8192, 8192, (6144, 1536)),  # contract example
        (4096, 32000, (3072, 768)),
        (None, None, (131072 - 4096, 4096)),
        (2, 2, (1, 1)),
        (1, 1, (1, 1)),  # P = 1: no headroom
    ],
)
def test_paperclip_limits(c, o, expected):
    assert paperclip_limits(c, o, CFG) == expected


def test_paperclip_without_headroom():
    cfg = CatalogConfig(paperclip_headroom_tokens=0)
    assert paperclip_limits(20000, 8192, cfg) == (20000, 4096)


@pytest.mark.parametrize(
    ("c", "expected"),
    [
        (20000, {"reserveTokens": 4096, "reserveTokensFloor": 0}),  # contract example
        (8192, {"reserveTokens": 2048, "reserveTokensFloor": 0}),  # contract example
        (2048, {"reserveTokens": 1024, "reserveTokensFloor": 0}),
        (32768, {"reserveTokens": 4096, "reserveTokensFloor": 0}),
        (128000, {"reserveTokensFloor": 20000}),  # large window: floor only
        (None, {"reserveTokensFloor": 20000}),
    ],
)
def test_openclaw_compaction(c, expected):
    assert openclaw_compaction(c) == expected
