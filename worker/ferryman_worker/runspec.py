"""The MigrationRun resource: what a user asks for, as one tree of pydantic models.

This module owns the shape of a MigrationRun (``apiVersion: ferryman.dev/v1alpha1``): its spec, its
status, the rules a spec must follow, and the one translation of validation errors into messages a
user can act on (``spec.options.pageSize: must be at most 500 (the source's largest page); got
1000``). The same models serve ``ferryman run run.yaml`` (no Kubernetes), the operator, and the
generation of the CRD in ``crds/``, so a file one of them accepts the others accept too: YAML keys
are camelCase only, unknown keys are errors, every field carries its description.

It must not do I/O beyond reading the YAML file it is handed: no database, no Kubernetes client, no
network, no provider look-up (whether a provider has the kinds asked for is checked where providers
are loaded). Credentials are never part of a run: a spec names the Secret that holds them, and no
message or exception this module produces carries a value that could be one.
"""

from __future__ import annotations

import difflib
import enum
import os
import pathlib
import types
import urllib.parse
from collections.abc import Hashable, Mapping, Sequence
from typing import Annotated, Any, Final, Literal, Self, Union, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails, PydanticCustomError

from ferryman_worker.errors import RunSpecError

API_VERSION: Final = "ferryman.dev/v1alpha1"
KIND: Final = "MigrationRun"

DNS_SUBDOMAIN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
IDENTIFIER: Final = r"^[a-z][a-z0-9_]*$"
SECRET_KEY: Final = r"^[-._a-zA-Z0-9]+$"
HTTP_URL: Final = r"^https?://"
CONDITION_TYPE: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON: Final = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"

SECRET_ADVICE: Final = (
    "put them in a Secret and reference it with spec.source.credentialsSecretRef {name, key}"
)
INLINE_CREDENTIALS: Final = "credentials must not be inline; " + SECRET_ADVICE
_SECRET_KEYS: Final = frozenset(
    {"token", "apikey", "apitoken", "accesstoken", "bearertoken", "password", "secret"}
    | {"clientsecret", "credentials"}
)

DnsSubdomain = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)]
DnsLabel = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL)]
Identifier = Annotated[str, Field(min_length=1, max_length=63, pattern=IDENTIFIER)]
Count = Annotated[int, Field(ge=0, strict=True)]


def _check_base_url(url: str) -> str:
    """Refuse what is not a plain http(s) base URL, without ever repeating the URL."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        raise PydanticCustomError("url_parsing", "is not a valid URL") from None
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise PydanticCustomError(
            "inline_credentials", "must not carry credentials (user:password@); " + SECRET_ADVICE
        )
    if parts.query or parts.fragment:
        raise PydanticCustomError(
            "url_query",
            "must not have a query or fragment "
            "(credentials belong in spec.source.credentialsSecretRef)",
        )
    if not parts.hostname or any(char.isspace() for char in url):
        raise PydanticCustomError(
            "url_host", "must be an http(s) URL with a host, e.g. https://api.example.com"
        )
    return url


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_attribute_docstrings=True,
        hide_input_in_errors=True,
    )


class ObjectMeta(_Model):
    """Kubernetes object metadata; only name and namespace matter, other keys are ignored."""

    model_config = ConfigDict(extra="ignore")

    name: DnsSubdomain
    """Name of the run, unique in its namespace (a DNS-1123 subdomain)."""

    namespace: DnsLabel = "default"
    """Namespace of the run; its credentials Secret lives in the same namespace."""


class SecretKeyRef(_Model):
    """A key of a Secret in the run's namespace."""

    name: DnsSubdomain
    """Name of the Secret, in the MigrationRun's namespace."""

    key: Annotated[str, Field(min_length=1, max_length=253, pattern=SECRET_KEY)] = "token"
    """Key of the Secret whose value is the source credential."""


class RateLimitSpec(_Model):
    """The source's token budget, shared by every worker that uses this credential."""

    tokens_per_second: Annotated[float, Field(gt=0, strict=True, allow_inf_nan=False)]
    """Tokens added back to the budget per second."""

    burst: Annotated[int, Field(ge=1, strict=True)]
    """Tokens in the budget when it is full; a listing costs about 20, a message body 1."""


