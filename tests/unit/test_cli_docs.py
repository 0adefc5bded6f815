"""docs/cli.md is what hack/gen-cli-docs writes from the parsers and the settings models; every
``ferryman`` command answers ``--help``; every FERRYMAN_* variable the documentation names is one
the code reads."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from ferryman_operator.settings import OperatorSettings
from ferryman_worker import cli
from ferryman_worker.settings import LogSettings, Settings

ROOT = Path(__file__).resolve().parents[2]
VARIABLE = re.compile(r"FERRYMAN_[A-Z0-9_]*")
DOCUMENTED = ("README.md", "docs", "charts", "examples")
CODE = (
    "worker",
    "operator",
    "hack",
    "tests",
    "charts/ferryman/templates",
    "Makefile",
    "Dockerfile",
)


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _clidoc() -> ModuleType:
    return _load("clidoc", ROOT / "hack" / "clidoc.py")


def test_the_cli_page_is_what_the_generator_writes() -> None:
    page = (ROOT / "docs" / "cli.md").read_text()
    assert page == _clidoc().render(), "docs/cli.md is stale: run hack/gen-cli-docs"


def _command_paths() -> Iterator[list[str]]:
    for parser in _clidoc().commands(cli.build_parser()):
        yield parser.prog.split()[1:]


@pytest.mark.parametrize("path", list(_command_paths()), ids=lambda p: " ".join(p) or "ferryman")
def test_every_command_answers_help(path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main([*path, "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {' '.join(['ferryman', *path])}")


def test_the_console_script_answers_help() -> None:
    script = Path(sys.executable).parent / "ferryman"
    done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "operator" in done.stdout  # a sub-command another package registers


def _files(roots: tuple[str, ...]) -> Iterator[Path]:
    for root in roots:
        path = ROOT / root
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from (
                p for p in sorted(path.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
            )


def _names(paths: Iterator[Path]) -> dict[str, str]:
    """Each variable name (trailing _ dropped) and the first file:line naming it."""
    found: dict[str, str] = {}
    for path in paths:
        try:
            lines = path.read_text().splitlines()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(lines, 1):
            for name in VARIABLE.findall(line):
                found.setdefault(name.rstrip("_"), f"{path.relative_to(ROOT)}:{number}")
    return found


def _read_by_the_code() -> set[str]:
    settings = {
        f"{model.model_config.get('env_prefix', '')}{field}".upper()
        for model in (Settings, LogSettings, OperatorSettings)
        for field in model.model_fields
    }
    literal = set(_names(p for p in _files(CODE) if p.name != Path(__file__).name))
    # `hack/controlplane env` exports FERRYMAN_<BINARY> for each binary it builds
    versions = _load("controlplane_versions", ROOT / "hack/cp/controlplane/versions.py")
    binaries = {f"FERRYMAN_{name.upper().replace('-', '_')}" for name in versions.VERSIONS}
    return settings | literal | binaries


def test_every_documented_variable_is_read_by_the_code() -> None:
    known = _read_by_the_code()
    unknown = [
        f"{where}: {name}"
        for name, where in _names(_files(DOCUMENTED)).items()
        if name not in known and not any(k.startswith(name + "_") for k in known)
    ]
    assert not unknown, "documented but read nowhere:\n" + "\n".join(unknown)
