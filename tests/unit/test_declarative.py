"""Declarative providers: a bad document gets one line per problem naming its YAML path and the
fix; a good one becomes a provider whose records, requests and pages are what it declares; the
generated reference and JSON Schema agree with the models."""

from __future__ import annotations

import json
import pathlib
import textwrap
from typing import Annotated, Literal, Union

import pytest
from pydantic import Field, TypeAdapter

from ferryman_worker import cli
from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers import Request, declarative, options_for, pagination
from ferryman_worker.providers.declarative import reference, spec
from ferryman_worker.providers.democrm import PROVIDER_FILE
from ferryman_worker.providers.democrm import python_provider as python_democrm

ROOT = pathlib.Path(__file__).resolve().parents[2]

GOOD = """
metadata: {name: crm}
spec:
  auth: {style: header, name: X-Api-Key}
  kinds:
    companies:
      request: {path: /companies, query: {sort: id}, headers: {API-Version: "7"}, cost: 5}
      records: items
      pagination: {style: keyset, key: id, param: filter, template: "id>'{key}'",
                   sizeParam: perPage, maxPageSize: 200}
      fields:
        id: {type: string, required: true}
        name: {type: string, required: true, maxLength: 5}
        tags: {type: array, items: string}
        employees: {type: integer}
    notes:
      walk: tree
      parent: companies
      request: {method: POST, path: "/companies/{parent.id}/notes/search",
                body: {filter: {open: true}}}
      pagination: {style: cursor, param: after, next: paging.after, send: body}
      split: {values: {param: status, values: [open, closed]}}
      responses: {gone: [], rateLimited: [429, 503], backoffSeconds: 30}
      fields:
        id: {type: string, required: true}
        text: {type: string, source: body}
"""


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigurationError) as caught:
        declarative.parse(textwrap.dedent(text), "crm.yaml")
    head, *lines = str(caught.value).splitlines()
    assert head == f"crm.yaml: {len(lines)} problem(s):"
    return [line.strip() for line in lines]


def test_every_problem_of_a_bad_file_is_one_line_naming_its_yaml_path_and_the_fix() -> None:
    problems = _problems(
        """
        metadata: {name: crm}
        spec:
          auth: {style: header}
          kinds:
            companies:
              request: {path: /companies, cots: 5}
              pagination: {style: pages}
              fields: {id: {type: integer}}
            notes:
              walk: tree
              request: {path: /notes}
              pagination: {style: offset, offsetParam: 7}
              fields: {id: {type: text}}
        """
    )
    assert problems == [
        "spec.auth: style header needs `name`: the header or parameter to use",
        "spec.kinds.companies.request.cots: unknown field (remove it, or check its spelling"
        " and indentation)",
        "spec.kinds.companies.pagination.style: must be one of offset, page_number, next_url,"
        " link_header, cursor, keyset, single",
        "spec.kinds.notes.pagination.offsetParam: Input should be a valid string",
        "spec.kinds.notes.fields.id.type: Input should be 'string', 'integer', 'number',"
        " 'boolean', 'datetime', 'date', 'object' or 'array'",
    ]


def test_kinds_that_do_not_fit_together_are_named() -> None:
    assert _problems(
        """
        metadata: {name: crm}
        spec:
          phases: [[notes], [companies]]
          kinds:
            companies:
              request: {path: /companies}
              fields: {id: {type: integer}}
            notes:
              walk: tree
              parent: companies
              request: {path: /notes}
              fields: {key: {type: integer}}
        """
    ) == ["spec.kinds.notes: the id field 'id' is not among `fields`: declare it"]
    assert _problems(
        """
        metadata: {name: crm}
        spec:
          phases: [[notes], [companies]]
          kinds:
            companies: {request: {path: /c}, fields: {id: {}}}
            notes: {walk: tree, parent: companies, request: {path: /n}, fields: {id: {}}}
        """
    ) == [
        "spec.kinds.notes.parent: 'companies' must be in an earlier phase than 'notes' (its"
        " records are listed per companies record)"
    ]
    assert _problems(
        """
        metadata: {name: crm}
        spec:
          kinds:
            companies: {request: {path: /c}, fields: {id: {}}}
            notes:
              walk: tree
              parent: companies
              request: {path: /n}
              body: {request: {path: "/n/{record.id}"}, field: stage, into: stage}
              fields: {id: {}}
        """
    ) == [
        "spec.kinds.notes: body.into: 'stage' is not among `fields` (a record keeps only its"
        " declared fields): declare it, e.g. stage: {type: string}"
    ]
    assert _problems(
        """
        metadata: {name: crm}
        spec:
          kinds:
            notes:
              request: {path: /api/collections/notes/records}
              pagination: {style: keyset, param: filter, template: "id > '{key}'"}
              split: {values: {param: filter, values: ["created < '2026'", "created >= '2026'"]}}
              fields: {id: {}}
        """
    ) == [
        "spec.kinds.notes: split: its parameter 'filter' is also pagination.param, which"
        " replaces the part's value: each part would list the whole kind; split on another"
        " parameter (or, for one filter parameter, choose a pagination that does not use it)"
    ]


