"""``ferryman run`` of a declarative provider whose auth style is OAuth2, against the demo CRM's
OAuth mode (single-use refresh tokens that rotate; a reused one revokes its family). Its token
endpoint is reached as ``localhost`` where the API is ``127.0.0.1``: a login host of its own,
which the credential reaches only when the run binds it there (``tokenHost``)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
from typing import Any

import httpx
import psycopg
import pytest
import yaml
from net import wait_for
from psycopg import sql
from runfiles import command_env, run_file
from tests.democrm.server_fixture import DemoCRM
from workers import scalar

from ferryman_worker.db import connect
from ferryman_worker.engine.runtime import credential_env_var
from ferryman_worker.providers.democrm import PROVIDER_FILE

CLIENT = {"client_id": "ferryman", "client_secret": "client-s3cret"}
FIRST = "rt-the-first-one"
KINDS = ("organizations", "people", "deals")
SECRET = "democrm-token"  # the Secret run_file's MigrationRun names


def _provider(folder: pathlib.Path, token_url: str) -> str:
    """The demo CRM's provider as ``crm``, its first kinds only, with refresh-token auth."""
    document = yaml.safe_load(PROVIDER_FILE.read_text())
    document["metadata"]["name"] = "crm"
    document["spec"]["auth"] = {
        "style": "oauth2",
        "oauth2": {"grant": "refresh_token", "tokenUrl": token_url, "keys": {"refreshToken": "rt"}},
    }
    document["spec"]["kinds"] = {kind: document["spec"]["kinds"][kind] for kind in KINDS}
    path = folder / "crm.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def _run_file(folder: pathlib.Path, url: str, token_host: str | None = None) -> str:
    path = pathlib.Path(run_file(folder, url, page_size=20))
    text = path.read_text().replace("provider: democrm", "provider: crm")
    if token_host is not None:
        ref = "{name: democrm-token, key: token"
        text = text.replace(ref + "}", f"{ref}, tokenHost: {token_host!r}}}")
        assert "tokenHost" in text
    path.write_text(text + f"  kinds: [{', '.join(KINDS)}]\n")
    return str(path)


def _ferryman(run: str, provider: str, db_url: str) -> subprocess.Popen[str]:
    keys = {"client_id": CLIENT["client_id"], "client_secret": CLIENT["client_secret"]}
    env = command_env(
        None,
        FERRYMAN_DATABASE_URL=db_url,
        FERRYMAN_LANES="migrations:3",
        **{credential_env_var(SECRET, key): value for key, value in keys.items()},
        **{credential_env_var(SECRET, "rt"): FIRST},
    )
    argv = [sys.executable, "-m", "ferryman_worker.cli", "--log-level", "WARNING"]
    argv += ["run", run, "--provider-file", provider]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _oauth_crm(**dataset: int) -> DemoCRM:
    """The demo CRM in its OAuth mode, its first refresh token ``FIRST``."""
    return DemoCRM.start(
        api_key=None,
        oauth_client_id=CLIENT["client_id"],
        oauth_client_secret=CLIENT["client_secret"],
        oauth_refresh_token=FIRST,
        **dataset,
    )


def _oauth(crm: DemoCRM) -> dict[str, Any]:
    return dict(httpx.get(f"{crm.url}/_oauth").json())


def _rows(db_url: str) -> int:
    try:
        return int(scalar(db_url, "SELECT count(*) FROM ferryman_ledger"))
    except psycopg.errors.UndefinedTable:  # not migrated yet
        return 0


def _every_row_written(db_url: str, truth: dict[str, Any]) -> None:
    with connect.connect(db_url) as conn:
        counts = conn.execute("SELECT kind, count(*) AS n FROM ferryman_ledger GROUP BY kind")
        written = {row["kind"]: row["n"] for row in counts}
    assert written == {kind: truth[kind]["count"] - len(truth[kind]["malformed"]) for kind in KINDS}


