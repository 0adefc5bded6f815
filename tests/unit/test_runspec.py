"""A MigrationRun loads the same way from a file and from Kubernetes, and a bad one is refused with
one line per problem, each naming the camelCase path and the fix, never echoing a secret."""

from __future__ import annotations

import copy
import pathlib
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from ferryman_worker import cli, runspec
from ferryman_worker.errors import ConfigurationError, RunSpecError

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "run.yaml"
SECRET = "s3cr3t-hunter2-value"
DELETE = object()

VALID: dict[str, Any] = {
    "apiVersion": "ferryman.dev/v1alpha1",
    "kind": "MigrationRun",
    "metadata": {"name": "acme-crm"},
    "spec": {
        "workspace": "acme",
        "source": {
            "provider": "democrm",
            "baseURL": "http://127.0.0.1:8765",
            "credentialsSecretRef": {"name": "democrm-token"},
        },
    },
}


def document(**changes: Any) -> dict[str, Any]:
    """VALID with changes given as dotted paths (``spec__options__pageSize=100``)."""
    doc = copy.deepcopy(VALID)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = doc
        for key in parents:
            node = node.setdefault(key, {})
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return doc


def problems_of(doc: object) -> tuple[str, ...]:
    with pytest.raises(RunSpecError) as info:
        runspec.parse_run(doc, source="run.yaml")
    return info.value.problems


def only_problem(doc: object) -> str:
    problems = problems_of(doc)
    assert len(problems) == 1, problems
    return problems[0]


# --- what loads -------------------------------------------------------------------------------


def test_the_example_file_loads_with_the_defaults() -> None:
    run = runspec.load_run_file(EXAMPLE)
    assert run.metadata.name == "acme-crm" and run.metadata.namespace == "default"
    spec = run.spec
    assert spec.workspace == "acme"
    assert spec.source.provider == "democrm"
    assert spec.source.base_url == "http://127.0.0.1:8765"
    assert spec.source.credentials_secret_ref == runspec.SecretKeyRef(name="democrm-token")
    assert spec.source.credentials_secret_ref.key == "token"
    assert spec.source.rate_limit is None
    assert spec.kinds == ["organizations", "people", "deals", "messages"]
    assert spec.options == runspec.RunOptions()
    assert (spec.options.stripes, spec.options.page_size, spec.options.window_size) == (4, 500, 50)
    assert (spec.options.fetch_threads, spec.options.parents_per_task) == (4, 10)
    assert spec.options.max_in_flight is None
    assert spec.suspend is False and spec.ttl_seconds_after_finished is None
    assert run.status is None


def test_a_minimal_run_gets_every_default() -> None:
    run = runspec.parse_run(VALID)
    assert run.metadata.namespace == "default"
    assert run.spec.kinds == []
    assert run.spec.options == runspec.RunOptions()
    assert run.spec.source.credentials_secret_ref.key == "token"


def test_a_rate_limit_and_every_option_can_be_set() -> None:
    doc = document(
        spec__source__rateLimit={"tokensPerSecond": 100, "burst": 2000},
        spec__options={
            "stripes": 64,
            "pageSize": 1,
            "windowSize": 60,
            "maxInFlight": 1000,
            "fetchThreads": 16,
            "parentsPerTask": 1000,
        },
        spec__suspend=True,
        spec__ttlSecondsAfterFinished=0,
    )
    run = runspec.parse_run(doc)
    assert run.spec.source.rate_limit == runspec.RateLimitSpec(tokens_per_second=100.0, burst=2000)
    assert run.spec.options.max_in_flight == 1000 and run.spec.options.page_size == 1
    assert run.spec.suspend is True and run.spec.ttl_seconds_after_finished == 0


