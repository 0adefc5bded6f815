"""A source credential: its secret values, the hosts it may be sent to, and a stable name that
reveals nothing of it; sealing it for the database; redacting it from a source's words.

On Kubernetes the operator reads a run's Secret in the run's own namespace at admission, checks
that the run's ``baseURL`` is one of the hosts the Secret's ``ferryman.dev/hosts`` annotation
binds it to, and seals it (Fernet, with the installation's key) into
``ferryman_run_credentials``; a worker unseals it from there and needs no Kubernetes API rights.
``ferryman run`` (no Kubernetes) reads it from the environment or a folder and binds it to the
host of the run's own ``baseURL``, and to the run's ``credentialsSecretRef.tokenHost`` when it
declares one (the login host of an OAuth2 token URL).

Every request a worker makes with a credential passes ``Credential.guard`` first: a request to a
host the credential is not bound to is refused before a byte leaves the worker.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import pathlib
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from ferryman_worker.engine import allowlist
from ferryman_worker.engine.allowlist import DEFAULT_PORTS
from ferryman_worker.errors import (
    ConfigurationError,
    CredentialRefused,
    CredentialUnavailable,
    FerrymanError,
)

HOSTS_ANNOTATION = "ferryman.dev/hosts"
"""The Secret annotation that binds its credential to hosts: comma-separated patterns
``[SCHEME://]HOST[:PORT]``, each a host name (``api.example.com``) or a wildcard for its
subdomains (``*.example.com``). A binding means scheme, host and port: without a scheme it is
``https``, without a port the scheme's default (``api.example.com`` is https on 443 only);
``http://crm.internal:8080`` binds plain http on that port, ``:*`` any port."""

TOKEN_HOST_FIELD = "spec.source.credentialsSecretRef.tokenHost"
"""Where a run of ``ferryman run`` binds its credential to a second host."""

REDACTED = "***"

SECRET_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""A Secret's name (a DNS-1123 subdomain): no ``/``, never ``.`` or ``..``."""

SECRET_KEY = re.compile(r"[-._a-zA-Z0-9]+")
"""A key of a Secret (``.`` and ``..`` are refused apart): no ``/``."""


class RequestRefused(FerrymanError):
    """A request the worker refuses to send (the source client turns it into a SourceError
    that retrying cannot mend)."""


class NotAllowed(RequestRefused):
    """A request to a URL the installation's allow-list (sealed with the credential at
    admission) does not allow."""

    def __init__(self, url: str, credential: Credential) -> None:
        super().__init__(
            f"refused to send a request to {url_host(url)}: no pattern of the installation's "
            f"allowedSourceURLs ({', '.join(credential.allowed)}) allows it (the chart's "
            "operator.allowedSourceURLs, as it was when the run was admitted); a source's "
            "links must stay within it"
        )


class OutsideBase(RequestRefused):
    """A request whose URL leaves the run's base URL: another scheme, host or port, a path
    not below its path, or a dot segment."""

    def __init__(self, url: str, base_url: str) -> None:
        super().__init__(
            f"refused to send a request to {url_host(url)}: its URL leaves the run's "
            f"spec.source.baseURL ({url_host(base_url)}, below its path), and a source's links "
            "must stay there (another scheme, host, port or path, or a '..' segment); point "
            "spec.source.baseURL at the API's common base"
        )


class HostNotBound(RequestRefused):
    """A request to a host the credential is not bound to: refused before it is sent (the
    source client turns it into a SourceError that retrying cannot mend)."""

    def __init__(self, url: str, credential: Credential) -> None:
        host = url_host(url) if urllib.parse.urlsplit(url).hostname else "(no host)"
        bound = ", ".join(credential.hosts) or "no host"
        by = (
            f"the run binds it to {bound} (its baseURL's host and {TOKEN_HOST_FIELD})"
            if credential.local
            else f"its Secret binds it to {bound} (annotation {HOSTS_ANNOTATION})"
        )
        super().__init__(
            f"refused to send the source credential to {host}: {by}; spec.source.baseURL must"
            " be one of them"
        )


@dataclasses.dataclass(frozen=True)
class Credential:
    """The secret ``values`` of one credential (keys such as token, api_key, username,
    password, client_id, client_secret, refresh_token), the host patterns it is bound to, and
    ``id``: stable, and revealing nothing of the values (rate budgets and locks key on it)."""

    values: Mapping[str, str]
    hosts: tuple[str, ...]
    id: str = ""
    allowed: tuple[str, ...] = ()
    """The installation's allowedSourceURLs at admission (empty: no allow-list): every request
    must match one too."""
    local: bool = False
    """Bound by a run of ``ferryman run`` (its baseURL's host and ``tokenHost``), not by a
    Secret's annotation: what an error tells to change."""

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", fingerprint(self.values, self.hosts))

    def __repr__(self) -> str:  # never the values
        return f"Credential(id={self.id!r}, hosts={self.hosts!r}, keys={sorted(self.values)!r})"

    @property
    def token(self) -> str:
        """The value a bearer or API-key style sends: ``token``, else the only value."""
        if "token" in self.values:
            return self.values["token"]
        if len(self.values) == 1:
            return next(iter(self.values.values()))
        raise ConfigurationError(
            f"the source credential has keys {sorted(self.values)} and no 'token': name the "
            "key in spec.source.credentialsSecretRef.key"
        )

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(value for value in self.values.values() if value)

    def allows(self, url: str | httpx.URL) -> bool:
        """True if ``url`` is on a scheme, host and port this credential is bound to, and the
        installation's allow-list (if any) allows it."""
        return self.bound(url) and self.permitted(url)

    def bound(self, url: str | httpx.URL) -> bool:
        """True if ``url`` (http or https) is on a scheme, host and port this credential is
        bound to."""
        parts = urllib.parse.urlsplit(str(url))
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            return False
        port = parts.port or DEFAULT_PORTS[parts.scheme]
        return any(
            host_matches(pattern, parts.scheme, parts.hostname, port) for pattern in self.hosts
        )

    def permitted(self, url: str | httpx.URL) -> bool:
        """True if the installation's allow-list sealed with the credential allows a request
        to ``url`` (always, without one)."""
        return allowlist.request_allowed(str(url), allowlist.parse(self.allowed))

    def binding_fix(self, host: str) -> str:
        """How to bind this credential to ``host`` too, where its hosts are declared."""
        if self.local:
            return f"set {TOKEN_HOST_FIELD}: {host} in the run file"
        return f"add {host} to the annotation {HOSTS_ANNOTATION} of its Secret"

    def guard(self, request: httpx.Request) -> None:
        """An httpx request hook: HostNotBound unless the request goes to a bound scheme, host
        and port; NotAllowed unless the installation's allow-list allows it."""
        if not self.bound(request.url):
            raise HostNotBound(str(request.url), self)
        if not self.permitted(request.url):
            raise NotAllowed(str(request.url), self)


def host_matches(pattern: str, scheme: str, host: str, port: int) -> bool:
    """``pattern`` (``[scheme://]name[:port]``, ``name`` or ``*.suffix``) matches
    ``scheme://host:port``. Without a scheme the pattern means ``https``; without a port the
    scheme's default, ``:*`` any. Case-insensitive; a wildcard stands for one or more labels,
    never for the bare suffix."""
    text = pattern.strip().lower()
    wanted_scheme, _, text = text.rpartition("://")
    if (wanted_scheme or "https") != scheme.lower():
        return False
    name, _, wanted = text.rpartition(":")
    if not name or not (wanted.isdigit() or wanted == "*"):
        name, wanted = text, ""
    if wanted != "*" and int(wanted or DEFAULT_PORTS.get(scheme.lower(), 0)) != port:
        return False
    host = host.lower().rstrip(".")
    if name.startswith("*."):
        return host.endswith(name[1:]) and len(host) > len(name) - 1
    return host == name


def within_base(base: httpx.URL, url: httpx.URL) -> bool:
    """Whether ``url`` is on the scheme, host and port of ``base``, at its path or below it,
    with no segment that is (or decodes to) ``.`` or ``..``."""
    if (url.scheme, url.host, url.port) != (base.scheme, base.host, base.port):
        return False
    path = url.raw_path.split(b"?")[0].decode("ascii", "replace")
    segments = urllib.parse.unquote(path).replace("\\", "/").split("/")
    if any(segment in (".", "..") for segment in segments):
        return False
    root = base.raw_path.split(b"?")[0].decode("ascii", "replace").rstrip("/")
    return path == root or path.startswith(root + "/") or (not root and path == "")


def parse_hosts(annotation: str | None) -> tuple[str, ...]:
    """The patterns of a ``ferryman.dev/hosts`` annotation (comma or whitespace separated)."""
    text = (annotation or "").replace(",", " ")
    return tuple(part.strip().lower() for part in text.split() if part.strip())


def url_host(url: str | httpx.URL) -> str:
    """The binding pattern for exactly the scheme, host and port of ``url``, written short:
    ``api.example.com`` (https on 443), ``api.example.com:8443``, ``http://crm.internal:8080``."""
    parts = urllib.parse.urlsplit(str(url))
    scheme = parts.scheme.lower()
    port = parts.port or DEFAULT_PORTS.get(scheme, 0)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    prefix = "" if scheme == "https" else f"{scheme}://"
    suffix = "" if port == DEFAULT_PORTS.get(scheme) and scheme == "https" else f":{port}"
    return f"{prefix}{host}{suffix}"


def local_file(folder: pathlib.Path, name: str, key: str) -> pathlib.Path:
    """The file ``<folder>/<name>/<key>`` of a ``ferryman run`` credential, which never leaves
    ``folder``: ``name`` must be a Secret's name and ``key`` a Secret's key (no ``/``, no
    ``..``, not absolute), and the resolved file (symbolic links followed) must lie inside
    the resolved folder. CredentialRefused names the field and the rule, never the file's
    content."""
    if not SECRET_NAME.fullmatch(name):
        raise CredentialRefused(
            "spec.source.credentialsSecretRef.name must be a Secret's name (lower-case letters,"
            " digits, '-' and '.'; no '/', no '..'): a credential file is read only from inside"
            " the credentials folder (FERRYMAN_CREDENTIALS_DIR)"
        )
    if not SECRET_KEY.fullmatch(key) or key in (".", ".."):
        raise CredentialRefused(
            "spec.source.credentialsSecretRef.key must be a Secret's key (letters, digits, '-',"
            " '_' and '.'; no '/', not '.' or '..'): a credential file is read only from inside"
            " the credentials folder (FERRYMAN_CREDENTIALS_DIR)"
        )
    root = folder.resolve()
    path = (root / name / key).resolve()
    if not path.is_relative_to(root):
        raise CredentialRefused(
            f"the credential file of Secret {name!r} key {key!r} leads out of the credentials "
            f"folder {root} (a symbolic link): put the file itself in {root / name}"
        )
    return path


def fingerprint(values: Mapping[str, str], hosts: Iterable[str] = ()) -> str:
    """A stable name for a credential: a hash of its values and hosts (24 hex digits)."""
    text = json.dumps([sorted(values.items()), sorted(hosts)])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def redact(text: str, secrets: Iterable[str], limit: int = 200) -> str:
    """``text`` with every secret (as is, and as it appears percent-encoded in a URL) replaced
    by ``***``, **then** cut to ``limit`` characters: a secret across the cut cannot leave its
    prefix behind."""
    forms = {
        form for secret in secrets if secret for form in (secret, urllib.parse.quote(secret, ""))
    }
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, REDACTED)
    return text[:limit]


