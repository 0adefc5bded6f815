"""Configuration errors name the setting and the fix."""

from __future__ import annotations

import pytest

from ferryman_worker.errors import ConfigurationError
from ferryman_worker.queue.lanes import LaneSpec, parse_lanes
from ferryman_worker.settings import OWN_CONNECTIONS, load


def test_lanes_parse_in_order() -> None:
    assert parse_lanes("migrations:4,critical:2,default:3") == [
        LaneSpec("migrations", 4),
        LaneSpec("critical", 2),
        LaneSpec("default", 3),
    ]


@pytest.mark.parametrize(
    ("lanes", "message"),
    [
        ("", "lanes is empty"),
        ("migrations", "is not 'name:threads'"),
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