def test_metadata_from_the_cluster_is_ignored() -> None:
    meta = {
        "name": "acme-crm",
        "namespace": "team-a",
        "labels": {"app": "x"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
        "uid": "5d4c",
        "generation": 3,
        "resourceVersion": "81",
        "creationTimestamp": "2026-01-31T12:00:00Z",
        "managedFields": [{"manager": "kubectl"}],
    }
    run = runspec.parse_run(document(metadata=meta))
    assert run.metadata == runspec.ObjectMeta(name="acme-crm", namespace="team-a")


def test_python_code_may_use_snake_case_names() -> None:
    options = runspec.RunOptions(page_size=100, max_in_flight=8)
    assert options.page_size == 100
    source = runspec.SourceSpec(
        provider="democrm",
        base_url="https://crm.example.com/api",
        credentials_secret_ref=runspec.SecretKeyRef(name="t"),
    )
    assert source.model_dump(by_alias=True)["baseURL"] == "https://crm.example.com/api"


def test_a_file_must_use_the_camel_case_names_kubernetes_uses() -> None:
    problem = only_problem(document(spec__options={"page_size": 100}))
    assert problem.startswith("spec.options.page_size: unknown field (did you mean pageSize?)")


# --- every constraint, with its path and message ----------------------------------------------

BOUNDS = [
    ("stripes", 0, "must be at least 1; got 0"),
    ("stripes", 65, "must be at most 64; got 65"),
    ("pageSize", 0, "must be at least 1; got 0"),
    ("pageSize", 10_001, "must be at most 10000 (a provider serves at most its own largest"),
    ("windowSize", 0, "must be at least 1; got 0"),
    ("windowSize", 61, "must be at most 60 (a refused window is rewritten with a savepoint"),
    ("maxInFlight", 0, "must be at least 1; got 0"),
    ("maxInFlight", 1001, "must be at most 1000; got 1001"),
    ("fetchThreads", 0, "must be at least 1; got 0"),
    ("fetchThreads", 17, "must be at most 16; got 17"),
    ("parentsPerTask", 0, "must be at least 1; got 0"),
    ("parentsPerTask", 1001, "must be at most 1000; got 1001"),
]


@pytest.mark.parametrize(("field", "value", "message"), BOUNDS)
def test_options_out_of_bounds_are_refused(field: str, value: int, message: str) -> None:
    problem = only_problem(document(**{f"spec__options__{field}": value}))
    assert problem.startswith(f"spec.options.{field}: {message}")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"metadata__name": DELETE}, "metadata.name: is required"),
        ({"metadata": DELETE}, "metadata: is required"),
        ({"metadata__name": "Acme_CRM"}, "metadata.name: must be a DNS-1123 subdomain"),
        ({"metadata__name": "a" * 254}, "metadata.name: must be at most 253 characters; got 254"),
        ({"metadata__name": ""}, "metadata.name: must not be empty"),
        ({"metadata__namespace": "Team A"}, "metadata.namespace: must be lowercase letters"),
        ({"spec": DELETE}, "spec: is required"),
        ({"spec": "acme"}, "spec: must be a mapping; got a string"),
        ({"spec__workspace": DELETE}, "spec.workspace: is required"),
        ({"spec__workspace": "Acme"}, "spec.workspace: must be lowercase letters, digits and '-'"),
        ({"spec__workspace": "-acme"}, "spec.workspace: must be lowercase letters"),
        ({"spec__workspace": "acme-"}, "spec.workspace: must be lowercase letters"),
        ({"spec__workspace": "a" * 64}, "spec.workspace: must be at most 63 characters; got 64"),
        ({"spec__workspace": ""}, "spec.workspace: must not be empty"),
        ({"spec__workspace": 42}, "spec.workspace: must be a string; got a number (quote it"),
        ({"spec__workspace": None}, "spec.workspace: must be a string; got nothing (null)"),
        ({"spec__source": DELETE}, "spec.source: is required"),
        ({"spec__source__provider": DELETE}, "spec.source.provider: is required"),
        ({"spec__source__provider": "DemoCRM"}, "spec.source.provider: must be a lowercase"),
        ({"spec__source__provider": "1crm"}, "spec.source.provider: must be a lowercase"),
        ({"spec__source__baseURL": DELETE}, "spec.source.baseURL: is required"),
        ({"spec__source__baseURL": "ftp://x.example"}, "spec.source.baseURL: must be an http://"),
        ({"spec__source__baseURL": "127.0.0.1:8765"}, "spec.source.baseURL: must be an http://"),
        ({"spec__source__baseURL": "http://"}, "spec.source.baseURL: must be an http(s) URL with"),
        ({"spec__source__baseURL": "http://a b"}, "spec.source.baseURL: must be an http(s) URL"),
        ({"spec__source__baseURL": "http://h:99999"}, "spec.source.baseURL: is not a valid URL"),
        ({"spec__source__baseURL": "http://h/?k=v"}, "spec.source.baseURL: must not have a query"),
        ({"spec__source__baseURL": "http://h/#x"}, "spec.source.baseURL: must not have a query"),
        (
            {"spec__source__credentialsSecretRef": DELETE},
            "spec.source.credentialsSecretRef: is required",
        ),
        (
            {"spec__source__credentialsSecretRef": "democrm-token"},
            "spec.source.credentialsSecretRef: must be a mapping; got a string",
        ),
        (
            {"spec__source__credentialsSecretRef__name": DELETE},
            "spec.source.credentialsSecretRef.name: is required",
        ),
        (
            {"spec__source__credentialsSecretRef__name": "Token!"},
            "spec.source.credentialsSecretRef.name: must be a DNS-1123 subdomain",
        ),
        (
            {"spec__source__credentialsSecretRef__key": "a key"},
            "spec.source.credentialsSecretRef.key: must be a Secret key",
        ),
        (
            {"spec__source__credentialsSecretRef__key": ".."},
            "spec.source.credentialsSecretRef.key: must be a Secret's key, not '.' or '..'",
        ),
        (
            {"spec__source__credentialsSecretRef__name": "../outside"},
            "spec.source.credentialsSecretRef.name: must be a DNS-1123 subdomain",
        ),
        (
            {"spec__source__rateLimit": {"tokensPerSecond": 0, "burst": 1}},
            "spec.source.rateLimit.tokensPerSecond: must be greater than 0; got 0",
        ),
        (
            {"spec__source__rateLimit": {"tokensPerSecond": -1.5, "burst": 1}},
            "spec.source.rateLimit.tokensPerSecond: must be greater than 0; got -1.5",
        ),
        (
            {"spec__source__rateLimit": {"tokensPerSecond": float("inf"), "burst": 1}},
            "spec.source.rateLimit.tokensPerSecond: must be a finite number",
        ),
        (
            {"spec__source__rateLimit": {"tokensPerSecond": 1, "burst": 0}},
            "spec.source.rateLimit.burst: must be at least 1; got 0",
        ),
        (
            {"spec__source__rateLimit": {"tokensPerSecond": 1}},
            "spec.source.rateLimit.burst: is required",
        ),
        ({"spec__kinds": "people"}, "spec.kinds: must be a list; got a string"),
        ({"spec__kinds": ["people", "Deals"]}, "spec.kinds[1]: must be a lowercase identifier"),
        (
            {"spec__kinds": ["people", "deals", "people"]},
            "spec.kinds[2]: 'people' is listed twice (first at index 0); list each kind once",
        ),
        ({"spec__options__stripes": "4"}, "spec.options.stripes: must be an integer; got a string"),
        ({"spec__options__stripes": 4.5}, "spec.options.stripes: must be an integer; got a number"),
        ({"spec__options__stripes": True}, "spec.options.stripes: must be an integer; got a bool"),
        ({"spec__options": [4]}, "spec.options: must be a mapping; got a list"),
        ({"spec__suspend": "yes"}, "spec.suspend: must be true or false; got a string"),
        ({"spec__suspend": 1}, "spec.suspend: must be true or false; got a number"),
        (
            {"spec__ttlSecondsAfterFinished": -1},
            "spec.ttlSecondsAfterFinished: must be at least 0; got -1",
        ),
    ],
)
def test_each_rule_names_its_path_and_the_fix(changes: dict[str, Any], expected: str) -> None:
    assert only_problem(document(**changes)).startswith(expected)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"spec__options__pagesize": 1},
            "spec.options.pagesize: unknown field (did you mean pageSize?); known fields here: "
            "stripes, pageSize, windowSize, maxInFlight, fetchThreads, parentsPerTask",
        ),
        (
            {"spec__source__baseUrl": "http://h"},
            "spec.source.baseUrl: unknown field (did you mean baseURL?); known fields here: "
            "provider, baseURL, credentialsSecretRef, rateLimit, options",
        ),
        (
            {"spec__priority": 3},
            "spec.priority: unknown field; known fields here: "
            "workspace, source, kinds, mapping, mode, options, errorBudget, suspend, "
            "ttlSecondsAfterFinished, conflictPolicy",
        ),
        (
            {"specs": {}},
            "specs: unknown field (did you mean spec?); known fields here: "
            "apiVersion, kind, metadata, spec, status",
        ),
    ],
)
def test_an_unknown_field_lists_the_known_ones(changes: dict[str, Any], expected: str) -> None:
    assert expected in problems_of(document(**changes))


