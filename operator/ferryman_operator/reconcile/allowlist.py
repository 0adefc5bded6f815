"""The installation's allow-list of source base URLs (the operator's ``allowed_source_urls``,
the chart's ``operator.allowedSourceURLs``): which ``spec.source.baseURL`` a run may read from,
and which OAuth2 token URL its provider may send the credential to, checked at admission before
its credential is read. An empty list allows every URL.

A pattern is ``SCHEME://HOST[:PORT][/PATH]``. ``HOST`` may hold ``*`` wildcards, matched against
the URL's host name alone (a ``*`` never reaches into the port or the path, so
``https://*.example.com`` does not match ``https://evil.test/x.example.com``);
``*.example.com`` does not match ``example.com`` itself. Without ``PORT`` the scheme's default
port is meant, ``:*`` allows any. Without ``PATH`` any path is allowed; a ``PATH`` (``*``
allowed) must match the URL's whole path. No Kubernetes and no database here.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
import urllib.parse
from collections.abc import Sequence

from ferryman_operator.reconcile.status import Refusal

SETTING = "allowedSourceURLs"
"""The chart value; the operator's setting is FERRYMAN_OPERATOR_ALLOWED_SOURCE_URLS."""
DEFAULT_PORTS = {"http": 80, "https": 443}
_ASK = (
    f"have its administrators add a pattern (the chart's operator.{SETTING}), then retry the run"
    " (annotate it ferryman.dev/retry=<any new value>)"
)
_FORM = re.compile(
    r"^(?P<scheme>https?)://(?P<host>[a-z0-9*.-]+)(?::(?P<port>\*|[0-9]{1,5}))?(?P<path>/.*)?$"
)


@dataclasses.dataclass(frozen=True)
class Pattern:
    """One allowed base-URL pattern, parsed."""

    text: str
    scheme: str
    host: str
    port: int | None  # None: any port
    path: str | None  # None: any path

    @classmethod
    def parse(cls, text: str) -> Pattern:
        """ValueError naming the expected form when ``text`` is not a pattern."""
        found = _FORM.match(text.strip().lower())
        if found is None:
            raise ValueError(
                f"{text!r} is not a base-URL pattern: write SCHEME://HOST[:PORT][/PATH] with "
                "scheme http or https and '*' wildcards, e.g. 'https://*.example.com'"
            )
        port = found["port"]
        return cls(
            text=text.strip(),
            scheme=found["scheme"],
            host=found["host"],
            port=None if port == "*" else int(port or DEFAULT_PORTS[found["scheme"]]),
            path=_trimmed(found["path"]) if found["path"] is not None else None,
        )

    def matches(self, url: str) -> bool:
        """Whether the base URL ``url`` is one this pattern allows."""
        try:
            parts = urllib.parse.urlsplit(url.strip())
            port = parts.port
        except ValueError:
            return False
        scheme = parts.scheme.lower()
        if scheme != self.scheme or not parts.hostname:
            return False
        if self.port is not None and (port or DEFAULT_PORTS.get(scheme)) != self.port:
            return False
        if not fnmatch.fnmatchcase(parts.hostname.lower(), self.host):
            return False
        return self.path is None or fnmatch.fnmatchcase(_trimmed(parts.path), self.path)


def parse(texts: Sequence[str]) -> tuple[Pattern, ...]:
    """The patterns of a setting; ValueError naming the first that is not one."""
    return tuple(Pattern.parse(text) for text in texts if text.strip())


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


def allowed(url: str, patterns: Sequence[Pattern]) -> bool:
    """Whether ``url`` matches a pattern (any URL when there is none)."""
    return not patterns or any(pattern.matches(url) for pattern in patterns)


def _trimmed(path: str) -> str:
    """A path without its trailing slashes ("" for the root)."""
    return path.rstrip("/")
