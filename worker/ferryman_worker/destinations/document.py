"""What every part of a mapping document shares: the model base (camelCase keys, unknown keys
refused, attribute docstrings as the published descriptions, frozen) and the constrained strings
it is written in (identifiers, JSON pointers, table and type names, scalar values)."""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

IDENTIFIER: Final = r"^[a-z][a-z0-9_]*$"
POINTER: Final = r"^(/([^~/]|~[01])*)+$"
TABLE: Final = r"^([a-z_][a-z0-9_]*\.)?[a-z_][a-z0-9_]*$"
SQL_TYPE: Final = r"^[a-z_][a-z0-9_]*( [a-z_][a-z0-9_]*)*( ?\(\d+( ?, ?\d+)?\))?(\[\])?$"

Identifier = Annotated[str, Field(min_length=1, max_length=63, pattern=IDENTIFIER)]
Pointer = Annotated[str, Field(min_length=2, max_length=500, pattern=POINTER)]
TableName = Annotated[str, Field(min_length=1, max_length=127, pattern=TABLE)]
SqlType = Annotated[str, Field(min_length=1, max_length=63, pattern=SQL_TYPE)]
Scalar = str | int | float | bool


class Model(BaseModel):
    """The base of a mapping document's models."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_attribute_docstrings=True,
        frozen=True,
    )
