"""Who may call ``/v1``, in the one auth style the server was started with (``--auth``):

- ``bearer`` (default): ``Authorization: Bearer <key>``, an ``--api-key`` (any non-empty key
  when none is given), or with OAuth a live access token;
- ``basic``: ``Authorization: Basic base64(user:password)``, exactly ``--user`` and
  ``--password``;
- ``query``: ``?api_key=<key>``, an ``--api-key`` (any non-empty key when none is given).

A credential in another place than the style's (a valid key as a bearer token in ``query``
mode) is no credential: 401. The key a call is charged to (its budget) is the API key, the
user, or with OAuth the client id.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs

from democrm import oauth
from democrm.wire import ApiError, Request, decode_basic

STYLES = ("bearer", "basic", "query")
QUERY_PARAM = "api_key"
"""The query parameter holding the API key in ``query`` mode."""


@dataclass(frozen=True)
class Auth:
    style: str = "bearer"
    api_keys: frozenset[str] = frozenset()
    """Accepted API keys (bearer, query); empty means any non-empty key (each with its own
    budget), unless OAuth is on: then only the access tokens it issued (and these keys)."""
    user: str = ""
    password: str = ""
    """The one accepted HTTP basic user and password (basic)."""

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ValueError(f"auth must be one of {', '.join(STYLES)}, got {self.style!r}")
        if (self.style == "basic") != bool(self.user and self.password):
            raise ValueError("--user and --password go together with --auth basic, and only there")

    def authenticate(self, request: Request, sessions: oauth.OAuth | None = None) -> str:
        """The budget key of ``request``'s credential, or 401 saying where to send one."""
        if self.style == "basic":
            return self._basic(request.authorization)
        if self.style == "query":
            return self._query(request.query)
        return self._bearer(request.authorization, sessions)

    def _bearer(self, authorization: str | None, sessions: oauth.OAuth | None) -> str:
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() == "bearer" and token:
            if token in self.api_keys or not (self.api_keys or sessions):
                return token
            if sessions and sessions.access(token):
                return sessions.client.client_id
        raise ApiError(
            401,
            "unauthorized",
            "send a valid API key or access token as 'Authorization: Bearer <key>'",
            (("WWW-Authenticate", 'Bearer realm="democrm", error="invalid_token"'),),
        )

    def _basic(self, authorization: str | None) -> str:
        scheme, _, encoded = (authorization or "").partition(" ")
        user, password = decode_basic(encoded) if scheme.lower() == "basic" else ("", "")
        good_user = secrets.compare_digest(user.encode(), self.user.encode())
        if good_user and secrets.compare_digest(password.encode(), self.password.encode()):
            return user
        raise ApiError(
            401,
            "unauthorized",
            "send the user and password as HTTP basic ('Authorization: Basic <base64 of"
            " user:password>')",
            (("WWW-Authenticate", 'Basic realm="democrm", charset="UTF-8"'),),
        )

    def _query(self, query: str) -> str:
        key = parse_qs(query).get(QUERY_PARAM, [""])[-1]
        if key and (key in self.api_keys or not self.api_keys):
            return key
        raise ApiError(
            401,
            "unauthorized",
            f"send a valid API key as the query parameter {QUERY_PARAM} (?{QUERY_PARAM}=<key>)",
            (("WWW-Authenticate", f'ApiKey realm="democrm", param="{QUERY_PARAM}"'),),
        )
