"""What a verification reads of a listing, without a source: each record's id where its
provider declares it (a nested source path, a mapping's own sourceId), and the listing's request
with the kind's verifyQuery (ids only) where the ledger is keyed by the kind's id."""

from __future__ import annotations

from typing import Any

from ferryman_worker.engine import paging, verify
from ferryman_worker.providers import declarative

PROVIDER = {
    "metadata": {"name": "nodes"},
    "spec": {
        "auth": {"style": "bearer"},
        "kinds": {
            "nodes": {
                "request": {"path": "/api/v1/nodes", "query": {"sort": "id"}},
                "records": "items",
                "pagination": {"style": "page_number", "pageParam": "page", "sizeParam": "n",
                               "maxPageSize": 800},
                "verifyQuery": {"fields": "metadata.uid"},
                "id": "uid",
                "fields": {
                    "uid": {"type": "string", "required": True, "source": "metadata.uid"},
                    "name": {"type": "string", "required": True, "source": "metadata.name"},
                },
            }
        },
    },
}  # fmt: skip


def lister(mapping: dict[str, Any] | None = None) -> verify.Lister:
    provider = declarative.DeclaredProvider(declarative.check(PROVIDER))
    run = {"id": 1, "options": {"source": {}}, "mapping": mapping}
    return verify.Lister(conn=None, run=run, provider=provider, caller=None, threads=1)  # type: ignore[arg-type]


def test_a_records_id_is_read_where_its_provider_declares_it() -> None:
    kind = lister().provider.kinds["nodes"]
    record = {"metadata": {"uid": "u-1", "name": "a"}}
    assert verify.record_id(kind, kind.id_pointer, record) == "u-1"
    assert verify.record_id(kind, kind.id_pointer, {"metadata": {}}) is None
    assert verify.record_id(kind, kind.id_pointer, "not an object") is None
    # a mapping keying the ledger by another field reads it from the record as its model does
    assert verify.record_id(kind, "/name", record) == "a"


def test_the_listing_asks_for_the_ids_alone_at_the_kinds_largest_page() -> None:
    found = lister()
    kind = found.provider.kinds["nodes"]
    request = found._request(kind, paging.Position.start(kind))
    assert dict(request.params) == {"sort": "id", "fields": "metadata.uid", "page": 1, "n": 800}


def test_a_mapping_keyed_by_another_field_gets_whole_records() -> None:
    found = lister({"mapping": {"kinds": {"nodes": {"sourceId": "/name"}}}})
    kind = found.provider.kinds["nodes"]
    request = found._request(kind, paging.Position.start(kind))
    assert "fields" not in dict(request.params)
