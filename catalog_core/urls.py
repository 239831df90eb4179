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
