"""The installation's say over destinations: which tables a mapping may write, and whether a table
without a workspace column may be written at all.

Many teams share one installation and one database. A mapping is a team's, the tables are the
application's and ferryman's: the installation (its operator and workers, from the same chart
values) lists the schemas, and the extra tables, mappings may write; ferryman's own tables
(``ferryman_*``) and PostgreSQL's (``pg_*``, ``information_schema``) are never among them,
whatever is listed. A table without a workspace column holds every workspace's rows alike, so
writing one needs the installation's explicit leave (``unscoped``: single-tenant installations).

Checked twice: at admission against the catalog (the table as PostgreSQL resolves it), and by
the writer a worker builds from the run's stored snapshot (``destinations.writer_for``). This
module decides from names only: it never reads the database, and imports nothing of
ferryman's, so that every process's settings can hold it.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field

NEVER_SCHEMAS: Final = ("information_schema", "pg_catalog", "pg_toast")
"""Schemas no mapping writes, whatever the installation lists (and every ``pg_*`` one)."""
OWN_PREFIX: Final = "ferryman_"
"""ferryman's own tables: runs, tasks, the queue, the ledger, credentials. Never a destination."""
DEFAULT_SCHEMAS: Final = ("public",)
IDENTIFIER: Final = r"^[a-z][a-z0-9_]*$"
QUALIFIED: Final = r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$"

Schema = Annotated[str, Field(min_length=1, max_length=63, pattern=IDENTIFIER)]
Table = Annotated[str, Field(min_length=3, max_length=127, pattern=QUALIFIED)]


class Policy(BaseModel):
    """Where mappings may write in this installation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schemas: tuple[Schema, ...] = DEFAULT_SCHEMAS
    """Schemas whose tables mappings may write (their ``ferryman_*`` tables excepted)."""

    tables: tuple[Table, ...] = ()
    """Tables (``schema.table``) mappings may write besides those of ``schemas``."""

    unscoped: bool = False
    """Whether a mapping may write a table without a workspace column (``workspaceColumn``):
    such a table keeps no workspace apart, so only a single-tenant installation allows it."""

    def table_refused(self, table: str, at: str) -> str | None:
        """Why a mapping may not write ``table`` (``schema.table``, as the catalog resolved
        it; an unqualified name is read in the first allowed schema), one line naming ``at``
        (its YAML path) and the fix; None when it may."""
        schema, _, name = qualified(table, self.schemas).partition(".")
        if name.startswith(OWN_PREFIX):
            return (
                f"{at}: {table} is one of ferryman's own tables (runs, tasks, the ledger): a "
                "mapping never writes them; name a table of the application"
            )
        if schema in NEVER_SCHEMAS or schema.startswith("pg_"):
            return (
                f"{at}: {table} is in PostgreSQL's own schema {schema}: name an application table"
            )
        if schema in self.schemas or f"{schema}.{name}" in self.tables:
            return None
        allowed = ", ".join([*self.schemas, *self.tables]) or "none"
        return (
            f"{at}: {schema}.{name} is not a table this installation lets mappings write (schemas "
            f"and tables allowed: {allowed}): name one of those, or ask its administrators to add "
            "it (destinations.schemas or destinations.tables of the chart; FERRYMAN_DESTINATION_"
            "SCHEMAS, FERRYMAN_DESTINATION_TABLES)"
        )

    def unscoped_refused(self, table: str, at: str) -> str | None:
        """Why a mapping may not write ``table`` without a workspace column; None when it may."""
        if self.unscoped:
            return None
        return (
            f"{at}.workspaceColumn: {table} is written without a workspace column, so one "
            "workspace's rows could not be kept from another's: name the table's workspace "
            "column (workspaceColumn: workspace, mapped as {constant: workspace}); only a "
            "single-tenant installation writes tables without one (destinations."
            "allowUnscopedTables of the chart, FERRYMAN_DESTINATION_UNSCOPED)"
        )


def qualified(table: str, schemas: tuple[str, ...] = DEFAULT_SCHEMAS) -> str:
    """``table`` as ``schema.table``: an unqualified name in the first of ``schemas``."""
    if "." in table:
        return table
    return f"{schemas[0] if schemas else DEFAULT_SCHEMAS[0]}.{table}"
