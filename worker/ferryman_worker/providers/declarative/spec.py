"""The declarative provider format: a YAML document, validated by these models (the JSON Schema
published in ``schemas/migrationprovider.schema.json`` and the reference in
``docs/provider-reference.md`` are generated from them).

Each pagination style is one model (a branch of ``Paging``): it declares its fields and builds
the runtime style it stands for (``build``); the style list and the reference's sections are read
from the union itself (``paging_models``, ``style_of``).
"""

from __future__ import annotations

import abc
import re
from typing import Annotated, Any, ClassVar, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from ferryman_worker.providers import pagination as styles

Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=63)]
Status = Annotated[int, Field(ge=100, le=599)]
Template = Annotated[str, Field(min_length=1, max_length=2048)]
"""A path or value with ``{parent.FIELD}`` (a tree kind's parent) or ``{record.FIELD}`` (a tree
child, for its body) in it."""

VERSIONS = ("datetime", "integer")
"""Types a version field may have."""

PLACEHOLDER = re.compile(r"\{(parent|record)\.([A-Za-z_][A-Za-z0-9_]*)\}")


class _Spec(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_attribute_docstrings=True,
        frozen=True,
    )


class OAuth2KeysSpec(_Spec):
    """Which keys of the run's credential (its Secret) hold the OAuth2 client's secrets."""

    client_id: str = "client_id"
    """The key holding the client id."""

    client_secret: str = "client_secret"
    """The key holding the client secret."""

    refresh_token: str = "refresh_token"
    """The key holding the first refresh token (grant refresh_token): ferryman keeps the
    rotated ones in PostgreSQL; a new value here starts from it again."""


class OAuth2Spec(_Spec):
    """An OAuth2 grant whose access token goes on each request as a bearer token."""

    grant: Literal["client_credentials", "refresh_token"]
    """client_credentials (the client's own token, fetched by each worker process) or
    refresh_token (from a user's authorization; refresh tokens may be single-use: one worker
    of the fleet refreshes at a time and the rotated token is kept before anyone uses it)."""

    token_url: Annotated[str, Field(min_length=1, max_length=2048)]
    """The token endpoint: an absolute http(s) URL, or a path (/oauth/token) on the host of the
    run's baseURL. Its host must be one the credential is bound to, like the API's."""

    scopes: list[Annotated[str, Field(pattern=r"^[\x21\x23-\x5b\x5d-\x7e]+$")]] = Field(
        default_factory=list
    )
    """Scopes asked for, e.g. [crm.read] (none: the server's default)."""

    client_auth: Literal["basic", "post"] = "basic"
    """How the client authenticates at the token endpoint: HTTP basic (the standard's default)
    or client_id and client_secret in the form (post)."""

    keys: OAuth2KeysSpec = Field(default_factory=OAuth2KeysSpec)
    """Which credential keys hold the client id, client secret and refresh token."""

    @model_validator(mode="after")
    def _token_url(self) -> OAuth2Spec:
        url = self.token_url
        if not (url.startswith(("https://", "http://")) or url.startswith("/")):
            raise ValueError(
                f"tokenUrl {url!r}: give an absolute http(s) URL, or a path starting with / on"
                " the run's baseURL host"
            )
        return self


class AuthSpec(_Spec):
    """How the credential goes on each request."""

    style: Literal["bearer", "header", "query", "basic", "oauth2", "none"] = "bearer"
    """bearer (Authorization: Bearer), header (an API key in header `name`), query (an API key
    in query parameter `name`), basic (HTTP basic from the Secret's username and password keys),
    oauth2 (a bearer token from the grant `oauth2` describes) or none (an API without
    authentication)."""

    name: str = ""
    """The header or query parameter holding the key (header, query)."""

    prefix: str = ""
    """Written before the key in the header, e.g. "Token " (header)."""

    oauth2: OAuth2Spec | None = None
    """The OAuth2 grant (style oauth2)."""

    @model_validator(mode="after")
    def _named(self) -> AuthSpec:
        if self.style in ("header", "query") and not self.name:
            raise ValueError(f"style {self.style} needs `name`: the header or parameter to use")
        if self.style == "oauth2" and self.oauth2 is None:
            raise ValueError(
                "style oauth2 needs `oauth2`: its grant and tokenUrl, e.g."
                " {grant: client_credentials, tokenUrl: /oauth/token}"
            )
        if self.style != "oauth2" and self.oauth2 is not None:
            raise ValueError("`oauth2` is for style oauth2: set `style: oauth2`, or drop it")
        if self.name and self.style not in ("header", "query"):
            raise ValueError(
                f"`name` is for styles header and query (the header or parameter holding the"
                f" key); style {self.style} does not use it: drop it, or set the style"
            )
        if self.prefix and self.style != "header":
            raise ValueError(
                f"`prefix` is for style header; style {self.style} does not use it: drop it"
            )
        return self

    def carrier(self) -> tuple[str, str] | None:
        """Where the credential goes (``("header", name)`` or ``("query", name)``, the header
        name lower-cased); None for style none."""
        if self.style == "none":
            return None
        if self.style in ("header", "query"):
            return self.style, self.name.lower() if self.style == "header" else self.name
        return "header", "authorization"


