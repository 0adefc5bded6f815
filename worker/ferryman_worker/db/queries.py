"""The named queries of ``sql/queries.sql``, loaded once.

Each query starts with a ``-- name: <name>`` line; the text up to the next one is the query.
``queries.sql`` holds the capsule's, ``engine.sql`` the engine's; a provider keeps the SQL of its
destination tables in its own package's ``sql/`` folder.
Query text is a ``LiteralString`` so psycopg's typing accepts it as trusted SQL.
"""

from __future__ import annotations

import functools
import importlib.resources
from typing import LiteralString

_MARKER = "-- name:"


@functools.cache
def _load(filename: str, package: str = "ferryman_worker.db") -> dict[str, LiteralString]:
    text = importlib.resources.files(package).joinpath("sql", filename).read_text()
    queries: dict[str, LiteralString] = {}
    for chunk in text.split(_MARKER)[1:]:
        name, _, body = chunk.partition("\n")
        queries[name.strip()] = body.strip()  # trusted: shipped with the package
    return queries


def get(
    name: str, filename: str = "queries.sql", package: str = "ferryman_worker.db"
) -> LiteralString:
    """The query called ``name`` in ``<package>/sql/<filename>``; KeyError names what exists."""
    queries = _load(filename, package)
    try:
        return queries[name]
    except KeyError:
        raise KeyError(f"no query named {name!r} in {filename}; known: {sorted(queries)}") from None


def engine(name: str) -> LiteralString:
    """The engine's query called ``name`` (``sql/engine.sql``)."""
    return get(name, "engine.sql")
