"""The token budget per API key: 429 with Retry-After when spent, nothing charged, refills."""

import email.utils
import time

import httpx
from tests.democrm.conftest import StartDemoCRM
from tests.democrm.server_fixture import DemoCRM


def test_a_spent_budget_answers_429_with_retry_after_and_refills(
    start_democrm: StartDemoCRM,
) -> None:
    crm = start_democrm(organizations=10, budget_capacity=40, budget_refill_per_s=20)
    with crm.client() as http:
        assert [http.get("/v1/organizations").status_code for _ in range(2)] == [200, 200]
        refused = http.get("/v1/organizations")
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "rate_limited"
        retry_after = int(refused.headers["Retry-After"])
        assert 1 <= retry_after <= 2
        time.sleep(retry_after)
        assert http.get("/v1/organizations").status_code == 200
    counts = crm.stats()["requests"]["GET /v1/organizations"]
    assert counts == {"200": 3, "429": 1}


def test_retry_after_can_be_an_http_date_never_sooner_than_the_wait(
    start_democrm: StartDemoCRM,
) -> None:
    crm = start_democrm(organizations=10, budget_capacity=20, budget_refill_per_s=0.1)
    with crm.client() as http:
        assert http.get("/v1/organizations").status_code == 200
        assert http.get("/v1/organizations").headers["Retry-After"] == "200"
        crm.configure(retry_after="date")
        asked = time.time()
        refused = http.get("/v1/organizations")
    assert refused.status_code == 429
    moment = email.utils.parsedate_to_datetime(refused.headers["Retry-After"]).timestamp()
    assert asked + 199 <= moment <= asked + 202  # the bucket has a call's worth in 200 s


def test_retry_after_takes_only_its_two_forms(shared_democrm: DemoCRM) -> None:
    response = httpx.post(f"{shared_democrm.url}/_config", json={"retry_after": "minutes"})
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("retry_after must be one of seconds")


def test_a_refused_call_takes_no_tokens(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(organizations=10, budget_capacity=30, budget_refill_per_s=0.001)
    with crm.client() as http:
        assert http.get("/v1/organizations").status_code == 200
        assert http.get("/v1/organizations").status_code == 429
        assert crm.stats()["budgets"]["test-key"] >= 10
        messages = crm.truth()["messages"]
        ids = [i for i in messages["ids"] if str(i) not in messages["malformed"]][:10]
        assert [http.get(f"/v1/messages/{i}").status_code for i in ids] == [200] * 10
        assert http.get(f"/v1/messages/{ids[0]}").status_code == 429


def test_each_key_has_its_own_bucket(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(organizations=5, api_key=None, budget_capacity=20, budget_refill_per_s=1)

    def status(key: str) -> int:
        url = f"{crm.url}/v1/organizations"
        return httpx.get(url, headers={"Authorization": f"Bearer {key}"}).status_code

    assert [status("a"), status("a"), status("b")] == [200, 429, 200]


def test_configuring_the_budget_refills_and_can_disable_it(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(organizations=5, budget_capacity=20, budget_refill_per_s=0.01)
    with crm.client() as http:
        assert [http.get("/v1/people").status_code for _ in range(2)] == [200, 429]
        crm.configure(budget_capacity=20)
        assert [http.get("/v1/people").status_code for _ in range(2)] == [200, 429]
        crm.configure(budget_capacity=0)
        assert {http.get("/v1/people").status_code for _ in range(5)} == {200}


def test_costs_are_configurable(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(organizations=5, budget_capacity=100, budget_refill_per_s=0.01)
    crm.configure(listing_cost=50)
    with crm.client() as http:
        assert [http.get("/v1/deals").status_code for _ in range(3)] == [200, 200, 429]


def test_every_answer_says_what_is_left_of_the_budget(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(organizations=5, budget_capacity=100, budget_refill_per_s=0.01)
    with crm.client() as http:
        first = http.get("/v1/people").headers  # a listing costs 20
        assert first["X-RateLimit-Limit"] == "100"
        assert first["X-RateLimit-Remaining"] == "80"
        assert int(first["X-RateLimit-Reset"]) >= 2000  # 20 tokens back at 0.01/s
        assert first["RateLimit-Policy"] == '"budget";q=100;w=3600'  # the longest it says
        assert first["RateLimit"] == f'"budget";r=80;t={first["X-RateLimit-Reset"]}'
        for _ in range(4):
            http.get("/v1/people")
        refused = http.get("/v1/people")
        assert refused.status_code == 429 and refused.headers["X-RateLimit-Remaining"] == "0"


def test_without_a_budget_no_rate_headers_are_sent(democrm: DemoCRM) -> None:
    with democrm.client() as http:
        headers = http.get("/v1/people").headers
    assert not any(name.lower().startswith(("ratelimit", "x-ratelimit")) for name in headers)


def test_the_first_calls_of_each_key_are_throttled_whatever_its_budget(
    start_democrm: StartDemoCRM,
) -> None:
    crm = start_democrm(
        organizations=5,
        api_key=None,
        budget_capacity=100,
        budget_refill_per_s=0.01,
        throttle_first=2,
    )

    def call(key: str) -> httpx.Response:
        url = f"{crm.url}/v1/organizations"
        return httpx.get(url, headers={"Authorization": f"Bearer {key}"})

    first = call("a")
    assert first.status_code == 429
    assert first.json()["error"]["code"] == "rate_limited"
    assert first.headers["Retry-After"] == "1"
    assert first.headers["X-RateLimit-Remaining"] == "100"  # nothing taken
    assert [call("a").status_code, call("a").status_code, call("b").status_code] == [429, 200, 429]
    assert 80 <= crm.stats()["budgets"]["a"] < 81  # only the call served paid
    crm.configure(throttle_first=1)  # counted again from now
    assert [call("a").status_code, call("a").status_code] == [429, 200]
    crm.configure(throttle_first=0)
    assert call("b").status_code == 200
    assert crm.stats()["requests"]["GET /v1/organizations"] == {"200": 3, "429": 4}
