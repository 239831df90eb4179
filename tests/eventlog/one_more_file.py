"""This version with one more generated catalog file declared: what a release that adds one runs.

    python tests/eventlog/one_more_file.py replay LOG...   # each must replay as it ran (--verify)
    python tests/eventlog/one_more_file.py record OUT      # the example run, recorded by that release

A process of its own, because the declarations are read once, at import (the renderer's layout, the
configuration's default keys): the file is added to ``catalog_files.FILES`` before anything reads it,
as a commit declaring it would. Used by ``tests/eventlog/test_catalog_keys.py``.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from catalog_core import catalog_files as cf  # noqa: E402  (the declarations, before any reader)

EXTRA_KEY = "demo-chat.json"
DEMO_CHAT = cf.labels({"app.kubernetes.io/name": "demo-chat"})


def _demo_chat_model(e: cf.PublishedModel, _: object) -> dict[str, str]:
    return {"id": e.id, "title": e.name}


def declare_one_more_file() -> None:
    readers = sorted(
        m for m in ("catalog_core.rules.render", "catalog_core.sources.consumers") if m in sys.modules
    )
    assert not readers, f"the declarations were read before the file was added: {readers}"
    extra = cf.CatalogFile(
        EXTRA_KEY,
        members=cf.Models(cf.CHAT, _demo_chat_model, keyed=False),
        document=lambda models, p: {"chatModels": models, "default": p.default_chat, "baseUrl": p.base_url},
        format=cf.Format.JSON,
        consumers=(DEMO_CHAT,),
    )
    cf.check((*cf.FILES, extra))
    cf.FILES = (*cf.FILES, extra)
    cf.KEYS = frozenset(f.key for f in cf.FILES)
    cf.CONSUMER_LABELS = (*cf.CONSUMER_LABELS, DEMO_CHAT)


def _replay(logs: list[str]) -> int:
    from app.cli import main
    from catalog_core.config import CatalogConfig
    from catalog_core.rules.render import bootstrap_data

    # The release renders the new file: a live controller (the default configuration) writes it.
    assert EXTRA_KEY in bootstrap_data(CatalogConfig()), "the added file is not rendered by a live controller"
    failed = [log for log in logs if main(["replay", log, "--verify"]) != 0]
    print(f"{len(logs) - len(failed)} of {len(logs)} logs replay as they ran; failed: {failed}")
    return 1 if failed else 0


def _record(out: str) -> int:
    example = runpy.run_path(str(REPO / "examples" / "make_event_log.py"), run_name="example")
    code: int = example["main"](["make_event_log.py", out])
    return code


if __name__ == "__main__":
    declare_one_more_file()
    action, *paths = sys.argv[1:]
    raise SystemExit(_replay(paths) if action == "replay" else _record(paths[0]))
