"""Malformed records: exactly those the truth names, each with its stated defect."""

from collections import Counter
from typing import Any

from tests.democrm.conftest import StartDemoCRM

MAX_STRING = 255

SCHEMA: dict[str, dict[str, type | tuple[type, ...]]] = {
    "organizations": {"id": int, "name": str, "domain": str, "created_at": str},
    "people": {"id": int, "org_id": int, "name": str, "email": str, "phone": str},
    "deals": {
        "id": int,
        "org_id": int,
        "person_ids": list,
        "title": str,
        "value": (int, float),
        "currency": str,
        "stage": str,
        "status": str,
    },
    "messages": {"id": int, "deal_id": int, "subject": str, "from": str, "sent_at": str},
}
"""The documented shape, checked strictly (no coercion), as a consumer's validation would."""


def defect(kind: str, record: dict[str, Any]) -> str | None:
    """The first violation of ``SCHEMA`` as ``"<defect>:<field>"``, or None."""
    for field, expected in SCHEMA[kind].items():
        if field not in record:
            return f"missing:{field}"
        value = record[field]
        if isinstance(value, bool) or not isinstance(value, expected):
            return f"wrong_type:{field}"
        if isinstance(value, str) and len(value) > MAX_STRING:
            return f"too_long:{field}"
    return None


def test_malformed_records_are_exactly_those_the_truth_names(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(organizations=400, people=300, deals=200, malformed_rate=0.2)
    truth = crm.truth()
    found: dict[str, dict[str, str]] = {}
    with crm.client() as http:
        for kind in ("organizations", "people", "deals"):
            records = http.get(f"/v1/{kind}", params={"limit": 500}).json()["data"]
            found[kind] = {str(r["id"]): why for r in records if (why := defect(kind, r))}
        messages = []
        for deal_id in truth["deals"]["ids"]:
            messages += http.get(f"/v1/deals/{deal_id}/messages").json()["data"]
        found["messages"] = {str(r["id"]): why for r in messages if (why := defect("messages", r))}
        found["messages"] |= {
            str(r["id"]): "gone:body"
            for r in messages
            if str(r["id"]) not in found["messages"]
            and http.get(f"/v1/messages/{r['id']}").status_code == 404
        }
    for kind, malformed in found.items():
        assert malformed == truth[kind]["malformed"], kind
        kinds_of_defect = Counter(why.split(":")[0] for why in malformed.values())
        expected = {"missing", "wrong_type", "too_long"} | (
            {"gone"} if kind == "messages" else set()
        )
        assert set(kinds_of_defect) == expected, kind


def test_too_long_strings_are_at_least_300_characters(start_democrm: StartDemoCRM) -> None:
    crm = start_democrm(organizations=300, people=0, deals=0, malformed_rate=0.5)
    too_long = [i for i, why in crm.truth()["organizations"]["malformed"].items() if "too" in why]
    with crm.client() as http:
        records = http.get("/v1/organizations", params={"limit": 300}).json()["data"]
    names = {str(r["id"]): r.get("name") for r in records}
    assert too_long and all(len(names[i]) >= 300 for i in too_long)


def test_rate_zero_means_no_malformed_records(start_democrm: StartDemoCRM) -> None:
    truth = start_democrm(organizations=500, people=500, deals=100, malformed_rate=0).truth()
    assert all(not truth[kind]["malformed"] for kind in SCHEMA)
