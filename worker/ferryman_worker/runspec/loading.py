"""Reading a MigrationRun from YAML or from an already parsed document."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Hashable, Mapping
from typing import Any

import yaml
from pydantic import (
    ValidationError,
)

from ferryman_worker.errors import RunSpecError
from ferryman_worker.runspec.explain import _kind_of, explain
from ferryman_worker.runspec.models import KIND, MigrationRun


def load_run_file(path: str | os.PathLike[str]) -> MigrationRun:
    """Read and validate a MigrationRun YAML file; :class:`RunSpecError` says what is wrong."""
    source = os.fspath(path)
    try:
        text = pathlib.Path(source).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise RunSpecError(f"{source}: is not UTF-8 text") from None
    except OSError as exc:
        raise RunSpecError(f"{source}: cannot be read: {exc.strerror or exc}") from None
    return load_run(text, source=source)


def load_run(text: str, *, source: str = "<input>") -> MigrationRun:
    """Validate the MigrationRun in YAML ``text``; ``source`` names it in messages.

    Of several documents, the one MigrationRun is taken. A ``status`` block is ignored.
    """
    return parse_run(_one_document(text, source), source=source)


def parse_run(document: object, *, source: str = "<input>") -> MigrationRun:
    """Validate a MigrationRun already parsed (from YAML or the Kubernetes API).

    Keys are matched by their camelCase names only, as Kubernetes does; ``status`` is ignored, so a
    ``kubectl get -o yaml`` round-trips. Raises :class:`RunSpecError` listing every problem.
    """
    if not isinstance(document, Mapping):
        raise RunSpecError(
            f"{source}: expected a mapping with apiVersion, kind, metadata and spec; "
            f"got {_kind_of(document)}"
        )
    body = {key: value for key, value in document.items() if key != "status"}
    try:
        return MigrationRun.model_validate(body, by_alias=True, by_name=False)
    except ValidationError as exc:
        # No chaining: the pydantic error holds the inputs, and an input may be a secret.
        problems = explain(exc)
    count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    lines = "".join(f"\n  {problem}" for problem in problems)
    raise RunSpecError(f"{source}: not a valid MigrationRun ({count}):{lines}", problems)


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if (key_node.tag, key_node.value) in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key '{key_node.value}' is given twice", key_node.start_mark
                    )
                seen.add((key_node.tag, key_node.value))
        return super().construct_mapping(node, deep)


def _one_document(text: str, source: str) -> object:
    try:
        documents = [
            (number, document)
            for number, document in enumerate(yaml.load_all(text, Loader=_Loader), 1)
            if document is not None
        ]
    except yaml.YAMLError as exc:
        # Only the problem and its position: PyYAML's own message quotes the line, maybe a secret
        # (and the error is not kept as the context of ours, for the same reason).
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        failure = f"{source}: not valid YAML: {where}{problem}"
    else:
        return _pick_run(documents, source)
    raise RunSpecError(failure)


def _pick_run(documents: list[tuple[int, Any]], source: str) -> object:
    if not documents:
        raise RunSpecError(f"{source}: is empty; expected a MigrationRun document")
    if len(documents) == 1:
        return documents[0][1]
    runs = [
        (n, doc) for n, doc in documents if isinstance(doc, Mapping) and doc.get("kind") == KIND
    ]
    if len(runs) == 1:
        return runs[0][1]
    if runs:
        numbers = ", ".join(str(number) for number, _ in runs)
        raise RunSpecError(
            f"{source}: holds {len(runs)} MigrationRun documents (documents {numbers}); "
            "put one run in each file"
        )
    raise RunSpecError(f"{source}: holds {len(documents)} YAML documents and none has kind: {KIND}")
