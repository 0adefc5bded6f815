"""A source credential for OAuth tests, and a worker process that calls the demo CRM through
``RefreshTokenAuth``: each line ``call`` on stdin makes one API call and prints its status.

    python tests/support/oauth_client.py   (FERRYMAN_DATABASE_URL, CRM_URL, CLIENT_ID,
                                            CLIENT_SECRET, REFRESH_TOKEN in the environment)
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import sys
from collections.abc import Mapping
from urllib.parse import urlsplit

import httpx

from ferryman_worker.db import connect
from ferryman_worker.engine import oauth

SUPPORT_SCRIPT = pathlib.Path(__file__).resolve()


@dataclasses.dataclass(frozen=True)
class StaticCredential:
    id: str
    values: Mapping[str, str] = dataclasses.field(repr=False)
    hosts: tuple[str, ...]

    def allows(self, url: str) -> bool:
        return urlsplit(url).hostname in self.hosts


def refresh_auth(crm_url: str, db_url: str, values: Mapping[str, str]) -> oauth.RefreshTokenAuth:
    credential = StaticCredential("democrm-oauth", values, ("127.0.0.1",))
    endpoint = oauth.TokenEndpoint(credential, f"{crm_url}/oauth/token")
    return oauth.RefreshTokenAuth(endpoint, lambda: connect.connect(db_url))


def main() -> int:
    env = os.environ
    values = {
        "client_id": env["CLIENT_ID"],
        "client_secret": env["CLIENT_SECRET"],
        "refresh_token": env["REFRESH_TOKEN"],
    }
    auth = refresh_auth(env["CRM_URL"], env["FERRYMAN_DATABASE_URL"], values)
    with httpx.Client(base_url=env["CRM_URL"], auth=auth) as http:
        for line in sys.stdin:
            if line.strip() == "call":
                print(http.get("/v1/people", params={"limit": 1}).status_code, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
