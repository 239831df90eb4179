"""Who we are to the peers: the field manager of every Kubernetes write and the User-Agent of every request.

The API server records the field manager in each object's ``managedFields`` and names it in server-side
apply conflicts; its audit log shows the User-Agent. Without them every write would read as the generated
client's ``OpenAPI-Generator``, which names no program.
"""

from __future__ import annotations

import platform
from typing import Final

NAME: Final = "model-catalog"
FIELD_MANAGER: Final = NAME
# The distribution's version: pyproject.toml reads it from here (so the running code needs no
# importlib.metadata, which loads email, zipfile and csv: ~1.3 MiB of a process's memory).
VERSION: Final = "0.1.0"


def version() -> str:
    """This code's version (the distribution's)."""
    return VERSION


# As Kubernetes' own clients form it (kubectl/v1.32.4 (linux/amd64) ...): the API server takes the part
# before the first "/" as the field manager of a write that names none.
USER_AGENT: Final = (
    f"{NAME}/{version()} ({platform.system().lower()}/{platform.machine()}) "
    f"python/{platform.python_version()}"
)