def test_a_file_that_is_not_yaml_or_not_there_says_so() -> None:
    with pytest.raises(ConfigurationError, match=r"crm.yaml: not YAML"):
        declarative.parse("kinds: [", "crm.yaml")
    with pytest.raises(ConfigurationError, match=r"nowhere.yaml: cannot read the provider file"):
        declarative.load_file("nowhere.yaml")


def test_a_declared_kind_validates_its_records_as_declared() -> None:
    provider = declarative.DeclaredProvider(declarative.parse(GOOD))
    model = provider.kinds["companies"].model
    record = model.model_validate({"id": "c1", "name": "Acme", "extra": 1})
    assert record.model_dump() == {"id": "c1", "name": "Acme", "tags": [], "employees": None}
    for bad, where in (({"id": "c2"}, "name"), ({"id": "c3", "name": "Acme Inc"}, "name")):
        with pytest.raises(ValueError, match=where):
            model.model_validate(bad)
    note = provider.kinds["notes"].model.model_validate({"id": "n1", "body": "hi"})
    assert note.model_dump() == {"id": "n1", "text": "hi"}


def test_a_declared_kind_makes_the_requests_and_pages_it_declares() -> None:
    provider = declarative.DeclaredProvider(declarative.parse(GOOD))
    companies, notes = provider.kinds["companies"], provider.kinds["notes"]
    first = companies.pagination.apply(provider.listing("companies", None), "c9", 50)
    assert (first.path, first.params, first.headers, first.cost) == (
        "/companies",
        {"sort": "id", "perPage": 50, "filter": "id>'c9'"},
        {"API-Version": "7"},
        5,
    )
    assert companies.max_page_size == 200 and companies.pagination.striped is False
    search = notes.pagination.apply(provider.listing("notes", {"id": "c 1"}), "tok", 10)
    assert (search.method, search.path, search.json) == (
        "POST",
        "/companies/c 1/notes/search",
        {"filter": {"open": True}, "after": "tok"},
    )
    assert notes.split.parts == ({"status": "open"}, {"status": "closed"})
    assert notes.policy.action(404) == "fail" and notes.policy.action(503) == "rate_limited"
    assert notes.policy.backoff == 30 and companies.policy.action(404) == "gone"
    assert provider.auth.style == "header" and provider.auth.name == "X-Api-Key"
    assert provider.phases == (("companies",), ("notes",))


def test_the_demo_crm_file_declares_what_the_python_provider_does() -> None:
    declared = declarative.load_file(PROVIDER_FILE)
    assert declared.phases == python_democrm.phases and declared.auth == python_democrm.auth
    record = {"id": 3, "deal_id": 5, "subject": "s", "from": "a@b", "name": "n", "title": "t"}
    for name, kind in python_democrm.kinds.items():
        mine = declared.kinds[name]
        assert (mine.walk, mine.parent, mine.pagination, mine.changed_since) == (
            kind.walk,
            kind.parent,
            kind.pagination,
            kind.changed_since,
        )
        parent = {"id": "5"} if kind.parent else None
        assert declared.listing(name, parent) == python_democrm.listing(name, parent)
        assert declared.writer(name) == python_democrm.writer(name)
        assert mine.model.model_validate(record).model_dump_json() == (
            kind.model.model_validate(record).model_dump_json()
        )
    assert declared.body("messages", {"id": 9}) == python_democrm.body("messages", {"id": 9})


def test_the_generated_reference_and_schema_agree_with_the_models() -> None:
    """Run hack/gen-provider-docs after changing the format's models."""
    assert (ROOT / reference.SCHEMA_PATH).read_text() == reference.schema_text()
    assert (ROOT / reference.REFERENCE_PATH).read_text() == reference.markdown()