class SourceSpec(_Model):
    """Where the data comes from; credentials only ever come from a Secret."""

    provider: Identifier
    """Provider plug-in that talks to the source, e.g. democrm."""

    base_url: Annotated[
        str,
        Field(alias="baseURL", min_length=1, max_length=2048, pattern=HTTP_URL),
        AfterValidator(_check_base_url),
    ]
    """Base URL of the source API (http or https), without credentials, query or fragment."""

    credentials_secret_ref: SecretKeyRef
    """Secret key holding the source credential (never put the credential itself here)."""

    rate_limit: RateLimitSpec | None = None
    """Token budget of this credential; absent: the provider's default."""


class RunOptions(_Model):
    """How the run is cut into work; the defaults suit most sources."""

    stripes: Annotated[int, Field(ge=1, le=64, strict=True)] = 4
    """Page-walking tasks per kind that run side by side, each walking every S-th page."""

    page_size: Annotated[int, Field(ge=1, le=500, strict=True)] = 500
    """Rows per listing call; a listing costs the same whatever its size, so the largest is best."""

    window_size: Annotated[int, Field(ge=1, le=60, strict=True)] = 25
    """Rows per transaction; each row is one savepoint, and PostgreSQL caches 64 per transaction."""

    max_in_flight: Annotated[int, Field(ge=1, le=1000, strict=True)] | None = None
    """Tasks of this run running or queued at once; absent: 2 x the migrations lane's width."""

    fetch_threads: Annotated[int, Field(ge=1, le=16, strict=True)] = 4
    """Threads that fetch message bodies for one email task (they hold no database connection)."""

    deals_per_task: Annotated[int, Field(ge=1, le=1000, strict=True)] = 10
    """Deals whose messages one email task imports."""


class MigrationRunSpec(_Model):
    """What to migrate, from where, and how."""

    workspace: DnsLabel
    """Destination workspace; at most one run per workspace is live at a time."""

    source: SourceSpec
    """The source API and the Secret holding its credential."""

    kinds: Annotated[
        list[Identifier], Field(json_schema_extra={"x-kubernetes-list-type": "set"})
    ] = Field(default_factory=list)
    """Kinds to import, e.g. [organizations, people]; empty: every kind the provider has."""

    options: RunOptions = Field(default_factory=RunOptions)
    """Tuning: stripes, page and window sizes, in-flight limit, fetch threads."""

    suspend: Annotated[bool, Field(strict=True)] = False
    """True pauses the run at the next window; false resumes it."""

    ttl_seconds_after_finished: Annotated[int, Field(ge=0, strict=True)] | None = None
    """Seconds after which a finished run is deleted; absent: kept until deleted by hand."""

    @field_validator("kinds")
    @classmethod
    def _each_kind_once(cls, kinds: list[str]) -> list[str]:
        first: dict[str, int] = {}
        for index, kind in enumerate(kinds):
            if kind in first:
                raise PydanticCustomError(
                    "duplicate_kind",
                    "'{kind}' is listed twice (first at index {first}); list each kind once",
                    {"at": index, "kind": kind, "first": first[kind]},
                )
            first[kind] = index
        return kinds

    def effective_max_in_flight(self, lane_width: int) -> int:
        """Tasks this run may keep running or queued: ``maxInFlight``, or 2 x ``lane_width``."""
        if lane_width < 1:
            raise ValueError(f"lane_width must be at least 1; got {lane_width}")
        limit = self.options.max_in_flight
        return limit if limit is not None else 2 * lane_width


class RunState(enum.StrEnum):
    """Where a run is in its life."""

    PENDING = "Pending"
    QUEUED = "Queued"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"

    @property
    def finished(self) -> bool:
        """True for the terminal states: Succeeded, Failed, Cancelled."""
        return self in (RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED)


class Condition(_Model):
    """One aspect of the run's state, in the shape of Kubernetes' metav1.Condition."""

    type: Annotated[str, Field(min_length=1, max_length=316, pattern=CONDITION_TYPE)]
    """Kind of condition, CamelCase, e.g. Admitted."""

    status: Literal["True", "False", "Unknown"]
    """Whether the condition holds: True, False or Unknown."""

    reason: Annotated[str, Field(min_length=1, max_length=1024, pattern=CONDITION_REASON)]
    """Why, as a CamelCase word, e.g. WorkspaceBusy."""

    message: Annotated[str, Field(max_length=32768)] = ""
    """Why, for humans."""

    last_transition_time: AwareDatetime
    """When the status last changed."""

    observed_generation: Count | None = None
    """The metadata.generation this condition was computed from."""


