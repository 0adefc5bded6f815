"""The xdist groups of tests/conftest.py, carried from the worker processes to the scheduler.

pytest-xdist's `--dist loadgroup` reads a test's `xdist_group` by appending it to the test's id in
the worker; pytest 9.2's structured ids ignore that, so the groups are lost and every test is
scheduled on its own (a known bug of pytest-xdist 3.8, still open). Here each worker writes the
groups it collected (`{test id: group}`) into a folder the controller named in the environment
before it started them, and the controller schedules with `GroupScheduling`, xdist's own loadgroup
scheduler reading the group from there. When xdist carries the groups itself again (an id ending in
`@group`), that wins.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

FOLDER_VARIABLE = "FERRYMAN_TEST_GROUPS_DIR"
GROUP_MARK = "xdist_group"


def _loadgroup(config: pytest.Config) -> bool:
    option = config.option
    return getattr(option, "dist", None) == "loadgroup" or bool(getattr(option, "loadgroup", 0))


def pytest_configure(config: pytest.Config) -> None:
    """On the controller, before any worker starts: the folder the workers write into."""
    if not hasattr(config, "workerinput") and _loadgroup(config):
        os.environ[FOLDER_VARIABLE] = tempfile.mkdtemp(prefix="ferryman-test-groups-")


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and os.environ.get(FOLDER_VARIABLE):
        shutil.rmtree(os.environ.pop(FOLDER_VARIABLE), ignore_errors=True)


@pytest.hookimpl(tryfirst=True)  # before xdist tells the controller that collection is over
def pytest_collection_finish(session: pytest.Session) -> None:
    folder = os.environ.get(FOLDER_VARIABLE)
    worker = getattr(session.config, "workerinput", {}).get("workerid")
    if not folder or not worker:
        return
    groups = {item.nodeid: group for item in session.items if (group := group_of(item))}
    part = Path(folder) / f".{worker}.json"
    part.write_text(json.dumps(groups))
    part.replace(Path(folder) / f"{worker}.json")


def group_of(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker(GROUP_MARK)
    return str(marker.args[0]) if marker and marker.args else None


def collected_groups(folder: Path) -> dict[str, str]:
    """Every worker's groups (they collected the same tests)."""
    groups: dict[str, str] = {}
    for path in sorted(folder.glob("gw*.json")):
        groups.update(json.loads(path.read_text()))
    return groups


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if not _loadgroup(config) or not os.environ.get(FOLDER_VARIABLE):
        return None
    from xdist.scheduler import LoadGroupScheduling

    folder = Path(os.environ[FOLDER_VARIABLE])

    class GroupScheduling(LoadGroupScheduling):  # type: ignore[misc]
        """xdist's loadgroup, with the groups the workers wrote (read once all collected)."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            scope = str(super()._split_scope(nodeid))
            if scope != nodeid:
                return scope
            if self.groups is None:
                self.groups = collected_groups(folder)
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)
