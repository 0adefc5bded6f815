"""A deal's messages: the header listing, bodies one by one, and the ids in the truth."""

import pytest
from tests.democrm.conftest import StartDemoCRM
from tests.democrm.server_fixture import DemoCRM


def test_listings_of_every_deal_give_the_truths_message_ids(shared_democrm: DemoCRM) -> None:
    truth = shared_democrm.truth()
    seen: list[int] = []
    with shared_democrm.client() as http:
        for deal_id in truth["deals"]["ids"]:
            body = http.get(f"/v1/deals/{deal_id}/messages", params={"limit": 500}).json()
            assert all(m["deal_id"] == deal_id for m in body["data"])
            assert body["pagination"]["more"] is False
            seen += [m["id"] for m in body["data"]]
    assert seen == truth["messages"]["ids"]
    counts = [seen.count(i) for i in set(seen)]
    assert set(counts) == {1}


def test_message_counts_vary_between_zero_and_twice_the_mean(shared_democrm: DemoCRM) -> None:
    with shared_democrm.client() as http:
        counts = [
            len(http.get(f"/v1/deals/{deal}/messages").json()["data"])
            for deal in range(1, shared_democrm.options["deals"] + 1)
        ]
    assert min(counts) == 0 and max(counts) <= 6 and len(set(counts)) > 2


def test_a_message_listing_pages_like_the_others(shared_democrm: DemoCRM) -> None:
    truth = shared_democrm.truth()
    deal = next(m // 7 + 1 for m in truth["messages"]["ids"] if m % 7 == 4)  # has >= 4 messages
    with shared_democrm.client() as http:
        first = http.get(f"/v1/deals/{deal}/messages", params={"limit": 2}).json()
        second = http.get(f"/v1/deals/{deal}/messages", params={"start": 2, "limit": 2}).json()
    assert first["pagination"] == {"start": 0, "limit": 2, "more": True, "next_start": 2}
    assert len(first["data"]) == len(second["data"]) == 2
    assert first["data"][1]["id"] + 1 == second["data"][0]["id"]


def test_bodies_are_fetched_one_by_one(shared_democrm: DemoCRM) -> None:
    messages = shared_democrm.truth()["messages"]
    message_ids = [i for i in messages["ids"] if str(i) not in messages["malformed"]][:5]
    with shared_democrm.client() as http:
        bodies = [http.get(f"/v1/messages/{i}").json() for i in message_ids]
        again = http.get(f"/v1/messages/{message_ids[0]}").json()
    assert [b["id"] for b in bodies] == message_ids
    assert all(set(b) == {"id", "deal_id", "body"} and len(b["body"]) > 40 for b in bodies)
    assert again == bodies[0]


@pytest.mark.parametrize(
    "path", ["/v1/deals/999/messages", "/v1/deals/0/messages", "/v1/deals/x/messages"]
)
def test_an_unknown_deal_is_a_404(shared_democrm: DemoCRM, path: str) -> None:
    with shared_democrm.client() as http:
        response = http.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_an_unknown_message_is_a_404(shared_democrm: DemoCRM) -> None:
    ids = set(shared_democrm.truth()["messages"]["ids"])
    missing = next(i for i in range(1, 1000) if i not in ids)
    with shared_democrm.client() as http:
        assert http.get(f"/v1/messages/{missing}").status_code == 404
        assert http.get("/v1/messages/100000000").status_code == 404


def test_a_gone_message_is_listed_but_its_body_is_a_404(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(organizations=5, people=5, deals=40, malformed_rate=0.5)
    truth = crm.truth()["messages"]
    gone = [int(i) for i, why in truth["malformed"].items() if why == "gone:body"]
    assert gone
    with crm.client() as http:
        deal = (gone[0] - 1) // 7 + 1  # messages_per_deal 3: a stride of 7 ids per deal
        listed = http.get(f"/v1/deals/{deal}/messages").json()["data"]
        body = http.get(f"/v1/messages/{gone[0]}")
    assert gone[0] in [m["id"] for m in listed]
    assert body.status_code == 404 and "was deleted" in body.json()["error"]["message"]


def test_no_messages_when_the_mean_is_zero(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(organizations=5, people=5, deals=5, messages_per_deal=0)
    assert crm.truth()["messages"] == {"count": 0, "ids": [], "malformed": {}}
    with crm.client() as http:
        assert http.get("/v1/deals/5/messages").json()["data"] == []


def test_a_gone_deal_is_listed_but_its_messages_are_404_and_not_in_the_truth(
    start_democrm: StartDemoCRM,
) -> None:
    crm = start_democrm(organizations=5, people=5, deals=40, malformed_rate=0, gone_deal_rate=0.3)
    truth = crm.truth()
    gone = truth["deals"]["gone"]
    assert gone and set(gone) < set(truth["deals"]["ids"])
    stride = 7  # messages_per_deal 3: ids deal_index * 7 + position + 1
    assert not any((m - 1) // stride + 1 in gone for m in truth["messages"]["ids"])
    with crm.client() as http:
        listed = http.get("/v1/deals", params={"limit": 100}).json()["data"]
        messages = http.get(f"/v1/deals/{gone[0]}/messages")
        body = http.get(f"/v1/messages/{(gone[0] - 1) * stride + 1}")
        kept = next(d for d in truth["deals"]["ids"] if d not in gone)
        alive = http.get(f"/v1/deals/{kept}/messages")
    assert gone[0] in [d["id"] for d in listed]
    assert messages.status_code == 404 and "was deleted" in messages.json()["error"]["message"]
    assert body.status_code == 404 and alive.status_code == 200
