"""The demo CRM's declarative provider (registered as ``democrm``): ``provider.yaml``."""

from __future__ import annotations

import pathlib

from ferryman_worker.providers import declarative

PROVIDER_FILE = pathlib.Path(__file__).with_name("provider.yaml")

provider = declarative.load_file(PROVIDER_FILE)
