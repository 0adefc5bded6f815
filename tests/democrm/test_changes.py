"""Changes between runs (``POST /_changes``): a message's edit shows in its deal's listing of
messages and moves the deal's ``updated_at``, so a listing of deals changed since a time names the
deal, its title as it was."""

import httpx
from tests.democrm.conftest import StartDemoCRM

RECORDS = {"organizations": 5, "people": 5, "deals": 6, "messages_per_deal": 3, "malformed_rate": 0}


def test_a_message_edit_shows_in_its_listing_and_moves_its_deals_updated_at(
    start_democrm: StartDemoCRM,
) -> None:
    crm = start_democrm(**RECORDS)
    with crm.client() as http:
        crm.change()
        deal = next(d for d in range(1, 7) if http.get(f"/v1/deals/{d}/messages").json()["data"])
        before = http.get(f"/v1/deals/{deal}/messages").json()["data"]
        title = http.get("/v1/deals", params={"start": deal - 1, "limit": 1}).json()["data"][0]
        edited = before[-1]["id"]
        view = crm.change(update={"messages": [edited]})
        after = http.get(f"/v1/deals/{deal}/messages").json()["data"]
        since = "2016-01-01T00:00:00Z"  # after every record never changed (2015-01-01)
        changed = http.get("/v1/deals", params={"updated_since": since}).json()["data"]
    assert view["updated"]["messages"] == {str(edited): 1}
    assert after[-1] == {**before[-1], "subject": before[-1]["subject"] + " (edit 1)"}
    assert after[:-1] == before[:-1]
    assert [d["id"] for d in changed] == [deal]
    assert {**changed[0], "updated_at": None} == {**title, "updated_at": None}


def test_an_edit_of_a_message_that_does_not_exist_is_a_400_and_changes_nothing(
    start_democrm: StartDemoCRM,
) -> None:
    crm = start_democrm(**RECORDS)
    response = httpx.post(f"{crm.url}/_changes", json={"update": {"messages": [10**6]}})
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_changes"
    assert response.json()["error"]["message"].startswith("update.messages:")
    assert httpx.get(f"{crm.url}/_changes").json()["updated"]["messages"] == {}
