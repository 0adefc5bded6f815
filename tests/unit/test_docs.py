"""The documentation site builds with ``mkdocs build --strict``: a page missing from the
navigation, a link to a page or an anchor that does not exist, fails the tests."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from pymdownx.slugs import slugify

ROOT = Path(__file__).resolve().parents[2]


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=120,
    )


def test_the_site_builds_strict(tmp_path: Path) -> None:
    built = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "cli" / "index.html").is_file()


def _copy(tmp_path: Path) -> Path:
    """The site's sources in tmp_path, to break them there."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    return tmp_path / "mkdocs.yml"


def test_a_broken_anchor_fails_the_build(tmp_path: Path) -> None:
    config = _copy(tmp_path)
    page = tmp_path / "docs" / "glossary.md"
    page.write_text(page.read_text() + "\nSee [the ledger](engine.md#no-such-section).\n")
    built = _build(config, tmp_path / "site")
    assert built.returncode != 0
    assert "no-such-section" in built.stderr


def test_a_page_left_out_of_the_navigation_fails_the_build(tmp_path: Path) -> None:
    config = _copy(tmp_path)
    (tmp_path / "docs" / "orphan.md").write_text("# Orphan\n")
    built = _build(config, tmp_path / "site")
    assert built.returncode != 0
    assert "orphan.md" in built.stderr


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """The page's headings as GitHub (and the site) make their anchors."""
    slug = slugify(case="lower")
    return {
        slug(line.lstrip("#").strip().replace("`", ""), "-")
        for line in page.read_text().splitlines()
        if line.startswith("#")
    }


def _broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(page.read_text()):
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no such heading")
    return broken


def test_the_readmes_links_lead_somewhere() -> None:
    for readme in (ROOT / "README.md", ROOT / "examples" / "README.md"):
        assert _broken_links(readme) == [], readme


def test_every_glossary_term_is_linked_from_the_pages_that_use_it() -> None:
    terms = re.findall(r"^### (.+)$", (ROOT / "docs" / "glossary.md").read_text(), re.M)
    pages = [page for page in (ROOT / "docs").glob("*.md") if page.name != "glossary.md"]
    linked = "".join(page.read_text() for page in [*pages, ROOT / "README.md"])
    slug = slugify(case="lower")
    unlinked = [term for term in terms if f"glossary.md#{slug(term, '-')}" not in linked]
    assert unlinked == [], f"defined in docs/glossary.md but linked from no page: {unlinked}"
