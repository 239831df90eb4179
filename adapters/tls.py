"""The TLS context of our HTTP clients: the CA roots httpx would trust, read when the first TLS connection
is made instead of when the client is built.

httpx builds a client's TLS context with the client, and that context parses its whole CA bundle at
once (certifi's ~140 roots: ~1 MiB of memory per client). LiteLLM and the runtimes' ``/health`` are
usually plain http inside the cluster: such a client never opens a TLS connection, and with this
context it never reads a certificate. The roots are the ones httpx chooses for a client (``SSL_CERT_FILE``,
else ``SSL_CERT_DIR``, when the client reads the environment; else certifi's bundle), read from the
environment when the client is built, as httpx reads them; certificates and host names are checked as
in httpx's own context, so what is trusted does not change, only when the roots are loaded.
"""

from __future__ import annotations

import os
import socket
import ssl
import sys
import threading
from collections.abc import Mapping


class RootsOnFirstUse(ssl.SSLContext):
    """A client context (``PROTOCOL_TLS_CLIENT``: certificate and host name required) that loads its CA
    roots the first time it wraps a connection."""

    _cafile: str | None
    _capath: str | None
    _loaded: bool
    _lock: threading.Lock

    def __new__(cls, *, cafile: str | None = None, capath: str | None = None) -> RootsOnFirstUse:
        context = super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)
        context._cafile, context._capath = cafile, capath
        context._loaded, context._lock = False, threading.Lock()
        return context

    def __init__(self, *, cafile: str | None = None, capath: str | None = None) -> None:
        super().__init__()  # the state is set in __new__: SSLContext takes its protocol there

    @property
    def roots_loaded(self) -> bool:
        return self._loaded

    def _load_roots(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if not self._loaded:
                self.load_verify_locations(cafile=self._cafile, capath=self._capath)
                self._loaded = True

    def wrap_socket(  # noqa: PLR0917 - ssl.SSLContext.wrap_socket's signature
        self,
        sock: socket.socket,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        self._load_roots()
        return super().wrap_socket(
            sock, server_side, do_handshake_on_connect, suppress_ragged_eofs, server_hostname, session
        )

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        self._load_roots()
        return super().wrap_bio(incoming, outgoing, server_side, server_hostname, session)


def client_tls_context(*, trust_env: bool, env: Mapping[str, str] = os.environ) -> RootsOnFirstUse:
    """The context for an httpx client built with ``trust_env``: the roots httpx itself would choose
    (``httpx.create_ssl_context``), loaded on first use. Pass it as the client's ``verify=``."""
    cafile: str | None = None
    capath: str | None = None
    if trust_env and env.get("SSL_CERT_FILE"):
        cafile = env["SSL_CERT_FILE"]
    elif trust_env and env.get("SSL_CERT_DIR"):
        capath = env["SSL_CERT_DIR"]
    else:
        import certifi  # httpx's own dependency, and its default bundle

        cafile = certifi.where()
    context = RootsOnFirstUse(cafile=cafile, capath=capath)
    keylog = env.get("SSLKEYLOGFILE")
    if keylog and not sys.flags.ignore_environment:  # as ssl.create_default_context, which httpx uses
        context.keylog_filename = keylog
    return context
