"""Record shapes, references between kinds, and determinism from the seed."""

import re
from typing import Any

from tests.democrm.conftest import SMALL, StartDemoCRM
from tests.democrm.server_fixture import DemoCRM

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def everything(crm: DemoCRM) -> dict[str, list[dict[str, Any]]]:
    with crm.client() as http:
        return {
            kind: http.get(f"/v1/{kind}", params={"limit": 500}).json()["data"]
            for kind in ("organizations", "people", "deals")
        }


def test_records_have_the_documented_fields(start_democrm: StartDemoCRM) -> None:
    data = everything(start_democrm(malformed_rate=0, **SMALL))
    organization, person, deal = data["organizations"][0], data["people"][0], data["deals"][0]
    assert set(organization) == {"id", "name", "domain", "created_at"}
    assert ISO.fullmatch(str(organization["created_at"]))
    assert set(person) == {"id", "org_id", "name", "email", "phone"}
    assert set(deal) == {"id", "org_id", "person_ids", "title", "value", "currency"} | {
        "stage",
        "status",
    }
    assert isinstance(deal["value"], float) and isinstance(deal["person_ids"], list)
    assert all(isinstance(i, int) for i in deal["person_ids"])


def test_people_and_deals_refer_to_existing_records(shared_democrm: DemoCRM) -> None:
    data = everything(shared_democrm)
    malformed = shared_democrm.truth()["people"]["malformed"]
    organizations = {r["id"] for r in data["organizations"]}
    people = {r["id"]: r for r in data["people"]}
    assert malformed and all(isinstance(p["id"], int) for p in people.values())
    assert all(
        p["org_id"] in organizations for p in people.values() if str(p["id"]) not in malformed
    )
    for deal in data["deals"]:
        assert deal["org_id"] in organizations
        assert deal["person_ids"] and set(deal["person_ids"]) <= set(people)


def test_the_same_seed_gives_the_same_records_and_truth(start_democrm: StartDemoCRM) -> None:
    first = start_democrm(seed=7, malformed_rate=0.1, **SMALL)
    second = start_democrm(seed=7, malformed_rate=0.1, **SMALL)
    assert everything(first) == everything(second)
    assert first.truth() == second.truth()


def test_another_seed_gives_other_records(start_democrm: StartDemoCRM) -> None:
    first = start_democrm(seed=7, malformed_rate=0.1, **SMALL)
    other = start_democrm(seed=8, malformed_rate=0.1, **SMALL)
    a, b = everything(first), everything(other)
    assert [r["id"] for r in a["people"]] == [r["id"] for r in b["people"]]
    assert a["organizations"] != b["organizations"] and a["people"] != b["people"]
    assert (
        first.truth()["organizations"]["malformed"] != other.truth()["organizations"]["malformed"]
    )
