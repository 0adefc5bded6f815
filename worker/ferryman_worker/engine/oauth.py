"""OAuth2 for source APIs, as ``httpx.Auth``: client credentials, and refresh tokens that rotate.

A server that rotates refresh tokens makes each one single-use: spending one twice (two workers
refreshing at once, or one retrying a refresh whose answer it lost) is taken for theft, and the
server refuses it and revokes every token of its family. So the fleet has one refresher per
credential: a refresh runs in a transaction holding the credential's row in
``ferryman_oauth_tokens`` (keyed by the credential's non-secret id) from before the token
endpoint is called until the rotated tokens are committed, and a worker uses a token only once
it is committed. A worker that meets the lock waits, then finds the new access token and uses it.

Access tokens are reused, in each process and across the fleet, until ``skew`` seconds before
they expire; a 401 refreshes once. Client-credentials tokens need no coordination (no token is
spent by asking), so each process fetches and caches its own. Tokens never reach a log line or
an exception: errors name the credential's id and the Secret key to fix.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections.abc import Callable, Generator, Mapping
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol

import httpx

from ferryman_worker.db import queries
from ferryman_worker.db.connect import Connection
from ferryman_worker.engine.credentials import Sealer
from ferryman_worker.engine.source import SourceError
from ferryman_worker.errors import ConfigurationError, CredentialUnavailable

SKEW = 60.0
"""Seconds before its expiry that an access token is refreshed rather than used."""
DEFAULT_LIFETIME = 3600.0
"""An access token's lifetime when the token endpoint does not say (no ``expires_in``)."""

ClientAuth = Literal["basic", "post"]
"""How the client authenticates at the token endpoint: HTTP basic (RFC 6749's default) or
``client_id``/``client_secret`` in the form (Salesforce's)."""


class Credential(Protocol):
    """What OAuth needs of a source credential."""

    @property
    def id(self) -> str:
        """Stable and not secret: names the token row and appears in errors."""

    @property
    def values(self) -> Mapping[str, str]:
        """client_id, client_secret, and for the refresh grant the first refresh_token."""

    def allows(self, url: str) -> bool:
        """Whether the credential may be sent to ``url`` (its bound hosts)."""


class TokenRefused(SourceError):
    """The token endpoint refused the credential: trying again cannot help."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False, status=400)


@dataclasses.dataclass(frozen=True)
class Token:
    access: str = dataclasses.field(repr=False)
    expires_at: float
    """On this process's monotonic clock."""

    def usable(self, skew: float) -> bool:
        return time.monotonic() < self.expires_at - skew


class TokenEndpoint:
    """The authorization server's token endpoint, for one credential: the one place its
    answers and failures are read."""

    def __init__(
        self,
        credential: Credential,
        url: str,
        *,
        client_auth: ClientAuth = "basic",
        scope: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        if not credential.allows(url):
            raise ConfigurationError(
                f"credential {credential.id}: the token URL {url!r} is on a host the credential"
                " is not bound to: add the host to the credential's hosts, or correct the"
                " token URL the provider declares"
            )
        for key in ("client_id", "client_secret"):
            if not credential.values.get(key):
                raise ConfigurationError(f"credential {credential.id} has no {key!r}: add it")
        self.credential, self.url = credential, url
        self.client_auth, self.scope, self.timeout = client_auth, scope, timeout

    def grant(self, form: dict[str, str]) -> dict[str, Any]:
        """POST the grant; the JSON answer, or TokenRefused (4xx) / SourceError (retryable)."""
        values = self.credential.values
        client = {"client_id": values["client_id"], "client_secret": values["client_secret"]}
        if self.scope:
            form = {**form, "scope": self.scope}
        try:  # a grant is rare: a connection of its own, never redirected
            with httpx.Client(timeout=self.timeout, follow_redirects=False) as http:
                if self.client_auth == "post":
                    response = http.post(self.url, data={**form, **client})
                else:
                    basic = httpx.BasicAuth(client["client_id"], client["client_secret"])
                    response = http.post(self.url, data=form, auth=basic)
        except httpx.ConnectError:
            raise SourceError(
                f"credential {self.credential.id}: cannot connect to the token endpoint",
                retryable=True,
            ) from None
        except httpx.TransportError as exc:
            raise self._answer_lost(form, type(exc).__name__) from None
        return self._answer(response, form)

    def _answer(self, response: httpx.Response, form: dict[str, str]) -> dict[str, Any]:
        if response.status_code >= 500:
            raise SourceError(
                f"credential {self.credential.id}: the token endpoint answered HTTP"
                f" {response.status_code}",
                retryable=True,
                status=response.status_code,
            )
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if response.status_code >= 400 or not isinstance(answer, dict):
            raise TokenRefused(self._refusal(response, answer))
        if not isinstance(answer.get("access_token"), str):
            raise TokenRefused(f"credential {self.credential.id}: no access_token in the answer")
        return answer

    def _refusal(self, response: httpx.Response, answer: object) -> str:
        """The server's error code only (its description may quote what we sent)."""
        code = answer.get("error") if isinstance(answer, dict) else None
        said = code if isinstance(code, str) and code.isidentifier() else "no error code"
        fix = (
            "authorize again and store the new refresh token in the credential's refresh_token key"
            if said == "invalid_grant"
            else "check the credential's client_id and client_secret"
        )
        return (
            f"credential {self.credential.id}: the token endpoint refused the grant"
            f" (HTTP {response.status_code}, {said}): {fix}"
        )

    def _answer_lost(self, form: dict[str, str], what: str) -> SourceError:
        if form.get("grant_type") != "refresh_token":
            return SourceError(
                f"credential {self.credential.id}: the token endpoint failed ({what})",
                retryable=True,
            )
        return TokenRefused(  # sent, answer lost: the server may have spent the token
            f"credential {self.credential.id}: the refresh's answer was lost ({what}); the"
            " server may have rotated the refresh token already. Resume the run: if the"
            " refresh is refused then, authorize again and store the new refresh token in"
            " the credential's refresh_token key"
        )


def _token(answer: Mapping[str, Any]) -> tuple[str, float]:
    lifetime = answer.get("expires_in")
    seconds = float(lifetime) if isinstance(lifetime, int | float) else DEFAULT_LIFETIME
    return str(answer["access_token"]), seconds


class _BearerAuth(httpx.Auth):
    """A bearer token, fetched when missing or near expiry; a 401 fetches once more."""

    skew = SKEW
    sends = "the OAuth2 access token got with the client id, secret or refresh token"

    def __init__(self, endpoint: TokenEndpoint) -> None:
        self.endpoint = endpoint
        self._lock = threading.Lock()
        self._token: Token | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.endpoint.credential.id})"

    @property
    def secrets(self) -> tuple[str, ...]:
        """What to redact from a source's words: the credential's secrets and the access
        token in use."""
        values = self.endpoint.credential.values
        held = (values.get("client_secret"), values.get("refresh_token"))
        current = self._token.access if self._token else None
        return tuple(secret for secret in (*held, current) if secret)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self._current(stale=None)
        request.headers["Authorization"] = f"Bearer {token.access}"
        response = yield request
        if response.status_code == 401:
            token = self._current(stale=token.access)
            request.headers["Authorization"] = f"Bearer {token.access}"
            yield request

    def _current(self, stale: str | None) -> Token:
        with self._lock:  # one thread of the process fetches; the others reuse its token
            token = self._token
            if token is None or token.access == stale or not token.usable(self.skew):
                self._token = token = self._fetch(stale)
            return token

    def _fetch(self, stale: str | None) -> Token:
        raise NotImplementedError


