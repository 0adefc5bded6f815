"""Records deleted and created while a client walks a listing (``POST /_drift``): pages by
position (offset, page number, Link header) drift, pages after an id (next URL, cursor, keyset)
do not."""

import httpx
import pytest
from tests.democrm import walker
from tests.democrm.conftest import StartDemoCRM
from tests.democrm.server_fixture import DemoCRM

BY_POSITION = ("offset", "page", "link")
AFTER_AN_ID = ("next_url", "cursor", "keyset")
RECORDS = {"organizations": 60, "people": 0, "deals": 0, "malformed_rate": 0}


@pytest.mark.parametrize("style", BY_POSITION + AFTER_AN_ID)
def test_records_deleted_behind_the_walk_make_pages_by_position_skip_live_ones(
    start_democrm: StartDemoCRM, style: str
) -> None:
    crm = start_democrm(**RECORDS)
    crm.drift(kind="organizations", delete=[1, 2, 3], after_pages=2)  # after ids 1..20
    with crm.client() as http:
        ids = walker.walk(http, "/v1/organizations", style, limit=10)
    skipped = [21, 22, 23] if style in BY_POSITION else []
    assert ids == [i for i in range(1, 61) if i not in skipped]
    assert crm.truth()["organizations"]["ids"] == list(range(4, 61))  # 21..23 still exist


@pytest.mark.parametrize("style", BY_POSITION + AFTER_AN_ID)
def test_records_created_behind_the_walk_make_pages_by_position_list_some_twice(
    start_democrm: StartDemoCRM, style: str
) -> None:
    crm = start_democrm(**RECORDS)
    crm.drift(kind="organizations", delete=[1, 2, 3])
    crm.drift(kind="organizations", create=[1, 2, 3], after_pages=2)  # after ids 4..23
    with crm.client() as http:
        ids = walker.walk(http, "/v1/organizations", style, limit=10)
    again = [21, 22, 23] if style in BY_POSITION else []
    assert ids == [*range(4, 24), *again, *range(24, 61)]
    assert crm.truth()["organizations"]["ids"] == list(range(1, 61))  # 1..3: behind every walk


def test_changes_wait_for_pages_of_their_own_kind(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(organizations=10, people=10, deals=0)
    assert crm.drift(kind="people", delete=[4], after_pages=1)["waiting"] == 1
    with crm.client() as http:
        http.get("/v1/organizations").raise_for_status()
        assert crm.drift(kind="people")["deleted"]["people"] == []
        http.get("/v1/people", params={"limit": 2}).raise_for_status()
    view = crm.drifted()
    deleted = {"organizations": [], "people": [4]}
    assert view == {"deleted": deleted, "waiting": 0, "applied": 2, "cursor_epoch": 0}
    assert crm.truth()["people"]["count"] == 9


def test_cursors_given_out_before_they_expire_answer_410(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(**RECORDS)
    crm.drift(kind="organizations", expire_cursors=True, after_pages=1)
    with crm.client() as http:
        query = {"paging": "cursor", "limit": 10}
        old = http.get("/v1/organizations", params=query).json()["pagination"]["next_cursor"]
        expired = http.get("/v1/organizations", params={**query, "cursor": old})
        assert expired.status_code == 410
        assert expired.json()["error"]["code"] == "cursor_expired"
        assert walker.walk(http, "/v1/organizations", "cursor", limit=10) == list(range(1, 61))
    assert crm.drifted()["cursor_epoch"] == 1


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"kind": "deals", "delete": [1]}, "kind"),
        ({"kind": "people", "delete": [0]}, "delete"),
        ({"kind": "people", "create": [61]}, "create"),
        ({"kind": "people", "delete": [2], "create": [2]}, "ids both"),
        ({"kind": "people", "after_pages": -1}, "after_pages"),
        ({"kind": "people", "update": [1]}, "unknown field"),
        ({"kind": "people", "expire_cursors": 1}, "expire_cursors"),
    ],
)
def test_a_bad_change_is_a_400_naming_the_field_and_changes_nothing(
    shared_democrm: DemoCRM, change: dict[str, object], named: str
) -> None:
    response = httpx.post(f"{shared_democrm.url}/_drift", json=change)
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_drift"
    assert response.json()["error"]["message"].startswith(named)
    assert shared_democrm.drifted()["applied"] == 0