def test_an_unknown_field_in_a_nested_mapping_lists_that_mappings_fields() -> None:
    doc = document(spec__source__credentialsSecretRef={"name": "t", "optional": True})
    assert only_problem(doc) == (
        "spec.source.credentialsSecretRef.optional: unknown field; known fields here: name, key, "
        "tokenHost"
    )


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"apiVersion": "v1"}, "apiVersion: must be 'ferryman.dev/v1alpha1'; got 'v1'"),
        (
            {"apiVersion": "ferryman.dev/v1"},
            "apiVersion: must be 'ferryman.dev/v1alpha1'; got 'ferryman.dev/v1'",
        ),
        ({"apiVersion": DELETE}, "apiVersion: is required"),
        ({"kind": "Job"}, "kind: must be 'MigrationRun'; got 'Job'"),
        ({"kind": "migrationrun"}, "kind: must be 'MigrationRun'; got 'migrationrun'"),
        ({"kind": DELETE}, "kind: is required"),
    ],
)
def test_the_api_version_and_kind_are_exact(changes: dict[str, Any], expected: str) -> None:
    assert only_problem(document(**changes)) == expected


def test_every_problem_is_listed_one_per_line() -> None:
    doc = document(
        metadata__name="Acme",
        spec__workspace=DELETE,
        spec__options__pageSize=10_001,
        spec__options__windowSize=0,
        spec__kinds=["people", "people"],
    )
    with pytest.raises(RunSpecError) as info:
        runspec.parse_run(doc, source="run.yaml")
    lines = str(info.value).splitlines()
    assert lines[0] == "run.yaml: not a valid MigrationRun (5 problems):"
    assert [line.strip() for line in lines[1:]] == list(info.value.problems)
    assert [problem.split(":")[0] for problem in info.value.problems] == [
        "metadata.name",
        "spec.workspace",
        "spec.kinds[1]",
        "spec.options.pageSize",
        "spec.options.windowSize",
    ]


