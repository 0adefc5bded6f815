"""The MigrationRun models: spec, status, and the rules a spec must follow."""

from __future__ import annotations

import enum
import re
import urllib.parse
from typing import Annotated, Final, Literal, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

API_VERSION: Final = "ferryman.dev/v1alpha1"
KIND: Final = "MigrationRun"

DNS_SUBDOMAIN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
IDENTIFIER: Final = r"^[a-z][a-z0-9_]*$"
SECRET_KEY: Final = r"^[-._a-zA-Z0-9]+$"
HTTP_URL: Final = r"^https?://"
SCHEME_MESSAGE: Final = "must be an http:// or https:// URL, e.g. https://api.example.com"
CONDITION_TYPE: Final = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON: Final = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
TOKEN_HOST: Final = r"(https?://)?[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]{1,5})?"

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
    if not re.match(HTTP_URL, url):
        raise PydanticCustomError("url_scheme", SCHEME_MESSAGE)
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


def _check_host(host: str) -> str:
    """A host name or address with an optional port: what a credential is bound to."""
    if not re.fullmatch(TOKEN_HOST, host):
        raise PydanticCustomError(
            "host",
            "must be a host with an optional scheme and port, e.g. login.example.com (https on"
            " 443), auth.internal:8443 or http://auth.internal:8080 (no path or wildcard): the"
            " host of the provider's OAuth2 tokenUrl",
        )
    return host.lower()


def _check_secret_key(key: str) -> str:
    """A Secret's key is never ``.`` or ``..`` (Kubernetes refuses them too): locally it is a
    file's name in the credentials folder."""
    if key in (".", ".."):
        raise PydanticCustomError("secret_key", "must be a Secret's key, not '.' or '..'")
    return key


def _cel(rule: str, message: str, reason: str | None = None) -> dict[str, str]:
    """A CEL rule of the CRD's schema (``x-kubernetes-validations``): the API server refuses a
    value for which it is false, with ``message`` after the field's path."""
    return {"rule": rule, "message": message} | ({"reason": reason} if reason else {})


def _unquoted(rule: str, message: str) -> dict[str, str]:
    """A CEL rule whose refusal does not quote the value: the API server's answer to a broken
    rule of the default reason (FieldValueInvalid), like to ``pattern``, ``minLength`` and
    ``enum``, is ``Invalid value: "<the value>": ...``; with FieldValueForbidden it is
    ``Forbidden: <message>``. ``maxLength`` is answered ``Too long`` without the value."""
    return _cel(rule, message, "FieldValueForbidden")


# What the CRD can say of a base URL (the model says all of it in _check_base_url), as rules that
# never quote the URL back (it may hold a password); hence no ``pattern`` on the field.
_BASE_URL_RULES: Final = [
    _unquoted("self.matches('^https?://')", SCHEME_MESSAGE),
    _unquoted(
        "!self.contains('@')", "must not carry credentials (user:password@); " + SECRET_ADVICE
    ),
    _unquoted(
        "!self.contains('?') && !self.contains('#')",
        "must not have a query or fragment "
        "(credentials belong in spec.source.credentialsSecretRef)",
    ),
    _unquoted(
        "self.matches('^https?://[^/:\\\\s]+(:[0-9]{1,5})?(/\\\\S*)?$')",
        "must be an http(s) URL with a host, e.g. https://api.example.com",
    ),
]
_IMMUTABLE: Final = "is immutable once the run is created; create a new MigrationRun instead"


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

    key: Annotated[
        str,
        Field(
            min_length=1,
            max_length=253,
            pattern=SECRET_KEY,
            json_schema_extra={
                "x-kubernetes-validations": [
                    _cel("self != '.' && self != '..'", "must be a Secret's key, not '.' or '..'")
                ]
            },
        ),
        AfterValidator(_check_secret_key),
    ] = "token"
    """Key of the Secret whose value is the source credential."""

    token_host: Annotated[str, Field(max_length=259), AfterValidator(_check_host)] | None = None
    """`ferryman run` only: a second host the credential may be sent to, the one of the
    provider's OAuth2 tokenUrl when it is not the baseURL's (a login host, e.g.
    login.example.com: https on 443; auth.internal:8443 another port; http://auth.internal:8080
    plain http). Locally a credential is bound to the baseURL's scheme, host and port, and to
    this one when given. On Kubernetes a credential is bound by its
    Secret's ferryman.dev/hosts annotation: the operator refuses a run that sets this."""


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
        Field(
            alias="baseURL",
            min_length=1,
            max_length=2048,
            json_schema_extra={"x-kubernetes-validations": _BASE_URL_RULES},
        ),
        AfterValidator(_check_base_url),
    ]
    """Base URL of the source API (http or https), without credentials, query or fragment."""

    credentials_secret_ref: SecretKeyRef
    """Secret key holding the source credential (never put the credential itself here)."""

    rate_limit: RateLimitSpec | None = None
    """Token budget of this credential; absent: the provider's default."""

    options: dict[str, Annotated[str, Field(max_length=1024)]] = Field(default_factory=dict)
    """The provider's own options (e.g. an API version, a region), as text; the provider says
    which it has, their types and defaults, and a run naming one it lacks is refused."""


