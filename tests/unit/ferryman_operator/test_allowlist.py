"""The installation's allow-list of source base URLs: which URLs a pattern allows (a wildcard
stays inside the host name), the refusal naming the setting, and a bad pattern refused when the
operator's settings are read."""

from __future__ import annotations

import pytest

from ferryman_operator import settings
from ferryman_operator.errors import SettingsError
from ferryman_operator.reconcile import allowlist


def allows(pattern: str, url: str) -> bool:
    return allowlist.Pattern.parse(pattern).matches(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com",
        "https://API.Example.com/v2/",
        "https://eu.api.example.com:443/v2",
    ],
)
def test_a_host_wildcard_allows_the_hosts_below_it(url: str) -> None:
    assert allows("https://*.example.com", url)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com",  # the domain itself is not below it
        "http://api.example.com",  # another scheme
        "https://api.example.com:8443",  # another port than the scheme's
        "https://evil.test/x.example.com",  # the wildcard does not reach into the path
        "https://api.example.com.evil.test",
        "https://evil.test#.example.com",
        "https://api.example.com@evil.test",  # user info: the host is evil.test
        "not a url",
    ],
)
def test_a_host_wildcard_allows_nothing_else(url: str) -> None:
    assert not allows("https://*.example.com", url)


def test_ports_and_paths() -> None:
    assert allows("http://127.0.0.1:*", "http://127.0.0.1:8765")
    assert not allows("http://127.0.0.1", "http://127.0.0.1:8765")
    assert allows("http://127.0.0.1:8765", "http://127.0.0.1:8765/")
    assert allows("https://crm.example.com/api/*", "https://crm.example.com/api/v1")
    assert not allows("https://crm.example.com/api/*", "https://crm.example.com/other")
    assert allows("https://crm.example.com/api", "https://crm.example.com/api/")
    assert not allows("https://crm.example.com/api", "https://crm.example.com/api/v1")


def test_a_url_no_pattern_allows_is_refused_naming_the_setting() -> None:
    patterns = allowlist.parse(["https://*.example.com", "http://127.0.0.1:*"])
    assert allowlist.refusal("https://api.example.com", patterns) is None
    refused = allowlist.refusal("http://10.0.0.7:9000", patterns)
    assert refused is not None and refused.reason == "SourceNotAllowed"
    assert "http://10.0.0.7:9000 matches none of the installation's allowedSourceURLs" in (
        refused.message
    )
    assert "https://*.example.com, http://127.0.0.1:*" in refused.message
    assert "operator.allowedSourceURLs" in refused.message


def test_a_token_url_no_pattern_allows_is_refused_naming_the_provider_field() -> None:
    patterns = allowlist.parse(["https://api.example.com", "https://login.example.com"])
    login = "https://login.example.com/oauth/token"
    assert allowlist.refusal("https://api.example.com", patterns, login, "crm") is None
    elsewhere = "https://login.example.net/oauth/token"
    refused = allowlist.refusal("https://api.example.com", patterns, elsewhere, "crm")
    assert refused is not None and refused.reason == "SourceNotAllowed"
    assert refused.message.startswith(
        f"spec.auth.oauth2.tokenUrl of provider 'crm': {elsewhere} matches none of the "
        "installation's allowedSourceURLs (https://api.example.com, https://login.example.com)"
    )
    assert "operator.allowedSourceURLs" in refused.message
    # the base URL is checked first, and no list allows every token URL
    first = allowlist.refusal("https://evil.test", patterns, elsewhere, "crm")
    assert first is not None and first.message.startswith("spec.source.baseURL: ")
    assert allowlist.refusal("https://api.example.com", (), elsewhere, "crm") is None


def test_no_allow_list_allows_any_url() -> None:
    assert allowlist.refusal("http://10.0.0.7:9000", ()) is None


def test_the_setting_is_comma_separated_and_a_bad_pattern_names_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "FERRYMAN_OPERATOR_ALLOWED_SOURCE_URLS", "https://*.example.com, http://127.0.0.1:*"
    )
    assert settings.load().allowed_source_urls == ["https://*.example.com", "http://127.0.0.1:*"]
    monkeypatch.setenv("FERRYMAN_OPERATOR_ALLOWED_SOURCE_URLS", "*.example.com")
    with pytest.raises(SettingsError) as caught:
        settings.load()
    assert "FERRYMAN_OPERATOR_ALLOWED_SOURCE_URLS" in str(caught.value)
    assert "'*.example.com' is not a base-URL pattern" in str(caught.value)
