"""A throwaway route source for a test: the registry with extra specs, for the duration."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from catalog_core import registry
from catalog_core.events import SourceKind
from catalog_core.spec import SourceSpec
from catalog_core.values import Source


@contextlib.contextmanager
def installed(*extra: SourceSpec) -> Iterator[None]:
    """The registry with ``extra`` specs added, for the duration (their names are withdrawn after)."""
    before = registry.SPECS
    try:
        registry.install((*before, *extra))
        yield
    finally:
        for spec in extra:
            SourceKind.withdraw(spec.kind.value)
            Source.withdraw(spec.source.value)
        registry.install(before)
