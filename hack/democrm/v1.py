"""The CRM API proper, ``/v1/...``: authentication, pagination, pricing, faults and latency.

A request is checked in this order, and the first failure answers it: route (404), method (405),
bearer token (401), parameters and existence (400, 404), budget (429, nothing charged), then the
injected stall and error (the call is already paid), then the latency sleep, then the data,
with what is left of the key's budget in rate-limit headers. How a listing is paged is
``paging``'s.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from democrm import budget, changes, paging
from democrm.state import State
from democrm.wire import ApiError, Headers, Request, Response, json_response


@dataclass(frozen=True)
class Call:
    """A validated request, ready to be paid for and answered."""

    listing: bool
    """Priced and delayed as a listing; otherwise as a message body."""
    produce: Callable[[], tuple[Any, Headers]]
    """The payload and the headers of the answer (besides the rate-limit ones)."""
    answered: Callable[[], None] = lambda: None
    """Called once the payload is built (a listing's page was answered)."""


Prepare = Callable[[State, str, str], Call]


def handle(state: State, request: Request) -> tuple[str, Response]:
    """The response and the endpoint label it is counted under in ``/_stats``."""
    route = resolve(request.path)
    if route is None:
        return f"{request.method} (unknown)", not_found("no such endpoint").response()
    endpoint, prepare, argument = route
    try:
        if request.method != "GET":
            raise ApiError(405, "method_not_allowed", f"{endpoint} only supports GET")
        key = authenticate(state, request.authorization)
        call = prepare(state, argument, request.query)
        return f"GET {endpoint}", perform(state, key, call)
    except ApiError as exc:
        return f"{request.method} {endpoint}", exc.response()


def resolve(path: str) -> tuple[str, Prepare, str] | None:
    parts = path.rstrip("/").split("/")[1:]
    if parts[:1] != ["v1"]:
        return None
    if len(parts) == 2 and parts[1] in ("organizations", "people", "deals"):
        return f"/v1/{parts[1]}", prepare_listing, parts[1]
    if len(parts) == 4 and parts[1] == "deals" and parts[3] == "messages":
        return "/v1/deals/{id}/messages", prepare_messages, parts[2]
    if len(parts) == 3 and parts[1] == "messages":
        return "/v1/messages/{id}", prepare_body, parts[2]
    return None


def authenticate(state: State, authorization: str | None) -> str:
    """The budget key of a ``Bearer`` authorization header (the API key, or with OAuth the
    client id of a live access token), or 401."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() == "bearer" and token:
        if token in state.api_keys or not (state.api_keys or state.oauth):
            return token
        if state.oauth and state.oauth.access(token):
            return state.oauth.client.client_id
    raise ApiError(
        401,
        "unauthorized",
        "send a valid API key or access token as 'Authorization: Bearer <key>'",
        (("WWW-Authenticate", 'Bearer realm="democrm", error="invalid_token"'),),
    )


def perform(state: State, key: str, call: Call) -> Response:
    runtime = state.runtime
    wait = state.budgets.charge(key, runtime.listing_cost if call.listing else runtime.body_cost)
    if wait is not None:
        seconds = budget.retry_after(wait)
        message = f"token budget spent for this API key; retry after {seconds} s"
        said = budget.retry_after_header(seconds, runtime.retry_after)
        headers = (("Retry-After", said), *budget.rate_headers(state.budgets, key))
        raise ApiError(429, "rate_limited", message, headers)
    fault = state.faults.draw(runtime.error_rate, runtime.stall_rate)
    if fault.stall:
        time.sleep(runtime.stall_seconds)
    if fault.status is not None:
        raise ApiError(fault.status, "injected_fault", "injected server error; retry the call")
    delay_ms = runtime.latency_ms if call.listing else runtime.body_latency_ms
    if delay_ms > 0:
        time.sleep(delay_ms / 1000)
    payload, headers = call.produce()
    call.answered()
    return json_response(payload, headers=headers + budget.rate_headers(state.budgets, key))


def prepare_listing(state: State, kind: str, query: str) -> Call:
    if state.changes.active:
        start, limit = paging.page_params(query)
        return changed_listing(state, kind, query, start, limit)
    source = state.source
    make = {"organizations": source.organization, "people": source.person, "deals": source.deal}
    listing = paging.Listing(0, source.count(kind), make[kind], state.drift.deleted(kind))
    loop = state.runtime.paging_loop
    produce = paging.prepare(listing, f"/v1/{kind}", query, state.drift.epoch, loop)
    return Call(True, produce, lambda: state.drift.answered(kind))


def changed_listing(state: State, kind: str, query: str, start: int, limit: int) -> Call:
    """A listing once changes are on (``changes``): deleted records left out, each record
    with its ``updated_at``, and ``updated_since`` honoured."""
    text = parse_qs(query).get("updated_since", [None])[-1]
    try:
        since = None if text is None else changes.parse_since(text)
    except ValueError:
        message = f"updated_since must be an ISO 8601 time, got {text!r}"
        raise ApiError(400, "bad_request", message) from None
    make = {"organizations": state.source.organization, "people": state.source.person,
            "deals": state.source.deal}[kind]  # fmt: skip
    listed = state.changes.listed(kind, state.source.count(kind), since)

    def produce() -> tuple[Any, Headers]:
        chosen = listed[start : start + limit]
        records = [state.changes.revise(kind, i, make(i)) for i in chosen]
        return paging.offset_page(records, start, limit, len(listed)), ()

    return Call(True, produce)


def prepare_messages(state: State, deal: str, query: str) -> Call:
    deal_id = paging.parse_id(deal)
    if deal_id is None or not 1 <= deal_id <= state.source.dataset.deals:
        raise not_found(f"no deal with id {deal!r}")
    if state.source.deal_gone(deal_id - 1):
        raise not_found(f"deal {deal_id} was deleted")
    first = (deal_id - 1) * state.source.stride
    end = first + state.source.message_count(deal_id - 1)
    make = state.source.message
    if state.changes.active:  # each header with its edits

        def make(index: int) -> dict[str, Any]:
            return state.changes.revise_message(index, state.source.message(index))

    listing = paging.Listing(first, end, make)
    path = f"/v1/deals/{deal_id}/messages"
    loop = state.runtime.paging_loop
    return Call(True, paging.prepare(listing, path, query, state.drift.epoch, loop))


def prepare_body(state: State, message: str, query: str) -> Call:
    message_id = paging.parse_id(message)
    if message_id is None or not state.source.message_exists(message_id):
        raise not_found(f"no message with id {message!r}")
    if state.source.body_gone(message_id):
        raise not_found(f"message {message_id} was deleted")
    return Call(False, lambda: (state.source.body(message_id), ()))


def not_found(message: str) -> ApiError:
    return ApiError(404, "not_found", message)
