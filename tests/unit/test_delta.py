"""Delta runs, the parts that are pure logic: ``spec.mode`` in the run file, a kind's
``changedSince`` in a declarative provider (checked, and the filter it sends), and which
writer a delta gets."""

from __future__ import annotations

import datetime
import textwrap

import pytest
from tests.unit.test_runspec import VALID, document, only_problem

from ferryman_worker import destinations, runspec
from ferryman_worker.destinations import generate
from ferryman_worker.engine import delta
from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers import ChangedSince, declarative
from ferryman_worker.providers.democrm import provider as democrm

AT = datetime.datetime(2026, 1, 31, 9, 30, 15, 987654, tzinfo=datetime.UTC)

PROVIDER = """
metadata: {name: crm}
spec:
  kinds:
    companies:
      request: {path: /companies}
      changedSince: %s
      fields:
        id: {type: string, required: true}
        updated: {type: datetime}
        revision: {type: integer}
        name: {type: string}
"""


def test_a_run_is_full_unless_it_says_delta() -> None:
    assert runspec.parse_run(VALID).spec.mode is runspec.RunMode.FULL
    assert runspec.parse_run(document(spec__mode="Delta")).spec.mode is runspec.RunMode.DELTA
    assert only_problem(document(spec__mode="delta")).startswith("spec.mode: ")


def test_the_crd_keeps_the_mode_immutable() -> None:
    schema = runspec.MigrationRunSpec.model_json_schema(by_alias=True)
    rules = schema["properties"]["mode"]["x-kubernetes-validations"]
    assert [rule["rule"] for rule in rules] == ["self == oldSelf"]


@pytest.mark.parametrize(
    ("fmt", "sent"),
    [
        ("iso8601", "2026-01-31T09:30:15Z"),
        ("sql", "2026-01-31 09:30:15.000Z"),
        ("unix", "1769851815"),
        ("unix_ms", "1769851815000"),
    ],
)
def test_the_since_time_is_written_in_the_declared_format_rounded_down(fmt: str, sent: str) -> None:
    changed = ChangedSince("filter", "updated >= '{since}'", fmt)  # type: ignore[arg-type]
    assert changed.params(AT) == {"filter": f"updated >= '{sent}'"}
    other_zone = AT.astimezone(datetime.timezone(datetime.timedelta(hours=-5)))
    assert changed.params(other_zone) == changed.params(AT)


def test_a_declared_changed_since_reaches_the_kind() -> None:
    text = (
        PROVIDER
        % "{param: filter, value: \"updated >= '{since}'\", format: sql, version: revision}"
    )
    kind = declarative.DeclaredProvider(declarative.parse(text)).kinds["companies"]
    assert kind.changed_since == ChangedSince(
        "filter", "updated >= '{since}'", "sql", "revision", "integer"
    )


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        ("{param: since, version: name}", ": changedSince.version: 'name' must be a declared"),
        ("{param: since, version: nope}", ": changedSince.version: 'nope' must be a declared"),
        ("{param: since, value: 'updated >= x'}", ".changedSince.value: String should match"),
        ("{param: since, format: rfc}", ".changedSince.format: Input should be"),
        ("{value: '{since}'}", ".changedSince.param: required"),
    ],
)
def test_a_bad_changed_since_is_refused_naming_its_path(declared: str, problem: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        declarative.parse(PROVIDER % declared, "crm.yaml")
    assert f"spec.kinds.companies{problem}" in str(info.value)


def test_a_delta_asks_only_for_what_changed_since_its_starting_point() -> None:
    kinds = democrm.kinds
    run = {"options": {"mode": "delta", "since": {"people": AT.isoformat(), "deals": None}}}
    assert delta.listing_params(run, kinds["people"]) == {"updated_since": "2026-01-31T09:30:15Z"}
    assert delta.listing_params(run, kinds["deals"]) == {}  # read whole: no run imported it
    assert delta.listing_params(run, kinds["messages"]) == {}  # no changedSince
    assert delta.listing_params({"options": {}}, kinds["people"]) == {}  # a full run


def test_a_delta_sets_the_tombstones_its_listing_marks_apart() -> None:
    kind = democrm.kinds["people"]
    records = [{"id": 1, "name": "a"}, {"id": 2, "deleted": True}, {"id": 3, "deleted": False}]
    delta_run = {"options": {"mode": "delta"}}
    assert delta.tombstones(delta_run, kind, records) == (["2"], [records[0], records[2]])
    assert delta.tombstones({"options": {}}, kind, records) == ([], records)
    assert delta.tombstones(delta_run, democrm.kinds["messages"], records) == ([], records)


def test_a_delta_refuses_a_provider_function_writer_and_versions_each_kind() -> None:
    run = {"options": {"mode": "delta"}, "mapping": None}
    writer = destinations.writer_for(run, democrm, "people")
    assert "can only insert" in writer.problems(None)[0]  # type: ignore[arg-type]
    assert destinations.versions_for(run, democrm, "people") == generate.Versions(
        "/updated_at", "datetime", delta=True
    )
    assert destinations.versions_for({"options": {}}, democrm, "messages") == generate.FULL


def test_a_hash_versioned_kind_hashes_the_record_and_a_delta_compares_versions() -> None:
    landing = generate.landing_statement("/id", "window", generate.Versions(delta=True)).decode()
    assert "jsonb_hash_extended(e.rec, 0)" in landing
    assert "ferryman_version_newer(k.ferryman_version, k.ferryman_known_version)" in landing
    full = generate.landing_statement("/id", "window").decode()
    assert "ferryman_version_newer" not in full and "UPDATE" not in full
    assert textwrap.dedent(full).count("source_version") == 1
