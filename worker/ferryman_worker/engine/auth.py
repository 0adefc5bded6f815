"""How a credential goes on a source request: small ``httpx.Auth`` classes, one per style a
provider can declare (``providers.AuthStyle``). Each knows its secrets, so a message that echoes
one back can be redacted."""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping

import httpx

from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers import AuthStyle


class SecretAuth(httpx.Auth):
    """An auth style holding secrets (never shown: not in ``repr``, redacted from messages)."""

    secrets: tuple[str, ...] = ()

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

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers[self.name] = self.value
        yield request


class QueryKey(SecretAuth):
    """An API key as a query parameter (``?api_key=<key>``)."""

    def __init__(self, name: str, key: str) -> None:
        self.name, self.key = name, key
        self.secrets = (key,)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.url = request.url.copy_merge_params({self.name: self.key})
        yield request


class Basic(SecretAuth):
    """HTTP basic: ``username`` and ``password``."""

    def __init__(self, username: str, password: str) -> None:
        self.basic = httpx.BasicAuth(username, password)
        self.secrets = tuple(s for s in (password, username) if s)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        yield from self.basic.auth_flow(request)


class NoAuth(SecretAuth):
    """An API without authentication: requests go as they are."""

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        yield request


KEYS: dict[str, tuple[str, ...]] = {
    "none": (),
    "bearer": ("token",),
    "header": ("token",),
    "query": ("token",),
    "basic": ("username", "password"),
}
"""The credential keys each style reads (``token``: the key the run's credential names)."""


def credential_values(
    style: AuthStyle, ref: Mapping[str, str], read: Callable[[dict[str, str]], str]
) -> dict[str, str]:
    """The credential keys ``style`` needs, read (``read``: a Secret reference to its value)
    from the Secret ``ref`` names: the key ``ref`` names is the ``token``."""
    if style.style == "none":
        return {}
    if style.style == "basic":
        return {key: read({"name": ref["name"], "key": key}) for key in KEYS["basic"]}
    return {"token": read(dict(ref))}


def build(style: AuthStyle, values: Mapping[str, str]) -> SecretAuth:
    """The auth for ``style`` from the credential's ``values``; ConfigurationError names a
    missing key (never a value)."""
    missing = [key for key in KEYS[style.style] if not values.get(key)]
    if missing:
        raise ConfigurationError(
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