class MigrationRunStatus(_Model):
    """What the operator last saw of the run; written by the operator only."""

    state: RunState | None = None
    """Pending, Queued, Running, Succeeded, Failed or Cancelled."""

    phase: str | None = None
    """The migration phase running now, e.g. organizations."""

    tasks_done: Count = 0
    """Tasks finished."""

    tasks_total: Count = 0
    """Tasks created so far (it grows as pages are discovered)."""

    tasks_summary: str | None = None
    """tasksDone/tasksTotal, e.g. 12/40, for the TASKS column; filled in when absent."""

    rows_written: Count = 0
    """Source rows written to the destination."""

    rows_skipped: Count = 0
    """Malformed source rows skipped and recorded."""

    rows_failed: Count = 0
    """Source rows that could not be written."""

    started_at: AwareDatetime | None = None
    """When the run started working."""

    finished_at: AwareDatetime | None = None
    """When the run reached Succeeded, Failed or Cancelled."""

    observed_generation: Count | None = None
    """The metadata.generation this status was computed from."""

    conditions: Annotated[
        list[Condition],
        Field(
            json_schema_extra={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            }
        ),
    ] = Field(default_factory=list)
    """Conditions of the run, at most one per type."""

    @field_validator("conditions")
    @classmethod
    def _one_condition_per_type(cls, conditions: list[Condition]) -> list[Condition]:
        seen: set[str] = set()
        for index, condition in enumerate(conditions):
            if condition.type in seen:
                raise PydanticCustomError(
                    "duplicate_condition",
                    "a condition of type '{type}' is already listed; keep one per type",
                    {"at": index, "type": condition.type},
                )
            seen.add(condition.type)
        return conditions

    @model_validator(mode="after")
    def _summarize_tasks(self) -> Self:
        if self.tasks_summary is None:
            self.tasks_summary = f"{self.tasks_done}/{self.tasks_total}"
        return self


class MigrationRun(_Model):
    """A migration of one workspace's data from a source API into PostgreSQL."""

    api_version: Literal["ferryman.dev/v1alpha1"]
    """Always ferryman.dev/v1alpha1."""

    kind: Literal["MigrationRun"]
    """Always MigrationRun."""

    metadata: ObjectMeta
    """Name and namespace of the run."""

    spec: MigrationRunSpec
    """What to migrate, from where, and how."""

    status: MigrationRunStatus | None = None
    """Written by the operator; ignored when a run is loaded."""


_ROOTS: Final[tuple[type[BaseModel], ...]] = (
    MigrationRun,
    ObjectMeta,
    MigrationRunSpec,
    SourceSpec,
    SecretKeyRef,
    RateLimitSpec,
    RunOptions,
    MigrationRunStatus,
    Condition,
)


# --- loading ------------------------------------------------------------------------------------


def load_run_file(path: str | os.PathLike[str]) -> MigrationRun:
    """Read and validate a MigrationRun YAML file; :class:`RunSpecError` says what is wrong."""
    source = os.fspath(path)
    try:
        text = pathlib.Path(source).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise RunSpecError(f"{source}: is not UTF-8 text") from None
    except OSError as exc:
        raise RunSpecError(f"{source}: cannot be read: {exc.strerror or exc}") from None
    return load_run(text, source=source)


def load_run(text: str, *, source: str = "<input>") -> MigrationRun:
    """Validate the MigrationRun in YAML ``text``; ``source`` names it in messages.

    Of several documents, the one MigrationRun is taken. A ``status`` block is ignored.
    """
    return parse_run(_one_document(text, source), source=source)


