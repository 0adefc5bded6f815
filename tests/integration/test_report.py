"""Counts that mean what they say, and the migration report that shows them: records matched by a
natural key to rows the application had are counted as matched, not written; a tree kind run
again counts the children its ledger holds as skipped; ``ferryman report`` agrees with the
database and with ``ferryman status``, its JSON validates against the published schema, and its
HTML page fetches nothing. Real worker (``ferryman run``), real PostgreSQL, the demo CRM."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import jsonschema
import yaml
from runfiles import command_env, run_file, run_yaml
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker import contract
from ferryman_worker.db import connect
from ferryman_worker.report import model

ROOT = pathlib.Path(__file__).resolve().parents[2]
RUN = "default/acme-crm"

APP_TABLE = """
CREATE TABLE app_companies (
    id        bigserial PRIMARY KEY,
    workspace text      NOT NULL,
    source_id bigint    NOT NULL,
    name      text,
    UNIQUE (workspace, source_id)
)
"""
MAPPING = """
provider: democrm
kinds:
  organizations:
    table: app_companies
    workspaceColumn: workspace
    naturalKey: {columns: [workspace, source_id], onExisting: skip}
    columns:
      workspace: {constant: workspace}
      source_id: {field: /id}
      name: {field: /name}
"""


def _ferryman(db_url: str, *args: str, api_key: str | None = None) -> str:
    """``ferryman ARGS`` against ``db_url``; asserts it exited 0, returns what it printed."""
    env = command_env(api_key, FERRYMAN_DATABASE_URL=db_url, FERRYMAN_LANES="migrations:3")
    done = subprocess.run(
        [sys.executable, "-m", "ferryman_worker.cli", "--log-level", "WARNING", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _summary(printed: str) -> dict[str, dict[str, int]]:
    """The figures of ``ferryman status``'s table, per kind."""
    lines = printed.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("KIND"))
    names = lines[header].lower().split()[1:5]  # written, matched, skipped, malformed
    found = {}
    for line in lines[header + 1 :]:
        cells = line.split()
        if not cells or line.startswith(" ") or not re.fullmatch(r"[\d,]+", cells[1]):
            break
        found[cells[0]] = {
            n: int(c.replace(",", "")) for n, c in zip(names, cells[1:5], strict=True)
        }
    return found


def _tasks(db_url: str, run: str) -> dict[str, dict[str, int]]:
    """Each kind's counts as the run's tasks recorded them."""
    with connect.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT t.kind, sum(t.rows_written) AS written, sum(t.rows_matched) AS matched,"
            " sum(t.rows_skipped) AS skipped, sum(t.rows_failed) AS malformed"
            " FROM ferryman_tasks t JOIN ferryman_runs r ON r.id = t.run_id"
            " WHERE r.name = %s GROUP BY t.kind",
            (run,),
        ).fetchall()
    return {row.pop("kind"): {k: int(v) for k, v in row.items()} for row in rows}


