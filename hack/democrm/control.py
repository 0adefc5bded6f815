"""Endpoints outside ``/v1``: health, ground truth, runtime configuration and counters.

They need no API key, cost no tokens and are never faulted or delayed: tests use them to look at
and steer the server. The server binds to loopback only, which is their only protection.
"""

import dataclasses
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from democrm import changes, data, drift, oauth, truth
from democrm.settings import SettingsError
from democrm.state import State
from democrm.wire import ApiError, Request, Response, json_response

MAX_CONFIG_BYTES = 65_536


def healthz(state: State, request: Request) -> Response:
    return json_response({"status": "ok"})


def get_truth(state: State, request: Request) -> Response:
    """``?ids=0`` leaves out the id lists (counts and malformed records only)."""
    flag = parse_qs(request.query).get("ids", ["1"])[-1].lower()
    deleted = {kind: state.drift.deleted(kind) for kind in drift.KINDS}
    found = truth.ground_truth(state.source, with_ids=flag not in ("0", "false"), deleted=deleted)
    return json_response(found)


def get_config(state: State, request: Request) -> Response:
    return json_response(config_view(state))


def post_config(state: State, request: Request) -> Response:
    changes = json_object(request.body)
    try:
        state.reconfigure(changes)
    except SettingsError as exc:
        raise ApiError(400, "bad_config", str(exc)) from exc
    return json_response(config_view(state))


def get_stats(state: State, request: Request) -> Response:
    return json_response({**state.stats.snapshot(), "budgets": state.budgets.remaining()})


def delete_stats(state: State, request: Request) -> Response:
    state.stats.reset()
    return get_stats(state, request)


def get_changes(state: State, request: Request) -> Response:
    return json_response(state.changes.view())


def post_changes(state: State, request: Request) -> Response:
    counts = {kind: state.source.count(kind) for kind in data.LISTED}
    source = state.source

    def deal_of(message_id: int) -> int | None:
        return (message_id - 1) // source.stride if source.message_exists(message_id) else None

    try:
        return json_response(state.changes.apply(json_object(request.body), counts, deal_of))
    except changes.ChangeError as exc:
        raise ApiError(400, "bad_changes", str(exc)) from exc


def get_drift(state: State, request: Request) -> Response:
    return json_response(state.drift.view())


def post_drift(state: State, request: Request) -> Response:
    counts = {kind: state.source.count(kind) for kind in drift.KINDS}
    try:
        state.drift.add(drift.Change.parse(json_object(request.body), counts))
    except drift.ChangeError as exc:
        raise ApiError(400, "bad_drift", str(exc)) from exc
    return get_drift(state, request)


def get_oauth(state: State, request: Request) -> Response:
    return json_response(oauth_mode(state).stats())


def expire_oauth(state: State, request: Request) -> Response:
    oauth_mode(state).expire()
    return get_oauth(state, request)


def oauth_mode(state: State) -> oauth.OAuth:
    if state.oauth is None:
        raise ApiError(404, "not_found", "OAuth is off: start the server with --oauth-client-id")
    return state.oauth


def config_view(state: State) -> dict[str, Any]:
    return {
        "runtime": dataclasses.asdict(state.runtime),
        "dataset": dataclasses.asdict(state.source.dataset),
        "api_keys": len(state.auth.api_keys),
    }


def json_object(body: bytes) -> dict[str, Any]:
    if len(body) > MAX_CONFIG_BYTES:
        raise ApiError(413, "too_large", "configuration body is too large")
    try:
        value = json.loads(body or b"{}")
    except ValueError as exc:
        raise ApiError(400, "bad_json", f"body is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ApiError(400, "bad_config", "body must be a JSON object of settings")
    return value


ROUTES: dict[tuple[str, str], Callable[[State, Request], Response]] = {
    ("GET", "/healthz"): healthz,
    ("GET", "/_truth"): get_truth,
    ("GET", "/_config"): get_config,
    ("POST", "/_config"): post_config,
    ("GET", "/_stats"): get_stats,
    ("DELETE", "/_stats"): delete_stats,
    ("GET", "/_changes"): get_changes,
    ("POST", "/_changes"): post_changes,
    ("GET", "/_drift"): get_drift,
    ("POST", "/_drift"): post_drift,
    ("GET", "/_oauth"): get_oauth,
    ("POST", "/_oauth/expire"): expire_oauth,
}


def handle(state: State, request: Request) -> Response:
    endpoint = ROUTES.get((request.method, request.path.rstrip("/") or "/"))
    if endpoint is not None:
        return endpoint(state, request)
    if any(path == request.path.rstrip("/") for _, path in ROUTES):
        raise ApiError(405, "method_not_allowed", f"{request.method} is not allowed here")
    raise ApiError(404, "not_found", "no such endpoint")