def test_a_run_spec_error_is_a_configuration_error(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert issubclass(RunSpecError, ConfigurationError)
    # ... and is handled as one: `ferryman run` exits 2 with the problem, no traceback, before
    # it connects (this database does not exist: connecting would say so instead)
    monkeypatch.setenv("FERRYMAN_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setenv("FERRYMAN_LOG_FORMAT", "text")  # captured stderr is no terminal: json else
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(document(spec__options__pageSize=0)))
    assert cli.main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ferryman: ") and "spec.options.pageSize" in err, err
    assert "Traceback" not in err and "connect" not in err


# --- secrets -------------------------------------------------------------------------------------


def assert_secret_not_shown(error: RunSpecError) -> None:
    assert SECRET not in str(error) and SECRET not in repr(error)
    assert all(SECRET not in problem for problem in error.problems)
    assert error.__cause__ is None and error.__context__ is None


@pytest.mark.parametrize(
    "key", ["token", "apiKey", "apiToken", "password", "credentials", "api_key", "secret"]
)
def test_inline_credentials_are_refused_without_echoing_them(key: str) -> None:
    text = yaml.safe_dump(document(**{f"spec__source__{key}": SECRET}))
    with pytest.raises(RunSpecError) as info:
        runspec.load_run(text)
    assert info.value.problems == (
        f"spec.source.{key}: credentials must not be inline; put them in a Secret and reference "
        "it with spec.source.credentialsSecretRef {name, key}",
    )
    assert_secret_not_shown(info.value)


def test_inline_credentials_are_refused_anywhere_in_the_spec() -> None:
    doc = document(spec__token=SECRET, spec__source__credentialsSecretRef__password=SECRET)
    with pytest.raises(RunSpecError) as info:
        runspec.parse_run(doc)
    assert [p.split(":")[0] for p in info.value.problems] == [
        "spec.source.credentialsSecretRef.password",
        "spec.token",
    ]
    assert all("must not be inline" in problem for problem in info.value.problems)
    assert_secret_not_shown(info.value)


@pytest.mark.parametrize(
    "url", [f"https://user:{SECRET}@crm.example.com", f"http://{SECRET}@127.0.0.1:8765"]
)
def test_credentials_in_the_base_url_are_refused_without_echoing_them(url: str) -> None:
    with pytest.raises(RunSpecError) as info:
        runspec.parse_run(document(spec__source__baseURL=url))
    assert info.value.problems == (
        "spec.source.baseURL: must not carry credentials (user:password@); put them in a Secret "
        "and reference it with spec.source.credentialsSecretRef {name, key}",
    )
    assert_secret_not_shown(info.value)


@pytest.mark.parametrize(
    "url", [f"ftp://u:{SECRET}@h", f"http://h/?api_key={SECRET}", f"http://h:{SECRET}"]
)
def test_a_bad_base_url_is_never_echoed(url: str) -> None:
    with pytest.raises(RunSpecError) as info:
        runspec.parse_run(document(spec__source__baseURL=url))
    assert info.value.problems[0].startswith("spec.source.baseURL: ")
    assert_secret_not_shown(info.value)


def test_a_credential_given_where_a_mapping_belongs_is_not_echoed() -> None:
    with pytest.raises(RunSpecError) as info:
        runspec.parse_run(document(spec__source__credentialsSecretRef=SECRET))
    assert "must be a mapping; got a string" in str(info.value)
    assert_secret_not_shown(info.value)


def test_pydantic_itself_never_prints_an_input() -> None:
    with pytest.raises(ValidationError) as info:
        runspec.MigrationRun.model_validate(document(spec__source__token=SECRET))
    assert SECRET not in str(info.value)


def test_a_yaml_error_does_not_quote_the_line() -> None:
    with pytest.raises(RunSpecError) as info:
        runspec.load_run(f'spec:\n  source:\n    token: "{SECRET}\n', source="run.yaml")
    assert str(info.value).startswith("run.yaml: not valid YAML: line ")
    assert_secret_not_shown(info.value)


# --- YAML documents -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("spec: [unclosed\n", "run.yaml: not valid YAML: line 2, column 1: "),
        ("a: b\n  c: d\n", "run.yaml: not valid YAML: line 2, column 4: "),
        (
            "kind: MigrationRun\nkind: Job\n",
            "run.yaml: not valid YAML: line 2, column 1: key 'kind'",
        ),
        ("", "run.yaml: is empty; expected a MigrationRun document"),
        ("---\n# nothing\n", "run.yaml: is empty"),
        (
            "- a\n- b\n",
            "run.yaml: expected a mapping with apiVersion, kind, metadata and spec; got",
        ),
        ("just words\n", "run.yaml: expected a mapping with apiVersion, kind, metadata and spec"),
        ("!!python/object:os.system {}\n", "run.yaml: not valid YAML: line 1, column 1: "),
    ],
)
def test_a_file_that_is_not_one_yaml_mapping_is_refused(text: str, expected: str) -> None:
    with pytest.raises(RunSpecError) as info:
        runspec.load_run(text, source="run.yaml")
    assert str(info.value).startswith(expected)