class RunOptions(_Model):
    """How the run is cut into work; the defaults suit most sources."""

    stripes: Annotated[int, Field(ge=1, le=64, strict=True)] = 4
    """Page-walking tasks per kind that run side by side, each walking every S-th page."""

    page_size: Annotated[int, Field(ge=1, le=10_000, strict=True)] = 500
    """Rows per listing call, at most the largest page the provider serves for each kind (a
    larger value means that largest page); a listing costs the same whatever its size, so the
    largest is best."""

    window_size: Annotated[int, Field(ge=1, le=60, strict=True)] = 50
    """Rows per transaction; a window the database refuses is rewritten with one savepoint per
    row, and PostgreSQL caches 64 subtransactions per transaction."""

    max_in_flight: Annotated[int, Field(ge=1, le=1000, strict=True)] | None = None
    """Tasks of this run running or queued at once; absent: 2 x the migrations lane's width."""

    fetch_threads: Annotated[int, Field(ge=1, le=16, strict=True)] = 4
    """Threads of one tree task that list its parents' children and fetch their bodies (they
    hold no database connection)."""

    parents_per_task: Annotated[int, Field(ge=1, le=1000, strict=True)] = 10
    """Parent records (e.g. deals) whose children (e.g. their messages) one tree task imports."""


class ErrorBudget(_Model):
    """How many of a kind's records may be refused (malformed, or refused by the database)
    before the kind fails its run."""

    share: Annotated[float, Field(ge=0, le=1)] = 0.5
    """The largest share of a kind's records that may be refused: more fails the run, naming
    the kind and its most frequent reasons (0: any refused record fails it; 1: never)."""

    kinds: dict[Identifier, Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=dict)
    """A kind's own share instead of the run's, e.g. {notes: 0.2}."""


MAPPING_ONE_OF: Final = (
    "give exactly one of file (a mapping YAML file, read by `ferryman run`) and name (a "
    "MigrationMapping in the run's namespace, read by the operator)"
)


class MappingRef(_Model):
    """Where the run's mapping is: which of the application's tables each kind is written to.
    Exactly one of ``file`` (``ferryman run``) and ``name`` (on Kubernetes)."""

    file: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    """A mapping YAML file, relative to the run file (read by `ferryman run` only)."""

    name: DnsSubdomain | None = None
    """A MigrationMapping in the run's namespace (read by the operator only), checked against
    the database and snapshotted into the run when it is admitted."""

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.file is None) == (self.name is None):
            raise PydanticCustomError("mapping_one_of", MAPPING_ONE_OF)
        return self


class ConflictPolicy(enum.StrEnum):
    """What admission does with a run whose workspace already has a live run."""

    QUEUE = "Queue"
    REJECT = "Reject"


class RunMode(enum.StrEnum):
    """What a run reads: everything, or what changed since the workspace's last successful
    run."""

    FULL = "Full"
    DELTA = "Delta"


