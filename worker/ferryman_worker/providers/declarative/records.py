"""The record model of a declared kind: a pydantic model built from the kind's ``fields``, each
read from its own name, another (``source``) or a dotted path into nested objects, typed as
declared. A record the model refuses is malformed.
"""

from __future__ import annotations

import datetime
from typing import Annotated, Any

from pydantic import AliasPath, BaseModel, ConfigDict, Field, StringConstraints, create_model

from ferryman_worker.providers.declarative import spec as s

SCALARS: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "datetime": datetime.datetime,
    "date": datetime.date,
    "object": dict[str, Any],
}


def record_model(name: str, kind: s.KindSpec) -> type[BaseModel]:
    """The model of kind ``name``'s records; extra fields are ignored."""
    fields: dict[str, Any] = {}
    for field, declared in kind.fields.items():
        fields[field] = _field(declared)
    model: type[BaseModel] = create_model(
        name.title().replace("_", ""),
        __config__=ConfigDict(extra="ignore", populate_by_name=True),
        **fields,
    )
    return model


def _field(declared: s.FieldSpec) -> tuple[Any, Any]:
    named = _source(declared.source)
    if declared.type == "array":
        item = SCALARS[declared.items]
        if declared.required:
            return list[item], Field(**named)  # type: ignore[valid-type]
        return list[item], Field(default_factory=list, **named)  # type: ignore[valid-type]
    base: Any = SCALARS[declared.type]
    if declared.type == "string" and declared.max_length is not None:
        base = Annotated[str, StringConstraints(max_length=declared.max_length)]
    if declared.required:
        return base, Field(**named)
    return base | None, Field(None, **named)


def _source(source: str) -> dict[str, Any]:
    """Where a field is read from: its own name, another (``alias``), or a dotted path into
    nested objects (``metadata.uid``)."""
    if "." in source:
        return {"validation_alias": AliasPath(*source.split("."))}
    return {"alias": source or None}
