"""URLs from input: the parts that may carry credentials, and the form that may be shown to others.

A URL is split as HTTP clients split it (RFC 3986): the authority ends at the first ``/``, ``?`` or
``#``, and the userinfo at the authority's *last* ``@``, so a password holding an unescaped ``@`` is cut
whole. ``user:password@``, the query (``?api-key=...``) and the fragment are the credential parts.
"""

from __future__ import annotations

import re

import attrs

_SPLIT = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)([^?#]*)(?:\?([^#]*))?(?:#(.*))?$", re.DOTALL)
# host[:port]: a name, an IPv4 address or a bracketed IPv6 one. Anything else means the authority was cut
# somewhere unexpected (a "/" in a password), and what looks like a host may be part of a secret.
_HOST = re.compile(r"^(?:[A-Za-z0-9._~%-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{0,5})?$")
REDACTED = "<redacted>"


@attrs.frozen
class UrlParts:
    scheme: str  # with "://"
    userinfo: str | None  # without the "@"
    host: str  # host[:port]
    path: str
    query: str | None  # without the "?"
    fragment: str | None  # without the "#"

    @classmethod
    def parse(cls, url: str) -> UrlParts | None:
        """None when ``url`` is not ``scheme://host...``."""
        match = _SPLIT.match(url.strip())
        if match is None:
            return None
        scheme, authority, path, query, fragment = match.groups()
        userinfo, at, host = authority.rpartition("@")
        return cls(scheme, userinfo if at else None, host, path, query, fragment)

    @property
    def host_is_plain(self) -> bool:
        return bool(_HOST.match(self.host))


def credential_parts(url: str) -> tuple[str, ...]:
    """The strings of ``url`` that may be secret (for scrubbing text that could quote it): the userinfo and
    its password, the query and each of its values, the fragment."""
    parts = UrlParts.parse(url)
    if parts is None:
        return ()
    out: list[str] = []
    if parts.userinfo:
        out += [parts.userinfo, parts.userinfo.partition(":")[2]]
    if parts.query:
        out += [parts.query, *(pair.partition("=")[2] for pair in parts.query.split("&"))]
    if parts.fragment:
        out.append(parts.fragment)
    return tuple(dict.fromkeys(p for p in out if p))


def has_credentials(url: str) -> bool:
    """Whether ``url`` carries a userinfo, a query or a fragment (a bare ``?`` or ``#`` counts), or is not
    ``scheme://host...`` at all (so nothing of it may be trusted to hold none)."""
    parts = UrlParts.parse(url)
    return (
        parts is None or parts.userinfo is not None or parts.query is not None or parts.fragment is not None
    )


def published_url(url: str | None) -> str | None:
    """``url`` without its credential parts, as apps may read it; None when its host cannot be told apart
    from a secret (better no apiBase in the catalog than part of a password)."""
    if not url:
        return url
    parts = UrlParts.parse(url)
    if parts is None or not parts.host_is_plain:
        return None
    return f"{parts.scheme}{parts.host}{parts.path}"


def masked_url(url: str) -> str:
    """``url`` with each credential part shown as ``<redacted>``: says what is there without showing it."""
    parts = UrlParts.parse(url)
    if parts is None:
        return REDACTED
    if not parts.host_is_plain:
        return f"{parts.scheme}{REDACTED}"
    userinfo = f"{REDACTED}@" if parts.userinfo is not None else ""
    query = f"?{REDACTED}" if parts.query is not None else ""
    fragment = f"#{REDACTED}" if parts.fragment is not None else ""
    return f"{parts.scheme}{userinfo}{parts.host}{parts.path}{query}{fragment}"


# --- where a request goes: the destination of an API base, and the patterns that allow one -------------

_DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_DNS_HOST = re.compile(rf"^(?:{_LABEL}\.)*{_LABEL}$")
_IPV6_HOST = re.compile(r"^\[[0-9a-f:.]+\]$")
_PORT = re.compile(r"^[0-9]{1,5}$")


def _host_and_port(hostport: str, scheme: str) -> tuple[str, int] | None:
    """(host, port) of ``host[:port]`` as HTTP clients read it: a DNS name (lower case, one trailing dot
    dropped), an IPv4 address or a bracketed IPv6 one; None for anything else (a percent-escape, an
    underscore, a backslash: hosts that clients may read differently are never matched)."""
    text = hostport.lower()
    if text.startswith("["):
        end = text.find("]") + 1
        host, rest = text[:end], text[end:]
        if not end or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:]
    else:
        host, _, port_text = text.partition(":")  # a second ":" leaves a port that is not a number
    if port_text and not _PORT.match(port_text):
        return None
    port = int(port_text) if port_text else _DEFAULT_PORTS[scheme]
    if not 0 < port < 65536:
        return None
    if host.endswith(".") and not host.endswith(".."):
        host = host[:-1]
    if not (_DNS_HOST.match(host) or _IPV6_HOST.match(host)):
        return None
    return host, port


def _clean_path(path: str) -> str | None:
    """The path without trailing slashes; None when a client could resolve it elsewhere (a ``.`` or
    ``..`` segment, a percent-escape, a backslash)."""
    if "%" in path or "\\" in path:
        return None
    segments = path.split("/")
    if any(s in (".", "..") for s in segments):
        return None
    return path.rstrip("/")


@attrs.frozen
class Destination:
    """Where a request to an API base is sent: scheme, host and port (what a key is disclosed to), and
    the path (None when it cannot be compared: see ``_clean_path``)."""

    scheme: str  # http or https
    host: str
    port: int
    path: str | None

    @classmethod
    def of(cls, url: str) -> Destination | None:
        """None when ``url`` is not an http(s) URL whose host can be told for certain."""
        parts = UrlParts.parse(url)
        if parts is None:
            return None
        scheme = parts.scheme[:-3].lower()
        if scheme not in _DEFAULT_PORTS or "\\" in (parts.userinfo or ""):
            return None
        found = _host_and_port(parts.host, scheme)
        if found is None:
            return None
        return cls(scheme, found[0], found[1], _clean_path(parts.path))

    @property
    def origin(self) -> str:
        """``scheme://host[:port]``: never a credential part of the URL it came from."""
        port = "" if self.port == _DEFAULT_PORTS[self.scheme] else f":{self.port}"
        return f"{self.scheme}://{self.host}{port}"


@attrs.frozen
class DestinationPattern:
    """One allowed destination, as a cluster admin writes it: ``https://api.openai.com``,
    ``https://gateway.example.com:8443/openai`` (that path and below), ``api.mistral.ai`` (https, any path)
    or ``*.openai.azure.com`` (any host under that domain, not the domain itself; https unless a scheme is
    written). An entry without a port allows only the scheme's default port."""

    scheme: str
    host: str  # for a wildcard: the domain after "*."
    wildcard: bool
    port: int
    path: str

    @classmethod
    def parse(cls, entry: str) -> DestinationPattern | None:
        """None when ``entry`` is not such a pattern (a bare ``*``, a query, a user, another scheme)."""
        text = entry.strip()
        if "://" not in text:
            text = f"https://{text}"
        parts = UrlParts.parse(text)
        if (
            parts is None
            or parts.userinfo is not None
            or parts.query is not None
            or parts.fragment is not None
        ):
            return None
        scheme = parts.scheme[:-3].lower()
        if scheme not in _DEFAULT_PORTS:
            return None
        hostport = parts.host
        wildcard = hostport.startswith("*.")
        found = _host_and_port(hostport[2:] if wildcard else hostport, scheme)
        path = _clean_path(parts.path)
        if found is None or path is None or (wildcard and "." not in found[0]):
            return None  # "*.com" would allow a whole top-level domain
        return cls(scheme, found[0], wildcard, found[1], path)

    def allows(self, destination: Destination) -> bool:
        if (destination.scheme, destination.port) != (self.scheme, self.port):
            return False
        if self.wildcard:
            if not destination.host.endswith(f".{self.host}"):
                return False
        elif destination.host != self.host:
            return False
        if not self.path:
            return True
        path = destination.path
        return path is not None and (path == self.path or path.startswith(f"{self.path}/"))

    def __str__(self) -> str:
        host = f"*.{self.host}" if self.wildcard else self.host
        port = "" if self.port == _DEFAULT_PORTS[self.scheme] else f":{self.port}"
        return f"{self.scheme}://{host}{port}{self.path}"


def pattern_entries(text: str) -> tuple[str, ...]:
    """The entries of a list of patterns as written: separated by commas, spaces or line breaks."""
    return tuple(dict.fromkeys(e for e in re.split(r"[\s,]+", text) if e))
