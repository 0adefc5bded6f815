"""Every error the operator raises on purpose; messages say what to do, never hold a secret::

    FerrymanError (ferryman_worker)
    └── OperatorError
        ├── SettingsError            bad operator settings or flags: refused at start-up
        ├── DatabaseUnavailable      PostgreSQL cannot be reached now: retried, shown on status
        └── PoolSpecError            the pool-spec ConfigMap is malformed (names key and fix)

Whether kopf retries is decided in one place, ``handlers``: DatabaseUnavailable is temporary,
the rest become conditions and Events.
"""

from __future__ import annotations

from ferryman_worker.contract import FerrymanError


class OperatorError(FerrymanError):
    """Base class of every error the operator raises on purpose."""


class SettingsError(OperatorError):
    """An operator setting is invalid; the message names it and the fix."""


class DatabaseUnavailable(OperatorError):
    """PostgreSQL could not be reached or dropped the connection; the operator tries again."""


class PoolSpecError(OperatorError):
    """The pool-spec ConfigMap holds a value the operator cannot use."""