def test_the_one_migration_run_among_several_documents_is_taken() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "democrm-token"}}
    text = yaml.safe_dump_all([secret, None, VALID, ["not", "a", "mapping"]])
    assert runspec.load_run(text).metadata.name == "acme-crm"


def test_a_leading_document_marker_is_fine() -> None:
    assert runspec.load_run("---\n" + yaml.safe_dump(VALID)).spec.workspace == "acme"


def test_two_migration_runs_in_one_file_are_refused() -> None:
    other = document(metadata__name="other")
    with pytest.raises(RunSpecError) as info:
        runspec.load_run(yaml.safe_dump_all([VALID, {"kind": "ConfigMap"}, other]), source="r.yaml")
    assert str(info.value) == (
        "r.yaml: holds 2 MigrationRun documents (documents 1, 3); put one run in each file"
    )


def test_several_documents_without_a_migration_run_are_refused() -> None:
    with pytest.raises(RunSpecError) as info:
        runspec.load_run(yaml.safe_dump_all([{"kind": "Secret"}, {"kind": "Job"}]), source="r")
    assert str(info.value) == "r: holds 2 YAML documents and none has kind: MigrationRun"


def test_yaml_anchors_and_merge_keys_still_work() -> None:
    text = yaml.safe_dump(VALID) + (
        "  options:\n    <<: &tuned {stripes: 2, pageSize: 100}\n    stripes: 3\n"
    )
    run = runspec.load_run(text)
    assert (run.spec.options.stripes, run.spec.options.page_size) == (3, 100)