class ResponsesSpec(_Spec):
    """What the source's statuses mean. Unlisted: 2xx ok, 5xx retry, other 4xx and 3xx fail."""

    retry: list[Status] = Field(default_factory=lambda: [408])
    """Statuses to retry with backoff (every 5xx is retried too)."""

    gone: list[Status] = Field(default_factory=lambda: [404, 410])
    """Statuses saying the record no longer exists: a tree child recorded as a row error."""

    rate_limited: list[Status] = Field(default_factory=lambda: [429])
    """Statuses saying to slow down: every worker pauses this credential's budget."""

    fail: list[Status] = Field(default_factory=list)
    """Statuses that fail the task at once (with the source's message, redacted)."""

    reset: str = ""
    """A header of the source's own saying when the limit resets (seconds ahead, or a Unix
    time), read when the standard ones (Retry-After as seconds or an HTTP date, RateLimit,
    RateLimit-Reset, X-RateLimit-Reset) are absent."""

    backoff_seconds: Annotated[float, Field(gt=0, le=3600)] = 1.0
    """The first wait after a rate-limited answer that says nothing (PocketBase sends no
    Retry-After), doubling while it keeps saying nothing."""


class RequestSpec(_Spec):
    """One HTTP request. Path, query values and headers may use {parent.FIELD} and
    {record.FIELD}."""

    method: Literal["GET", "POST"] = "GET"
    """GET, or POST (a search endpoint taking a JSON body)."""

    path: Template
    """Relative to the run's baseURL, e.g. /v1/deals/{parent.id}/messages."""

    query: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Query parameters every page carries, e.g. {sort: id}."""

    headers: dict[str, str] = Field(default_factory=dict)
    """Headers every call carries, e.g. {API-Version: "2026-01"} (never a credential)."""

    body: dict[str, Any] | None = None
    """JSON body (POST), e.g. a search filter."""

    cost: Annotated[int, Field(ge=1, le=10_000)] = 1
    """Rate-limit tokens one call costs."""

    @model_validator(mode="after")
    def _body_with_post(self) -> RequestSpec:
        if self.body is not None and self.method != "POST":
            raise ValueError(
                f"`body` goes with method POST (a {self.method} sends none): set `method: POST`,"
                " or move its values into `query`"
            )
        return self


class StopSpec(_Spec):
    """When a listing ends, besides an empty page (which always ends it)."""

    total: str = ""
    """Body path of the listing's record count, e.g. totalItems."""

    total_header: str = ""
    """Header with the listing's record count, e.g. X-Total-Count."""

    remaining: str = ""
    """Body path of the number of records after this page, e.g. metadata.remainingItemCount
    (the kube-apiserver's): the listing's count is then what its walk listed up to the page's
    end plus it. A page without it states no count (the last page, a filtered listing)."""

    more: str = ""
    """Body path of a has-more flag whose false ends the listing, e.g. pagination.more."""

    short_page: bool | None = None
    """A page with fewer records than asked for is the last; default: yes for offset, page
    number and keyset, no otherwise."""

    max_pages: Annotated[int, Field(ge=0)] = 0
    """At most this many pages: the listing ends there. 0: no declared maximum, and a listing
    past 100,000 pages fails its task, naming this field."""


