"""docs/cli.md, generated: every ``ferryman`` command's ``--help`` and every setting's environment
variable, from the argparse parsers (``ferryman_worker.cli.build_parser``, with the sub-commands
other packages register) and the settings models. ``hack/gen-cli-docs`` writes it;
tests/unit/test_cli_docs.py fails while the page and the code disagree."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from pydantic_core import PydanticUndefined
from pydantic_settings import BaseSettings

PAGE = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
WIDTH = "100"

HEADER = """\
# CLI reference

Every `ferryman` command and every setting, generated from the code by `hack/gen-cli-docs` (do not
edit this page: a test fails while it disagrees with the parsers and the settings models). Flags
override environment variables; a bad value is refused at start-up with a message that names the
variable and the fix. `status`, `errors`, `retry`, `jobs` and `reap` refuse a database whose schema
is not up to date, naming `ferryman db migrate` (`ferryman run` and `ferryman worker --migrate`
migrate it themselves).
"""


def commands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every parser below it, depth first, in the order they were added."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from commands(sub)


def help_text(parser: argparse.ArgumentParser) -> str:
    """``parser``'s ``--help``, at a fixed width whatever the terminal."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        return parser.format_help().rstrip()
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def variables(model: type[BaseSettings]) -> Iterator[tuple[str, str, str]]:
    """(variable, default, meaning) of each field of a settings model."""
    prefix = str(model.model_config.get("env_prefix", ""))
    for name, field in model.model_fields.items():
        if field.validation_alias is not None:
            continue  # read under another model's name (the operator's database URL)
        default = _default(field.default)
        meaning = " ".join((field.description or "").split()).replace("``", "`")
        yield f"`{prefix}{name.upper()}`", default, meaning.replace("|", "\\|")


def _default(value: object) -> str:
    """A default as a variable would be written: `15`, `false`; — when there is none."""
    if value is PydanticUndefined or value is None:
        return "—"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def table(model: type[BaseSettings]) -> list[str]:
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    rows += [f"| {var} | {default} | {meaning} |" for var, default, meaning in variables(model)]
    return rows


def render() -> str:
    from ferryman_operator.settings import OperatorSettings
    from ferryman_worker.cli import build_parser
    from ferryman_worker.settings import LogSettings, Settings

    lines = [HEADER, "## Commands", ""]
    for parser in commands(build_parser()):
        lines += [f"### `{parser.prog}`", "", "```text", help_text(parser), "```", ""]
    lines += [
        "## Environment variables",
        "",
        "### Every command",
        "",
        *table(Settings),
        *table(LogSettings)[2:],
        "",
        "### `ferryman operator`",
        "",
        "The operator reads `FERRYMAN_DATABASE_URL` too.",
        "",
        *table(OperatorSettings),
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    text = render()
    if sys.argv[1:] == ["--check"]:
        if PAGE.read_text() != text:
            print(f"{PAGE} is out of date: run hack/gen-cli-docs", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
