"""Providers: plug-ins that know one source API.

A provider declares its kinds, their phase order and how each is walked: a listing walked page by
page (``pages``: stripes where the pagination knows its page tokens ahead, else one chain of pages
per part of the kind's split), or a ``tree`` (children listed per parent, page by page, and each
child's body fetched when the listing does not carry it). A kind's pagination style and stop
rules live in ``pagination``, its response policy in ``responses``, what a kind and a provider
are in ``model``, what a run chooses of a provider (its kinds, its options) in ``choices``; the
``registry`` finds a run's provider (``resolve``). This module only re-exports them.
Records are validated by the kind's pydantic model (a validation error marks a row malformed); a
destination writes them (``destinations``).

Providers are found through the ``ferryman.providers`` entry-point group; a provider package
outside ferryman registers its migrations (destination tables, writers) in the
``ferryman.migrations`` group (see ``db.migrate``). The built-in ``democrm`` talks to the demo
CRM API in ``hack/democrm``; its tables and writers are among ferryman's own migrations.
"""

from __future__ import annotations

from ferryman_worker.providers.choices import options_for, phases_for
from ferryman_worker.providers.model import (
    AuthStyle,
    ChangedSince,
    Kind,
    OAuth2,
    Option,
    Provider,
    Split,
)
from ferryman_worker.providers.pagination import Reply, Request, dig
from ferryman_worker.providers.registry import ENTRY_POINTS, load, of_run, resolve
from ferryman_worker.providers.responses import ResponsePolicy

__all__ = [
    "ENTRY_POINTS",
    "AuthStyle",
    "ChangedSince",
    "Kind",
    "OAuth2",
    "Option",
    "Provider",
    "Reply",
    "Request",
    "ResponsePolicy",
    "Split",
    "dig",
    "load",
    "of_run",
    "options_for",
    "phases_for",
    "resolve",
]