class Sealer:
    """Seals credentials for the database and opens them again (Fernet: AES-CBC and an HMAC,
    with the installation's key); a blob sealed with another key does not open."""

    def __init__(self, key: bytes) -> None:
        from cryptography.fernet import Fernet

        try:
            self._fernet = Fernet(key.strip())
        except ValueError:
            raise ConfigurationError(
                "the sealing key is not a Fernet key (32 url-safe base64-encoded bytes): make "
                "one with `python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'`"
            ) from None

    @classmethod
    def derived(cls, secrets: Iterable[str], context: str) -> Sealer:
        """A sealer whose key is derived (HKDF-SHA256) from ``secrets`` for ``context``: what
        opens only for whoever holds those secrets (a credential's own values), with no key of
        the installation's needed."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        material = json.dumps(list(secrets)).encode()
        derive = HKDF(hashes.SHA256(), 32, salt=None, info=f"ferryman:{context}".encode())
        return cls(base64.urlsafe_b64encode(derive.derive(material)))

    @classmethod
    def from_file(cls, path: str | pathlib.Path) -> Sealer:
        file = pathlib.Path(path)
        if not file.is_file():
            raise CredentialUnavailable(
                f"the credential sealing key is not at {file}: mount the installation's "
                "sealing-key Secret there (the chart does) or set FERRYMAN_SEALING_KEY_FILE"
            )
        return cls(file.read_bytes())

    def seal(self, credential: Credential) -> bytes:
        document = {
            "values": dict(credential.values),
            "hosts": list(credential.hosts),
            "allowed": list(credential.allowed),
        }
        return self._fernet.encrypt(json.dumps(document).encode())

    def seal_text(self, text: str) -> str:
        return self._fernet.encrypt(text.encode()).decode()

    def open_text(self, sealed: str) -> str:
        """``sealed`` opened; ConfigurationError when it was sealed with another key."""
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except InvalidToken:
            raise ConfigurationError(
                "a sealed token does not open with its credential's key: the credential's "
                "Secret changed; the token is taken again from the Secret"
            ) from None

    def unseal(self, blob: bytes) -> Credential:
        from cryptography.fernet import InvalidToken

        try:
            document: dict[str, Any] = json.loads(self._fernet.decrypt(bytes(blob)))
        except InvalidToken:
            raise CredentialUnavailable(
                "the run's sealed credential does not open with this worker's sealing key: the "
                "operator and the workers must mount the same key"
            ) from None
        return Credential(
            dict(document["values"]),
            tuple(document["hosts"]),
            allowed=tuple(document.get("allowed", ())),
        )
