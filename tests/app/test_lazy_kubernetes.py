"""kubernetes-asyncio's generated client, loaded lazily (app/lazy_kubernetes.py; issue 15).

The stand-ins must bind exactly the names the real package ``__init__``s bind, to the same objects,
while loading only what is used; and anything they cannot stand in for is left to load eagerly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.lazy_kubernetes import GENERATED_PACKAGES, defer_generated_client

REPO = Path(__file__).resolve().parents[2]

# Every public name of the four packages, with the module of what it is bound to.
_SURFACE = """
import importlib, json, sys
if sys.argv[1] == "lazy":
    from app.lazy_kubernetes import defer_generated_client
    assert defer_generated_client()
surface = {}
for package in PACKAGES:
    module = importlib.import_module(package)
    public = {n for n in dir(module) if not n.startswith("_")}
    for name in sorted(set(getattr(module, "__all__", [])) | public):
        value = getattr(module, name)
        bound = getattr(value, "__module__", None) or getattr(value, "__name__", repr(value))
        surface[package + "." + name] = bound
surface["__version__"] = sys.modules["kubernetes_asyncio"].__version__
print(json.dumps(surface))
""".replace("PACKAGES", repr(GENERATED_PACKAGES))


def _surface(mode: str) -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "-c", _SURFACE, mode],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    surface: dict[str, str] = json.loads(out)
    return surface


def test_the_lazy_packages_bind_what_the_eager_ones_do() -> None:
    eager, lazy = _surface("eager"), _surface("lazy")
    assert len(eager) > 2000  # every API and model class, the subpackages, the version
    assert lazy == eager


def test_kubernetes_asyncio_when_used_loads_a_handful_of_generated_classes(tmp_path: Path) -> None:
    """As app/kube_client.py loads it for a kubeconfig user that authenticates through a program."""
    code = (
        "import sys, asyncio\n"
        "import app.service\n"
        "from app.lazy_kubernetes import defer_generated_client\n"
        "assert defer_generated_client()\n"
        "from kubernetes_asyncio import client as k8s_client\n"
        "from kubernetes_asyncio import config\n"
        "async def lease():\n"
        "    async with k8s_client.ApiClient() as api:\n"
        '        class Answer: data = b\'{"metadata": {"name": "l", "resourceVersion": "7"},\''
        ' b\'"spec": {"holderIdentity": "a", "leaseTransitions": 2}}\'\n'
        "        return api.deserialize(Answer(), 'V1Lease')\n"
        "value = asyncio.run(lease())\n"
        "assert (value.spec.holder_identity, value.metadata.resource_version) == ('a', '7'), value\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('kubernetes_asyncio')))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    models = [m for m in loaded if m.startswith("kubernetes_asyncio.client.models.")]
    assert (
        "kubernetes_asyncio.client.api_client" in loaded and "kubernetes_asyncio.config.kube_config" in loaded
    )
    assert sorted(models) == [
        "kubernetes_asyncio.client.models.v1_lease",
        "kubernetes_asyncio.client.models.v1_lease_spec",
        "kubernetes_asyncio.client.models.v1_object_meta",
    ]
    assert len(loaded) < 30, loaded  # eagerly: ~870


@pytest.fixture
def scratch_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0] in {"lazypkg", "oddpkg"}]:
        del sys.modules[name]


def _package(root: Path, name: str, init: str, **modules: str) -> None:
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(init)
    for module, text in modules.items():
        (root / name / f"{module}.py").write_text(text)


def test_a_name_is_imported_on_first_use_only(scratch_packages: Path) -> None:
    _package(
        scratch_packages,
        "lazypkg",
        '"""doc"""\nfrom __future__ import annotations\nfrom lazypkg.heavy import Heavy\n'
        "from .light import light as renamed\nVERSION = '1.2'\n__all__ = ['Heavy']\n",
        heavy="class Heavy:\n    pass\n",
        light="light = 42\n",
    )
    assert defer_generated_client(("lazypkg",))
    import lazypkg  # type: ignore[import-not-found]

    assert (lazypkg.VERSION, lazypkg.__all__) == ("1.2", ["Heavy"])
    assert "lazypkg.heavy" not in sys.modules and "lazypkg.light" not in sys.modules
    assert lazypkg.renamed == 42 and "lazypkg.heavy" not in sys.modules
    assert lazypkg.Heavy.__module__ == "lazypkg.heavy"
    assert {"Heavy", "renamed", "VERSION"} <= set(dir(lazypkg))
    with pytest.raises(AttributeError):
        lazypkg.missing  # noqa: B018


def test_an_init_that_does_more_than_import_loads_eagerly(scratch_packages: Path) -> None:
    _package(scratch_packages, "oddpkg", "from oddpkg.sub import x\ndef setup():\n    pass\n", sub="x = 1\n")
    assert not defer_generated_client(("oddpkg",))
    assert "oddpkg" not in sys.modules
    import oddpkg  # type: ignore[import-not-found]

    assert oddpkg.x == 1 and callable(oddpkg.setup)


def test_a_package_already_imported_is_left_alone(scratch_packages: Path) -> None:
    _package(
        scratch_packages, "lazypkg", "from lazypkg.heavy import Heavy\n", heavy="class Heavy:\n    pass\n"
    )
    import lazypkg

    assert not defer_generated_client(("lazypkg",))
    assert sys.modules["lazypkg"] is lazypkg and "lazypkg.heavy" in sys.modules