class PagingSpec(_Spec):
    """The fields every pagination style has. A style is a subclass with a ``style`` literal
    (its name in YAML) and ``build``, made a branch of ``Paging``."""

    size_param: str = ""
    """Query parameter asking for the page size ("" : the API has none)."""

    max_page_size: Annotated[int, Field(ge=1, le=100_000)] = 500
    """The largest page the API serves: bounds the run's pageSize."""

    stop: StopSpec = Field(default_factory=StopSpec)
    """When the listing ends, besides an empty page."""

    ends_short: ClassVar[bool] = False
    """Whether a short page ends the listing when ``stop.shortPage`` does not say."""

    @abc.abstractmethod
    def build(self) -> styles.Pagination:
        """The runtime style this declaration stands for."""

    def stops(self) -> styles.Stops:
        """The declared stop rules, ``shortPage`` defaulted by the style."""
        stop = self.stop
        short = self.ends_short if stop.short_page is None else stop.short_page
        return styles.Stops(
            stop.total, stop.total_header, stop.more, short, stop.max_pages, stop.remaining
        )


class OffsetPaging(PagingSpec):
    """offset/limit: pages known ahead, walked in stripes."""

    style: Literal["offset"]
    """The pagination style."""

    offset_param: str = "offset"
    """Query parameter of the first record's offset."""

    size_param: str = "limit"
    """Query parameter of the page size."""

    ends_short: ClassVar[bool] = True

    def build(self) -> styles.Offset:
        return styles.Offset(self.stops(), self.size_param, offset=self.offset_param)


class PageNumberPaging(PagingSpec):
    """page/size: pages known ahead, walked in stripes."""

    style: Literal["page_number"]
    """The pagination style."""

    page_param: str = "page"
    """Query parameter of the page number."""

    size_param: str = "per_page"
    """Query parameter of the page size."""

    first_page: int = 1
    """The first page's number."""

    total_pages: str = ""
    """Body path of the number of pages, e.g. totalPages."""

    ends_short: ClassVar[bool] = True

    def build(self) -> styles.PageNumber:
        return styles.PageNumber(
            self.stops(), self.size_param, self.page_param, first_page=self.first_page,
            total_pages=self.total_pages,
        )  # fmt: skip


class NextUrlPaging(PagingSpec):
    """The body names the next page's URL."""

    style: Literal["next_url"]
    """The pagination style."""

    next: str = "next"
    """Body path of the next page's URL."""

    def build(self) -> styles.NextUrl:
        return styles.NextUrl(self.stops(), self.size_param, next_url=self.next)


class LinkHeaderPaging(PagingSpec):
    """An RFC 8288 Link header names the next page."""

    style: Literal["link_header"]
    """The pagination style."""

    rel: str = "next"
    """The link relation naming the next page."""

    def build(self) -> styles.LinkHeader:
        return styles.LinkHeader(self.stops(), self.size_param, rel=self.rel)


class CursorPaging(PagingSpec):
    """An opaque cursor from the body (or a header), sent back in the query, body or a
    header."""

    style: Literal["cursor"]
    """The pagination style."""

    param: str = "cursor"
    """Where the cursor is sent back: a query parameter, body field or header name."""

    next: str = "next_cursor"
    """Body path of the next cursor."""

    next_header: str = ""
    """Header with the next cursor (instead of the body)."""

    send: Literal["query", "body", "header"] = "query"
    """Send the cursor back as a query parameter, a JSON body field or a header."""

    def build(self) -> styles.Cursor:
        return styles.Cursor(
            self.stops(), self.size_param, self.param, self.next, self.next_header, self.send
        )


class KeysetPaging(PagingSpec):
    """The next page starts after the last record's sort key (sort the listing by it)."""

    style: Literal["keyset"]
    """The pagination style."""

    key: str = "id"
    """The records' field the listing is sorted by."""

    param: str
    """Query parameter carrying the bound, e.g. filter or id_gt."""

    template: str = "{key}"
    """The parameter's value with {key} for the last key, e.g. "id>'{key}'"."""

    ends_short: ClassVar[bool] = True

    def build(self) -> styles.Keyset:
        return styles.Keyset(self.stops(), self.size_param, self.key, self.param, self.template)


class SinglePaging(PagingSpec):
    """One page: a detail, or a listing the API does not page."""

    style: Literal["single"]
    """The pagination style."""

    def build(self) -> styles.Single:
        return styles.Single(self.stops(), self.size_param)


