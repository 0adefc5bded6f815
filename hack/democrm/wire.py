"""What crosses the HTTP boundary: a parsed request, a ready response, and the JSON error shape.

Every error body is ``{"error": {"code": "<snake_case>", "message": "<sentence>"}}``.
"""

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
