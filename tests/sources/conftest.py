"""The real source servers, as fixtures (see tests/support/source_servers.py)."""

from source_servers import (
    json_server,
    pocketbase,
    pocketbase_limited,
    start_json_server,
    start_pocketbase,
)

__all__ = [
    "json_server",
    "pocketbase",
    "pocketbase_limited",
    "start_json_server",
    "start_pocketbase",
]