Paging = Annotated[
    OffsetPaging
    | PageNumberPaging
    | NextUrlPaging
    | LinkHeaderPaging
    | CursorPaging
    | KeysetPaging
    | SinglePaging,
    Field(discriminator="style"),
]
"""A kind's pagination: one branch per style, chosen by ``style``. A new style is a
``PagingSpec`` subclass added here; the style list and the reference follow from the union."""


def paging_models(union: Any = Paging) -> tuple[type[PagingSpec], ...]:
    """The styles' models of a pagination union (``Paging``), in its order."""
    members = get_args(union)[0] if get_origin(union) is Annotated else union
    return tuple(get_args(members))


def style_of(model: type[PagingSpec]) -> str:
    """The name a style's model is chosen by in YAML: its ``style`` literal."""
    (style,) = get_args(model.model_fields["style"].annotation)
    return str(style)


def styles_of(union: Any = Paging) -> tuple[str, ...]:
    """The style names of a pagination union, in its order."""
    return tuple(style_of(model) for model in paging_models(union))


STYLES: tuple[str, ...] = styles_of()
"""The pagination styles a provider may declare."""


class RangesSplit(_Spec):
    """Parts [bounds[i], bounds[i+1]) sent as two query parameters: id ranges, time windows."""

    low: str
    """Query parameter of a part's lower bound (inclusive)."""

    high: str
    """Query parameter of a part's upper bound (exclusive)."""

    bounds: Annotated[list[str | int | float], Field(min_length=2)]
    """Ascending bounds: n bounds make n - 1 parts."""


class ValuesSplit(_Spec):
    """One part per value of a query parameter (a status, a region)."""

    param: str
    """The query parameter."""

    values: Annotated[list[str | int | float | bool], Field(min_length=1)]
    """Its values: one part each."""


class SplitSpec(_Spec):
    """Parts of a cursor-paged listing walked side by side; give exactly one."""

    ranges: RangesSplit | None = None
    """Id ranges or time windows."""

    values: ValuesSplit | None = None
    """Partition values."""

    @model_validator(mode="after")
    def _one(self) -> SplitSpec:
        if (self.ranges is None) == (self.values is None):
            raise ValueError("give exactly one of `ranges` and `values`")
        return self


class BodySpec(_Spec):
    """A tree child's body, fetched one by one."""

    request: RequestSpec
    """The body's request; {record.FIELD} fills in the listed child's fields."""

    field: str = ""
    """Body path of the value to keep ("" : the whole answer)."""

    into: str = "body"
    """The record field that receives it."""


class ChangedSinceSpec(_Spec):
    """How a delta run asks this kind's listing for the records changed since the workspace's
    last successful run, and which field holds a record's version."""

    param: Annotated[str, Field(min_length=1, max_length=255)]
    """Query parameter carrying the filter, e.g. updated_since, or filter (PocketBase)."""

    value: Annotated[str, Field(min_length=7, max_length=2048, pattern=r"\{since\}")] = "{since}"
    """The parameter's value with {since} for the time, e.g. "updated >= '{since}'"."""

    format: Literal["iso8601", "sql", "unix", "unix_ms"] = "iso8601"
    """How {since} is written: iso8601 (2026-01-31T09:30:00Z), sql (2026-01-31
    09:30:00.000Z), unix (seconds) or unix_ms (milliseconds); to the second, rounded down."""

    version: str = ""
    """The record field holding its version (a datetime or integer field that grows with each
    change, e.g. updated_at): a record older than the imported one is never applied. "": a
    hash of the record is its version (any difference is applied)."""

    deleted: str = ""
    """A record field whose true value marks a deleted record in the changed-since listing (a
    tombstone, e.g. deleted or archived): a delta records the deletion in the ledger
    (ferryman_ledger.source_deleted_at) and leaves the row as it is. "": the listing reports
    no deletions."""


FieldType = Literal["string", "integer", "number", "boolean", "datetime", "date", "object"]


class FieldSpec(_Spec):
    """One field of a record: a record whose field does not fit is malformed (recorded with its
    reason, not written)."""

    type: Literal[
        "string", "integer", "number", "boolean", "datetime", "date", "object", "array"
    ] = "string"
    """string, integer, number, boolean, datetime, date, object or array."""

    items: FieldType = "string"
    """The type of an array's items."""

    required: bool = False
    """A record without it (or with null) is malformed; an absent optional field is null (an
    absent array is empty)."""

    max_length: Annotated[int, Field(ge=1)] | None = None
    """Longest string allowed."""

    source: str = ""
    """The field's name in the source's record, when it differs (e.g. from), or a dotted path
    into its nested objects (e.g. metadata.uid)."""


