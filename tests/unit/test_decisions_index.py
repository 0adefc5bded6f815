"""docs/decisions.md's index is what hack/gen-decisions-index writes from the page's headings:
every section and record once, in page order, each linked to its heading's anchor."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "decisions.md"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "decisions_index", ROOT / "hack/decisions_index.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["decisions_index"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _index_lines(text: str) -> list[str]:
    generator = _generator()
    block = text.split(generator.START, 1)[1].split(generator.END, 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_the_decisions_index_is_what_the_generator_writes() -> None:
    page = PAGE.read_text()
    written = _index_lines(_generator().render(page))
    assert _index_lines(page) == written, (
        "docs/decisions.md's index is stale: run hack/gen-decisions-index"
    )


def test_every_record_is_in_the_index_once_under_its_section() -> None:
    page = PAGE.read_text()
    records = [line[4:] for line in page.splitlines() if line.startswith("### ")]
    entries = [line for line in _index_lines(page) if line.startswith("    - [")]
    titles = [entry.removeprefix("    - [").rsplit("](#", 1)[0] for entry in entries]
    assert titles == records


def test_a_missing_record_is_restored_and_a_stale_entry_dropped() -> None:
    page = PAGE.read_text()
    lines = page.splitlines(keepends=True)
    record = next(i for i, line in enumerate(lines) if line.startswith("    - ["))
    stale = "    - [A decision since removed](#a-decision-since-removed)\n"
    broken = "".join([*lines[:record], stale, *lines[record + 1 :]])
    generator = _generator()
    assert generator.render(broken) == generator.render(page)


def test_two_headings_with_one_anchor_are_refused() -> None:
    page = PAGE.read_text() + "\n### The queue\n"
    with pytest.raises(ValueError, match="the-queue"):
        _generator().render(page)
