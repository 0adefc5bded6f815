"""Configuration errors name the setting and the fix."""

from __future__ import annotations

import pytest

from ferryman_worker.errors import ConfigurationError
from ferryman_worker.lanespec import LaneSpec
from ferryman_worker.settings import OWN_CONNECTIONS, load, resolve_lanes


def test_lanes_parse_in_order() -> None:
    assert resolve_lanes("migrations:4,critical:2,default:3", None) == [
        LaneSpec("migrations", 4),
        LaneSpec("critical", 2),
        LaneSpec("default", 3),
    ]


@pytest.mark.parametrize(
    ("pool_size", "widths"),
    [
        (14, [4, 2, 4]),  # 14 - 4 own - 2 given = 8, shared by two
        (15, [5, 2, 4]),  # 9: the remainder goes to the first width-less lane written
        (16, [5, 2, 5]),
        (OWN_CONNECTIONS + 4, [1, 2, 1]),  # the least: 1 thread each
    ],
)
def test_a_lane_without_a_width_shares_what_the_pool_size_leaves(
    pool_size: int, widths: list[int]
) -> None:
    settings = load(lanes="migrations,critical:2,default", pool_size=pool_size)
    assert [(s.name, s.width) for s in settings.lane_specs] == list(
        zip(["migrations", "critical", "default"], widths, strict=True)
    )
    assert settings.threads + OWN_CONNECTIONS == settings.effective_pool_size == pool_size


def test_a_lane_without_a_width_needs_a_pool_size() -> None:
    with pytest.raises(ConfigurationError) as info:
        load(lanes="migrations,critical:2")
    text = str(info.value)
    assert "give lane(s) 'migrations' no thread count" in text
    assert f"set FERRYMAN_POOL_SIZE (--pool-size) to at least {2 + OWN_CONNECTIONS + 1}" in text
    assert "or give each lane its threads (e.g. 'migrations:4')" in text


def test_a_pool_size_that_leaves_a_width_less_lane_no_thread_is_refused() -> None:
    with pytest.raises(ConfigurationError) as info:
        load(lanes="migrations,critical:2,default", pool_size=OWN_CONNECTIONS + 3)
    text = str(info.value)
    assert f"pool_size {OWN_CONNECTIONS + 3} leaves 1 thread(s)" in text
    assert "lane(s) 'migrations', 'default'" in text and "each needs at least 1" in text
    assert f"FERRYMAN_POOL_SIZE (--pool-size) to at least {OWN_CONNECTIONS + 4}" in text


@pytest.mark.parametrize(
    ("lanes", "message"),
    [
        ("", "lanes is empty"),
        ("migrations", "'migrations' no thread count"),
        ("migrations:", "not a whole number"),
        ("migrations:four", "not a whole number"),
        ("migrations:0", "needs at least 1"),
        ("migrations:-2", "needs at least 1"),
        ("default:2,default:3", "names lane 'default' twice"),
        ("Bad Name:2", "is not 'name:threads'"),
    ],
)
def test_a_malformed_lanes_string_is_refused(lanes: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        load(lanes=lanes)


def test_a_pool_smaller_than_the_lanes_plus_own_connections_is_refused() -> None:
    with pytest.raises(ConfigurationError) as info:
        load(lanes="migrations:4,default:3", pool_size=10)
    text = str(info.value)
    assert "pool_size 10 is too small" in text
    assert f"at least {7 + OWN_CONNECTIONS}" in text
    assert "FERRYMAN_POOL_SIZE" in text


def test_the_default_pool_covers_the_lanes() -> None:
    settings = load(lanes="migrations:4,critical:2,default:3")
    assert settings.threads == 9
    assert settings.effective_pool_size == 9 + OWN_CONNECTIONS
    assert load(lanes="a:1", pool_size=5).effective_pool_size == 5


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRYMAN_LANES", "default:2")
    monkeypatch.setenv("FERRYMAN_IMPORTS", "a.b, c")
    monkeypatch.setenv("FERRYMAN_DATABASE_URL", "postgresql://u:hunter2@db/x")
    settings = load()
    assert settings.lanes == "default:2"
    assert settings.imports == ["a.b", "c"]
    assert "hunter2" not in repr(settings) and "hunter2" not in str(settings.model_dump())


def test_a_bad_number_names_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRYMAN_POLL_INTERVAL", "-1")
    with pytest.raises(ConfigurationError, match=r"poll_interval \(FERRYMAN_POLL_INTERVAL\)"):
        load()


def test_db_shell_hands_psql_the_url_as_libpq_variables_not_arguments() -> None:
    from ferryman_worker.db import shell

    env = shell.environment("postgresql://ferry:s3cret@db.example:6432/app?sslmode=require")
    assert env == {
        "PGUSER": "ferry",
        "PGPASSWORD": "s3cret",
        "PGHOST": "db.example",
        "PGPORT": "6432",
        "PGDATABASE": "app",
        "PGSSLMODE": "require",
    }
    socket = shell.environment("postgresql://postgres:@/postgres?host=/tmp/pg-x&application_name=f")
    assert socket == {
        "PGUSER": "postgres",
        "PGDATABASE": "postgres",
        "PGHOST": "/tmp/pg-x",
        "PGAPPNAME": "f",
    }