def test_records_matched_by_a_natural_key_are_counted_as_matched_not_written(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    with connect.connect(db_url) as conn:
        conn.execute(APP_TABLE)
        conn.execute(  # the application had the first 50 companies already
            "INSERT INTO app_companies (workspace, source_id, name)"
            " SELECT 'acme', n, 'Had it' FROM generate_series(1, 50) AS n"
        )
    path = pathlib.Path(run_file(tmp_path, "http://127.0.0.1:1"))
    (tmp_path / "mapping.yaml").write_text(MAPPING)
    with DemoCRM.start(seed=12, organizations=200, people=0, deals=0, malformed_rate=0) as crm:
        run = yaml.safe_load(path.read_text())
        run["spec"]["source"]["baseURL"] = crm.url
        run["spec"]["kinds"] = ["organizations"]
        run["spec"]["mapping"] = {"file": "mapping.yaml"}
        path.write_text(yaml.safe_dump(run))
        printed = _ferryman(db_url, "run", str(path), api_key=crm.api_key)

    assert _tasks(db_url, RUN) == {
        "organizations": {"written": 150, "matched": 50, "skipped": 0, "malformed": 0}
    }
    with connect.connect(db_url) as conn:
        rows = conn.execute("SELECT name = 'Had it' AS had, count(*) AS n FROM app_companies"
                            " GROUP BY 1 ORDER BY 1").fetchall()  # fmt: skip
        progress = contract.progress(conn, RUN)[0]
    assert [(r["had"], r["n"]) for r in rows] == [(False, 150), (True, 50)]  # left as they were
    assert (progress.rows_written, progress.rows_matched) == (150, 50)
    status = progress.status()  # what the operator writes into the MigrationRun's status
    assert (status.rows_written, status.rows_matched) == (150, 50)
    shown = {"written": 150, "matched": 50, "skipped": 0, "malformed": 0}
    assert _summary(printed)["organizations"] == shown  # the run's own summary
    assert _summary(_ferryman(db_url, "status", RUN))["organizations"] == shown
    found = json.loads(_ferryman(db_url, "report", RUN, "--format", "json"))
    assert (found["totals"]["written"], found["totals"]["matched"]) == (150, 50)
    assert (found["kinds"][0]["written"], found["kinds"][0]["matched"]) == (150, 50)


def test_a_tree_kind_run_again_counts_the_children_its_ledger_holds_as_skipped(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    with DemoCRM.start(seed=13, organizations=30, people=30, deals=40, malformed_rate=0) as crm:
        first = tmp_path / "first.yaml"
        first.write_text(run_yaml(crm.url))
        _ferryman(db_url, "run", str(first), api_key=crm.api_key)
        again = tmp_path / "again.yaml"
        again.write_text(run_yaml(crm.url, name="acme-again"))
        printed = _ferryman(db_url, "run", str(again), api_key=crm.api_key)
    with connect.connect(db_url) as conn:
        held = conn.execute(
            "SELECT kind, count(*) AS n FROM ferryman_ledger WHERE workspace = 'acme' GROUP BY kind"
        ).fetchall()
    ledger = {row["kind"]: int(row["n"]) for row in held}
    assert ledger["messages"] > 0
    counts = _tasks(db_url, "default/acme-again")
    for kind, n in ledger.items():  # the tree kind (messages) like the page kinds
        assert counts[kind] == {"written": 0, "matched": 0, "skipped": n, "malformed": 0}, kind
    assert _summary(printed)["messages"]["skipped"] == ledger["messages"]
    report = json.loads(_ferryman(db_url, "report", "default/acme-again", "--format", "json"))
    assert {k["kind"]: k["skipped"] for k in report["kinds"]} == ledger


def test_the_report_agrees_with_the_database_and_status_and_validates_against_its_schema(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    with DemoCRM.start(
        seed=14, organizations=400, people=200, deals=30, malformed_rate=0.05
    ) as crm:
        _ferryman(db_url, "run", run_file(tmp_path, crm.url), api_key=crm.api_key)
        truth = crm.truth()
    printed = _ferryman(db_url, "report", RUN, "--format", "json")
    found = json.loads(printed)
    schema = json.loads((ROOT / model.SCHEMA_PATH).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(found)

    tasks = _tasks(db_url, RUN)
    status = _summary(_ferryman(db_url, "status", RUN))
    kinds = {k["kind"]: k for k in found["kinds"]}
    assert list(kinds) == ["organizations", "people", "deals", "messages"]
    for name, kind in kinds.items():
        figures = {
            "written": kind["written"],
            "matched": kind["matched"],
            "skipped": kind["skipped"],
            "malformed": kind["refused"],
        }
        assert figures == tasks[name] == status[name], name
        assert kind["refused"] == len(truth[name]["malformed"]) > 0, name  # as the CRM made them
        assert sum(r["count"] for r in kind["refusals"]) == kind["refused"], name
        examples = {e for r in kind["refusals"] for e in r["examples"]}
        assert examples <= {str(i) for i in truth[name]["malformed"]}, name
        assert kind["verdict"] == "unverified"  # the demo CRM states no totals
        assert kind["stated_total"] is None
    listed = {"organizations": 400, "people": 200, "deals": 30}
    assert {n: kinds[n]["listed"] for n in listed} == listed
    assert kinds["messages"]["listed"] is None and kinds["messages"]["walk"] == "tree"
    with connect.connect(db_url) as conn:
        reasons = conn.execute(
            "SELECT kind, reason, count(*) AS n FROM ferryman_row_errors"
            " WHERE kind = 'organizations' GROUP BY 1, 2"
        ).fetchall()
    assert {(r["reason"], r["n"]) for r in reasons} == {
        (r["reason"], r["count"]) for r in kinds["organizations"]["refusals"]
    }
    assert found["state"] == "Succeeded" and found["complete"] is True
    assert found["totals"]["refused"] == sum(len(truth[k]["malformed"]) for k in kinds)

    text = _ferryman(db_url, "report", RUN)
    for name, kind in kinds.items():
        assert re.search(rf"^{name}\s.*\s{kind['written']:,}\s.*unverified$", text, re.M), name


def test_the_html_report_is_one_page_that_fetches_nothing(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    with DemoCRM.start(seed=16, organizations=60, people=20, deals=5, malformed_rate=0.1) as crm:
        _ferryman(db_url, "run", run_file(tmp_path, crm.url), api_key=crm.api_key)
    out = tmp_path / "report.html"
    said = _ferryman(db_url, "report", RUN, "--format", "html", "--output", str(out))
    assert str(out) in said
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<script" not in page.lower()
    for attribute in re.findall(r"""(?:src|href|srcset|action)\s*=\s*["']?([^"'\s>]*)""", page):
        assert not attribute, attribute  # nothing to fetch, not even a relative file
    assert not re.search(r"url\(|@import|https?://", page)  # nor from the CSS
    assert "<link" not in page.lower() and "<img" not in page.lower()
    assert "default/acme-crm" in page and "unverified" in page and "refused" in page
