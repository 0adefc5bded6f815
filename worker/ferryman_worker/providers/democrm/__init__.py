"""The built-in provider for the demo CRM API (``hack/democrm``): organizations, people, deals,
and the e-mail messages of each deal (a tree: listed per deal, bodies fetched one by one).

``provider`` (registered as ``democrm``) is declared in ``provider.yaml``; ``DemoCRM`` says the
same in Python (registered as ``democrm_python``, in ``demo_crm``): the example of a provider in
code, for what a YAML document cannot say. This module only re-exports them."""

from __future__ import annotations

from ferryman_worker.providers.democrm.declared import PROVIDER_FILE, provider
from ferryman_worker.providers.democrm.demo_crm import (
    BODY_COST,
    CHANGED,
    CHILDREN,
    LISTING,
    LISTING_COST,
    MAX_PAGE,
    DemoCRM,
    python_provider,
)

__all__ = [
    "BODY_COST",
    "CHANGED",
    "CHILDREN",
    "LISTING",
    "LISTING_COST",
    "MAX_PAGE",
    "PROVIDER_FILE",
    "DemoCRM",
    "provider",
    "python_provider",
]
