"""The real source servers, as fixtures for the crash and 429-storm runs (see
tests/support/source_servers.py)."""

from source_servers import json_server, pocketbase, start_json_server, start_pocketbase

__all__ = ["json_server", "pocketbase", "start_json_server", "start_pocketbase"]
