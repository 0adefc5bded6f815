"""The real source servers, as session fixtures (see tests/support/source_servers.py)."""

from source_servers import json_server, pocketbase, pocketbase_limited

__all__ = ["json_server", "pocketbase", "pocketbase_limited"]
