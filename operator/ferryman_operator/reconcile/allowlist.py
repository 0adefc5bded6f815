"""The installation's allow-list of source base URLs at admission (the operator's
``allowed_source_urls``, the chart's ``operator.allowedSourceURLs``): which ``spec.source.baseURL``
a run may read from, and which OAuth2 token URL its provider may send the credential to, checked
before its credential is read. An empty list allows every URL. The patterns and their matching are
the worker's (``contract.URLPattern``): the list is sealed into each run's credential and the
worker holds every request to it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ferryman_operator.reconcile.status import Refusal
from ferryman_worker import contract

Pattern = contract.URLPattern
parse = contract.parse_url_patterns
allowed = contract.url_allowed

SETTING = "allowedSourceURLs"
"""The chart value; the operator's setting is FERRYMAN_OPERATOR_ALLOWED_SOURCE_URLS."""
_ASK = (
    f"have its administrators add a pattern (the chart's operator.{SETTING}), then retry the run"
    " (annotate it ferryman.dev/retry=<any new value>)"
)


def refusal(
    base_url: str, patterns: Sequence[Pattern], token_url: str | None = None, provider: str = ""
) -> Refusal | None:
    """Why a run reading from ``base_url`` is refused (None: allowed, or no allow-list): its
    credential goes there, and to ``token_url`` (its provider's OAuth2 token endpoint, if any;
    ``provider`` names it), so both must be allowed."""
    listed = ", ".join(pattern.text for pattern in patterns)
    if not allowed(base_url, patterns):
        return Refusal(
            "SourceNotAllowed",
            f"spec.source.baseURL: {base_url} matches none of the installation's {SETTING} "
            f"({listed}): read from a source the installation allows, or {_ASK}",
        )
    if token_url is not None and not allowed(token_url, patterns):
        return Refusal(
            "SourceNotAllowed",
            f"spec.auth.oauth2.tokenUrl of provider {provider!r}: {token_url} matches none of"
            f" the installation's {SETTING} ({listed}), and the run's credential would be sent"
            f" there: use a provider whose token URL the installation allows, or {_ASK}",
        )
    return None
