"""The files ``just generate`` writes (``app/generated.py``) are what the declarations give: a declaration
changed without the command fails here, naming the file and the command."""

from __future__ import annotations

import shutil
from pathlib import Path

import attrs
import pytest

from app import generated
from contracts import rbac


@pytest.mark.parametrize("file", generated.GENERATED, ids=lambda g: g.path)
def test_the_committed_file_is_what_its_declaration_generates(file: generated.Generated) -> None:
    assert not file.is_stale(), (
        f"{file.path} is stale: run `{generated.COMMAND}` (it is generated from {file.source})"
    )


def _copy(root: Path) -> None:
    for file in generated.GENERATED:
        (root / file.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(generated.REPO / file.path, root / file.path)


def test_the_command_rewrites_a_stale_file_and_leaves_the_prose_around_a_generated_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _copy(tmp_path)
    docs = tmp_path / "docs" / "rbac.md"
    original = docs.read_text()
    docs.write_text(original.replace("| `PodEvictor` |", "| `PodEvicter` |"))
    (tmp_path / "contracts/schemas/sources.schema.json").write_text("{}\n")
    assert generated.main([str(tmp_path)]) == 0
    assert docs.read_text() == original
    assert capsys.readouterr().out.split() == [
        "wrote",
        "contracts/schemas/sources.schema.json",
        "wrote",
        "docs/rbac.md",
    ]
    assert not any(file.is_stale(tmp_path) for file in generated.GENERATED)


def test_the_rbac_table_is_every_grant_one_row_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A grant added to the declaration is a row of the generated table (the prose before and after
    the table is kept)."""
    _copy(tmp_path)
    extra = attrs.evolve(rbac.GRANTS[0], adapter="`ExtraWatcher`", resources=("widgets",))
    monkeypatch.setattr(rbac, "GRANTS", (*rbac.GRANTS, extra))
    before = (tmp_path / "docs" / "rbac.md").read_text()
    after = generated.GENERATED[1].expected(tmp_path)
    added = [line for line in after.splitlines() if line not in before.splitlines()]
    assert added == ["| `ExtraWatcher` | `NAMESPACE` | `kubeai.org` | `widgets` | | `list`, `watch` |"]
    assert after.startswith(before.split("<!-- rbac-table:")[0])
    assert after.endswith(before[before.index("`RuntimeProber`") :])


def test_a_document_without_the_tables_marker_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="rbac-table"):
        generated.GENERATED[1].write("# RBAC\n\n| a | b |\n")
