"""A credential's host binding, its redaction and its sealing: pure logic."""

from __future__ import annotations

import logging
import pathlib
import urllib.parse

import httpx
import pytest
from cryptography.fernet import Fernet

from ferryman_worker.engine import auth
from ferryman_worker.engine.credentials import (
    Credential,
    HostNotBound,
    NotAllowed,
    Sealer,
    local_file,
    parse_hosts,
    redact,
    url_host,
)
from ferryman_worker.engine.runtime import credential_env_var
from ferryman_worker.errors import ConfigurationError, CredentialRefused
from ferryman_worker.providers import AuthStyle, OAuth2


@pytest.mark.parametrize(
    ("pattern", "url", "matches"),
    [
        ("api.example.com", "https://api.example.com", True),
        ("API.example.com", "https://api.EXAMPLE.com:443", True),
        ("api.example.com", "http://api.example.com", False),  # a binding is https by default
        ("api.example.com", "https://api.example.com:8443", False),  # on 443 by default
        ("api.example.com", "https://api.example.com.evil.net", False),
        ("api.example.com", "https://evilapi.example.com", False),
        ("*.example.com", "https://eu.api.example.com", True),
        ("*.example.com", "https://example.com", False),
        ("*.example.com", "https://example.com.evil.net", False),
        ("*.example.com", "https://notexample.com", False),
        ("crm.internal:8080", "https://crm.internal:8080", True),
        ("crm.internal:8080", "http://crm.internal:8080", False),
        ("crm.internal:8080", "https://crm.internal:8081", False),
        ("http://crm.internal:8080", "http://crm.internal:8080", True),
        ("http://crm.internal", "http://crm.internal", True),
        ("http://crm.internal", "http://crm.internal:8080", False),
        ("http://127.0.0.1:*", "http://127.0.0.1:5000", True),
        ("http://127.0.0.1:*", "https://127.0.0.1:5000", False),
        ("https://api.example.com", "https://api.example.com", True),
    ],
)
def test_a_binding_means_scheme_host_and_port(pattern: str, url: str, matches: bool) -> None:
    assert Credential({"token": "t"}, (pattern,)).allows(url) is matches


def test_a_credential_allows_only_its_hosts_and_only_http() -> None:
    hosts = parse_hosts("api.example.com, http://*.crm.io:*  x.test:81")
    credential = Credential({"token": "t"}, hosts)
    assert credential.hosts == ("api.example.com", "http://*.crm.io:*", "x.test:81")
    assert credential.allows("https://api.example.com/v1/things?x=1")
    assert credential.allows("http://eu.crm.io:9000/")
    assert credential.allows("https://x.test:81/")
    assert not credential.allows("https://x.test/")  # port 443
    assert not credential.allows("https://user@evil.net/?h=api.example.com")
    assert not credential.allows("ftp://api.example.com/")
    assert not Credential({"token": "t"}, ()).allows("https://api.example.com/")


@pytest.mark.parametrize(
    ("url", "short"),
    [
        ("https://API.example.com/v1", "api.example.com"),
        ("https://api.example.com:8443", "api.example.com:8443"),
        ("http://crm.internal", "http://crm.internal:80"),
        ("http://127.0.0.1:5000/x", "http://127.0.0.1:5000"),
    ],
)
def test_the_binding_of_a_url_is_exactly_its_scheme_host_and_port(url: str, short: str) -> None:
    assert url_host(url) == short
    assert Credential({"token": "t"}, (short,)).allows(url)


def test_the_installations_allow_list_sealed_with_the_credential_holds_every_request() -> None:
    credential = Credential(
        {"token": "t"}, ("*.example.com",), allowed=("https://api.example.com/v1",)
    )
    credential.guard(httpx.Request("GET", "https://api.example.com/v1/things"))
    with pytest.raises(NotAllowed) as caught:
        credential.guard(httpx.Request("GET", "https://other.example.com/v1/things"))
    assert "allowedSourceURLs (https://api.example.com/v1)" in str(caught.value)
    with pytest.raises(NotAllowed):
        credential.guard(httpx.Request("GET", "https://api.example.com/v2"))
    sealer = Sealer(Fernet.generate_key())
    assert sealer.unseal(sealer.seal(credential)).allowed == credential.allowed


def test_the_guard_refuses_an_unbound_request_naming_the_binding() -> None:
    credential = Credential({"token": "t0k3n"}, ("api.example.com",))
    credential.guard(httpx.Request("GET", "https://api.example.com/x"))
    with pytest.raises(HostNotBound) as caught:
        credential.guard(httpx.Request("GET", "https://evil.net:8443/x?token=t0k3n"))
    message = str(caught.value)
    assert "evil.net:8443" in message and "api.example.com" in message
    assert "ferryman.dev/hosts" in message and "t0k3n" not in message


GRANT = OAuth2("client_credentials", "https://login.example.com/oauth/token")
CLIENT = {"client_id": "c", "client_secret": "s3cr3t-value"}


@pytest.mark.parametrize(
    ("local", "fix"),
    [
        (False, "add login.example.com to the annotation ferryman.dev/hosts of its Secret"),
        (True, "set spec.source.credentialsSecretRef.tokenHost: login.example.com in the run"),
    ],
)
def test_a_token_url_off_the_credentials_hosts_is_refused_naming_where_to_bind_it(
    local: bool, fix: str
) -> None:
    credential = Credential(CLIENT, ("api.example.com",), local=local)
    style = AuthStyle("oauth2", oauth2=GRANT)
    with pytest.raises(ConfigurationError) as caught:
        auth.for_credential(style, credential, "https://api.example.com")
    message = str(caught.value)
    assert message.startswith(
        "spec.auth.oauth2.tokenUrl: login.example.com is not a host the source credential"
        " is bound to (api.example.com)"
    )
    assert fix in message and "s3cr3t" not in message
    bound = Credential(CLIENT, ("api.example.com", "login.example.com"), local=local)
    assert isinstance(auth.for_credential(style, bound, "https://api.example.com"), httpx.Auth)