class MigrationRunSpec(_Model):
    """What to migrate, from where, and how."""

    workspace: Annotated[
        DnsLabel,
        Field(
            json_schema_extra={"x-kubernetes-validations": [_cel("self == oldSelf", _IMMUTABLE)]}
        ),
    ]
    """Destination workspace; at most one run per workspace is live at a time."""

    source: Annotated[
        SourceSpec,
        Field(
            json_schema_extra={"x-kubernetes-validations": [_cel("self == oldSelf", _IMMUTABLE)]}
        ),
    ]
    """The source API and the Secret holding its credential."""

    kinds: Annotated[
        list[Identifier], Field(json_schema_extra={"x-kubernetes-list-type": "set"})
    ] = Field(default_factory=list)
    """Kinds to import, e.g. [organizations, people]; empty: every kind the provider has."""

    mapping: Annotated[
        MappingRef | None,
        Field(
            json_schema_extra={
                "x-kubernetes-validations": [
                    _cel("self == oldSelf", _IMMUTABLE),
                    _cel("has(self.file) != has(self.name)", MAPPING_ONE_OF),
                ]
            }
        ),
    ] = None
    """Where the records go in the application's tables; absent: the mapping the provider ships,
    if any (else the provider's own writers, else the landing table)."""

    mode: Annotated[
        RunMode,
        Field(
            json_schema_extra={"x-kubernetes-validations": [_cel("self == oldSelf", _IMMUTABLE)]}
        ),
    ] = RunMode.FULL
    """Full (every record) or Delta (the cutover's catch-up: what changed since the workspace's
    last successful run, each changed row updated through the ledger, new ones inserted; refused
    when the workspace has no successful run)."""

    options: RunOptions = Field(default_factory=RunOptions)
    """Tuning: stripes, page and window sizes, in-flight limit, fetch threads."""

    error_budget: ErrorBudget = Field(default_factory=ErrorBudget)
    """How many of a kind's records may be refused before the kind fails the run (by default
    more than half fails it, so a kind whose every record is refused never ends Succeeded)."""

    suspend: Annotated[bool, Field(strict=True)] = False
    """True pauses the run at the next window; false resumes it."""

    ttl_seconds_after_finished: Annotated[int, Field(ge=0, strict=True)] | None = None
    """Seconds after which a finished run is deleted; absent: kept until deleted by hand."""

    conflict_policy: ConflictPolicy = ConflictPolicy.QUEUE
    """When the workspace has a live run: Queue (wait, then start by itself) or Reject (fail)."""

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


class PhaseEta(_Model):
    """One phase still to do: the time it has left and what bounds it."""

    phase: Annotated[str, Field(max_length=1024)]
    """The phase's kinds, e.g. people+deals."""

    seconds: Count | None = None
    """Seconds left; null while a part cannot be estimated yet (the message names it)."""

    at_least_seconds: Count = 0
    """Seconds left of the parts estimated so far: a lower bound, equal to seconds when known."""

    bound_by: Literal["RateLimit", "Pace"] = "Pace"
    """RateLimit: the source's rate limit binds; Pace: the pace of its tasks so far."""

    message: Annotated[str, Field(max_length=4096)] = ""
    """For humans, e.g. phase 4/4 (messages): ETA 1:10 (at the pace of its tasks so far)."""


class RunEta(_Model):
    """The time a running run has left, and what bounds it (``ferryman status`` shows the same)."""

    seconds: Count | None = None
    """Seconds left; null while a part cannot be estimated yet (the message names it)."""

    at_least_seconds: Count = 0
    """Seconds left of the parts estimated so far: a lower bound, equal to seconds when known."""

    bound_by: Literal["RateLimit", "Pace"] = "Pace"
    """RateLimit: the source's rate limit (spec.source.rateLimit) binds; Pace: the pace of the
    run's tasks so far."""

    remaining: Annotated[str, Field(max_length=64)] = ""
    """The time left for the ETA column: 1:02:03, or >= 0:40 (a lower bound), or unknown."""

    message: Annotated[str, Field(max_length=4096)] = ""
    """For humans, e.g. ETA 2:10:00 for the run (bound by the source's rate limit: 1,930,000
    tokens at 250/s)."""

    phases: Annotated[list[PhaseEta], Field(max_length=64)] = Field(default_factory=list)
    """Each phase still to do, the running one first."""


VerdictName = Literal["reconciled", "verified", "unverified", "short", "refused"]


class KindVerdictStatus(_Model):
    """A kind's verdict, given when its phase closed (docs/kubernetes.md#complete)."""

    kind: Annotated[str, Field(min_length=1, max_length=253)]
    """The provider's kind, e.g. organizations."""

    verdict: VerdictName
    """reconciled: what it listed adds up to the total its source states; verified: a
    verification found each of the source's ids in the ledger; unverified: its source states
    no total; short: it listed fewer than the total; refused: more of its records were refused
    than the error budget allows."""

    listed: Count | None = None
    """Records its walk listed (null for a tree kind, reconciled per parent)."""

    total: Count | None = None
    """The least total its source stated during the walk (null: none stated)."""

    short_by: Count | None = None
    """How many fewer it listed than the total, for a short kind."""

    note: Annotated[str, Field(max_length=4096)] = ""
    """What the verdict rests on, or why the kind failed, with the likely fix."""


