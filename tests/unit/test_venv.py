"""hack/venv installs the versions uv.lock pins, and refuses a lock that disagrees with
pyproject.toml (a dependency added without hack/lock) with a message saying what to run."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _copy(tmp_path: pathlib.Path) -> pathlib.Path:
    """The project's dependency files and hack/venv, with a .venv whose python and uv are this
    test's (so nothing is installed anywhere)."""
    for name in ("pyproject.toml", "uv.lock", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "hack").mkdir()
    shutil.copy(ROOT / "hack" / "venv", tmp_path / "hack" / "venv")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    (bin_dir / "uv").symlink_to(ROOT / ".venv" / "bin" / "uv")
    return tmp_path


def test_a_dependency_added_without_hack_lock_stops_hack_venv(tmp_path: pathlib.Path) -> None:
    project = _copy(tmp_path)
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    pyproject.write_text(text.replace('"pytest>=8",', '"pytest>=8",\n    "six>=1.16",', 1))
    assert pyproject.read_text() != text
    result = subprocess.run(
        ["bash", "hack/venv"], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "pyproject.toml and uv.lock disagree" in result.stderr
    assert "Run hack/lock, then commit uv.lock." in result.stderr


def test_the_lock_holds_psycopg_at_3_2_4_or_later() -> None:
    """Earlier psycopg 3.2 releases could lose notifications, on which the capsule wakes."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    (psycopg,) = [p["version"] for p in lock["package"] if p["name"] == "psycopg"]
    assert tuple(int(part) for part in psycopg.split(".")[:3]) >= (3, 2, 4)
