"""A provider for tests that never walk it: it has what a test sets on it (a name, kinds, a
listing) and nothing else; a request it was not given fails the test."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ferryman_worker.providers import AuthStyle, Provider, Reply, Request


class StubProvider(Provider):
    """A provider named ``stub`` with no kinds and no writer; subclass it to give it more."""

    name = "stub"
    phases: tuple[tuple[str, ...], ...] = ()
    auth = AuthStyle("none")

    def listing(self, kind: str, parent: Mapping[str, Any] | None) -> Request:
        raise AssertionError(f"{self.name}: nothing lists {kind!r} in this test")

    def records(self, kind: str, reply: Reply) -> list[dict[str, Any]]:
        raise AssertionError(f"{self.name}: no page of {kind!r} is read in this test")

    def body(self, kind: str, record: dict[str, Any]) -> Request | None:
        raise AssertionError(f"{self.name}: no body of {kind!r} is fetched in this test")

    def merge_body(self, kind: str, record: dict[str, Any], body: Any) -> dict[str, Any]:
        raise AssertionError(f"{self.name}: no body of {kind!r} is merged in this test")
