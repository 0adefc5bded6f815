"""The CRM API proper, ``/v1/...``: authentication, pagination, pricing, faults and latency.

A request is checked in this order, and the first failure answers it: route (404), method (405),
credential (401, in the server's auth style: ``auth``), parameters, body and existence (400,
404), the throttle of a key's first calls and the budget (429, nothing charged), then the
injected stall and error (the call is already paid), then the latency sleep, then the data,
with what is left of the key's budget in rate-limit headers. How a listing is paged is
``paging``'s; a collection's search (``POST``) is ``search``'s.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from democrm import budget, changes, paging, search
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


Prepare = Callable[[State, str, Request], Call]


def handle(state: State, request: Request) -> tuple[str, Response]:
    """The response and the endpoint label it is counted under in ``/_stats``."""
    route = resolve(request.path)
    if route is None:
        return f"{request.method} (unknown)", not_found("no such endpoint").response()
    method, endpoint, prepare, argument = route
    try:
        if request.method != method:
            raise ApiError(405, "method_not_allowed", f"{endpoint} only supports {method}")
        key = state.auth.authenticate(request, state.oauth)
        call = prepare(state, argument, request)
        return f"{method} {endpoint}", perform(state, key, call)
    except ApiError as exc:
        return f"{request.method} {endpoint}", exc.response()


def resolve(path: str) -> tuple[str, str, Prepare, str] | None:
    """The method, endpoint label, preparation and path argument of ``path``'s route."""
    parts = path.rstrip("/").split("/")[1:]
    if parts[:1] != ["v1"]:
        return None
    collection = len(parts) >= 2 and parts[1] in ("organizations", "people", "deals")
    if len(parts) == 2 and collection:
        return "GET", f"/v1/{parts[1]}", prepare_listing, parts[1]
    if len(parts) == 3 and collection and parts[2] == "search":
        return "POST", f"/v1/{parts[1]}/search", prepare_search, parts[1]
    if len(parts) == 4 and parts[1] == "deals" and parts[3] == "messages":
        return "GET", "/v1/deals/{id}/messages", prepare_messages, parts[2]
    if len(parts) == 3 and parts[1] == "messages":
        return "GET", "/v1/messages/{id}", prepare_body, parts[2]
    return None


def perform(state: State, key: str, call: Call) -> Response:
    runtime = state.runtime
    if state.throttle.refuses(key, runtime.throttle_first):
        message = "this API key is throttled; retry after 1 s"
        said = budget.retry_after_header(1, runtime.retry_after)
        headers = (("Retry-After", said), *budget.rate_headers(state.budgets, key))
        raise ApiError(429, "rate_limited", message, headers)
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


def prepare_listing(state: State, kind: str, request: Request) -> Call:
    query = request.query
    if state.changes.active:
        start, limit = paging.page_params(query)
        return changed_listing(state, kind, query, start, limit)
    source = state.source
    listing = paging.Listing(0, source.count(kind), maker(state, kind), state.drift.deleted(kind))
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
    make = maker(state, kind)
    listed = state.changes.listed(kind, state.source.count(kind), since)

    def produce() -> tuple[Any, Headers]:
        chosen = listed[start : start + limit]
        records = [state.changes.revise(kind, i, make(i)) for i in chosen]
        return paging.offset_page(records, start, limit, len(listed)), ()

    return Call(True, produce)


def prepare_search(state: State, kind: str, request: Request) -> Call:
    """A collection's search (``search``): as the listing is now, with ``/_drift``'s and
    ``/_changes``' deletions left out and, once changes are on, each record as it is now."""
    query = search.parse(kind, request.body)
    source, make = state.source, maker(state, kind)
    if state.changes.active:
        indices = state.changes.listed(kind, source.count(kind), None)

        def revised(index: int) -> dict[str, Any]:
            return state.changes.revise(kind, index, make(index))

        return Call(True, search.produce(indices, revised, query))
    deleted = set(state.drift.deleted(kind))
    count = source.count(kind)
    remaining: Sequence[int] = (
        [i for i in range(count) if i not in deleted] if deleted else range(count)
    )
    return Call(True, search.produce(remaining, make, query), lambda: state.drift.answered(kind))


def maker(state: State, kind: str) -> Callable[[int], dict[str, Any]]:
    """What builds the record of a collection (organizations, people, deals) at an index."""
    source = state.source
    return {"organizations": source.organization, "people": source.person,
            "deals": source.deal}[kind]  # fmt: skip


def prepare_messages(state: State, deal: str, request: Request) -> Call:
    query = request.query
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


def prepare_body(state: State, message: str, request: Request) -> Call:
    message_id = paging.parse_id(message)
    if message_id is None or not state.source.message_exists(message_id):
        raise not_found(f"no message with id {message!r}")
    if state.source.body_gone(message_id):
        raise not_found(f"message {message_id} was deleted")
    return Call(False, lambda: (state.source.body(message_id), ()))


def not_found(message: str) -> ApiError:
    return ApiError(404, "not_found", message)
