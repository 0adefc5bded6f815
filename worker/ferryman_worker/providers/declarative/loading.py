"""Reading a declarative provider: a YAML file (``load_file``), YAML text (``parse``), a
document already parsed (``check``) or a run's snapshot (``from_definition``).

A bad document raises ConfigurationError with one line per problem, each naming the field by
its YAML path and what to do (``problem``).
"""

from __future__ import annotations

import functools
import json
import pathlib
import re
from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import ValidationError

from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers.declarative import spec as s
from ferryman_worker.providers.declarative.provider import DeclaredProvider


def load_file(path: str | pathlib.Path) -> DeclaredProvider:
    """The provider a YAML file declares; ConfigurationError lists every problem."""
    file = pathlib.Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise ConfigurationError(
            f"{file}: cannot read the provider file ({exc.strerror})"
        ) from None
    return DeclaredProvider(parse(text, str(file)))


def from_definition(name: str, definition: Mapping[str, Any]) -> DeclaredProvider:
    """The provider a run's snapshot holds (built once per process and content);
    ConfigurationError when it does not check, or is not named ``name``."""
    text = json.dumps(definition, sort_keys=True)
    provider = _built(text)
    if provider.name != name:
        raise ConfigurationError(
            f"spec.source.provider: {name!r}, but the provider file declares"
            f" {provider.name!r} (metadata.name): make them the same"
        )
    return provider


@functools.lru_cache(maxsize=64)
def _built(text: str) -> DeclaredProvider:
    return DeclaredProvider(check(json.loads(text), "the run's provider definition"))


def parse(text: str, origin: str = "provider") -> s.ProviderDocument:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"{origin}: not YAML: {exc}") from None
    return check(data, origin)


def check(data: Any, origin: str = "provider") -> s.ProviderDocument:
    """The document ``data`` as the model, or ConfigurationError: one line per problem."""
    try:
        return s.ProviderDocument.model_validate(data)
    except ValidationError as exc:
        lines = [problem(error) for error in exc.errors()]
        raise ConfigurationError(
            f"{origin}: {len(lines)} problem(s):\n" + "\n".join(f"  {line}" for line in lines)
        ) from None


def problem(error: Any) -> str:
    """``spec.kinds.deals.pagination.offsetParam: <what> (<fix>)``."""
    loc = [str(part) for part in error["loc"]]
    # a discriminated union puts the chosen style in the path; YAML has no such level
    path = [
        p for i, p in enumerate(loc) if not (i and loc[i - 1] == "pagination" and p in s.STYLES)
    ]
    where = ".".join(path) or "(the document)"
    kind, message = error["type"], error["msg"]
    if kind == "extra_forbidden":
        return f"{where}: unknown field (remove it, or check its spelling and indentation)"
    if kind == "missing":
        return f"{where}: required (add it)"
    if kind == "union_tag_invalid" or kind == "union_tag_not_found":
        return f"{where}.style: must be one of {', '.join(s.STYLES)}"
    message = message.removeprefix("Value error, ")
    inner = re.match(r"^(kinds\.[\w.-]+): (.*)$", message, re.DOTALL)
    if inner:  # a check across kinds names the field deeper than where pydantic found it
        return f"{where}.{inner.group(1)}: {inner.group(2)}"
    return f"{where}: {message}"