def test_a_missing_file_is_a_run_spec_error(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(RunSpecError, match=r"nope\.yaml: cannot be read: No such file"):
        runspec.load_run_file(missing)


def test_a_file_that_is_not_utf8_is_refused(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(RunSpecError, match="is not UTF-8 text"):
        runspec.load_run_file(path)


# --- status ----------------------------------------------------------------------------------

STATUS: dict[str, Any] = {
    "state": "Running",
    "phase": "people",
    "tasksDone": 12,
    "tasksTotal": 40,
    "tasksSummary": "12/40",
    "rowsWritten": 6000,
    "rowsSkipped": 3,
    "rowsFailed": 0,
    "startedAt": "2026-01-31T12:00:00Z",
    "finishedAt": None,
    "observedGeneration": 2,
    "conditions": [
        {
            "type": "Admitted",
            "status": "True",
            "reason": "WorkspaceFree",
            "message": "no other live run for workspace acme",
            "lastTransitionTime": "2026-01-31T12:00:00Z",
            "observedGeneration": 2,
        }
    ],
}


def test_kubectl_get_output_with_a_status_loads() -> None:
    text = yaml.safe_dump(document(status=STATUS, metadata__uid="5d4c"))
    run = runspec.load_run(text)
    assert run.spec.workspace == "acme" and run.status is None


def test_a_status_from_another_operator_version_never_blocks_loading() -> None:
    run = runspec.parse_run(document(status={"state": "Paused", "somethingNew": 1}))
    assert run.status is None


def test_the_status_round_trips_through_its_camel_case_form() -> None:
    run = runspec.MigrationRun.model_validate(document(status=STATUS))
    status = run.status
    assert status is not None
    assert status.state is runspec.RunState.RUNNING and not status.state.finished
    assert status.started_at == datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert status.conditions[0].reason == "WorkspaceFree"
    dumped = run.model_dump(mode="json", by_alias=True)
    assert dumped["status"]["tasksSummary"] == "12/40"
    assert dumped["status"]["conditions"][0]["lastTransitionTime"] == "2026-01-31T12:00:00Z"
    assert runspec.MigrationRun.model_validate(dumped) == run


def test_the_tasks_summary_is_filled_in_when_absent() -> None:
    status = runspec.MigrationRunStatus(tasks_done=3, tasks_total=7)
    assert status.tasks_summary == "3/7"
    assert runspec.MigrationRunStatus().tasks_summary == "0/0"


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (
            {"state": "Runing"},
            "status.state: must be 'Pending', 'Queued', 'Running', 'Succeeded', 'Failed' or "
            "'Cancelled'; got 'Runing'",
        ),
        ({"rowsWritten": -1}, "status.rowsWritten: must be at least 0; got -1"),
        (
            {"startedAt": "2026-01-31T12:00:00"},
            "status.startedAt: must be a date-time with a time zone",
        ),
        (
            {"conditions": [{**STATUS["conditions"][0], "status": True}]},
            "status.conditions[0].status: must be 'True', 'False' or 'Unknown'; got True "
            "(quote it in YAML)",
        ),
        (
            {"conditions": [{**STATUS["conditions"][0], "reason": "workspace free"}]},
            "status.conditions[0].reason: must be a CamelCase reason",
        ),
        (
            {"conditions": [STATUS["conditions"][0], STATUS["conditions"][0]]},
            "status.conditions[1]: a condition of type 'Admitted' is already listed",
        ),
    ],
)
def test_a_bad_status_is_explained_to_the_operator(status: dict[str, Any], expected: str) -> None:
    with pytest.raises(ValidationError) as info:
        runspec.MigrationRun.model_validate(document(status=status))
    problems = runspec.explain(info.value)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def test_a_status_validated_alone_is_explained_from_its_own_root() -> None:
    with pytest.raises(ValidationError) as info:
        runspec.MigrationRunStatus.model_validate({"rowsWriten": 3, "tasksDone": -1})
    assert runspec.explain(info.value) == (
        "tasksDone: must be at least 0; got -1",
        "rowsWriten: unknown field (did you mean rowsWritten?); known fields here: state, phase, "
        "tasksDone, tasksTotal, tasksSummary, rowsWritten, rowsSkipped, rowsMatched, rowsFailed, "
        "startedAt, finishedAt, eta, verdicts, observedGeneration, reason, message, lastRetry, "
        "verification, conditions",
    )


