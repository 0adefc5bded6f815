"""The repository speaks of the product only: no text that ships (README, docs/, code and its
comments, tests, migrations, the chart, examples) refers to how the project was made — work
sessions, issue numbers, who reviewed what, or design documents outside the repository. Words the
product uses (a PostgreSQL session, a phase seeded, the demo's random seed) are fine."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = (
    "README.md", "docs", "worker", "operator", "hack", "tests", "charts", "examples",
    "crds", "Makefile", "Dockerfile", "pyproject.toml", "mkdocs.yml",
)  # fmt: skip
BANNED = re.compile(
    "|".join(
        (
            r"\bsessions? \d",  # "session 4": a work session, not a database one
            r"\bsession-\d",
            r"\bthis session\b(?!'s (server|fixture))",
            r"\bissues? ?#?\d+",
            r"\bissue #",
            r"(?<![\w#])#\d+\b(?![\w-])",  # "#11", an issue number
            r"\bthe lead\b",
            r"\bother engineers\b",
            r"\bseeds?/",
            r"\bseed \d{3}\b",
            r"\bthe seed's\b",  # the design document, not a random seed
            r"\bshared interface\b",
            r"\.\./shared\b",
            r"/work/shared\b",
            r"\bDESIGN\.md\b",  # a file outside the repository
        )
    ),
    re.IGNORECASE,
)


def _shipped_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *SHIPPED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    me = Path(__file__).resolve()
    return [ROOT / name for name in listed if (ROOT / name).is_file() and (ROOT / name) != me]


def hits(path: Path) -> list[str]:
    """``file:line: text`` of each banned phrase in ``path``."""
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError:
        return []
    return [
        f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{number}: "
        f"{match.group(0)!r}"
        for number, line in enumerate(lines, 1)
        for match in BANNED.finditer(line)
    ]


def test_nothing_shipped_refers_to_how_it_was_made() -> None:
    found = [hit for path in _shipped_files() for hit in hits(path)]
    assert not found, "say what the product does instead:\n" + "\n".join(found)


def test_the_check_finds_each_kind_of_reference(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Windows of 50 (session 4).\nSee issue 11 and #12.\nRe-measured by the lead.\n"
        "As seed 004 says; see ../shared/DESIGN.md and shared interface 3.\n"
    )
    found = [hit.rsplit(": ", 1)[1] for hit in hits(page)]
    assert found == [
        "'session 4'", "'issue 11'", "'#12'", "'the lead'", "'seed 004'", "'../shared'",
        "'DESIGN.md'", "'shared interface'",
    ]  # fmt: skip


def test_the_products_own_words_pass(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "A session-level advisory lock; the test session's server; the demo CRM's seed 7;\n"
        "the winner seeds the next phase; [the node](#the-node-up---node); colour #1f77b4.\n"
    )
    assert hits(page) == []
