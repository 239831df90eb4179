"""A venv built as the Containerfile builds the image's: the runtime dependencies of ``requirements.lock``
(hash-checked) and the project installed from a copy of its packages (not editable), with bytecode
compiled ahead (the image compiles for ``-OO``, how it runs).

The memory benchmarks run the controller from it, as the image runs it: the dev venv also holds the
development tools, and httpx imports click, rich and pygments whenever they are installed (~3.7 MiB of
RSS the image never has).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("model_catalog", "app", "adapters", "contracts", "catalog_core")


def build(where: Path, *, optimize: tuple[int, ...] = (2,)) -> Path:
    """The venv at ``where/venv`` (the sources copied to ``where/source``); bytecode compiled for each
    optimisation level of ``optimize``. Returns the venv's directory."""
    source = where / "source"
    for name in PACKAGES:
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "pip"), "-q", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "install", "--require-hashes", "--no-deps", "-r", str(REPO / "requirements.lock")], check=True
    )
    subprocess.run(
        [*pip, "install", "--no-index", "--no-build-isolation", "--no-deps", str(source)], check=True
    )
    levels = [arg for level in optimize for arg in ("-o", str(level))]
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "compileall", "-q", *levels, str(venv)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return venv
