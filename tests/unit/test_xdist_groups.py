"""tests/support/xdist_groups.py: under `-n 2 --dist loadgroup`, the tests of one xdist group run
on one worker process, however many others there are to spread."""

from __future__ import annotations

import re

import pytest
from xdist_groups import __file__ as PLUGIN

CONFTEST = f"""
import sys
sys.path.insert(0, {str(PLUGIN.rsplit("/", 1)[0])!r})
pytest_plugins = ["xdist_groups"]
"""
SUITE = """
import pytest

@pytest.mark.parametrize("n", range(6))
def test_shared(n):
    pass

@pytest.mark.parametrize("n", range(6))
def test_alone(n):
    pass
"""


def test_the_tests_of_a_group_run_on_one_worker(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        CONFTEST
        + """
def pytest_collection_modifyitems(items):
    for item in items:
        if item.name.startswith("test_shared"):
            item.add_marker(pytest.mark.xdist_group("shared"))
import pytest
"""
    )
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess(
        "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=12)
    lines = result.stdout.lines
    shared = {m[1] for line in lines if (m := re.search(r"\[(gw\d)\].*test_shared", line))}
    assert len(shared) == 1, lines
