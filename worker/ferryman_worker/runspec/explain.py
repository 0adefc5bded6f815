"""Validation errors as messages a user can act on: one ``path: fix`` line per problem."""

from __future__ import annotations

import difflib
import types
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ValidationError,
)
from pydantic_core import ErrorDetails

from ferryman_worker.runspec.models import (
    _ROOTS,
    _SECRET_KEYS,
    CONDITION_REASON,
    CONDITION_TYPE,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    IDENTIFIER,
    INLINE_CREDENTIALS,
    SECRET_KEY,
    MigrationRun,
)

# --- error messages -----------------------------------------------------------------------------

_PATTERNS: Final[dict[str, tuple[str, bool]]] = {
    # pattern: (what it means, whether the offending value may be repeated)
    DNS_SUBDOMAIN: (
        "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', "
        "starting and ending with a letter or digit",
        True,
    ),
    DNS_LABEL: (
        "lowercase letters, digits and '-', starting and ending with a letter or digit",
        True,
    ),
    IDENTIFIER: ("a lowercase identifier: a letter, then lowercase letters, digits or '_'", True),
    SECRET_KEY: ("a Secret key: letters, digits, '-', '_' or '.'", True),
    CONDITION_TYPE: ("a CamelCase condition type, e.g. Admitted", True),
    CONDITION_REASON: ("a CamelCase reason, e.g. WorkspaceBusy", True),
}
_AT_MOST_WHY: Final = {
    "spec.options.pageSize": "a provider serves at most its own largest page anyway",
    "spec.options.windowSize": "a refused window is rewritten with a savepoint per row, and"
    " PostgreSQL caches 64 subtransactions per transaction",
}
_BOUNDS: Final = {
    "greater_than_equal": ("at least", "ge"),
    "greater_than": ("greater than", "gt"),
    "less_than_equal": ("at most", "le"),
    "less_than": ("less than", "lt"),
}
_EXPECTED: Final = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "list_type": "a list",
    "datetime_type": "a date-time",
    "datetime_parsing": "an RFC 3339 date-time, e.g. 2026-01-31T12:00:00Z",
    "datetime_from_date_parsing": "an RFC 3339 date-time, e.g. 2026-01-31T12:00:00Z",
    "timezone_aware": "a date-time with a time zone, e.g. 2026-01-31T12:00:00Z",
}


def explain(exc: ValidationError) -> tuple[str, ...]:
    """Every problem of a validation error of one of this module's models, as ``path: fix``.

    For the operator, which validates a status or a spec it already holds; never quotes a secret.
    """
    root = next((m for m in _ROOTS if m.__name__ == exc.title), MigrationRun)
    return tuple(_problem(error, root) for error in exc.errors(include_url=False))


def _problem(error: ErrorDetails, root: type[BaseModel]) -> str:
    loc: list[str | int] = list(error["loc"])
    at = error.get("ctx", {}).get("at")
    if isinstance(at, str | int):
        loc.append(at)
    return f"{_dotted(loc)}: {_message(error, loc, root)}"


def _dotted(loc: Sequence[str | int]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else part
    return path or "(document)"


def _message(error: ErrorDetails, loc: Sequence[str | int], root: type[BaseModel]) -> str:
    kind, ctx, value = error["type"], error.get("ctx", {}), error["input"]
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return _unknown_field(loc, root)
    if kind in _BOUNDS:
        word, key = _BOUNDS[kind]
        why = _AT_MOST_WHY.get(_dotted(loc)) if key == "le" else None
        bound = ctx[key]
        bound = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
        return f"must be {word} {bound}{f' ({why})' if why else ''}; got {value!r}"
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    if kind in ("string_too_short", "string_too_long"):
        word, key = (
            ("at least", "min_length") if kind.endswith("short") else ("at most", "max_length")
        )
        return f"must be {word} {ctx[key]} characters; got {len(value)}"
    if kind == "string_pattern_mismatch":
        meaning, show = _PATTERNS.get(ctx.get("pattern", ""), ("in the documented format", False))
        return f"must be {meaning}" + (f"; got {_show(value)}" if show else "")
    if kind in ("enum", "literal_error"):
        return f"must be {ctx['expected']}; got {_show(value)}{_quote_hint(value)}"
    if kind in _EXPECTED:
        expected = _EXPECTED[kind]
        return f"must be {expected}; got {_kind_of(value)}{_quote_hint(value, expected)}"
    if kind.startswith(("duplicate_", "inline_", "url_")):  # raised by this module, already clear
        return error["msg"]
    return error["msg"][:1].lower() + error["msg"][1:]


def _unknown_field(loc: Sequence[str | int], root: type[BaseModel]) -> str:
    key = loc[-1]
    if isinstance(key, str) and key.replace("_", "").replace("-", "").lower() in _SECRET_KEYS:
        return INLINE_CREDENTIALS
    model = _model_at(root, loc[:-1])
    if model is None:
        return "unknown field"
    known = [field.alias or name for name, field in model.model_fields.items()]
    guess = _closest(str(key), known)
    return (
        "unknown field"
        + (f" (did you mean {guess}?)" if guess else "")
        + ("; known fields here: " + ", ".join(known))
    )


def _closest(key: str, known: list[str]) -> str | None:
    squashed = {name.lower(): name for name in known}
    if key.replace("_", "").lower() in squashed:
        return squashed[key.replace("_", "").lower()]
    matches = difflib.get_close_matches(key.lower(), list(squashed), n=1, cutoff=0.75)
    return squashed[matches[0]] if matches else None


def _model_at(root: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model that validates the mapping at ``loc``, walking from ``root``."""
    current: Any = root
    for part in loc:
        current = _strip(current)
        if isinstance(part, int):
            if get_origin(current) is not list:
                return None
            current = get_args(current)[0]
        elif isinstance(current, type) and issubclass(current, BaseModel):
            fields = current.model_fields
            field = next((f for n, f in fields.items() if part in (n, f.alias)), None)
            if field is None:
                return None
            current = field.annotation
        else:
            return None
    current = _strip(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _strip(annotation: Any) -> Any:
    """``X`` of ``Annotated[X, ...]`` and of ``X | None``."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            members = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def _kind_of(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


_SCALARS: Final = frozenset({"an integer", "a whole number", "a number", "a finite number"}) | {
    "true or false"
}


def _quote_hint(value: object, expected: str = "a string") -> str:
    if expected == "a string" and isinstance(value, bool | int | float):
        return " (quote it in YAML)"
    if expected in _SCALARS and isinstance(value, str):
        return " (remove the quotes)"
    return ""


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:56] + "...'"
