"""Every module of the worker and operator packages has a place in an import-linter layer.

``lint-imports`` checks the imports between the modules its layers name and ignores the rest,
so a module named nowhere may import anything. Here a new module fails until it is given its
layer. A module is placed when a layer names it, or names a package holding it; but a package
that a layers contract takes as its container names each of its modules in that contract.
"""

from __future__ import annotations

import importlib.util
import pathlib
import pkgutil
import re
import tomllib
from collections.abc import Iterator, Mapping
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("ferryman_worker", "ferryman_operator")


def _layers_contracts() -> list[Mapping[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return [c for c in config["contracts"] if c["type"] == "layers"]


def _named(contract: Mapping[str, Any]) -> set[str]:
    """The modules a layers contract names: each layer's modules (``a | b`` or ``a : b``,
    ``(a)`` when optional), under each of its containers."""
    tails = {
        tail.strip().strip("()")
        for layer in contract["layers"]
        for tail in re.split(r"[|:]", layer)
        if tail.strip()
    }
    containers = contract.get("containers", [])
    if not containers:
        return tails
    return {f"{container}.{tail}" for container in containers for tail in tails}


def _modules(package: str) -> Iterator[str]:
    """Every module and package below ``package``, found on disk (nothing is imported)."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations is not None
    for folder in spec.submodule_search_locations:
        yield from _below(package, pathlib.Path(folder))


def _below(package: str, folder: pathlib.Path) -> Iterator[str]:
    for info in pkgutil.iter_modules([str(folder)]):
        name = f"{package}.{info.name}"
        yield name
        if info.ispkg:
            yield from _below(name, folder / info.name)


def _placed(module: str, named: set[str], containers: set[str]) -> bool:
    """Whether ``module`` or a package holding it is named, with no layered container between
    (the container's contract must name what it holds)."""
    parts = module.split(".")
    for end in range(len(parts), 1, -1):
        candidate = ".".join(parts[:end])
        if candidate != module and candidate in containers:
            return False
        if candidate in named:
            return True
    return False


def _unplaced(packages: tuple[str, ...]) -> list[str]:
    contracts = _layers_contracts()
    named = set().union(*(_named(c) for c in contracts))
    containers = {container for c in contracts for container in c.get("containers", [])}
    return [
        module
        for package in packages
        for module in sorted(_modules(package))
        if not _placed(module, named, containers)
    ]


def test_every_worker_module_sits_in_a_layer() -> None:
    missing = _unplaced(("ferryman_worker",))
    assert not missing, f"named in no layer of pyproject.toml's contracts: {missing}"


def test_every_operator_module_sits_in_a_layer() -> None:
    missing = _unplaced(("ferryman_operator",))
    assert not missing, f"named in no layer of pyproject.toml's contracts: {missing}"


def test_the_walk_finds_modules_inside_subpackages() -> None:
    found = set(_modules("ferryman_worker"))
    assert {"ferryman_worker.engine.tasks", "ferryman_worker.providers.declarative.spec"} <= found
    assert set(PACKAGES).isdisjoint(found)


def test_a_container_names_what_it_holds() -> None:
    named = {"p.engine", "p.engine.tasks"}
    assert _placed("p.engine.tasks", named, {"p.engine"})
    assert not _placed("p.engine.auth", named, {"p.engine"})
    assert _placed("p.engine", named, {"p.engine"})
    assert _placed("p.queue.lanes", {"p.queue"}, set())
    assert not _placed("p.errors", {"p.queue"}, set())
