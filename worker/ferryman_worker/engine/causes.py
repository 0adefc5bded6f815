"""Causes: a task's failure named by what it says a user must fix, so that a run that cannot
make progress says why on its status (a condition's reason, ``ferryman status``) from its
first failed attempt, not only in the worker's log.

A failure is named from its error text as the queue keeps it (``Type: message``, the job's
``last_error``; ``task N failed: Type: message``, a failed run's error): the type is one of the
errors a cause belongs to. Pure; never a secret (the messages name keys and hosts, not values).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from typing import Any, Final

from ferryman_worker import wording

CREDENTIAL_UNAVAILABLE: Final = "CredentialUnavailable"
SOURCE_REFUSED: Final = "SourceRefused"
TABLE_MISSING: Final = "TableMissing"
COLUMN_MISSING: Final = "ColumnMissing"
DATABASE_REFUSED: Final = "DatabaseRefused"

_BY_TYPE: Final = {
    "CredentialUnavailable": CREDENTIAL_UNAVAILABLE,  # errors.CredentialUnavailable
    "SourceRefused": SOURCE_REFUSED,  # engine.source.SourceRefused: HTTP 401 or 403
    "TokenRefused": SOURCE_REFUSED,  # engine.oauth: the token endpoint refused the grant
    "UndefinedTable": TABLE_MISSING,  # psycopg.errors, SQLSTATE 42P01
    "UndefinedColumn": COLUMN_MISSING,  # 42703
    "InsufficientPrivilege": DATABASE_REFUSED,  # 42501
}
WHAT: Final = {
    CREDENTIAL_UNAVAILABLE: "the source credential (or a key of it) is not available to the worker",
    SOURCE_REFUSED: "the source refuses the credential",
    TABLE_MISSING: "a table the mapping writes is missing",
    COLUMN_MISSING: "a column the mapping writes is missing",
    DATABASE_REFUSED: "the database refuses the run's writes",
}
"""Each cause in words, for ``ferryman status`` and the run's status."""

_TYPE = re.compile(r"^(?:task \d+ failed: )?([A-Za-z_][A-Za-z0-9_]*): ")


def named(error: str | None) -> str | None:
    """The cause (a CamelCase reason) of the failure ``error`` says, or None: one the run
    cannot name (a timeout, a 5xx: trying again may mend it)."""
    found = _TYPE.match(error or "")
    return None if found is None else _BY_TYPE.get(found.group(1))


def retrying_line(row: Mapping[str, Any], now: datetime.datetime) -> str:
    """``wording.retrying_line`` of tasks waiting to try again (``runs.retrying``), led by the
    cause their latest failure names, if it names one: ``CredentialUnavailable (the source
    credential ... is not available to the worker): retrying 1 task(s); ...``."""
    line = wording.retrying_line(dict(row), now)
    cause = named(row.get("last_error"))
    if cause is None:
        return line
    return f"  {cause} ({WHAT[cause]}): {line.strip()}"
