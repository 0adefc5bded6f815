"""``ferryman run`` and ``ferryman status``: a MigrationRun YAML without Kubernetes."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys

import yaml
from migration import check_against_truth
from net import wait_for
from runfiles import command_env, run_file, run_yaml
from tests.democrm.server_fixture import DemoCRM
from workers import scalar

from ferryman_worker.db import connect
from ferryman_worker.engine import runs
from ferryman_worker.providers.democrm import PROVIDER_FILE


def _env(db_url: str, api_key: str | None) -> dict[str, str]:
    return command_env(api_key, FERRYMAN_DATABASE_URL=db_url, FERRYMAN_LANES="migrations:3")


def _ferryman(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ferryman_worker.cli", "--log-level", "WARNING", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_run_file_runs_to_the_end_with_a_summary(tmp_path: pathlib.Path, db_url: str) -> None:
    with DemoCRM.start(seed=31, organizations=900, people=300, deals=40) as crm:
        proc = _ferryman("run", run_file(tmp_path, crm.url), env=_env(db_url, crm.api_key))
        out, err = proc.communicate(timeout=120)
        truth = crm.truth()
    assert proc.returncode == 0, err
    assert "run default/acme-crm admitted" in out
    assert "Succeeded" in out and "KIND" in out and "organizations" in out
    check_against_truth(db_url, truth)
    status = _ferryman("status", "default/acme-crm", env=_env(db_url, None))
    shown, _ = status.communicate(timeout=30)
    assert status.returncode == 0 and "Succeeded" in shown and "messages" in shown
    malformed = {k: truth[k]["malformed"] for k in ("organizations", "people", "deals", "messages")}
    total = sum(len(m) for m in malformed.values())
    ferryman = f"{sys.executable} -m ferryman_worker.cli"  # how this test called it
    assert f"{total:,} source row(s) not written: `{ferryman} errors default/acme-crm`" in out

    listing = _ferryman("errors", "default/acme-crm", "--limit", "1000", env=_env(db_url, None))
    listed, _ = listing.communicate(timeout=30)
    assert listing.returncode == 0 and listed.split()[:4] == ["KIND", "SOURCE_ID", "AT", "REASON"]
    rows = [line.split(None, 3) for line in listed.splitlines()[1:]]
    assert {(kind, source_id) for kind, source_id, _, _ in rows} == {
        (kind, source_id) for kind, ids in malformed.items() for source_id in ids
    }
    assert all(reason.strip() for *_, reason in rows)

    few = _ferryman(
        "errors", "default/acme-crm", "--kind", "people", "--limit", "1", env=_env(db_url, None)
    )
    shown, _ = few.communicate(timeout=30)
    assert len(malformed["people"]) > 1, "the dataset needs malformed people"
    assert shown.splitlines()[1].startswith("people ")
    assert f"1 of {len(malformed['people'])} shown" in shown

    unknown = _ferryman("errors", "default/nope", env=_env(db_url, None))
    _, err = unknown.communicate(timeout=30)
    assert unknown.returncode != 0 and "no run named 'default/nope'" in err


def test_ctrl_c_suspends_and_the_same_command_resumes(tmp_path: pathlib.Path, db_url: str) -> None:
    with DemoCRM.start(seed=32, organizations=3000, people=600, deals=100, latency_ms=40) as crm:
        path, env = run_file(tmp_path, crm.url), _env(db_url, crm.api_key)
        first = _ferryman("run", path, env=env)
        wait_for(lambda: _rows(db_url) > 300, 60, "progress")
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=60)
        assert first.returncode == 130, err
        assert "suspended: run `" in out and " run " in out and "again to resume" in out
        with connect.connect(db_url) as conn:  # the command's workers died with it
            (run,) = runs.progress(conn)
        assert run["suspended"] and run["tasks_running"] == 0 and run["tasks_waiting"] > 0
        second = _ferryman("run", path, env=env)
        out, err = second.communicate(timeout=180)
        truth = crm.truth()
    assert second.returncode == 0, err
    assert "resumed from its checkpoints" in out
    check_against_truth(db_url, truth)


def test_bad_yaml_names_the_field(tmp_path: pathlib.Path, db_url: str) -> None:
    bad = run_file(tmp_path, "http://127.0.0.1:1", page_size=10_001, workspace="Acme")
    proc = _ferryman("run", bad, env=_env(db_url, "k"))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "spec.options.pageSize: must be at most 10000" in err
    assert "spec.workspace:" in err


def test_a_missing_credential_says_where_to_put_it(tmp_path: pathlib.Path, db_url: str) -> None:
    proc = _ferryman("run", run_file(tmp_path, "http://127.0.0.1:1"), env=_env(db_url, None))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "FERRYMAN_CREDENTIAL_DEMOCRM_TOKEN__TOKEN" in err


def _rows(db_url: str) -> int:
    return int(scalar(db_url, "SELECT coalesce(sum(rows_written), 0) FROM ferryman_tasks"))


def test_a_failed_run_is_retried_from_its_checkpoints(tmp_path: pathlib.Path, db_url: str) -> None:
    with DemoCRM.start(seed=33, organizations=600, people=200, deals=20) as crm:
        path = run_file(tmp_path, crm.url)
        first = _ferryman("run", path, env=_env(db_url, "a-wrong-key"))
        out, err = first.communicate(timeout=60)
        assert first.returncode == 1, err
        assert "HTTP 401" in out and " retry default/acme-crm` reopens it" in out

        retry = _ferryman("retry", "default/acme-crm", env=_env(db_url, None))
        said, err = retry.communicate(timeout=30)
        assert retry.returncode == 0, err
        assert "run default/acme-crm reopened:" in said and "task(s) queued again" in said

        second = _ferryman("run", path, env=_env(db_url, crm.api_key))
        out, err = second.communicate(timeout=120)
        truth = crm.truth()
    assert second.returncode == 0, err
    assert "resumed from its checkpoints" in out and "Succeeded" in out
    check_against_truth(db_url, truth)
    again = _ferryman("retry", "default/acme-crm", env=_env(db_url, None))
    _, err = again.communicate(timeout=30)
    assert again.returncode == 2 and "is succeeded, not failed" in err
    unknown = _ferryman("retry", "default/nope", env=_env(db_url, None))
    _, err = unknown.communicate(timeout=30)
    assert unknown.returncode == 2 and "retry: no run named 'default/nope'" in err


def _provider_file(folder: pathlib.Path, name: str) -> str:
    """The demo CRM's declarative provider named ``name``, with its first two kinds only."""
    document = yaml.safe_load(PROVIDER_FILE.read_text())
    document["metadata"]["name"] = name
    document["spec"]["options"] = {"people_path": {"default": "/v1/nobody"}}
    kinds = document["spec"]["kinds"]
    kinds["people"]["request"]["path"] = "{options.people_path}"  # the run names the path
    document["spec"]["kinds"] = {kind: kinds[kind] for kind in ("organizations", "people")}
    path = folder / "crm.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def test_a_provider_file_is_snapshotted_into_the_run_it_runs(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    provider = _provider_file(tmp_path, "crm")
    path = pathlib.Path(run_file(tmp_path, "http://127.0.0.1:1"))
    with DemoCRM.start(seed=5, organizations=300, people=200, deals=10) as crm:
        path.write_text(
            path.read_text()
            .replace("provider: democrm", "provider: crm\n    options: {people_path: /v1/people}")
            .replace("http://127.0.0.1:1", crm.url)
        )
        proc = _ferryman(
            "run", str(path), "--provider-file", provider, env=_env(db_url, crm.api_key)
        )
        out, err = proc.communicate(timeout=120)
        truth = crm.truth()
    assert proc.returncode == 0, err
    assert "Succeeded" in out
    with connect.connect(db_url) as conn:
        run = conn.execute(
            "SELECT kinds, provider, provider_definition, options FROM ferryman_runs"
        ).fetchone()
        counts = conn.execute("SELECT kind, count(*) AS n FROM ferryman_ledger GROUP BY kind")
        written = {row["kind"]: row["n"] for row in counts}
    assert (
        run is not None and run["provider"] == "crm" and run["kinds"] == ["organizations", "people"]
    )
    assert run["provider_definition"]["metadata"]["name"] == "crm"
    assert run["options"]["source"] == {"people_path": "/v1/people"}
    assert written == {
        kind: truth[kind]["count"] - len(truth[kind]["malformed"])
        for kind in ("organizations", "people")
    }


def test_a_provider_file_not_named_as_the_run_says_is_refused(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    provider = _provider_file(tmp_path, "crm")
    proc = _ferryman(
        "run", run_file(tmp_path, "http://127.0.0.1:1"), "--provider-file", provider,
        env=_env(db_url, "key"),
    )  # fmt: skip
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "spec.source.provider: 'democrm', but the provider file declares 'crm'" in err


def test_a_kind_the_provider_does_not_have_is_refused_naming_the_field_and_its_kinds(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    path = tmp_path / "run.yaml"
    run = run_yaml("http://127.0.0.1:1").replace(
        "spec:\n", "spec:\n  kinds: [organizations, tickets]\n"
    )
    path.write_text(run)
    proc = _ferryman("run", str(path), env=_env(db_url, "key"))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "spec.kinds: ['tickets'] not provided by 'democrm'" in err
    assert "name only the provider's kinds, ['deals', 'messages', 'organizations', 'people']" in err
    assert scalar(db_url, "SELECT count(*) FROM ferryman_runs") == 0  # nothing admitted