def test_a_local_credentials_guard_names_the_runs_binding() -> None:
    credential = Credential({"token": "t0k3n"}, ("api.example.com",), local=True)
    with pytest.raises(HostNotBound) as caught:
        credential.guard(httpx.Request("GET", "https://evil.net/x"))
    assert "the run binds it to api.example.com" in str(caught.value)
    assert "spec.source.credentialsSecretRef.tokenHost" in str(caught.value)


def test_redaction_happens_before_the_cut() -> None:
    token = "SECRET-" + "x" * 20
    text = "e" * 190 + token + " and the rest"  # the token straddles character 200
    shown = redact(text, [token])
    assert len(shown) <= 200 and "SECRET" not in shown and "xxxxxxxxxx" not in shown
    assert shown == "e" * 190 + "***" + " and the"[:7]


def test_redaction_covers_the_percent_encoded_form_and_the_longest_secret_first() -> None:
    assert redact("q=a%2Fb%3D&b=a/b=", ["a/b="]) == "q=***&b=***"
    assert redact("abcdef", ["abc", "abcdef"]) == "***"
    assert redact("nothing", ["", "zz"]) == "nothing"


def test_the_id_and_repr_reveal_nothing_and_the_id_is_stable() -> None:
    one = Credential({"token": "hunter2"}, ("a.example",))
    assert one.id == Credential({"token": "hunter2"}, ("a.example",)).id
    assert one.id != Credential({"token": "hunter3"}, ("a.example",)).id
    assert "hunter2" not in repr(one) and "hunter2" not in one.id


def test_a_sealed_credential_opens_with_its_key_only() -> None:
    key = Fernet.generate_key()
    credential = Credential({"token": "tk-0123456789", "username": "u"}, ("api.example.com",))
    blob = Sealer(key).seal(credential)
    assert b"tk-0123456789" not in blob and b"api.example.com" not in blob
    assert Sealer(key).unseal(blob) == credential
    with pytest.raises(ConfigurationError, match="does not open"):
        Sealer(Fernet.generate_key()).unseal(blob)
    with pytest.raises(ConfigurationError, match="not a Fernet key"):
        Sealer(b"too short")


def test_credential_variables_of_different_references_differ() -> None:
    assert credential_env_var("a-b", "c") != credential_env_var("a", "b-c")
    assert credential_env_var("democrm-token", "token") == (
        "FERRYMAN_CREDENTIAL_DEMOCRM_TOKEN__TOKEN"
    )


@pytest.mark.parametrize("key", ["qk-plain-7f2a", "a+b/c=d", "with space", "ä€&x"])
def test_a_query_key_is_taken_out_of_the_urls_httpx_logs(
    key: str, caplog: pytest.LogCaptureFixture
) -> None:
    answer = httpx.MockTransport(lambda request: httpx.Response(200, json={}))
    sender = auth.build(AuthStyle("query", name="api_key"), {"token": key})
    client = httpx.Client(auth=sender, transport=answer)
    with client, caplog.at_level(logging.DEBUG, logger="httpx"):
        sent = client.get("https://source.example/v1/people", params={"limit": 5})
    assert sent.request.url.params["api_key"] == key  # the key went, in the query
    logged = [record.getMessage() for record in caplog.records if record.name == "httpx"]
    assert logged and all("people?limit=5&api_key=*** " in line for line in logged), logged
    encoded = {key, urllib.parse.quote(key, ""), urllib.parse.quote_plus(key, "")}
    assert not any(form in line for form in encoded for line in logged)


@pytest.mark.parametrize(
    ("name", "key", "field"),
    [
        ("/etc", "passwd", "name"),
        ("../outside", "token", "name"),
        ("..", "token", "name"),
        ("crm/sub", "token", "name"),
        ("crm", "..", "key"),
        ("crm", "../../etc/passwd", "key"),
        ("crm", "/etc/passwd", "key"),
    ],
)
def test_a_credential_file_outside_its_folder_is_refused_naming_the_field(
    tmp_path: pathlib.Path, name: str, key: str, field: str
) -> None:
    with pytest.raises(CredentialRefused) as caught:
        local_file(tmp_path, name, key)
    assert f"spec.source.credentialsSecretRef.{field} must be a Secret's" in str(caught.value)


def test_a_symbolic_link_out_of_the_folder_is_refused(tmp_path: pathlib.Path) -> None:
    (tmp_path / "outside").write_text("not a credential")
    (tmp_path / "credentials" / "crm").mkdir(parents=True)
    (tmp_path / "credentials" / "crm" / "token").symlink_to(tmp_path / "outside")
    with pytest.raises(CredentialRefused, match="leads out of the credentials folder"):
        local_file(tmp_path / "credentials", "crm", "token")


def test_a_credential_file_inside_its_folder_is_found(tmp_path: pathlib.Path) -> None:
    found = local_file(tmp_path, "crm.tokens", "api_key")
    assert found == tmp_path.resolve() / "crm.tokens" / "api_key"
