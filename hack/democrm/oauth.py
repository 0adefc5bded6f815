"""OAuth2 mode: a token endpoint whose refresh tokens are single-use, as strict servers make them.

``POST /oauth/token`` (form-encoded; the client authenticates with HTTP basic or with
``client_id``/``client_secret`` in the form):

- ``grant_type=client_credentials``: an access token for the client;
- ``grant_type=refresh_token``: a new access token *and a new refresh token*; the one sent is
  spent. A spent refresh token sent again is taken for a stolen one, as Salesforce's rotation
  and Ory Hydra do: the whole family (every token descended from the first refresh token) is
  revoked, and the call answers 400 ``invalid_grant``.

Access tokens live ``access_ttl`` seconds. ``GET /_oauth`` counts grants, reuses, revoked families
and API calls per access token (by its issue number, never the token); ``POST /_oauth/expire``
expires every access token now, so a test can make clients refresh.
"""

import dataclasses
import secrets
import threading
import time
from typing import Any
from urllib.parse import parse_qs, unquote

from democrm.wire import ApiError, Request, Response, decode_basic, json_response


@dataclasses.dataclass
class Access:
    family: str
    number: int
    """The order it was issued in: what counters show instead of the token."""
    expires_at: float


@dataclasses.dataclass(frozen=True)
class Client:
    client_id: str
    client_secret: str
    refresh_token: str | None
    """The first refresh token of the one family (as if a user had authorized once)."""
    access_ttl: float = 3600.0
    token_latency_ms: float = 0.0
    """Sleep before answering the token endpoint (so concurrent refreshes overlap)."""


class OAuth:
    def __init__(self, client: Client) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._refresh: dict[str, tuple[str, bool]] = {}  # refresh token -> (family, spent)
        self._access: dict[str, Access] = {}
        self._revoked: set[str] = set()
        self._issued = 0
        self.counts = {"refresh_token": 0, "client_credentials": 0, "reused": 0, "refused": 0}
        self.calls: dict[int, int] = {}
        if client.refresh_token:
            self._refresh[client.refresh_token] = ("family-1", False)

    def token(self, request: Request) -> Response:
        """The token endpoint."""
        form = {name: values[-1] for name, values in parse_qs(request.body.decode()).items()}
        self._authenticate_client(request.authorization, form)
        if self.client.token_latency_ms > 0:
            time.sleep(self.client.token_latency_ms / 1000)
        grant = form.get("grant_type")
        with self._lock:
            if grant == "client_credentials":
                self.counts["client_credentials"] += 1
                return json_response(self._issue("clients", refresh=False))
            if grant == "refresh_token":
                return json_response(self._rotate(form.get("refresh_token", "")))
        raise oauth_error("unsupported_grant_type", f"grant_type {grant!r} is not supported")

    def access(self, token: str) -> Access | None:
        """The live access token ``token`` (counted as one API call), or None."""
        with self._lock:
            access = self._access.get(token)
            if access is None or access.family in self._revoked:
                return None
            if access.expires_at <= time.monotonic():
                return None
            self.calls[access.number] = self.calls.get(access.number, 0) + 1
            return access

    def expire(self) -> None:
        with self._lock:
            for access in self._access.values():
                access.expires_at = 0.0

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                **self.counts,
                "revoked_families": len(self._revoked),
                "issued": self._issued,
                "calls": {str(number): n for number, n in sorted(self.calls.items())},
            }

    def _rotate(self, refresh_token: str) -> dict[str, Any]:
        known = self._refresh.get(refresh_token)
        if known is None or known[0] in self._revoked:
            self.counts["refused"] += 1
            raise oauth_error("invalid_grant", "the refresh token is unknown or revoked")
        family, spent = known
        if spent:  # reuse: revoke the family, as a server must assume the token was stolen
            self.counts["reused"] += 1
            self._revoked.add(family)
            raise oauth_error("invalid_grant", "the refresh token was already used")
        self._refresh[refresh_token] = (family, True)
        self.counts["refresh_token"] += 1
        return self._issue(family, refresh=True)

    def _issue(self, family: str, *, refresh: bool) -> dict[str, Any]:
        self._issued += 1
        access = "at-" + secrets.token_urlsafe(18)
        expires = time.monotonic() + self.client.access_ttl
        self._access[access] = Access(family, self._issued, expires)
        answer: dict[str, Any] = {
            "access_token": access,
            "token_type": "bearer",
            "expires_in": int(self.client.access_ttl),
        }
        if refresh:
            rotated = "rt-" + secrets.token_urlsafe(18)
            self._refresh[rotated] = (family, False)
            answer["refresh_token"] = rotated
        return answer

    def _authenticate_client(self, authorization: str | None, form: dict[str, str]) -> None:
        scheme, _, encoded = (authorization or "").partition(" ")
        if scheme.lower() == "basic":
            client_id, client_secret = (unquote(part) for part in decode_basic(encoded))
        else:
            client_id, client_secret = form.get("client_id", ""), form.get("client_secret", "")
        good_id = secrets.compare_digest(client_id, self.client.client_id)
        if not (good_id and secrets.compare_digest(client_secret, self.client.client_secret)):
            raise OAuthError(
                401,
                "invalid_client",
                "unknown client or wrong secret",
                (("WWW-Authenticate", 'Basic realm="democrm"'),),
            )


class OAuthError(ApiError):
    """An RFC 6749 error answer: ``{"error": code, "error_description": ...}``."""

    def response(self) -> Response:
        payload = {"error": self.code, "error_description": self.message}
        return json_response(payload, self.status, self.headers)


def oauth_error(code: str, description: str) -> OAuthError:
    return OAuthError(400, code, description)
