"""One call to a source: the request a provider asks for and the reply it gets to read."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Literal

OPTION = re.compile(r"\{options\.([a-z][a-z0-9_]*)\}")


@dataclasses.dataclass(frozen=True)
class Request:
    """An HTTP call against the source and the rate-limit tokens it costs. ``path`` is relative
    to the source's base URL, or absolute (a next-page URL the source gave)."""

    path: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    cost: int = 1
    method: Literal["GET", "POST"] = "GET"
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict)
    json: Any = None

    def with_params(self, **params: Any) -> Request:
        return dataclasses.replace(self, params={**self.params, **params})

    def with_options(self, options: Mapping[str, Any]) -> Request:
        """The request with ``{options.NAME}`` in its path, query values and headers replaced
        by the run's ``spec.source.options``."""
        if not options:
            return self

        def filled(value: Any) -> Any:
            if not isinstance(value, str) or "{options." not in value:
                return value
            return OPTION.sub(lambda m: str(options.get(m.group(1), m.group(0))), value)

        return dataclasses.replace(
            self,
            path=filled(self.path),
            params={key: filled(value) for key, value in self.params.items()},
            headers={key: filled(value) for key, value in self.headers.items()},
        )


@dataclasses.dataclass(frozen=True)
class Reply:
    """The source's answer: its status, headers (case-insensitive names) and decoded body."""

    status: int
    headers: Mapping[str, str]
    body: Any


def dig(value: Any, path: str) -> Any:
    """The value at a dotted ``path`` (``pagination.next``) inside a decoded body; ``""`` is the
    body itself; None when a step is missing."""
    for step in path.split(".") if path else ():
        if isinstance(value, Mapping):
            value = value.get(step)
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return None
    return value
