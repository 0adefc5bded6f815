"""Declarative providers: a YAML document (``spec``) instead of Python code.

``load_file`` reads and checks one; a bad document raises ConfigurationError with one line per
problem, each naming the field by its YAML path and what to do. ``DeclaredProvider`` is the
provider the engine walks: its kinds' record models are built from the declared fields, its
requests from the declared templates.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import pathlib
import re
from collections.abc import Mapping
from typing import Annotated, Any

import yaml
from pydantic import (
    AliasPath,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    create_model,
)

from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers.declarative import spec as s
from ferryman_worker.providers.model import AuthStyle, ChangedSince, Kind, OAuth2, Option, Split
from ferryman_worker.providers.pagination import Reply, Request, dig
from ferryman_worker.providers.responses import ResponsePolicy

SCALARS: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "datetime": datetime.datetime,
    "date": datetime.date,
    "object": dict[str, Any],
}


def load_file(path: str | pathlib.Path) -> DeclaredProvider:
    """The provider a YAML file declares; ConfigurationError lists every problem."""
    file = pathlib.Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise ConfigurationError(
            f"{file}: cannot read the provider file ({exc.strerror})"
        ) from None
    return DeclaredProvider(parse(text, str(file)))


def from_definition(name: str, definition: Mapping[str, Any]) -> DeclaredProvider:
    """The provider a run's snapshot holds (built once per process and content);
    ConfigurationError when it does not check, or is not named ``name``."""
    text = json.dumps(definition, sort_keys=True)
    provider = _built(text)
    if provider.name != name:
        raise ConfigurationError(
            f"spec.source.provider: {name!r}, but the provider file declares"
            f" {provider.name!r} (metadata.name): make them the same"
        )
    return provider


@functools.lru_cache(maxsize=64)
def _built(text: str) -> DeclaredProvider:
    return DeclaredProvider(check(json.loads(text), "the run's provider definition"))


def parse(text: str, origin: str = "provider") -> s.ProviderDocument:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"{origin}: not YAML: {exc}") from None
    return check(data, origin)


def check(data: Any, origin: str = "provider") -> s.ProviderDocument:
    """The document ``data`` as the model, or ConfigurationError: one line per problem."""
    try:
        return s.ProviderDocument.model_validate(data)
    except ValidationError as exc:
        lines = [problem(error) for error in exc.errors()]
        raise ConfigurationError(
            f"{origin}: {len(lines)} problem(s):\n" + "\n".join(f"  {line}" for line in lines)
        ) from None


def problem(error: Any) -> str:
    """``spec.kinds.deals.pagination.offsetParam: <what> (<fix>)``."""
    loc = [str(part) for part in error["loc"]]
    # a discriminated union puts the chosen style in the path; YAML has no such level
    path = [
        p for i, p in enumerate(loc) if not (i and loc[i - 1] == "pagination" and p in s.STYLES)
    ]
    where = ".".join(path) or "(the document)"
    kind, message = error["type"], error["msg"]
    if kind == "extra_forbidden":
        return f"{where}: unknown field (remove it, or check its spelling and indentation)"
    if kind == "missing":
        return f"{where}: required (add it)"
    if kind == "union_tag_invalid" or kind == "union_tag_not_found":
        return f"{where}.style: must be one of {', '.join(s.STYLES)}"
    message = message.removeprefix("Value error, ")
    inner = re.match(r"^(kinds\.[\w.-]+): (.*)$", message, re.DOTALL)
    if inner:  # a check across kinds names the field deeper than where pydantic found it
        return f"{where}.{inner.group(1)}: {inner.group(2)}"
    return f"{where}: {message}"


def _record_model(name: str, kind: s.KindSpec) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for field, declared in kind.fields.items():
        fields[field] = _field(declared)
    model: type[BaseModel] = create_model(
        name.title().replace("_", ""),
        __config__=ConfigDict(extra="ignore", populate_by_name=True),
        **fields,
    )
    return model


def _field(declared: s.FieldSpec) -> tuple[Any, Any]:
    named = _source(declared.source)
    if declared.type == "array":
        item = SCALARS[declared.items]
        if declared.required:
            return list[item], Field(**named)  # type: ignore[valid-type]
        return list[item], Field(default_factory=list, **named)  # type: ignore[valid-type]
    base: Any = SCALARS[declared.type]
    if declared.type == "string" and declared.max_length is not None:
        base = Annotated[str, StringConstraints(max_length=declared.max_length)]
    if declared.required:
        return base, Field(**named)
    return base | None, Field(None, **named)


def _source(source: str) -> dict[str, Any]:
    """Where a field is read from: its own name, another (``alias``), or a dotted path into
    nested objects (``metadata.uid``)."""
    if "." in source:
        return {"validation_alias": AliasPath(*source.split("."))}
    return {"alias": source or None}


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


class DeclaredProvider:
    """A provider declared by a document (``spec.ProviderDocument``)."""

    def __init__(self, document: s.ProviderDocument) -> None:
        self.document = document
        body = document.spec
        self.name = document.metadata.name
        self.phases: tuple[tuple[str, ...], ...] = tuple(
            tuple(phase) for phase in body.phase_order()
        )
        self.auth = _auth(body.auth)
        self.options = {
            name: Option(option.type, option.default) for name, option in body.options.items()
        }
        self.specs = body.kinds
        self.kinds = {name: self._kind(name, kind) for name, kind in body.kinds.items()}

    def _kind(self, name: str, kind: s.KindSpec) -> Kind:
        return Kind(
            name,
            _record_model(name, kind),
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