def parse_run(document: object, *, source: str = "<input>") -> MigrationRun:
    """Validate a MigrationRun already parsed (from YAML or the Kubernetes API).

    Keys are matched by their camelCase names only, as Kubernetes does; ``status`` is ignored, so a
    ``kubectl get -o yaml`` round-trips. Raises :class:`RunSpecError` listing every problem.
    """
    if not isinstance(document, Mapping):
        raise RunSpecError(
            f"{source}: expected a mapping with apiVersion, kind, metadata and spec; "
            f"got {_kind_of(document)}"
        )
    body = {key: value for key, value in document.items() if key != "status"}
    try:
        return MigrationRun.model_validate(body, by_alias=True, by_name=False)
    except ValidationError as exc:
        # No chaining: the pydantic error holds the inputs, and an input may be a secret.
        problems = explain(exc)
    count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    lines = "".join(f"\n  {problem}" for problem in problems)
    raise RunSpecError(f"{source}: not a valid MigrationRun ({count}):{lines}", problems)


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if (key_node.tag, key_node.value) in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key '{key_node.value}' is given twice", key_node.start_mark
                    )
                seen.add((key_node.tag, key_node.value))
        return super().construct_mapping(node, deep)


def _one_document(text: str, source: str) -> object:
    try:
        documents = [
            (number, document)
            for number, document in enumerate(yaml.load_all(text, Loader=_Loader), 1)
            if document is not None
        ]
    except yaml.YAMLError as exc:
        # Only the problem and its position: PyYAML's own message quotes the line, maybe a secret
        # (and the error is not kept as the context of ours, for the same reason).
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        failure = f"{source}: not valid YAML: {where}{problem}"
    else:
        return _pick_run(documents, source)
    raise RunSpecError(failure)


def _pick_run(documents: list[tuple[int, Any]], source: str) -> object:
    if not documents:
        raise RunSpecError(f"{source}: is empty; expected a MigrationRun document")
    if len(documents) == 1:
        return documents[0][1]
    runs = [
        (n, doc) for n, doc in documents if isinstance(doc, Mapping) and doc.get("kind") == KIND
    ]
    if len(runs) == 1:
        return runs[0][1]
    if runs:
        numbers = ", ".join(str(number) for number, _ in runs)
        raise RunSpecError(
            f"{source}: holds {len(runs)} MigrationRun documents (documents {numbers}); "
            "put one run in each file"
        )
    raise RunSpecError(f"{source}: holds {len(documents)} YAML documents and none has kind: {KIND}")


# --- error messages -----------------------------------------------------------------------------

_PATTERNS: Final[dict[str, tuple[str, bool]]] = {
    # pattern: (what it means, whether the offending value may be repeated)
    DNS_SUBDOMAIN: (
        "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', "
        "starting and ending with a letter or digit",
        True,
    ),
    DNS_LABEL: (
        "lowercase letters, digits and '-', starting and ending with a letter or digit",
        True,
    ),
    IDENTIFIER: ("a lowercase identifier: a letter, then lowercase letters, digits or '_'", True),
    SECRET_KEY: ("a Secret key: letters, digits, '-', '_' or '.'", True),
    HTTP_URL: ("an http:// or https:// URL", False),
    CONDITION_TYPE: ("a CamelCase condition type, e.g. Admitted", True),
    CONDITION_REASON: ("a CamelCase reason, e.g. WorkspaceBusy", True),
}
_AT_MOST_WHY: Final = {
    "spec.options.pageSize": "the source's largest page",
    "spec.options.windowSize": "each row is a savepoint and PostgreSQL caches 64 per transaction",
}
_BOUNDS: Final = {
    "greater_than_equal": ("at least", "ge"),
    "greater_than": ("greater than", "gt"),
    "less_than_equal": ("at most", "le"),
    "less_than": ("less than", "lt"),
}
_EXPECTED: Final = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dict_type": "a mapping",
    "list_type": "a list",
    "datetime_type": "a date-time",
    "datetime_parsing": "an RFC 3339 date-time, e.g. 2026-01-31T12:00:00Z",
    "datetime_from_date_parsing": "an RFC 3339 date-time, e.g. 2026-01-31T12:00:00Z",
    "timezone_aware": "a date-time with a time zone, e.g. 2026-01-31T12:00:00Z",
}


