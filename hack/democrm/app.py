"""Request dispatch, free of sockets: ``/v1`` goes to the API, everything else to control.

``App.handle`` never raises: unexpected exceptions become a JSON 500 (and a log line).
"""

import logging

from democrm import control, v1
from democrm.state import State
from democrm.wire import ApiError, Request, Response

log = logging.getLogger("democrm")


class App:
    def __init__(self, state: State) -> None:
        self.state = state

    def handle(self, request: Request) -> Response:
        try:
            return self._dispatch(request)
        except ApiError as exc:
            return exc.response()
        except Exception:
            log.exception("unexpected error for %s %s", request.method, request.path)
            return ApiError(500, "internal", "unexpected server error").response()

    def _dispatch(self, request: Request) -> Response:
        if request.path == "/oauth/token" and self.state.oauth:
            if request.method != "POST":
                raise ApiError(405, "method_not_allowed", "/oauth/token only supports POST")
            return self.state.oauth.token(request)
        if request.path == "/v1" or request.path.startswith("/v1/"):
            endpoint, response = v1.handle(self.state, request)
            self.state.stats.record(endpoint, response.status)
            return response
        return control.handle(self.state, request)
