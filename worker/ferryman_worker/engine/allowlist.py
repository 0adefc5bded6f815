"""The installation's allow-list of source URLs (the chart's ``operator.allowedSourceURLs``): the
patterns, and which URL each allows. The operator checks a run's ``baseURL`` and token URL against
them at admission and seals the list into the run's credential; the worker checks every request
against the sealed list, so the list decided at admission holds for the whole run.

A pattern is ``SCHEME://HOST[:PORT][/PATH]``. ``HOST`` may hold ``*`` wildcards, matched against
the URL's host name alone (a ``*`` never reaches into the port or the path, so
``https://*.example.com`` does not match ``https://evil.test/x.example.com``);
``*.example.com`` does not match ``example.com`` itself. Without ``PORT`` the scheme's default
port is meant, ``:*`` allows any. Without ``PATH`` any path is allowed; a ``PATH`` (``*``
allowed) must match a base URL's whole path, and a request's path or a path above it.
No Kubernetes and no database here.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
import urllib.parse
from collections.abc import Sequence

DEFAULT_PORTS = {"http": 80, "https": 443}
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
        parts = self._origin(url)
        return parts is not None and (
            self.path is None or fnmatch.fnmatchcase(_trimmed(parts.path), self.path)
        )

    def allows_request(self, url: str) -> bool:
        """Whether a request to ``url`` may be sent: its origin matches, and its path is one
        the pattern allows or lies below one (a listing below an allowed base URL)."""
        parts = self._origin(url)
        if parts is None:
            return False
        if self.path is None:
            return True
        path = _trimmed(parts.path)
        return any(fnmatch.fnmatchcase(above, self.path) for above in [path, *_parents(path)])

    def _origin(self, url: str) -> urllib.parse.SplitResult | None:
        """``url`` split, if its scheme, host and port are this pattern's."""
        try:
            parts = urllib.parse.urlsplit(url.strip())
            port = parts.port
        except ValueError:
            return None
        scheme = parts.scheme.lower()
        if scheme != self.scheme or not parts.hostname:
            return None
        if self.port is not None and (port or DEFAULT_PORTS.get(scheme)) != self.port:
            return None
        if not fnmatch.fnmatchcase(parts.hostname.lower(), self.host):
            return None
        return parts


def parse(texts: Sequence[str]) -> tuple[Pattern, ...]:
    """The patterns of a setting; ValueError naming the first that is not one."""
    return tuple(Pattern.parse(text) for text in texts if text.strip())


def allowed(url: str, patterns: Sequence[Pattern]) -> bool:
    """Whether the base URL ``url`` matches a pattern (any URL when there is none)."""
    return not patterns or any(pattern.matches(url) for pattern in patterns)


def request_allowed(url: str, patterns: Sequence[Pattern]) -> bool:
    """Whether a request to ``url`` is allowed (any request when there is no pattern)."""
    return not patterns or any(pattern.allows_request(url) for pattern in patterns)


def _parents(path: str) -> list[str]:
    """The paths above ``path`` (``/a/b`` -> ``/a``, ``""``)."""
    segments = path.split("/")
    return ["/".join(segments[:end]) for end in range(len(segments) - 1, 0, -1)]


def _trimmed(path: str) -> str:
    """A path without its trailing slashes ("" for the root)."""
    return path.rstrip("/")
