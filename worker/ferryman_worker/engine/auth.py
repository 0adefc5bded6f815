"""How a credential goes on a source request: small ``httpx.Auth`` classes, one per style a
provider can declare (``providers.AuthStyle``). Each knows its secrets, so a message that echoes
one back can be redacted."""

from __future__ import annotations

import logging
import sys
import urllib.parse
from collections.abc import Callable, Generator, Mapping

import httpx

from ferryman_worker.engine import oauth
from ferryman_worker.engine.credentials import Credential, redact, url_host
from ferryman_worker.errors import ConfigurationError, CredentialUnavailable
from ferryman_worker.providers import AuthStyle, OAuth2


class SecretAuth(httpx.Auth):
    """An auth style holding secrets (never shown: not in ``repr``, redacted from messages)."""

    secrets: tuple[str, ...] = ()
    sends = "the token sent as Authorization: Bearer"
    """What the source is sent, for the hint of a refusal (401, 403)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(***)"


class Bearer(SecretAuth):
    """``Authorization: Bearer <token>``."""

    def __init__(self, token: str) -> None:
        self.header = f"Bearer {token}"
        self.secrets = (token,)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self.header
        yield request


class HeaderKey(SecretAuth):
    """An API key in a header of its own (``X-Api-Key: <key>``), optionally prefixed."""

    def __init__(self, name: str, key: str, prefix: str = "") -> None:
        self.name, self.value = name, f"{prefix}{key}"
        self.secrets = (key,)
        self.sends = f"the API key sent in the {name} header"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers[self.name] = self.value
        yield request


class UrlKeys(logging.Filter):
    """Takes the keys sent as query parameters out of what httpx logs (at DEBUG, each request's
    URL with its query: ``HTTP Request: GET https://...?api_key=<key>``)."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: frozenset[str] = frozenset()

    def add(self, key: str) -> None:
        """Redact ``key`` as is, percent-encoded (``redact``) and as a query value encodes a
        space (``+``)."""
        self.keys = self.keys | {key, urllib.parse.quote_plus(key, safe="")}

    def filter(self, record: logging.LogRecord) -> bool:
        keys = self.keys
        if keys:
            message = record.getMessage()
            redacted = redact(message, keys, limit=sys.maxsize)
            if redacted != message:
                record.msg, record.args = redacted, ()
        return True


URL_KEYS = UrlKeys()
logging.getLogger("httpx").addFilter(URL_KEYS)


class QueryKey(SecretAuth):
    """An API key as a query parameter (``?api_key=<key>``), kept out of httpx's log lines."""

    def __init__(self, name: str, key: str) -> None:
        self.name, self.key = name, key
        self.secrets = (key,)
        self.sends = f"the API key sent as the query parameter {name}"
        URL_KEYS.add(key)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.url = request.url.copy_merge_params({self.name: self.key})
        yield request


class Basic(SecretAuth):
    """HTTP basic: ``username`` and ``password``."""

    sends = "the username and password sent as HTTP basic"

    def __init__(self, username: str, password: str) -> None:
        self.basic = httpx.BasicAuth(username, password)
        self.secrets = tuple(s for s in (password, username) if s)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        yield from self.basic.auth_flow(request)


class NoAuth(SecretAuth):
    """An API without authentication: requests go as they are."""

    sends = (
        "a call without a credential (the provider's auth style is none: declare the style"
        " the source wants)"
    )

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        yield request


KEYS: dict[str, tuple[str, ...]] = {
    "none": (),
    "bearer": ("token",),
    "header": ("token",),
    "query": ("token",),
    "basic": ("username", "password"),
}
"""The credential keys each style reads (``token``: the key the run's credential names);
``oauth2`` reads the keys its grant names (``needs``)."""


def needs(style: AuthStyle) -> tuple[str, ...]:
    """The credential keys ``style`` reads."""
    if style.oauth2 is not None:
        return tuple(style.oauth2.keys().values())
    return KEYS[style.style]


def credential_values(
    style: AuthStyle, ref: Mapping[str, str], read: Callable[[dict[str, str]], str]
) -> dict[str, str]:
    """The credential keys ``style`` needs, read (``read``: a Secret reference to its value)
    from the Secret ``ref`` names: the key ``ref`` names is the ``token``."""
    if style.style == "none":
        return {}
    if style.style in ("basic", "oauth2"):
        return {key: read({"name": ref["name"], "key": key}) for key in needs(style)}
    return {"token": read(dict(ref))}


def build(style: AuthStyle, values: Mapping[str, str]) -> SecretAuth:
    """The auth for ``style`` from the credential's ``values``; ConfigurationError names a
    missing key (never a value). OAuth2 needs more than values: ``for_credential``."""
    if style.style == "oauth2":
        raise ConfigurationError("auth style oauth2 is built for a credential (for_credential)")
    missing = [key for key in KEYS[style.style] if not values.get(key)]
    if missing:
        raise CredentialUnavailable(
            f"the provider's auth style {style.style!r} needs the credential keys {missing}: "
            "add them to the Secret that spec.source.credentialsSecretRef names"
        )
    if style.style == "none":
        return NoAuth()
    if style.style == "bearer":
        return Bearer(values["token"])
    if style.style == "header":
        return HeaderKey(style.name or "X-Api-Key", values["token"], style.prefix)
    if style.style == "query":
        return QueryKey(style.name or "api_key", values["token"])
    return Basic(values["username"], values["password"])


def for_credential(
    style: AuthStyle, credential: Credential, base_url: str, connect: oauth.Connect | None = None
) -> httpx.Auth:
    """The auth for ``style`` with ``credential`` on the source at ``base_url``. An OAuth2
    token URL on a host the credential is not bound to is refused here, before any request;
    ``connect`` opens the database connection a refresh-token grant keeps its tokens with."""
    if style.oauth2 is None:
        return build(style, credential.values)
    grant = style.oauth2
    url = token_url(grant, base_url)
    if not credential.allows(url):
        raise ConfigurationError(
            f"spec.auth.oauth2.tokenUrl: {url_host(url)} is not a host the source credential is"
            f" bound to ({', '.join(credential.hosts) or 'none'}): correct the provider's"
            f" tokenUrl, or bind the credential to that host too:"
            f" {credential.binding_fix(url_host(url))}"
        )
    endpoint = oauth.TokenEndpoint(
        _GrantCredential(credential, grant),
        url,
        client_auth=grant.client_auth,
        scope=" ".join(grant.scopes) or None,
    )
    if grant.grant == "client_credentials":
        return oauth.ClientCredentialsAuth(endpoint)
    if connect is None:
        raise ConfigurationError(
            "auth style oauth2 with grant refresh_token keeps its tokens in PostgreSQL: this"
            " process has no database to keep them in"
        )
    return oauth.RefreshTokenAuth(endpoint, connect)


def token_url(grant: OAuth2, base_url: str) -> str:
    """The grant's token URL: as declared, or its path on the host of ``base_url``."""
    if grant.token_url.startswith("/"):
        return str(httpx.URL(base_url).join(grant.token_url))
    return grant.token_url


class _GrantCredential:
    """The credential as the grant sees it: its values under the names OAuth2 gives them
    (client_id, client_secret, refresh_token), whichever keys of the Secret hold them."""

    def __init__(self, credential: Credential, grant: OAuth2) -> None:
        self._credential = credential
        self.id = credential.id
        missing = [key for key in grant.keys().values() if not credential.values.get(key)]
        if missing:
            raise CredentialUnavailable(
                f"the provider's auth style 'oauth2' ({grant.grant}) needs the credential keys"
                f" {missing}: add them to the Secret that spec.source.credentialsSecretRef"
                " names, or name the keys it has in spec.auth.oauth2.keys"
            )
        self.values = {role: credential.values[key] for role, key in grant.keys().items()}

    def __repr__(self) -> str:
        return f"_GrantCredential({self.id!r})"

    def allows(self, url: str) -> bool:
        return self._credential.allows(url)