def test_terminal_states_are_finished() -> None:
    finished = {state for state in runspec.RunState if state.finished}
    assert finished == {"Succeeded", "Failed", "Cancelled"}


# --- behaviour and schema ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_in_flight", "lane_width", "expected"),
    [(None, 4, 8), (None, 1, 2), (3, 4, 3), (50, 2, 50)],
)
def test_effective_max_in_flight(max_in_flight: int | None, lane_width: int, expected: int) -> None:
    spec = runspec.parse_run(document(spec__options={"maxInFlight": max_in_flight})).spec
    assert spec.effective_max_in_flight(lane_width) == expected


def test_effective_max_in_flight_needs_a_lane() -> None:
    spec = runspec.parse_run(VALID).spec
    with pytest.raises(ValueError, match="lane_width must be at least 1; got 0"):
        spec.effective_max_in_flight(0)


MODELS: list[type[BaseModel]] = [
    runspec.MigrationRun,
    runspec.ObjectMeta,
    runspec.MigrationRunSpec,
    runspec.SourceSpec,
    runspec.SecretKeyRef,
    runspec.RateLimitSpec,
    runspec.RunOptions,
    runspec.MigrationRunStatus,
    runspec.Condition,
]


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model.__name__)
def test_every_field_has_a_description_and_a_camel_case_alias(model: type[BaseModel]) -> None:
    assert model.__doc__
    for name, field in model.model_fields.items():
        assert field.description, f"{model.__name__}.{name} has no description"
        assert field.alias is not None and "_" not in field.alias


def test_the_json_schema_speaks_camel_case_and_forbids_unknown_fields() -> None:
    schema = runspec.MigrationRun.model_json_schema(by_alias=True)
    defs = schema["$defs"]
    assert list(defs["SourceSpec"]["properties"]) == [
        "provider",
        "baseURL",
        "credentialsSecretRef",
        "rateLimit",
        "options",
    ]
    assert defs["RunOptions"]["properties"]["pageSize"]["maximum"] == 10_000
    assert defs["MigrationRunSpec"]["properties"]["kinds"]["x-kubernetes-list-type"] == "set"
    assert defs["RunOptions"]["additionalProperties"] is False
    assert defs["MigrationRunStatus"]["properties"]["state"]