class KindSpec(_Spec):
    """One collection of the source."""

    walk: Literal["pages", "tree"] = "pages"
    """pages: a listing; tree: listed per `parent` record, children's bodies fetched."""

    parent: Name | None = None
    """The kind whose records are a tree kind's parents (request paths use {parent.id})."""

    request: RequestSpec
    """The first page's request (the pagination adds its parameters)."""

    records: str = ""
    """Body path of the page's records ("" : the body is the list). A list of ids (strings or
    whole numbers, e.g. Matrix's joined_rooms) gives records holding only the kind's id field."""

    pagination: Paging = Field(default_factory=lambda: SinglePaging(style="single"))
    """How pages follow each other and when the listing ends (default: one page)."""

    split: SplitSpec | None = None
    """Parts walked side by side (for a listing reached only by a cursor)."""

    body: BodySpec | None = None
    """A tree child's body, fetched one by one (absent: the listing carries all of it)."""

    responses: ResponsesSpec | None = None
    """This kind's response policy (default: the provider's)."""

    id: str = "id"
    """The field holding the record's source id."""

    fields: Annotated[dict[str, FieldSpec], Field(min_length=1)]
    """The record's fields: what a well-formed record is."""

    verify_query: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Query parameters `ferryman verify` adds to the listing so the source sends each record's
    id alone, e.g. {fields: id} (PocketBase) or {$select: id} (OData): the listing's pages are
    then cheaper to send and to read. Keep every field the pagination reads (a keyset's key)
    and the kind's id; the pages must follow each other as without it."""

    changed_since: ChangedSinceSpec | None = None
    """How a delta run lists only the records changed since a time (absent: a delta lists the
    kind whole, and the ledger skips the records whose hash is unchanged)."""

    writer: str = ""
    """An SQL function writing a window of this kind (a provider shipping its own tables);
    without one, the run's mapping says where the kind goes, else its records land in the
    landing table ferryman_landing as jsonb."""

    @model_validator(mode="after")
    def _consistent(self) -> KindSpec:
        if self.walk == "tree" and self.parent is None:
            raise ValueError("a tree kind needs `parent`: the kind whose records it lists from")
        if self.walk == "pages" and self.parent is not None:
            raise ValueError("`parent` is for tree kinds: set `walk: tree`, or drop `parent`")
        if self.body is not None and self.walk != "tree":
            raise ValueError("`body` is for tree kinds: their children's bodies")
        if self.id not in self.fields:
            raise ValueError(f"the id field {self.id!r} is not among `fields`: declare it")
        into = self.body.into if self.body else ""
        if into and into not in self.fields and all(f.source != into for f in self.fields.values()):
            raise ValueError(
                f"body.into: {into!r} is not among `fields` (a record keeps only its declared"
                f" fields): declare it, e.g. {into}: {{type: string}}"
            )
        if getattr(self.pagination, "send", "query") == "body" and self.request.method != "POST":
            raise ValueError(
                "pagination.send: body puts the cursor in the JSON body, which only a POST"
                " sends: set `request.method: POST` (a search endpoint), or `send: query`"
            )
        clash = _split_clash(self)
        if clash:
            raise ValueError(
                f"split: {clash}, which replaces the part's value: each part would list the"
                " whole kind; split on another parameter (or, for one filter parameter, choose a"
                " pagination that does not use it)"
            )
        version = self.changed_since.version if self.changed_since else ""
        if version and (version not in self.fields or self.fields[version].type not in VERSIONS):
            raise ValueError(
                f"changedSince.version: {version!r} must be a declared field of type datetime"
                " or integer (the record's updated-at or revision); declare it, or leave"
                " version out (a hash of the record is then its version)"
            )
        return self


def _split_clash(kind: KindSpec) -> str:
    """A query parameter both the kind's split and its pagination (or changedSince) set: the
    part's value would be replaced; "" when none."""
    if kind.split is None:
        return ""
    ranges, values = kind.split.ranges, kind.split.values
    parts = {ranges.low, ranges.high} if ranges else {values.param} if values else set()
    paging = kind.pagination
    sets = {"pagination.sizeParam": paging.size_param}
    for field in ("offset_param", "page_param", "param"):
        if hasattr(paging, field) and getattr(paging, "send", "query") == "query":
            sets[f"pagination.{to_camel(field)}"] = getattr(paging, field)
    if kind.changed_since is not None:
        sets["changedSince.param"] = kind.changed_since.param
    for where, param in sets.items():
        if param in parts:
            return f"its parameter {param!r} is also {where}"
    return ""


def _credential_clash(auth: AuthSpec, name: str, kind: KindSpec) -> str:
    """A kind's request (or its children's body request) setting the header or query parameter
    the credential goes in; "" when none."""
    carrier = auth.carrier()
    if carrier is None:
        return ""
    place, key = carrier
    requests = {
        "request": kind.request,
        **({"body.request": kind.body.request} if kind.body else {}),
    }
    for where, request in requests.items():
        given = request.headers if place == "header" else request.query
        for field in given:
            if (field.lower() if place == "header" else field) == key:
                return (
                    f"kinds.{name}.{where}.{'headers' if place == 'header' else 'query'}."
                    f"{field}: spec.auth ({auth.style}) puts the credential there on every"
                    " request: drop it (a credential never goes in a provider)"
                )
    return ""


class OptionSpec(_Spec):
    """An option a run gives in spec.source.options (as text); requests use it as
    {options.NAME}."""

    type: Literal["string", "integer", "number", "boolean"] = "string"
    default: str | None = None
    """Its value when the run gives none; absent: the run must give it."""

    description: str = ""
    """What it is, for the people writing runs."""


class ProviderSpecBody(_Spec):
    """A provider: its kinds, in phase order, and how the source is spoken to."""

    auth: AuthSpec = Field(default_factory=AuthSpec)
    """How the credential goes on each request."""

    responses: ResponsesSpec = Field(default_factory=ResponsesSpec)
    """What the source's statuses mean (a kind may override it)."""

    options: dict[Name, OptionSpec] = Field(default_factory=dict)
    """The options a run may give in spec.source.options (e.g. an API version)."""

    phases: list[list[Name]] | None = None
    """Kinds in the order they are imported, those of a phase side by side; default: each kind
    its own phase, in the order written."""

    kinds: Annotated[dict[Name, KindSpec], Field(min_length=1)]
    """The source's collections, by name (the names runs list in spec.kinds)."""

    @model_validator(mode="after")
    def _phases(self) -> ProviderSpecBody:
        order = self.phase_order()
        placed = [kind for phase in order for kind in phase]
        unknown = sorted(set(placed) - set(self.kinds))
        if unknown:
            raise ValueError(f"phases name kinds that are not declared: {unknown}")
        missing = sorted(set(self.kinds) - set(placed))
        if missing:
            raise ValueError(f"phases leave out kinds: {missing}; put each kind in one phase")
        if len(placed) != len(set(placed)):
            raise ValueError("phases name a kind twice: put each kind in one phase")
        for name, kind in self.kinds.items():
            clash = _credential_clash(self.auth, name, kind)
            if clash:
                raise ValueError(clash)
        where = {kind: n for n, phase in enumerate(order) for kind in phase}
        for name, kind in self.kinds.items():
            if kind.parent is None:
                continue
            if kind.parent not in self.kinds:
                raise ValueError(f"kinds.{name}.parent: {kind.parent!r} is not a declared kind")
            if where[kind.parent] >= where[name]:
                raise ValueError(
                    f"kinds.{name}.parent: {kind.parent!r} must be in an earlier phase than"
                    f" {name!r} (its records are listed per {kind.parent} record)"
                )
        return self

    def phase_order(self) -> list[list[str]]:
        return self.phases if self.phases is not None else [[kind] for kind in self.kinds]


class ProviderMeta(_Spec):
    model_config = ConfigDict(extra="ignore")

    name: Name
    """The provider's name (runs name it in spec.source.provider)."""


class ProviderDocument(_Spec):
    """A declarative provider file (the same shape as a MigrationProvider resource)."""

    api_version: Literal["ferryman.dev/v1alpha1"] = "ferryman.dev/v1alpha1"
    """The format's version."""

    kind: Literal["MigrationProvider"] = "MigrationProvider"
    """What the document is."""

    metadata: ProviderMeta
    """Its name (other keys are ignored)."""

    spec: ProviderSpecBody
    """The provider itself."""
