"""The event log store: the recorder (append, rotate, ring dump) and the streaming reader."""

from typing import Final

# Here, not in the reader, so the command line can show it without importing the wire format.
DEFAULT_MAX_LINE_BYTES: Final = 64 * 1024 * 1024  # newline included
