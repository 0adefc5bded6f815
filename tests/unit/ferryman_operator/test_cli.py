"""``ferryman operator`` and ``ferryman crd`` are sub-commands of the one console script, and the
operator's settings refuse bad values naming the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferryman_operator import crd, settings
from ferryman_operator.errors import SettingsError
from ferryman_worker import cli


def test_ferryman_crd_prints_the_generated_crd(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["crd"]) == 0
    assert capsys.readouterr().out == crd.render()


def test_ferryman_crd_writes_every_output(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "crd.yaml", tmp_path / "b.yaml"
    assert cli.main(["crd", "--output", str(first), "--output", str(second)]) == 0
    assert first.read_text() == second.read_text() == crd.render()


def test_ferryman_operator_help_names_its_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["operator", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for flag in (
        "--namespace NS",
        "--all-namespaces",
        "--liveness-port N",
        "FERRYMAN_DATABASE_URL",
    ):
        assert flag in text


def test_namespace_and_all_namespaces_exclude_each_other(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli.main(["operator", "--namespace", "a", "--all-namespaces"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_operator_refuses_to_start_without_a_database(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("FERRYMAN_DATABASE_URL", raising=False)
    assert cli.main(["operator", "--all-namespaces"]) == 2
    assert "FERRYMAN_DATABASE_URL is unset" in capsys.readouterr().err


def test_a_bad_setting_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRYMAN_OPERATOR_STATUS_INTERVAL", "0")
    with pytest.raises(SettingsError, match="FERRYMAN_OPERATOR_STATUS_INTERVAL"):
        settings.load()
    monkeypatch.delenv("FERRYMAN_OPERATOR_STATUS_INTERVAL")
    with pytest.raises(SettingsError, match="FERRYMAN_OPERATOR_LIVENESS_PORT"):
        settings.load(liveness_port=70000)


def test_the_database_url_is_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRYMAN_DATABASE_URL", "postgresql://u:hunter2@db/x")
    loaded = settings.load()
    assert loaded.database_url is not None and "hunter2" not in repr(loaded)
    assert loaded.renew_interval == loaded.lease_duration / 3


def test_namespaces_come_from_the_environment_comma_separated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FERRYMAN_OPERATOR_NAMESPACES", "team-a, team-b")
    assert settings.load().namespaces == ["team-a", "team-b"]
