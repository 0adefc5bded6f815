"""The declarative provider format's reference page (``docs/provider-reference.md``) and JSON
Schema (``schemas/migrationprovider.schema.json``), generated from the models in ``spec``
(``hack/gen-provider-docs``; a test fails while the files disagree with the models)."""

from __future__ import annotations

import inspect
import json
import re
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from ferryman_worker.providers.declarative import spec as s


def paging_sections(union: Any = s.Paging) -> list[tuple[str, type[BaseModel]]]:
    """One section per branch of a pagination union, titled by its style."""
    return [(f"pagination: style {s.style_of(model)}", model) for model in s.paging_models(union)]


SECTIONS: list[tuple[str, type[BaseModel]]] = [
    ("The document", s.ProviderDocument),
    ("spec", s.ProviderSpecBody),
    ("spec.auth", s.AuthSpec),
    ("spec.options.NAME", s.OptionSpec),
    ("spec.responses, kinds.K.responses", s.ResponsesSpec),
    ("kinds.K", s.KindSpec),
    ("kinds.K.request, kinds.K.body.request", s.RequestSpec),
    *paging_sections(),
    ("pagination.stop", s.StopSpec),
    ("kinds.K.split", s.SplitSpec),
    ("split.ranges", s.RangesSplit),
    ("split.values", s.ValuesSplit),
    ("kinds.K.body", s.BodySpec),
    ("kinds.K.fields.F", s.FieldSpec),
    ("kinds.K.changedSince", s.ChangedSinceSpec),
]

SCHEMA_PATH = "schemas/migrationprovider.schema.json"
REFERENCE_PATH = "docs/provider-reference.md"


def schema_text() -> str:
    document = s.ProviderDocument.model_json_schema(by_alias=True)
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def markdown() -> str:
    lines = [
        "# Provider format reference",
        "",
        "<!-- Generated from worker/ferryman_worker/providers/declarative/spec.py by",
        "     hack/gen-provider-docs; do not edit by hand. -->",
        "",
        "Every field of a declarative provider document, as `ferryman provider check` validates",
        f"it. The same models give the JSON Schema in `{SCHEMA_PATH}` (`ferryman provider",
        "schema`). How to write one, step by step: [Providers](providers.md).",
    ]
    for title, model in SECTIONS:
        lines += ["", f"## {title}", "", _one_line(inspect.getdoc(model) or ""), ""]
        lines += ["| field | type | default | meaning |", "|---|---|---|---|"]
        properties = model.model_json_schema(by_alias=True)["properties"]
        for name, field in model.model_fields.items():
            alias = field.alias or name
            lines.append(
                f"| `{alias}` | {_type(properties[alias])} | {_default(field)} |"
                f" {_one_line(field.description or '')} |"
            )
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().replace("|", "\\|")


def _type(schema: dict[str, Any]) -> str:
    """A property's JSON Schema, said briefly: ``string``, ``list of integer``, ``offset or
    page_number``."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "const" in schema:
        return f"`{schema['const']}`"
    if "enum" in schema:
        return " or ".join(f"`{value}`" for value in schema["enum"])
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return " or ".join(_type(part) for part in schema[union])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"map of {_type(schema['additionalProperties'])}"
    bounds = [
        f"{word} {schema[key]}"
        for key, word in (("minimum", "≥"), ("maximum", "≤"), ("maxLength", "length ≤"))
        if key in schema
    ]
    return str(kind) + (f" ({', '.join(bounds)})" if bounds else "")


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "(its defaults)"
    return "`" + json.dumps(value, default=str) + "`"
