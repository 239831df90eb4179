"""catalog_core.urls: the credential parts of a URL (RFC 3986 authority and userinfo rules)."""

from __future__ import annotations

import pytest

from catalog_core.urls import UrlParts, credential_parts, has_credentials, masked_url, published_url


def test_the_userinfo_ends_at_the_last_at_sign_of_the_authority():
    parts = UrlParts.parse("https://me:p@ss@api.example.com:8443/v1/x@y?a=1#f")
    assert parts == UrlParts("https://", "me:p@ss", "api.example.com:8443", "/v1/x@y", "a=1", "f")


@pytest.mark.parametrize(
    ("url", "published"),
    [
        ("http://kubeai.ai.svc.cluster.local/openai/v1", "http://kubeai.ai.svc.cluster.local/openai/v1"),
        ("https://u:pw@h.example/v1?api-key=k#f", "https://h.example/v1"),
        ("https://h.example?k=v", "https://h.example"),
        ("http://[fd00::1]:8080/v1", "http://[fd00::1]:8080/v1"),
        ("https://me:pw/secret@h.example/v1", None),  # no telling the host from the password
        ("not a url", None),
        (None, None),
        ("", ""),
    ],
)
def test_published_url_keeps_scheme_host_and_path_only(url, published):
    assert published_url(url) == published


def test_credential_parts_name_every_string_worth_scrubbing():
    url = "https://me:pw-1@h.example/v1?api-key=sk-2&api-version=2024#tok-3"
    assert credential_parts(url) == (
        "me:pw-1",
        "pw-1",
        "api-key=sk-2&api-version=2024",
        "sk-2",
        "2024",
        "tok-3",
    )
    assert credential_parts("https://h.example/v1") == ()


@pytest.mark.parametrize(
    ("url", "has"),
    [
        ("https://h.example/v1", False),
        ("https://u@h.example/v1", True),
        ("https://h.example/v1?", True),
        ("https://h.example/v1#", True),
        ("h.example/v1", True),  # not a URL: nothing vouches for it
    ],
)
def test_has_credentials(url, has):
    assert has_credentials(url) is has


def test_masked_url_says_what_is_there_without_showing_it():
    assert masked_url("https://u:pw@h.example/v1?k=sk#f") == (
        "https://<redacted>@h.example/v1?<redacted>#<redacted>"
    )
    assert masked_url("https://h.example/v1") == "https://h.example/v1"
    assert masked_url("https://me:pw/secret@h.example/v1") == "https://<redacted>"