# --- spec.mapping: a file (ferryman run) or a name (the operator) -----------------------------


@pytest.mark.parametrize(
    ("mapping", "file", "name"),
    [({"file": "mapping.yaml"}, "mapping.yaml", None), ({"name": "sales"}, None, "sales")],
)
def test_a_mapping_is_a_file_or_a_name(
    mapping: dict[str, str], file: str | None, name: str | None
) -> None:
    found = runspec.parse_run(document(spec__mapping=mapping)).spec.mapping
    assert found is not None and (found.file, found.name) == (file, name)


@pytest.mark.parametrize("mapping", [{}, {"file": "mapping.yaml", "name": "sales"}])
def test_a_mapping_needs_exactly_one_of_file_and_name(mapping: dict[str, str]) -> None:
    assert only_problem(document(spec__mapping=mapping)) == (
        "spec.mapping: give exactly one of file (a mapping YAML file, read by `ferryman run`) "
        "and name (a MigrationMapping in the run's namespace, read by the operator)"
    )


def test_a_mapping_name_is_a_kubernetes_name() -> None:
    assert only_problem(document(spec__mapping={"name": "Sales_1"})).startswith(
        "spec.mapping.name: must be a DNS-1123 subdomain"
    )


# --- spec.source.credentialsSecretRef.tokenHost: the login host of a run of `ferryman run` ------


def _token_host(host: str) -> dict[str, Any]:
    return document(spec__source__credentialsSecretRef__tokenHost=host)


def test_a_token_host_is_a_host_with_an_optional_port() -> None:
    ref = runspec.parse_run(_token_host("Login.Example.com:8443")).spec.source
    assert ref.credentials_secret_ref.token_host == "login.example.com:8443"
    assert runspec.parse_run(document()).spec.source.credentials_secret_ref.token_host is None
    plain = runspec.parse_run(_token_host("http://auth.internal:8080")).spec.source
    assert plain.credentials_secret_ref.token_host == "http://auth.internal:8080"


@pytest.mark.parametrize(
    "host", ["ftp://login.example.com", "login.example.com/oauth", "*.example.com", "a b", ""]
)
def test_a_token_host_that_is_no_host_is_refused_naming_it(host: str) -> None:
    assert only_problem(_token_host(host)).startswith(
        "spec.source.credentialsSecretRef.tokenHost: must be a host with an optional scheme and"
        " port, e.g. login.example.com"
    )


def test_the_operator_refuses_a_token_host_naming_the_secrets_annotation() -> None:
    from ferryman_worker import contract

    message = contract.local_binding_refused(runspec.parse_run(_token_host("login.example.com")))
    assert message is not None
    assert message.startswith(
        "spec.source.credentialsSecretRef.tokenHost: 'login.example.com' is read by "
        "`ferryman run` only; on Kubernetes the Secret binds its credential: add "
        "login.example.com to its ferryman.dev/hosts annotation"
    )
    assert contract.local_binding_refused(runspec.parse_run(document())) is None


def test_an_error_budget_is_a_share_for_the_run_and_for_each_kind() -> None:
    run = runspec.parse_run(document(spec__errorBudget={"share": 0.1, "kinds": {"notes": 1}}))
    assert (run.spec.error_budget.share, run.spec.error_budget.kinds) == (0.1, {"notes": 1.0})
    assert runspec.parse_run(VALID).spec.error_budget.share == 0.5  # docs/decisions.md


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        ({"share": 1.5}, "spec.errorBudget.share: must be at most 1"),
        ({"kinds": {"notes": -0.1}}, "spec.errorBudget.kinds.notes: must be at least 0"),
    ],
)
def test_an_error_budget_out_of_bounds_names_its_path(budget: Any, expected: str) -> None:
    assert only_problem(document(spec__errorBudget=budget)).startswith(expected)
