"""ferryman's worker: the capsule (a PostgreSQL job queue with lanes), the migration engine,
providers and the reaper. Never imports ``ferryman_operator``."""

__version__ = "0.1.0"
