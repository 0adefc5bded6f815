"""Every error ferryman's worker raises on purpose, in one place.

Messages say what went wrong and what to do about it, and never contain a secret
(a database URL, a source token)::

    FerrymanError
    ├── ConfigurationError        bad settings, lanes, pool sizes: refused at start-up
    │   ├── RunSpecError          a MigrationRun document is invalid (every problem, one a line)
    │   ├── MappingInvalid        a run's mapping is invalid, or cannot write in this database
    │   ├── CredentialRefused     a credential reference this worker will not read: run fails
    │   ├── CredentialUnavailable a credential, a key of it or the sealing key not found
    │   └── MappingRefused        a run's window was refused for its mapping's fault: the kind fails
    ├── ListingShort              a listing ended short of the total its source states
    ├── DatabaseError             PostgreSQL unreachable or refused a statement (wraps psycopg)
    │   ├── MigrationError        a schema migration failed or the schema is out of date
    │   └── SeedingRefused        the barrier's seeding of a phase was refused for good
    └── QueueError                misuse of the queue's public API, or a job the queue gave up on
        ├── UnknownJobError       a job name that no imported module registered
        ├── JobAlreadyFinished    a job's completion lost a race (it was run twice)
        ├── ProcessDied           a job's process kept dying mid-attempt (it failed for good)
        └── Unretryable           raised by a job: fail it for good now, trying again cannot help
"""

from __future__ import annotations


class FerrymanError(Exception):
    """Base class of every error ferryman raises on purpose."""


class ConfigurationError(FerrymanError):
    """A setting is invalid; the message names the setting and the fix."""


class RunSpecError(ConfigurationError):
    """A MigrationRun document is invalid; each of ``problems`` reads ``path: what to fix``."""

    def __init__(self, message: str, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems or (message,)


class MappingInvalid(ConfigurationError):
    """A run's mapping does not validate, does not fit its provider, or cannot write in this
    database (the catalog's answer): every problem, one a line, naming the field and the fix."""


class CredentialRefused(ConfigurationError):
    """A run's credential reference this worker refuses to read: a local file outside the
    credentials folder, or any local credential on a worker that takes only sealed ones.
    Trying the task again cannot mend it: its run fails at once."""


class CredentialUnavailable(ConfigurationError):
    """A run's credential this worker cannot find: the variable or file of a local one, a key
    the provider's auth needs that its Secret lacks, the sealing key that opens a sealed one.
    Its task is tried again (mounting it mends it), and its run names the cause from the
    first failed attempt (``engine.causes``); the message names keys and places, never a
    value."""


class ListingShort(FerrymanError):
    """A listing ended short of the total its source states, by more than the drift of the
    walk explains: the message names the kind, the counts, the rule that ended it and the
    likely fix; trying again lists the same."""


class MappingRefused(ConfigurationError):
    """The database refused a window's rows for the run's mapping's fault, not the records'
    (a ledger slot without a source id: the mapping's sourceId names no field of the records).
    Every record of the kind would be refused alike: the kind fails its run at once."""


class DatabaseError(FerrymanError):
    """PostgreSQL could not be reached or refused a statement."""


class MigrationError(DatabaseError):
    """A schema migration failed, or the database schema is not up to date."""


class SeedingRefused(DatabaseError):
    """The barrier could not seed a run's next phase: PostgreSQL refused the seeding in a way
    trying again cannot mend (``db.sqlstate.permanent``: a revoked privilege, a constraint, a bad
    value). The message names the phase, its kinds and the database's words; the run fails."""

    def __init__(self, phase: int, kinds: list[str], reason: str) -> None:
        super().__init__(
            f"seeding phase {phase} ({', '.join(kinds)}) at the barrier was refused by the "
            f"database: {reason}; trying again cannot help: fix the database, then "
            "`ferryman retry` the run"
        )
        self.phase = phase
        self.kinds = kinds


class QueueError(FerrymanError):
    """The queue's public API was used in a way it does not support."""


class UnknownJobError(QueueError):
    """A job names a function that no imported module registered."""


class JobAlreadyFinished(QueueError):
    """A job's completion found it already finished: its writes are rolled back."""


class ProcessDied(QueueError):
    """A job's attempts kept ending with their process (or its database connection): each
    such claim counted as an attempt, and none are left."""

    def __init__(self, died: int) -> None:
        super().__init__(
            f"the process running this job died {died} time(s) before an attempt ended: does "
            "the job crash its worker (out of memory, a segfault, os._exit)? Fix it, then "
            "`ferryman jobs retry`"
        )
        self.died = died


class Unretryable(QueueError):
    """Raised by a job (``raise Unretryable(...) from exc``) to fail it for good at once: its
    remaining attempts are not used, because trying again cannot help (a refused credential, a
    request the source calls invalid). ``ferryman jobs retry`` still runs it again."""