class _PrefixPaging(spec.PagingSpec):
    """Offsets sent in a parameter of the provider's choosing (a style of this test's own)."""

    style: Literal["prefix"]
    """The pagination style."""

    prefix: str = "from"
    """Query parameter of the first record's offset."""

    def build(self) -> pagination.Offset:
        return pagination.Offset(self.stops(), self.size_param, offset=self.prefix)


def test_each_pagination_style_is_one_model_that_builds_its_own_runtime_style() -> None:
    models = spec.paging_models()
    assert tuple(spec.style_of(model) for model in models) == spec.STYLES
    titles = {model: title for title, model in reference.SECTIONS}
    for model in models:
        style = spec.style_of(model)
        assert "build" in vars(model), f"{model.__name__} builds its own style"
        assert titles[model] == f"pagination: style {style}"
        required = {name: "after" for name, f in model.model_fields.items() if f.is_required()}
        declared = model.model_validate({**required, "style": style, "stop": {"maxPages": 3}})
        built = declared.build()
        assert built.style == style and built.stops.max_pages == 3
        assert built.stops.short_page is model.ends_short
    short = {spec.style_of(model) for model in models if model.ends_short}
    assert short == {"offset", "page_number", "keyset"}  # as stop.shortPage's docs say


def test_a_new_pagination_style_is_one_class_the_style_list_and_reference_follow() -> None:
    union = Annotated[
        Union[(*spec.paging_models(), _PrefixPaging)],
        Field(discriminator="style"),
    ]
    assert spec.styles_of(union) == (*spec.STYLES, "prefix")
    assert reference.paging_sections(union)[-1] == ("pagination: style prefix", _PrefixPaging)
    declared = TypeAdapter(union).validate_python({"style": "prefix", "sizeParam": "n"})
    assert declared.build() == pagination.Offset(pagination.Stops(), "n", offset="from")


