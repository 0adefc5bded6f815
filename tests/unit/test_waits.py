"""The tests' one way to wait (tests/support/net.py): it returns what the check found, counts
an AssertionError as "not yet", fails naming what it waited for, and stops at once on
``Hopeless``."""

from __future__ import annotations

import itertools
import socket
import time

import pytest
from net import Hopeless, free_port, wait_for


def test_it_returns_the_first_truthy_value_the_check_returns() -> None:
    calls = itertools.count()
    assert wait_for(lambda: next(calls) >= 3 and "ready", 5, "the third call") == "ready"


def test_an_assertion_error_means_not_yet_and_its_last_one_is_chained_to_the_failure() -> None:
    calls = itertools.count()

    def check() -> bool:
        raise AssertionError(f"call {next(calls)}: the job is still ready")

    with pytest.raises(AssertionError, match=r"^timed out after 0\.2 s waiting for the job$") as e:
        wait_for(check, 0.2, "the job", interval=0.01)
    assert isinstance(e.value.__cause__, AssertionError)
    assert str(e.value.__cause__).endswith(": the job is still ready")
    assert not str(e.value.__cause__).startswith("call 0:")  # it kept asking until the end


def test_without_a_what_the_failure_names_the_check() -> None:
    def the_lease_is_held() -> bool:
        return False

    with pytest.raises(AssertionError, match=r"waiting for .*the_lease_is_held$"):
        wait_for(the_lease_is_held, 0.05, interval=0.01)


def test_hopeless_ends_the_wait_at_once() -> None:
    def check() -> bool:
        raise Hopeless("the worker exited with 1")

    began = time.monotonic()
    with pytest.raises(Hopeless, match="the worker exited with 1"):
        wait_for(check, 30, "the worker to start")
    assert time.monotonic() - began < 5


def test_a_free_port_can_be_bound_on_loopback() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", free_port()))
