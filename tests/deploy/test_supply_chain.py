"""The image installs only what the lock pins by hash, on a base pinned by digest (issue 12, supply chain)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements.lock"
CONTAINERFILE = REPO / "Containerfile"
SHA256 = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def logical_lines(path: Path) -> list[str]:
    """The file's lines with backslash continuations joined and comments dropped."""
    joined = path.read_text().replace("\\\n", " ")
    return [line.split(" #")[0].strip() for line in joined.splitlines() if line.strip()[:1] not in ("", "#")]


def locked() -> dict[str, tuple[Version, list[str]]]:
    """name -> (pinned version, hashes) for every requirement line of the lock."""
    pins: dict[str, tuple[Version, list[str]]] = {}
    for line in logical_lines(LOCK):
        requirement, *options = line.split()
        name, _, version = requirement.partition("==")
        assert version, f"not pinned with ==: {line}"
        pins[canonicalize_name(name)] = (Version(version), [o for o in options if o.startswith("--hash")])
    return pins


def test_every_package_in_the_lock_is_pinned_with_a_sha256():
    pins = locked()
    assert len(pins) >= 30
    for name, (_, hashes) in pins.items():
        assert hashes, f"{name} has no --hash"
        assert all(SHA256.fullmatch(h) for h in hashes), f"{name}: {hashes}"


def test_the_lock_pins_every_runtime_dependency_and_the_build_backend_within_their_ranges():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = [*project["project"]["dependencies"], *project["build-system"]["requires"]]
    pins = locked()
    for text in wanted:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in requirements.lock (run `just lock`)"
        assert requirement.specifier.contains(pins[name][0], prereleases=True), (text, str(pins[name][0]))


def containerfile_runs() -> list[str]:
    return [line for line in logical_lines(CONTAINERFILE) if line.startswith("RUN ")]


def test_every_pip_install_in_the_containerfile_requires_hashes_or_cannot_download():
    installs = [
        command.strip()
        for run in containerfile_runs()
        for command in re.split(r"&&|;", run.removeprefix("RUN "))
        if re.search(r"\bpip\b.*\binstall\b", command)
    ]
    assert len(installs) == 2, installs
    dependencies, project = installs
    assert "--require-hashes" in dependencies.split() and "-r requirements.lock" in dependencies
    # pip refuses --require-hashes for a source directory, so the project's own install may not reach
    # any index: it builds with the setuptools the lock installed and fetches no dependency.
    assert project.split()[-1] == "."
    assert {"--no-index", "--no-build-isolation", "--no-deps"} <= set(project.split()), project
    text = CONTAINERFILE.read_text()
    for fetch in ("pip download", "curl ", "wget ", "ADD http", "--extra-index-url", "--index-url"):
        assert fetch not in text, fetch


def test_the_image_compiles_its_bytecode_for_the_optimisation_level_it_runs_at():
    # The root filesystem is read-only and PYTHONDONTWRITEBYTECODE is set: bytecode of another level
    # than the runtime's would be compiled again, in memory, at every start.
    from tests.e2e.harness import image_runtime_env

    env = image_runtime_env()
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    level = env.get("PYTHONOPTIMIZE", "0")
    (compile_all,) = [c for run in containerfile_runs() for c in run.split("&&") if "compileall" in c]
    levels = re.findall(r"-o\s*(\d)", compile_all) or ["0"]
    assert level in levels, (level, compile_all)


def test_every_from_line_uses_the_python_image_build_arg_and_just_image_pins_it():
    lines = logical_lines(CONTAINERFILE)
    froms = [line for line in lines if line.startswith("FROM ")]
    assert froms == ["FROM ${PYTHON_IMAGE} AS build", "FROM ${PYTHON_IMAGE}"]
    (arg,) = [line for line in lines if line.startswith("ARG PYTHON_IMAGE=")]
    assert lines.index(arg) < lines.index(froms[0])  # declared before the first FROM: a global build arg
    default = arg.partition("=")[2]
    justfile = (REPO / "justfile").read_text()
    assert f'python_image := "{default}"' in justfile  # the recipe pins the same image the file names


def just(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("just", path=str(REPO / ".venv" / "bin")) or shutil.which("just")
    if binary is None:
        pytest.skip("just is not installed (pip install -e '.[dev]' brings it)")
    return subprocess.run(
        [binary, *args], cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, check=False
    )


def test_just_image_builds_on_the_base_image_pinned_by_digest():
    digest = "sha256:" + "0123456789abcdef" * 4
    out = just("image", env={"PYTHON_DIGEST": digest, "CONTAINER_ENGINE": "echo"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [
        "build",
        "--build-arg",
        f"PYTHON_IMAGE=docker.io/library/python:3.11-slim@{digest}",
        "-t",
        "ghcr.io/magicstick/ai-model-catalog:0.1.0",
        "-f",
        "Containerfile",
        ".",
    ]


def test_just_image_refuses_a_digest_that_is_not_one():
    out = just("image", env={"PYTHON_DIGEST": "latest", "CONTAINER_ENGINE": "echo"})
    assert out.returncode != 0
    assert "no digest for docker.io/library/python:3.11-slim" in out.stderr
    assert "build" not in out.stdout