def test_provider_check_and_schema_commands(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "crm.yaml"
    good.write_text(GOOD)
    assert cli.main(["provider", "check", str(good)]) == 0
    out = capsys.readouterr().out
    assert f"{good}: provider 'crm' is valid" in out
    assert "notes: tree of each companies, cursor pagination, split in 2 parts" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("metadata: {name: crm}\nspec: {kinds: {}}\n")
    assert cli.main(["provider", "check", str(bad)]) == 2
    assert "spec.kinds: Dictionary should have at least 1 item" in capsys.readouterr().err
    assert cli.main(["provider", "schema"]) == 0
    published = json.loads(capsys.readouterr().out)
    assert published["title"] == "ProviderDocument" and "spec" in published["required"]


def test_a_run_s_source_options_are_checked_typed_and_filled_into_requests() -> None:
    provider = declarative.DeclaredProvider(
        declarative.parse(
            GOOD.replace(
                "spec:\n",
                "spec:\n  options:\n    version: {default: '2026-01'}\n"
                "    region: {}\n    limit: {type: integer, default: '50'}\n",
                1,
            )
        )
    )
    assert options_for(provider, {"region": "eu"}) == {
        "limit": 50,
        "region": "eu",
        "version": "2026-01",
    }
    with pytest.raises(ConfigurationError) as caught:
        options_for(provider, {"limit": "many", "colour": "red"})
    assert str(caught.value).splitlines() == [
        "spec.source.options.colour: 'crm' has no option 'colour' (it has: limit, region, version)",
        "spec.source.options.limit: must be integer; got 'many'",
        "spec.source.options.region: required by 'crm'; give it",
    ]
    request = Request(
        "/{options.region}/items", {"v": "{options.version}", "n": 1}, headers={"X": "{options.x}"}
    )
    assert request.with_options({"region": "eu", "version": "7"}) == Request(
        "/eu/items", {"v": "7", "n": 1}, headers={"X": "{options.x}"}
    )


OAUTH = """
metadata: {name: crm}
spec:
  auth:
    style: oauth2
    oauth2: {grant: refresh_token, tokenUrl: /oauth/token, scopes: [crm.read, crm.write],
             clientAuth: post, keys: {clientId: app-id, refreshToken: rt}}

  kinds:
    companies: {request: {path: /companies}, fields: {id: {type: integer}}}
"""


def test_an_oauth2_grant_is_declared_with_its_token_url_scopes_and_credential_keys() -> None:
    grant = declarative.DeclaredProvider(declarative.parse(OAUTH)).auth.oauth2
    assert grant is not None and grant.grant == "refresh_token"
    assert (grant.token_url, grant.scopes, grant.client_auth) == (
        "/oauth/token",
        ("crm.read", "crm.write"),
        "post",
    )
    assert grant.keys() == {
        "client_id": "app-id",
        "client_secret": "client_secret",
        "refresh_token": "rt",
    }


def test_a_bad_oauth2_block_names_the_field_and_the_fix() -> None:
    assert _problems(OAUTH.replace("tokenUrl: /oauth/token", "tokenUrl: oauth/token")) == [
        "spec.auth.oauth2: tokenUrl 'oauth/token': give an absolute http(s) URL, or a path"
        " starting with / on the run's baseURL host"
    ]
    assert _problems(OAUTH.replace("grant: refresh_token", "grant: password")) == [
        "spec.auth.oauth2.grant: Input should be 'client_credentials' or 'refresh_token'"
    ]
    no_grant = OAUTH.replace(OAUTH[OAUTH.index("    oauth2:") : OAUTH.index("  kinds:")], "")
    assert _problems(no_grant) == [
        "spec.auth: style oauth2 needs `oauth2`: its grant and tokenUrl, e.g. {grant:"
        " client_credentials, tokenUrl: /oauth/token}"
    ]
    assert _problems(OAUTH.replace("style: oauth2", "style: bearer")) == [
        "spec.auth: `oauth2` is for style oauth2: set `style: oauth2`, or drop it"
    ]


def test_a_field_may_be_read_from_a_dotted_path_into_nested_objects() -> None:
    text = """
    metadata: {name: cluster}
    spec:
      auth: {style: bearer}
      kinds:
        configmaps:
          request: {path: /configmaps}
          records: items
          pagination: {style: cursor, param: continue, next: metadata.continue}
          fields:
            id: {type: string, required: true, source: metadata.uid}
            labels: {type: object, source: metadata.labels}
            name: {type: string, source: metadata.name}
    """
    kind = declarative.DeclaredProvider(declarative.parse(textwrap.dedent(text))).kinds
    model = kind["configmaps"].model
    record = model.model_validate({"metadata": {"uid": "u-1", "labels": {"app": "crm"}}})
    assert record.model_dump() == {"id": "u-1", "labels": {"app": "crm"}, "name": None}
    with pytest.raises(ValueError, match="id"):
        model.model_validate({"metadata": {"name": "no-uid"}})


def test_a_body_on_a_get_and_a_body_cursor_without_a_post_are_named() -> None:
    get_body = GOOD.replace("request: {method: POST, path:", "request: {path:")
    assert _problems(get_body) == [
        "spec.kinds.notes.request: `body` goes with method POST (a GET sends none): set"
        " `method: POST`, or move its values into `query`",
    ]
    no_body = get_body.replace(",\n                body: {filter: {open: true}}}", "}")
    assert _problems(no_body) == [
        "spec.kinds.notes: pagination.send: body puts the cursor in the JSON body, which only a"
        " POST sends: set `request.method: POST` (a search endpoint), or `send: query`",
    ]


@pytest.mark.parametrize(
    ("auth", "problem"),
    [
        (
            "{style: basic, name: api_key}",
            "spec.auth: `name` is for styles header and query (the header or parameter holding"
            " the key); style basic does not use it: drop it, or set the style",
        ),
        (
            "{style: query, name: token, prefix: 'Token '}",
            "spec.auth: `prefix` is for style header; style query does not use it: drop it",
        ),
        (
            "{style: header, name: api-version}",
            "spec.kinds.companies.request.headers.API-Version: spec.auth (header) puts the"
            " credential there on every request: drop it (a credential never goes in a"
            " provider)",
        ),
        (
            "{style: query, name: sort}",
            "spec.kinds.companies.request.query.sort: spec.auth (query) puts the credential"
            " there on every request: drop it (a credential never goes in a provider)",
        ),
    ],
)
def test_an_auth_that_does_not_fit_its_style_or_the_requests_is_named(
    auth: str, problem: str
) -> None:
    assert _problems(GOOD.replace("{style: header, name: X-Api-Key}", auth)) == [problem]


def test_an_authorization_header_in_a_request_is_refused_for_bearer_and_basic() -> None:
    for style in ("bearer", "basic"):
        text = GOOD.replace("{style: header, name: X-Api-Key}", f"{{style: {style}}}")
        text = text.replace('API-Version: "7"', "authorization: Bearer abc")
        assert _problems(text) == [
            "spec.kinds.companies.request.headers.authorization: spec.auth"
            f" ({style}) puts the credential there on every request: drop it (a credential"
            " never goes in a provider)"
        ]
