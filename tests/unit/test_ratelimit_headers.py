"""What a source's headers say about its limits: how long a 429 asks us to wait, in every form
real APIs send it."""

from __future__ import annotations

import email.utils

import httpx
import pytest

from ferryman_worker.engine import ratelimit

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"Retry-After": "7"}, 7),
        ({"Retry-After": " 120 "}, 120),
        ({"Retry-After": email.utils.formatdate(NOW + 45, usegmt=True)}, 45),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, ratelimit.MIN_WAIT),  # in the past
        ({"Retry-After": "0"}, ratelimit.MIN_WAIT),
        ({"Retry-After": "86400"}, ratelimit.MAX_WAIT),
        ({"Retry-After": "soon", "X-RateLimit-Reset": "12"}, 12),  # unusable: the reset header
        ({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 30)}, 30),  # Unix time
        ({"RateLimit-Remaining": "0", "RateLimit-Reset": "9"}, 9),  # IETF draft, fields
        ({"RateLimit": '"default";r=0;t=25', "RateLimit-Policy": '"default";q=100;w=60'}, 25),
        ({"RateLimit": "limit=100, remaining=0, reset=17"}, 17),  # the older draft's dictionary
        ({"Retry-After": "3", "X-RateLimit-Reset": "50"}, 3),  # Retry-After wins
    ],
)
def test_a_429_says_how_long_to_wait(headers: dict[str, str], wait: float) -> None:
    assert ratelimit.retry_after(httpx.Headers(headers), now=NOW) == pytest.approx(wait)


@pytest.mark.parametrize(
    "headers",
    [{}, {"Retry-After": "later"}, {"Retry-After": "-5"}, {"X-RateLimit-Reset": "nan"}],
)
def test_a_429_that_says_nothing_usable_leaves_the_wait_to_the_backoff(
    headers: dict[str, str],
) -> None:
    assert ratelimit.retry_after(httpx.Headers(headers), now=NOW) is None


def test_the_backoff_doubles_up_to_its_cap() -> None:
    assert [ratelimit.backoff(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]


@pytest.mark.parametrize(
    ("headers", "remaining", "reset", "limit"),
    [
        ({"X-RateLimit-Remaining": "42", "X-RateLimit-Reset": "30"}, 42, 30, None),
        ({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 90)}, 0, 90, None),
        ({"RateLimit-Remaining": "7", "X-RateLimit-Limit": "50"}, 7, None, 50),
        (
            {"RateLimit": '"default";r=5;t=12', "RateLimit-Policy": '"default";q=100;w=60'},
            5,
            12,
            100,
        ),
        ({"RateLimit": "limit=100, remaining=3, reset=4"}, 3, 4, 100),
    ],
)
def test_a_response_says_what_is_left_of_the_quota(
    headers: dict[str, str], remaining: float, reset: float | None, limit: float | None
) -> None:
    expected = ratelimit.Quota(remaining, reset, limit)
    assert ratelimit.quota(httpx.Headers(headers), now=NOW) == expected


def test_a_spent_quota_is_waited_for_until_half_is_back_not_until_it_is_whole() -> None:
    bucket = ratelimit.Quota(remaining=2, reset_after=10, limit=102)  # 10 tokens a second
    assert bucket.wait_for(12) == 4.9  # 51 tokens: half the quota, more than the call's 12
    assert bucket.wait_for(72) == 7.0  # the call's 72, more than half
    assert ratelimit.Quota(remaining=2, reset_after=10).wait_for(12) == 10  # limit not said
    assert ratelimit.Quota(remaining=2, reset_after=None, limit=102).wait_for(12) is None


def test_a_response_without_rate_headers_says_nothing_of_the_quota() -> None:
    headers = httpx.Headers({"X-RateLimit-Limit": "100", "Content-Type": "application/json"})
    assert ratelimit.quota(headers, now=NOW) is None