def test_a_run_rotates_its_refresh_token_mid_run_and_writes_every_row(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    with _oauth_crm(seed=7, organizations=300, people=200, deals=100, latency_ms=100) as crm:
        proc = _ferryman(_run_file(tmp_path, crm.url), _provider(tmp_path, "/oauth/token"), db_url)
        wait_for(lambda: _rows(db_url) > 0 or proc.poll() is not None, 60, "the first rows")
        httpx.post(f"{crm.url}/_oauth/expire")  # mid-run: every worker meets a 401
        out, err = proc.communicate(timeout=120)
        stats, truth = _oauth(crm), crm.truth()
    assert proc.returncode == 0, err
    assert "Succeeded" in out
    _every_row_written(db_url, truth)
    with connect.connect(db_url) as conn:
        token = conn.execute("SELECT * FROM ferryman_oauth_tokens").fetchone()
    # one refresh at the start, one after the expiry; the rotated token used after it
    assert stats["refresh_token"] == 2 and stats["reused"] == 0 and stats["refused"] == 0, stats
    assert set(stats["calls"]) == {"1", "2"}, stats
    assert token is not None and token["rotations"] == 2 and token["refresh_token"] != FIRST
    for secret in (FIRST, CLIENT["client_secret"], token["refresh_token"], token["access_token"]):
        assert secret not in out + err
    assert _tokens_in_clear(db_url) == []  # the row holds them sealed


TOKEN = re.compile(r'"(?:at|rt)-[A-Za-z0-9_-]{16,}"')
"""A token of the demo CRM's (``at-``/``rt-`` and its random part) as a whole JSON string."""


def _tokens_in_clear(db_url: str) -> list[str]:
    """Every token of the demo CRM's found in clear in any table of the database."""
    found: list[str] = []
    with connect.connect(db_url) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
        for table in tables:
            query = sql.SQL("SELECT row_to_json(t)::text AS row FROM {} t").format(
                sql.Identifier(table["tablename"])
            )
            for row in conn.execute(query):
                found += [f"{table['tablename']}: {hit}" for hit in TOKEN.findall(row["row"])]
    return found


def test_a_run_that_binds_its_credential_to_the_login_host_gets_its_tokens_there(
    tmp_path: pathlib.Path, db_url: str
) -> None:
    with _oauth_crm(seed=3, organizations=60, people=30, deals=10) as crm:
        login_host = crm.url.replace("127.0.0.1", "localhost")  # a binding is scheme, host, port
        login = login_host + "/oauth/token"
        run = _run_file(tmp_path, crm.url, token_host=login_host)
        proc = _ferryman(run, _provider(tmp_path, login), db_url)
        out, err = proc.communicate(timeout=120)
        stats, truth = _oauth(crm), crm.truth()
    assert proc.returncode == 0, err
    assert "Succeeded" in out
    _every_row_written(db_url, truth)
    assert stats["refresh_token"] == 1 and stats["refused"] == 0, stats  # at localhost
    assert FIRST not in out + err and CLIENT["client_secret"] not in out + err


@pytest.mark.parametrize(
    ("token_host", "bound"),
    [
        (None, "http://127.0.0.1:{port}"),
        ("login.example.com", "http://127.0.0.1:{port}, login.example.com"),
    ],
)
def test_a_token_url_on_a_host_the_credential_is_not_bound_to_is_refused_before_anything(
    tmp_path: pathlib.Path, db_url: str, token_host: str | None, bound: str
) -> None:
    with _oauth_crm(organizations=20, people=10, deals=5) as crm:
        elsewhere = crm.url.replace("127.0.0.1", "localhost") + "/oauth/token"
        run = _run_file(tmp_path, crm.url, token_host)
        proc = _ferryman(run, _provider(tmp_path, elsewhere), db_url)
        out, err = proc.communicate(timeout=60)
        stats = _oauth(crm)
    port = crm.url.rsplit(":", 1)[1]
    assert proc.returncode == 2, err
    assert (
        f"spec.auth.oauth2.tokenUrl: http://localhost:{port} is not a host the source credential is"
        f" bound to ({bound.format(port=port)}): correct the provider's tokenUrl, or bind the"
        f" credential to that host too: set spec.source.credentialsSecretRef.tokenHost:"
        f" http://localhost:{port} in the run file"
    ) in " ".join(err.split())
    assert "ferryman.dev/hosts" not in err
    assert stats["refresh_token"] == 0 and stats["client_credentials"] == 0  # nothing was sent
    assert _rows(db_url) == 0 and "admitted" not in out
    assert FIRST not in out + err and CLIENT["client_secret"] not in out + err
