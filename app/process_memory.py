"""Process-wide memory settings: asyncio's TLS read buffer, and the source lines attrs keeps for tracebacks.

Both change state the whole process shares, so the library leaves them alone unless asked
(``app.options.HeapOptions``); ``model-catalog run`` owns its process and asks for both.

- asyncio gives every TLS connection a read buffer of ``SSLProtocol.max_size`` bytes (256 KiB),
  allocated and zero-filled when the connection opens, so all of it is resident for the connection's
  life. Every Kubernetes watch holds a connection of its own (HTTP/1.1), so a dozen watches hold ~3 MiB
  of buffers, the largest part of what the running controller adds to its imports. 32 KiB holds two
  full TLS records (16 KiB of data each); a large response is read in more, smaller reads.
- attrs compiles each class's generated methods from source and keeps that source in ``linecache``, so
  a traceback through a generated ``__init__`` can print its line: ~0.5 MiB for the controller's
  classes, kept for the process's life. Forgotten, such a traceback names the file and line without
  the text; nothing else reads it.
"""

from __future__ import annotations

import linecache

TLS_READ_BUFFER_BYTES = 32 * 1024

# The pseudo file names attrs (and cattrs, with the event log on) give the code they generate.
GENERATED_SOURCE_PREFIXES = ("<attrs generated", "<cattrs generated")


def limit_tls_read_buffer(size: int) -> int:
    """Give TLS connections opened from now on a read buffer of ``size`` bytes; the size before.

    ``SSLProtocol.max_size`` is a class attribute of CPython's asyncio (3.11 to 3.13): the size of
    the buffer each TLS connection reads the socket into. tests/app/test_process_memory.py checks that
    the running Python still has it and that a connection's buffer follows it."""
    from asyncio import sslproto

    if size < 16 * 1024:
        raise ValueError(f"a TLS read buffer of {size} bytes cannot hold one TLS record (16 KiB)")
    before = sslproto.SSLProtocol.max_size
    sslproto.SSLProtocol.max_size = size
    return before


def forget_generated_source(prefixes: tuple[str, ...] = GENERATED_SOURCE_PREFIXES) -> int:
    """Drop the source text attrs and cattrs left in ``linecache`` for their generated code; how many
    entries went. Lines of real files are not touched (linecache reads those again when asked)."""
    generated = [name for name in list(linecache.cache) if name.startswith(prefixes)]
    for name in generated:
        linecache.cache.pop(name, None)
    return len(generated)
