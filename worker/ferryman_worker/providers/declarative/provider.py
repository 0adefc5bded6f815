"""``DeclaredProvider``: the provider a declarative document (``spec.ProviderDocument``) says.

Its kinds' record models are built from the declared fields (``records``), its requests from the
declared templates, its auth style, response policies, splits and delta filters from their
declarations. Reading a document is ``loading``'s.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers.declarative import spec as s
from ferryman_worker.providers.declarative.records import record_model
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
from ferryman_worker.providers.responses import ResponsePolicy


def _policy(responses: s.ResponsesSpec) -> ResponsePolicy:
    return ResponsePolicy(
        retry=frozenset(responses.retry),
        gone=frozenset(responses.gone),
        rate_limited=frozenset(responses.rate_limited),
        fail=frozenset(responses.fail),
        reset=responses.reset,
        backoff=responses.backoff_seconds,
    )


def _split(split: s.SplitSpec | None) -> Split:
    if split is None:
        return Split()
    if split.ranges is not None:
        return Split.ranges(split.ranges.low, split.ranges.high, list(split.ranges.bounds))
    assert split.values is not None
    return Split.values(split.values.param, list(split.values.values))


def _changed_since(kind: s.KindSpec) -> ChangedSince | None:
    declared = kind.changed_since
    if declared is None:
        return None
    version = declared.version
    kind_of = kind.fields[version].type if version else "datetime"
    return ChangedSince(
        declared.param,
        declared.value,
        declared.format,
        version,
        "integer" if kind_of == "integer" else "datetime",
        declared.deleted,
    )


def fill(template: str, parent: Mapping[str, Any] | None, record: Mapping[str, Any] | None) -> str:
    """``template`` with its ``{parent.F}`` and ``{record.F}`` placeholders filled."""

    def value(match: Any) -> str:
        source = parent if match.group(1) == "parent" else record
        found = None if source is None else source.get(match.group(2))
        if found is None:
            raise ConfigurationError(
                f"the request template {template!r} needs {match.group(0)}, which is missing"
            )
        return str(found)

    return s.PLACEHOLDER.sub(value, template)


def _request(
    declared: s.RequestSpec,
    parent: Mapping[str, Any] | None = None,
    record: Mapping[str, Any] | None = None,
) -> Request:
    def filled(value: Any) -> Any:
        return fill(value, parent, record) if isinstance(value, str) else value

    return Request(
        fill(declared.path, parent, record),
        {key: filled(value) for key, value in declared.query.items()},
        declared.cost,
        declared.method,
        {key: filled(value) for key, value in declared.headers.items()},
        declared.body,
    )


class DeclaredProvider(Provider):
    """A provider declared by a document (``spec.ProviderDocument``)."""

    def __init__(self, document: s.ProviderDocument) -> None:
        self.document = document
        body = document.spec
        self.name = document.metadata.name
        self.phases = tuple(tuple(phase) for phase in body.phase_order())
        self.auth = _auth(body.auth)
        self.options = {
            name: Option(option.type, option.default) for name, option in body.options.items()
        }
        self.specs = body.kinds
        self.kinds = {name: self._kind(name, kind) for name, kind in body.kinds.items()}

    def _kind(self, name: str, kind: s.KindSpec) -> Kind:
        return Kind(
            name,
            record_model(name, kind),
            walk=kind.walk,
            parent=kind.parent,
            pagination=kind.pagination.build(),
            split=_split(kind.split),
            policy=_policy(kind.responses or self.document.spec.responses),
            max_page_size=kind.pagination.max_page_size,
            changed_since=_changed_since(kind),
            id=kind.id,
            verify_query=dict(kind.verify_query),
        )

    @functools.cached_property
    def digest(self) -> str:
        """Names this definition: two documents with the same content have the same digest."""
        text = json.dumps(self.definition(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def definition(self) -> dict[str, Any]:
        """The document as JSON: what a run snapshots. Its phases are written out: the order
        of the kinds in the document would not survive jsonb, which orders an object's keys."""
        found = self.document.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        found["spec"]["phases"] = self.document.spec.phase_order()
        return found

    def listing(self, kind: str, parent: Mapping[str, Any] | None) -> Request:
        return _request(self.specs[kind].request, parent)

    def records(self, kind: str, reply: Reply) -> list[dict[str, Any]]:
        found = dig(reply.body, self.specs[kind].records)
        if not isinstance(found, list):
            raise ConfigurationError(
                f"kinds.{kind}.records: the page has no list at {self.specs[kind].records!r}"
                f" (its top-level keys: {_keys(reply.body)}); point `records` at the list"
            )
        return [_as_record(self.specs[kind], item) for item in found]

    def body(self, kind: str, record: dict[str, Any]) -> Request | None:
        declared = self.specs[kind].body
        return None if declared is None else _request(declared.request, None, record)

    def merge_body(self, kind: str, record: dict[str, Any], body: Any) -> dict[str, Any]:
        declared = self.specs[kind].body
        assert declared is not None
        return {**record, declared.into: dig(body, declared.field)}

    def writer(self, kind: str) -> str:
        """The SQL function the document names for ``kind``; "" when it names none (the run's
        mapping or the landing table then takes the kind)."""
        return self.specs[kind].writer


def _auth(declared: s.AuthSpec) -> AuthStyle:
    grant = declared.oauth2
    oauth2 = (
        None
        if grant is None
        else OAuth2(
            grant.grant,
            grant.token_url,
            tuple(grant.scopes),
            grant.client_auth,
            grant.keys.client_id,
            grant.keys.client_secret,
            grant.keys.refresh_token,
        )
    )
    return AuthStyle(declared.style, declared.name, declared.prefix, oauth2)


def _as_record(kind: s.KindSpec, item: Any) -> Any:
    """A listing's item as a record: an object as it is; a string or a whole number (a listing
    of ids, such as Matrix's ``joined_rooms``) as a record holding only the kind's id field.
    Anything else stays as it is, and is malformed."""
    is_id = isinstance(item, str) or (isinstance(item, int) and not isinstance(item, bool))
    source = kind.fields[kind.id].source or kind.id
    return {source: item} if is_id and "." not in source else item


def _keys(body: Any) -> str:
    return ", ".join(sorted(body)) if isinstance(body, Mapping) else type(body).__name__