class KindVerification(_Model):
    """One kind of a verified run: its source's ids listed again, against the ledger."""

    kind: Annotated[str, Field(max_length=253)]
    """The kind, e.g. deals."""

    verdict: Literal["Verified", "Differs"]
    """Verified: the source lists what was imported; Differs: ids missing or gone."""

    listed: Count = 0
    """Ids the source listed."""

    missing: Count = 0
    """Ids the source lists that were not imported (no row error of the run explains them)."""

    gone: Count = 0
    """Ids imported that the source no longer lists."""

    missing_ids: Annotated[list[Annotated[str, Field(max_length=256)]], Field(max_length=10)] = (
        Field(default_factory=list)
    )
    """The first missing ids (at most ten)."""

    gone_ids: Annotated[list[Annotated[str, Field(max_length=256)]], Field(max_length=10)] = Field(
        default_factory=list
    )
    """The first gone ids (at most ten)."""


class RunVerification(_Model):
    """The run's latest verification (the ferryman.dev/verify annotation, or ferryman verify):
    each kind's ids listed again from the source and compared with what the run imported."""

    request: Annotated[str, Field(max_length=1024)]
    """The ferryman.dev/verify value it answers (cli: asked for by ferryman verify)."""

    verdict: Literal["Verified", "Differs", "Pending", "Failed"]
    """Verified: every kind lists what was imported; Differs: some kind has ids missing or
    gone; Pending: queued or running; Failed: it could not list the source (message)."""

    message: Annotated[str, Field(max_length=4096)] = ""
    """For humans, e.g. differs: 4 kind(s), 3 missing, 1 gone."""

    finished_at: AwareDatetime | None = None
    """When it finished."""

    kinds: Annotated[list[KindVerification], Field(max_length=64)] = Field(default_factory=list)
    """Each kind verified, in phase order."""


class MigrationRunStatus(_Model):
    """What the operator last saw of the run; written by the operator only."""

    state: RunState = RunState.PENDING
    """Pending (until the operator admits or queues it), Queued, Running, Succeeded, Failed or
    Cancelled."""

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
    """Source rows met again that were written before (the ledger keeps each row once)."""

    rows_matched: Count = 0
    """Source rows matched by their kind's natural key to rows the application already had:
    the ledger names those rows, nothing was written for them."""

    rows_failed: Count = 0
    """Malformed source rows not written, each recorded with its reason (ferryman errors)."""

    started_at: AwareDatetime | None = None
    """When the run started working."""

    finished_at: AwareDatetime | None = None
    """When the run reached Succeeded, Failed or Cancelled."""

    eta: RunEta | None = None
    """While it runs: the time it has left and what bounds it."""

    verdicts: Annotated[
        list[KindVerdictStatus],
        Field(
            max_length=256,
            json_schema_extra={
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["kind"],
            },
        ),
    ] = Field(default_factory=list)
    """Each kind's verdict once its phase closed, in phase order: the Complete condition is
    decided from them."""

    observed_generation: Count | None = None
    """The metadata.generation this status was computed from."""

    reason: Annotated[str, Field(max_length=1024)] | None = None
    """The CamelCase reason of what ``message`` says, for the REASON column: e.g. Running,
    Retrying, CredentialUnavailable (a task keeps failing for that cause), RunFailed."""

    message: Annotated[str, Field(max_length=32768)] | None = None
    """The latest news, for humans: the message of the condition that changed last."""

    last_retry: Annotated[str, Field(max_length=1024)] | None = None
    """The value of the ferryman.dev/retry annotation the operator last acted on."""

    verification: RunVerification | None = None
    """The run's latest verification, once one was asked for (the ferryman.dev/verify
    annotation)."""

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
RETRY_ANNOTATION: Final = "ferryman.dev/retry"
"""Annotating a failed run with a new value of this key retries it."""
VERIFY_ANNOTATION: Final = "ferryman.dev/verify"
"""Annotating a run with a new value of this key verifies it once it has finished: its
source's ids listed again by a worker and compared with what it imported (status.verification)."""
