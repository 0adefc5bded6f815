"""What crosses the HTTP boundary: a parsed request, a ready response, and the JSON error shape.

Every error body is ``{"error": {"code": "<snake_case>", "message": "<sentence>"}}``.
"""

import base64
import json
from dataclasses import dataclass
from typing import Any

Headers = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: str = ""
    authorization: str | None = None
    body: bytes = b""


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    headers: Headers = ()


class ApiError(Exception):
    """Raised anywhere while handling a request; becomes a JSON error response."""

    def __init__(self, status: int, code: str, message: str, headers: Headers = ()) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers

    def response(self) -> Response:
        payload = {"error": {"code": self.code, "message": self.message}}
        return json_response(payload, self.status, self.headers)


def to_json(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def json_response(payload: Any, status: int = 200, headers: Headers = ()) -> Response:
    return Response(status, to_json(payload), headers)


def decode_basic(encoded: str) -> tuple[str, str]:
    """The two parts of an HTTP basic credential, ``base64(first:second)``, split at the first
    colon; ``("", "")`` if it is not base64 of UTF-8."""
    try:
        decoded = base64.b64decode(encoded.strip()).decode()
    except ValueError:
        return "", ""
    first, _, second = decoded.partition(":")
    return first, second