def explain(exc: ValidationError) -> tuple[str, ...]:
    """Every problem of a validation error of one of this module's models, as ``path: fix``.

    For the operator, which validates a status or a spec it already holds; never quotes a secret.
    """
    root = next((m for m in _ROOTS if m.__name__ == exc.title), MigrationRun)
    return tuple(_problem(error, root) for error in exc.errors(include_url=False))


def _problem(error: ErrorDetails, root: type[BaseModel]) -> str:
    loc: list[str | int] = list(error["loc"])
    at = error.get("ctx", {}).get("at")
    if isinstance(at, str | int):
        loc.append(at)
    return f"{_dotted(loc)}: {_message(error, loc, root)}"


def _dotted(loc: Sequence[str | int]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else part
    return path or "(document)"


def _message(error: ErrorDetails, loc: Sequence[str | int], root: type[BaseModel]) -> str:
    kind, ctx, value = error["type"], error.get("ctx", {}), error["input"]
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return _unknown_field(loc, root)
    if kind in _BOUNDS:
        word, key = _BOUNDS[kind]
        why = _AT_MOST_WHY.get(_dotted(loc)) if key == "le" else None
        bound = ctx[key]
        bound = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
        return f"must be {word} {bound}{f' ({why})' if why else ''}; got {value!r}"
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    if kind in ("string_too_short", "string_too_long"):
        word, key = (
            ("at least", "min_length") if kind.endswith("short") else ("at most", "max_length")
        )
        return f"must be {word} {ctx[key]} characters; got {len(value)}"
    if kind == "string_pattern_mismatch":
        meaning, show = _PATTERNS.get(ctx.get("pattern", ""), ("in the documented format", False))
        return f"must be {meaning}" + (f"; got {_show(value)}" if show else "")
    if kind in ("enum", "literal_error"):
        return f"must be {ctx['expected']}; got {_show(value)}{_quote_hint(value)}"
    if kind in _EXPECTED:
        expected = _EXPECTED[kind]
        return f"must be {expected}; got {_kind_of(value)}{_quote_hint(value, expected)}"
    if kind.startswith(("duplicate_", "inline_", "url_")):  # raised by this module, already clear
        return error["msg"]
    return error["msg"][:1].lower() + error["msg"][1:]


def _unknown_field(loc: Sequence[str | int], root: type[BaseModel]) -> str:
    key = loc[-1]
    if isinstance(key, str) and key.replace("_", "").replace("-", "").lower() in _SECRET_KEYS:
        return INLINE_CREDENTIALS
    model = _model_at(root, loc[:-1])
    if model is None:
        return "unknown field"
    known = [field.alias or name for name, field in model.model_fields.items()]
    guess = _closest(str(key), known)
    return (
        "unknown field"
        + (f" (did you mean {guess}?)" if guess else "")
        + ("; known fields here: " + ", ".join(known))
    )


def _closest(key: str, known: list[str]) -> str | None:
    squashed = {name.lower(): name for name in known}
    if key.replace("_", "").lower() in squashed:
        return squashed[key.replace("_", "").lower()]
    matches = difflib.get_close_matches(key.lower(), list(squashed), n=1, cutoff=0.75)
    return squashed[matches[0]] if matches else None


def _model_at(root: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model that validates the mapping at ``loc``, walking from ``root``."""
    current: Any = root
    for part in loc:
        current = _strip(current)
        if isinstance(part, int):
            if get_origin(current) is not list:
                return None
            current = get_args(current)[0]
        elif isinstance(current, type) and issubclass(current, BaseModel):
            fields = current.model_fields
            field = next((f for n, f in fields.items() if part in (n, f.alias)), None)
            if field is None:
                return None
            current = field.annotation
        else:
            return None
    current = _strip(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _strip(annotation: Any) -> Any:
    """``X`` of ``Annotated[X, ...]`` and of ``X | None``."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            members = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(members) != 1:
                return annotation
            annotation = members[0]
        else:
            return annotation


def _kind_of(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


_SCALARS: Final = frozenset({"an integer", "a whole number", "a number", "a finite number"}) | {
    "true or false"
}


def _quote_hint(value: object, expected: str = "a string") -> str:
    if expected == "a string" and isinstance(value, bool | int | float):
        return " (quote it in YAML)"
    if expected in _SCALARS and isinstance(value, str):
        return " (remove the quotes)"
    return ""


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:56] + "...'"
