"""Issue 12 item 7, for rows the catalog does not own: LiteLLM does not check model names, so a row made
by hand (or by another owner) may hold a line break or a control character. Such a row is never touched,
and never becomes a catalog entry: its name would add lines to defaults.env and the scalar keys."""

from __future__ import annotations

import json

import pytest

from tests.core import builders as b
from tests.core.harness import Cluster

INJECTED = "AI_APPLIANCE_MODEL_CATALOG_READY=false"


@pytest.mark.parametrize(
    "name",
    [f"a\n{INJECTED}", f"a\r{INJECTED}", "a\x1b[2J", "a\u2028b", "a" * 600, "a\ud800"],
)
def test_a_foreign_row_whose_name_cannot_be_published_is_left_out_of_the_catalog(name):
    c = Cluster()
    c.start(b.kubeai_model("kube"), rows=[b.row(name, "hand-made")])
    assert c.model_ids() == ["kube"]
    env = c.data["defaults.env"].splitlines()
    assert env[0] == "AI_APPLIANCE_MODEL_CATALOG_READY=true" and INJECTED not in env
    assert c.data["AI_APPLIANCE_DEFAULT_CHAT_MODEL"] == "kube"
    assert "hand-made" in c.world.rows  # never touched


def test_a_trusted_owners_logical_name_is_checked_too():
    c = Cluster()
    row = b.row("mesh/x", "mesh-x", owner="private-mesh", order=1, ai_appliance_logical_name=f"x\n{INJECTED}")
    c.start(b.kubeai_model("kube"), rows=[row])
    assert c.model_ids() == ["kube"]
    assert INJECTED not in c.data["defaults.env"].splitlines()


def test_a_foreign_row_with_a_plain_name_is_still_listed():
    c = Cluster()
    c.start(b.kubeai_model("kube"), rows=[b.row("gpt-hand", "hand-made")])
    assert c.model_ids() == ["gpt-hand", "kube"]
    assert "gpt-hand" in json.dumps(c.catalog())