class ClientCredentialsAuth(_BearerAuth):
    """OAuth2 client credentials (RFC 6749 §4.4): this process's token, reused until near
    expiry."""

    def __init__(self, endpoint: TokenEndpoint) -> None:
        super().__init__(endpoint)

    def _fetch(self, stale: str | None) -> Token:
        access, lifetime = _token(self.endpoint.grant({"grant_type": "client_credentials"}))
        return Token(access, time.monotonic() + lifetime)


Connect = Callable[[], AbstractContextManager[Connection]]
"""Opens a database connection for a refresh (autocommit; a refresh is rare)."""


class RefreshTokenAuth(_BearerAuth):
    """OAuth2 refresh tokens (RFC 6749 §6) with rotation, one refresher for the whole fleet."""

    def __init__(self, endpoint: TokenEndpoint, connect: Connect) -> None:
        super().__init__(endpoint)
        seed = endpoint.credential.values.get("refresh_token")
        if not seed:
            raise CredentialUnavailable(
                f"credential {endpoint.credential.id} has no 'refresh_token': add it"
            )
        self._connect, self._seed = connect, seed
        values = endpoint.credential.values
        self.sealer = Sealer.derived(
            (values["client_id"], values["client_secret"], seed), f"oauth:{endpoint.credential.id}"
        )
        """Seals the tokens in their row: they open only with the credential's own values."""

    def _fetch(self, stale: str | None) -> Token:
        """The fleet's current access token, refreshed (under the row lock) if it is missing,
        near expiry or the one the source just refused (``stale``); returned once committed.
        Both tokens are sealed in the row; one written in clear before they were is sealed
        when it is read."""
        key = {
            "credential": self.endpoint.credential.id,
            "seed": self.sealer.seal_text(self._seed),
            "seed_sha256": hashlib.sha256(self._seed.encode()).hexdigest(),
        }
        with self._connect() as conn, conn.transaction():
            conn.execute(queries.engine("seed_oauth_token"), key)
            row = conn.execute(queries.engine("lock_oauth_token"), key).fetchone()
            assert row is not None  # seeded above, locked since
            refresh, access = self._opened(row)
            if access is not None and access != stale and float(row["lives"]) > self.skew:
                if not row["sealed"]:
                    self._save(conn, access, refresh, refresh, float(row["lives"]))
                return Token(access, time.monotonic() + float(row["lives"]))
            answer = self.endpoint.grant({"grant_type": "refresh_token", "refresh_token": refresh})
            access, lifetime = _token(answer)
            rotated = answer.get("refresh_token")
            current = rotated if isinstance(rotated, str) else refresh
            self._save(conn, access, current, refresh, lifetime)
        return Token(access, time.monotonic() + lifetime)  # committed: usable by all

    def _opened(self, row: Mapping[str, Any]) -> tuple[str, str | None]:
        """The row's refresh and access tokens in clear (sealed, or from before sealing)."""
        if not row["sealed"]:
            return row["refresh_token"], row["access_token"]
        access = row["access_token"]
        opened = None if access is None else self.sealer.open_text(access)
        return self.sealer.open_text(row["refresh_token"]), opened

    def _save(
        self, conn: Connection, access: str, refresh: str, before: str, lifetime: float
    ) -> None:
        conn.execute(
            queries.engine("save_oauth_token"),
            {
                "credential": self.endpoint.credential.id,
                "access_token": self.sealer.seal_text(access),
                "refresh_token": self.sealer.seal_text(refresh),
                "rotated": refresh != before,
                "expires_in": lifetime,
            },
        )
