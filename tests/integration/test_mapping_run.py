"""``ferryman run`` with ``spec.mapping.file``: the run writes through that mapping, and a bad
mapping is refused before anything is admitted."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import yaml
from runfiles import command_env, run_file
from tests.democrm.server_fixture import DemoCRM

from ferryman_worker.db import connect

ORGANIZATIONS = """
provider: democrm
kinds:
  organizations:
    table: crm_organizations
    workspaceColumn: workspace
    columns:
      workspace: {constant: workspace}
      source_id: {field: /id}
      name: {field: /name}
      domain: {value: imported.example}
"""


def _with_mapping(tmp_path: pathlib.Path, url: str, mapping: str) -> str:
    path = pathlib.Path(run_file(tmp_path, url))
    run = yaml.safe_load(path.read_text())
    run["spec"]["kinds"] = ["organizations", "people"]
    run["spec"]["mapping"] = {"file": "mapping.yaml"}
    path.write_text(yaml.safe_dump(run))
    (tmp_path / "mapping.yaml").write_text(mapping)
    return str(path)


def _run(path: str, db_url: str, api_key: str) -> subprocess.CompletedProcess[str]:
    env = command_env(api_key, FERRYMAN_DATABASE_URL=db_url, FERRYMAN_LANES="migrations:3")
    return subprocess.run(
        [sys.executable, "-m", "ferryman_worker.cli", "--log-level", "WARNING", "run", path],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_run_writes_through_the_mapping_its_file_names(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    with DemoCRM.start(seed=8, organizations=200, people=100, deals=0) as crm:
        done = _run(_with_mapping(tmp_path, crm.url, ORGANIZATIONS), db_url, crm.api_key)
    assert done.returncode == 0, done.stderr
    with connect.connect(db_url) as conn:
        domains = conn.execute("SELECT DISTINCT domain FROM crm_organizations").fetchall()
        people = conn.execute(
            "SELECT count(*) AS n, count(organization_id) AS linked FROM crm_people"
        ).fetchone()
        run = conn.execute("SELECT mapping FROM ferryman_runs").fetchone()
    assert [row["domain"] for row in domains] == ["imported.example"]
    assert people is not None and people["linked"] > 0  # the provider's writer, through the ledger
    assert run is not None and list(run["mapping"]["mapping"]["kinds"]) == ["organizations"]


def test_a_bad_mapping_file_is_refused_before_the_run_is_admitted(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    bad = ORGANIZATIONS.replace("{value: imported.example}", "{value: x, field: /domain}")
    done = _run(_with_mapping(tmp_path, "http://127.0.0.1:1", bad), db_url, "key")
    assert done.returncode == 2
    assert "kinds.organizations.columns.domain: give exactly one of field" in done.stderr
    with connect.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) AS n FROM ferryman_runs").fetchone() == {"n": 0}


def test_a_mapping_name_is_refused_by_ferryman_run_naming_file(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    """A MigrationMapping is the operator's to read; locally the mapping is a file."""
    path = pathlib.Path(_with_mapping(tmp_path, "http://127.0.0.1:1", ORGANIZATIONS))
    run = yaml.safe_load(path.read_text())
    run["spec"]["mapping"] = {"name": "sales"}
    path.write_text(yaml.safe_dump(run))
    done = _run(str(path), db_url, "key")
    assert done.returncode == 2
    assert "spec.mapping.name: 'sales' names a MigrationMapping" in done.stderr
    assert "use spec.mapping.file" in done.stderr
    with connect.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) AS n FROM ferryman_runs").fetchone() == {"n": 0}
