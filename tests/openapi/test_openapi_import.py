"""`toolrun import openapi` on real public documents, and `toolrun call` on what it wrote.

The documents under tests/fixtures/openapi/ were written by others (origins in
tests/fixtures/README.md); the messy and loopback documents are written here to pin one
behaviour each. Every request goes to a loopback server that records it.
"""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.loopback import Reply
from toolrun.catalog.loader import load_catalog
from toolrun.cli import main
from toolrun.openapi import OpenAPIError, import_openapi, lint_toolset
from toolrun.openapi.document import parse_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openapi"

REAL_DOCUMENTS = {
    "petstore-expanded.yaml": 4,  # 3.0, allOf, duplicate keys, an operationId with spaces
    "petstore-separate/spec/swagger.json": 4,  # Swagger 2.0 JSON, $refs to files beside it and above it
    "uspto.yaml": 3,  # 3.0.1, server variables, a form body
    "callback-example.yaml": 1,  # no operationId, callbacks (with a dangling $ref inside)
    "webhook-example.yaml": 1,  # 3.1 with webhooks
    "uber.yaml": 5,  # Swagger 2.0 YAML, no operationIds
}


def cli(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def imported(tmp_path: Path, spec: str | Path, *extra: str) -> tuple[Path, object]:
    folder = tmp_path / "tools.d"
    outcome = cli("import", "openapi", str(spec), "-o", str(folder / "api.yaml"), *extra)
    return folder, outcome


def call_json(folder: Path, name: str, arguments: dict, env: dict[str, str] | None = None) -> dict:
    outcome = cli("call", name, "--tools-dir", str(folder), "--args", json.dumps(arguments), "--json", "--yes",
                  env=env)
    return json.loads(outcome.stdout)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# ---------------------------------------------------------------- real documents


@pytest.mark.parametrize("name", sorted(REAL_DOCUMENTS))
def test_real_documents_import_load_and_lint_without_errors(name: str, tmp_path: Path) -> None:
    folder, outcome = imported(tmp_path, FIXTURES / name)
    assert outcome.exit_code == 0, outcome.output
    result = load_catalog(folder)
    assert result.problems == []
    assert len(result.catalog) == REAL_DOCUMENTS[name]
    assert "lint:" in outcome.stderr and "0 errors" in outcome.stderr
    for tool in result.catalog:
        assert tool.backend.kind == "http" and tool.annotations is not None


def test_reimporting_gives_the_same_file(tmp_path: Path) -> None:
    first = import_openapi(FIXTURES / "petstore-separate/spec/swagger.json").text
    second = import_openapi(FIXTURES / "petstore-separate/spec/swagger.json").text
    assert first == second
    assert "  # GET /pets/{id}\n  - name: find_pet_by_id\n" in first


def test_cross_file_refs_and_swagger_base_url() -> None:
    result = import_openapi(FIXTURES / "petstore-separate/spec/swagger.json")
    assert result.base_url == "http://petstore.swagger.wordnik.com/api"
    tools = {tool.name: tool for tool in result.tools}
    # NewPet.json is allOf [Pet.json, {...}]: merged into one object, its members separate arguments
    assert list(tools["addPet"].parameters["properties"]) == ["id", "name", "tag", "description"]
    assert tools["addPet"].parameters["required"] == ["id", "name"]
    assert tools["findPets"].arguments == {"tags": {"in": "query", "explode": False}, "limit": "query"}


def test_server_variables_take_their_defaults_and_webhooks_callbacks_are_reported() -> None:
    assert import_openapi(FIXTURES / "uspto.yaml").base_url == "https://developer.uspto.gov/ds-api"
    webhook = import_openapi(FIXTURES / "webhook-example.yaml")
    assert [str(s) for s in webhook.skipped] == [
        "webhook 'newPet': the API calls you with it: nothing for a tool to send"]
    callback = import_openapi(FIXTURES / "callback-example.yaml")
    assert callback.tools[0].name == "post_streams"
    assert any("callbacks are not imported" in note for note in callback.notes)
    assert "# Notes:" in callback.text


def test_selection_by_glob_and_tag() -> None:
    spec = FIXTURES / "uber.yaml"
    assert [t.name for t in import_openapi(spec, tags=["Estimates"]).tools] == [
        "get_estimates_price", "get_estimates_time"]
    assert [t.name for t in import_openapi(spec, include=["/estimates/*"], exclude=["*time"]).tools] == [
        "get_estimates_price"]
    result = import_openapi(FIXTURES / "petstore-expanded.yaml", include=["find*"])
    assert [t.name for t in result.tools] == ["findPets", "find_pet_by_id"] and result.not_selected == 2


# ---------------------------------------------------------------- requests on the wire


def test_call_sends_the_request_the_3_0_document_describes(tmp_path: Path, loopback) -> None:
    server = loopback(lambda request: Reply(200, {"ok": True}))
    folder, outcome = imported(tmp_path, FIXTURES / "petstore-expanded.yaml", "--base-url", server.url + "/v2")
    assert outcome.exit_code == 0, outcome.output

    assert call_json(folder, "findPets", {"tags": ["dog", "cat"], "limit": 3})["result"] == '{"ok": true}'
    assert call_json(folder, "findPets", {})["is_error"] is False
    assert call_json(folder, "addPet", {"name": "Rex"})["is_error"] is False
    assert call_json(folder, "deletePet", {"id": 7})["is_error"] is False
    find, find_bare, add, delete = server.requests
    assert (find.method, find.path, find.query) == ("GET", "/v2/pets", {"tags": ["dog", "cat"], "limit": ["3"]})
    assert (find_bare.path, find_bare.query) == ("/v2/pets", {})  # optional parameters left out, not empty
    assert (add.method, add.path, add.json()) == ("POST", "/v2/pets", {"name": "Rex"})
    assert add.headers["content-type"] == "application/json"
    assert (delete.method, delete.path, delete.body) == ("DELETE", "/v2/pets/7", b"")


def test_call_sends_swagger_2_collection_formats_and_json_bodies(tmp_path: Path, loopback) -> None:
    server = loopback(lambda request: Reply(200, {"id": 1}))
    folder, _ = imported(tmp_path, FIXTURES / "petstore-separate/spec/swagger.json", "--base-url", server.url)
    call_json(folder, "findPets", {"tags": ["dog", "cat"], "limit": 3})
    call_json(folder, "addPet", {"id": 1, "name": "Rex", "description": 5})
    find, add = server.requests
    assert find.query == {"tags": ["dog,cat"], "limit": ["3"]}  # csv, Swagger's default
    assert add.json() == {"id": 1, "name": "Rex", "description": 5}


def test_call_sends_form_bodies_and_path_parameters(tmp_path: Path, loopback) -> None:
    server = loopback(lambda request: Reply(200, []))
    folder, _ = imported(tmp_path, FIXTURES / "uspto.yaml", "--base-url", server.url + "/ds-api")
    call_json(folder, "perform-search", {"dataset": "oa citations", "version": "v1", "criteria": "*:*", "rows": 5})
    (search,) = server.requests
    assert (search.method, search.path) == ("POST", "/ds-api/oa%20citations/v1/records")
    assert search.headers["content-type"] == "application/x-www-form-urlencoded"
    assert search.body == b"criteria=%2A%3A%2A&rows=5"


LOCATIONS_DOCUMENT = """\
    openapi: 3.1.0
    info: {title: Ops Inventory, version: "2"}
    servers: [{url: /api/v1}]
    components:
      securitySchemes:
        key: {type: apiKey, in: header, name: X-Api-Key}
    security: [{key: []}]
    paths:
      /items/{item-id}:
        parameters:
          - {name: item-id, in: path, required: true, schema: {type: string}, description: The item.}
        put:
          operationId: replaceItem
          parameters:
            - {name: X-Request-ID, in: header, schema: {type: string}, description: Trace id.}
            - {name: id, in: query, schema: {type: integer}, description: Revision to replace.}
            - {name: fields, in: query, style: form, explode: false, schema: {type: array, items: {type: string}}}
            - {name: filter, in: query, style: deepObject, schema: {type: object}}
            - {name: session, in: cookie, schema: {type: string}}
            - {name: ids, in: query, style: pipeDelimited, schema: {type: array, items: {type: integer}}}
          requestBody:
            required: true
            content:
              application/json:
                schema: {$ref: "schemas.yaml#/Item"}
          responses: {"200": {description: ok}}
"""
SCHEMAS_DOCUMENT = """\
    Item:
      type: object
      required: [id, name]
      properties:
        id: {type: integer, readOnly: false, description: The body's id.}
        name: {type: string, description: Display name.}
        created: {type: string, readOnly: true}
        parent: {$ref: "#/Item"}
"""


def test_every_location_from_a_document_served_over_http(tmp_path: Path, loopback) -> None:
    documents = {"/specs/inventory.yaml": textwrap.dedent(LOCATIONS_DOCUMENT),
                 "/specs/schemas.yaml": textwrap.dedent(SCHEMAS_DOCUMENT)}
    api = loopback(lambda request: Reply(200, {"ok": True}))
    served = loopback(lambda request: Reply(200, documents[request.path]) if request.path in documents
                      else Reply(404, "no"))
    missing = cli("import", "openapi", served.url + "/specs/nothing.yaml")
    assert missing.exit_code == 2 and f"cannot fetch {served.url}/specs/nothing.yaml: HTTP 404" in missing.stderr
    folder, outcome = imported(tmp_path, served.url + "/specs/inventory.yaml")
    assert outcome.exit_code == 0, outcome.output
    text = (folder / "api.yaml").read_text(encoding="utf-8")
    assert f"base_url: {served.url}/api/v1" in text  # the relative server, resolved against the document's URL
    assert "X-Api-Key: ${env:OPS_INVENTORY_API_KEY}" in text and "OPS_INVENTORY_API_KEY:" in text
    tool = load_catalog(folder).catalog.tools["replaceItem"]
    properties = tool.parameters["properties"]
    assert list(properties) == ["item_id", "id", "fields", "filter", "ids", "X_Request_ID", "session", "body_id",
                                "name", "parent"]  # the body's `id` renamed, `created` (readOnly) not sent
    assert properties["parent"] == {"type": "object", "description": "(recursive: the same structure again, not spelled out)"}

    # the same toolset, pointed at the API server (its base URL and the host allow_hosts pins)
    assert yaml.safe_load(text)["defaults"]["http"]["allow_hosts"] == [served.url.removeprefix("http://")]
    toolset = text.replace(served.url.removeprefix("http://"), api.url.removeprefix("http://"))
    (folder / "api.yaml").write_text(toolset, encoding="utf-8")
    arguments = {"item_id": "a/b", "id": 3, "fields": ["x", "y"], "filter": {"color": "red"},
                 "ids": [1, 2], "X_Request_ID": "req-1", "session": "s1", "body_id": 9, "name": "Bolt"}
    result = call_json(folder, "replaceItem", arguments, env={"OPS_INVENTORY_API_KEY": "k-123"})
    assert result["is_error"] is False, result
    (request,) = api.requests
    assert (request.method, request.path) == ("PUT", "/api/v1/items/a%2Fb")
    assert request.query == {"id": ["3"], "fields": ["x,y"], "filter[color]": ["red"], "ids": ["1|2"]}
    assert request.headers["x-request-id"] == "req-1" and request.headers["x-api-key"] == "k-123"
    assert request.headers["cookie"] == "session=s1"
    assert request.json() == {"id": 9, "name": "Bolt"}


MESSY_DOCUMENT = """\
    swagger: "2.0"
    info: {title: "Legacy <b>Billing</b>", version: "1"}
    host: billing.internal
    basePath: /v1
    securityDefinitions:
      basic: {type: basic}
    paths:
      /invoices?status=open:
        get:
          summary: "Open invoices. See [the docs](https://docs.example.com/x) for <i>details</i>."
          parameters:
            - {name: "page[size]", in: query, type: integer, description: Page size.}
            - {name: "$filter", in: query, type: string, description: OData filter.}
      /invoices/{id}:
        get:
          operationId: getInvoice
          parameters:
            - {name: id, in: path, required: true, type: string}
            - $ref: "#/parameters/Missing"
        delete:
          operationId: getInvoice
          parameters:
            - {name: id, in: path, required: true, type: string}
            - {name: version, in: path, required: true, type: string}
      /invoices:
        post:
          operationId: createInvoice
          summary: Create an invoice for a customer.
          parameters:
            - {name: invoice, in: body, required: true, schema: {$ref: "#/definitions/Invoice"}}
      /upload:
        post:
          operationId: uploadScan
          consumes: [multipart/form-data]
          parameters:
            - {name: scan, in: formData, type: file}
      /trace:
        trace:
          operationId: traceIt
    definitions:
      Invoice:
        type: object
        required: [amount]
        properties:
          amount: {type: number, description: Total in euros.}
          customer: {$ref: "#/definitions/Customer"}
    ---
"""


def test_a_messy_document_imports_what_it_can_and_says_what_it_skipped(tmp_path: Path) -> None:
    spec = write(tmp_path, "legacy.yaml", MESSY_DOCUMENT)
    folder, outcome = imported(tmp_path, spec)
    assert outcome.exit_code == 0, outcome.output
    assert "Traceback" not in outcome.output
    skipped = [line.strip() for line in outcome.stderr.splitlines() if line.strip().startswith("skipped")]
    assert skipped == [
        "skipped GET /invoices/{id} (getInvoice): $ref '#/parameters/Missing' points to nothing",
        "skipped POST /upload (uploadScan): its formData includes a file (multipart/form-data): a file upload "
        "cannot be sent by the http backend",
        "skipped TRACE /trace (traceIt): the method TRACE cannot be sent by the http backend",
    ]
    notes = [line.strip() for line in outcome.stderr.splitlines() if line.strip().startswith("note")]
    assert notes == ["note: DELETE /invoices/{id} (getInvoice): path parameter 'version' is not in the path "
                     "'/invoices/{id}': left out",
                     "note: POST /invoices (createInvoice): $ref '#/definitions/Customer' points to nothing: "
                     "that part of its arguments accepts any value"]
    catalog = load_catalog(folder).catalog
    assert list(catalog.tools) == ["get_invoices_status_open", "getInvoice", "createInvoice"]
    assert catalog.tools["createInvoice"].parameters["required"] == ["amount"]
    listing = catalog.tools["get_invoices_status_open"]
    assert listing.description == "Open invoices. See the docs for details."
    assert listing.backend.config["url"] == "/invoices" and listing.backend.config["query"] == {"status": "open"}
    assert listing.backend.config["arguments"] == {"page_size": {"in": "query", "name": "page[size]"},
                                                   "filter": {"in": "query", "name": "$filter"}}
    assert catalog.tools["getInvoice"].annotations.destructive is True  # the DELETE kept the name
    text = (folder / "api.yaml").read_text(encoding="utf-8")
    assert 'Authorization: Basic ${env:LEGACY_BILLING_BASIC_AUTH}' in text  # the title's markup left out
    assert text.startswith(f"# Imported by `toolrun import openapi` from {spec}\n# (Legacy Billing, Swagger 2.0)")


def test_what_cannot_be_imported_at_all_is_one_sentence(tmp_path: Path) -> None:
    for text, expected in (("swagger: '1.2'\napis: []\n", "not an OpenAPI 3.x or Swagger 2.0 document"),
                           ("- a\n- b\n", "is not an OpenAPI document"),
                           ("openapi: 3.0.0\npaths: {x: [\n", "is neither YAML nor JSON")):
        spec = write(tmp_path, "bad.yaml", text)
        with pytest.raises(OpenAPIError, match=expected):
            import_openapi(spec)
        outcome = cli("import", "openapi", str(spec))
        assert outcome.exit_code == 2 and "Traceback" not in outcome.output and expected in outcome.stderr
    outcome = cli("import", "openapi", str(tmp_path / "missing.yaml"))
    assert outcome.exit_code == 2 and "no such file" in outcome.stderr


def test_a_broken_document_names_its_line_and_the_fix_that_applies(tmp_path: Path) -> None:
    broken = write(tmp_path, "broken.yaml", "openapi: 3.0.0\ninfo: {title: X}\npaths:\n  /a: {get: [\n")
    outcome = cli("import", "openapi", str(broken))
    assert outcome.exit_code == 2
    assert f"error: {broken}:5: the document is neither YAML nor JSON: " in outcome.stderr
    for text, fix in (("openapi: 4.0.0\npaths: {}\n", "toolrun reads OpenAPI 3.0 and 3.1 and Swagger 2.0"),
                      ("info: {title: X}\n", "an OpenAPI document starts with `openapi: 3.x.y`"),
                      ("openapi: 3.0.0\npaths: {}\n", "an OpenAPI document lists its operations under `paths:`"),
                      ("", "(it is empty)")):
        outcome = cli("import", "openapi", str(write(tmp_path, "odd.yaml", text)))
        assert outcome.exit_code == 2 and fix in outcome.stderr and "Swagger 1.x" not in outcome.stderr
        assert "see the reasons above" not in outcome.stderr
    referring = write(tmp_path, "refers.yaml", """\
        openapi: 3.0.0
        info: {title: X, version: "1"}
        paths:
          /a: {$ref: "broken.yaml#/paths/~1a"}
          /b: {get: {operationId: getB, responses: {"200": {description: ok}}}}
        """)
    result = import_openapi(referring)
    assert [str(s) for s in result.skipped] == [
        f"path /a: $ref 'broken.yaml#/paths/~1a' cannot be read: {broken}:5: the document is neither YAML nor JSON: "
        "did not find expected node content"]


def _one_operation(schema: str) -> str:
    return ('{"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": {"/a": {"get": {'
            '"operationId": "a", "responses": {"200": {"description": "ok"}}, '
            f'"parameters": [{{"name": "q", "in": "query", "schema": {schema}}}]}}}}}}}}')


@pytest.mark.parametrize(("text", "expected"), [
    (_one_operation("[" * 50_000 + "]" * 50_000), "nested too deeply to import"),
    (_one_operation('{"type": "array", "items": ' * 600 + '{"type": "string"}' + "}" * 600), "nested too deeply to import"),
    ("openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths: {}\nx-text: &s " + "A" * 100_000
     + "\nx-copies: [" + ", ".join(["*s"] * 120) + "]\n", "aliases expand to more than 10,000,000"),
], ids=["deep-json", "deep-schema", "aliased-text"])
def test_a_hostile_document_is_one_sentence_not_a_traceback_or_a_hang(tmp_path: Path, text: str, expected: str) -> None:
    # A document fetched from a server is not the user's own file: no recursion or alias bomb gets through.
    spec = write(tmp_path, "hostile.yaml", text)
    with pytest.raises(OpenAPIError, match=expected):
        import_openapi(spec)
    outcome = cli("import", "openapi", str(spec))
    assert outcome.exit_code == 2 and "Traceback" not in outcome.output and expected in outcome.stderr


def test_stdout_output_is_the_toolset_and_lint_still_runs(tmp_path: Path) -> None:
    outcome = cli("import", "openapi", str(FIXTURES / "webhook-example.yaml"))
    assert outcome.exit_code == 0
    document = yaml.safe_load(outcome.stdout)
    assert [tool["name"] for tool in document["tools"]] == ["listPets"]
    assert "lint: 1 tool — 0 errors" in outcome.stderr
    review = lint_toolset(outcome.stdout)
    assert review.tools == 1 and review.problems == []



def test_the_review_of_a_printed_toolset_names_stdout_not_a_temporary_file() -> None:
    text = import_openapi(FIXTURES / "webhook-example.yaml").text
    review = lint_toolset(text + "\n  - name: listPets\n    description: Again.\n")  # no backend: a load problem
    assert review.problems and all(str(problem).startswith("<stdout>:") for problem in review.problems)
    assert "toolrun-import-" not in " ".join(str(problem) for problem in review.problems)


def test_openai_document_imports_and_loads_without_errors(tmp_path: Path) -> None:
    # The subset keeps every path and operation of OpenAI's document (tests/fixtures/README.md).
    spec = FIXTURES.parent / "specs" / "openai-openapi.subset.json"
    result = import_openapi(spec)
    review = lint_toolset(result.text)
    assert len(result.tools) > 250 and review.tools == len(result.tools)
    assert review.problems == [] and not [f for f in review.findings if f.severity == "error"]
    # findings about the whole toolset (too many tools) name where it was printed, not a folder already gone
    [too_many] = [f for f in review.findings if f.rule == "too-many-tools"]
    assert too_many.file == "<stdout>"
    assert "toolrun-import-" not in " ".join(f"{f.file} {f.message}" for f in review.findings)
    assert result.base_url == "https://api.openai.com/v1"
    assert all(s.reason.startswith("its body is multipart/form-data") for s in result.skipped)


SECURITY_DOCUMENT = """\
    openapi: 3.0.3
    info: {title: Fleet, version: "1"}
    servers: [{url: /v1}]
    components:
      securitySchemes:
        bearer: {type: http, scheme: bearer}
        admin: {type: apiKey, in: query, name: admin_key}
    security: [{bearer: []}]
    paths:
      /trucks:
        post:
          operationId: addTrucks
          summary: Register several trucks at once.
          requestBody:
            required: true
            content:
              application/json:
                schema: {type: array, items: {type: string}, description: Plate numbers.}
          responses: {"200": {description: ok}}
      /admin/reset:
        post:
          operationId: resetFleet
          security: [{admin: []}]
          responses: {"200": {description: ok}}
"""


def test_relative_server_operation_security_and_a_whole_array_body(tmp_path: Path, loopback) -> None:
    spec = write(tmp_path, "fleet.yaml", SECURITY_DOCUMENT)
    result = import_openapi(spec)
    assert result.base_url == "${env:FLEET_BASE_URL}"  # a file cannot say where /v1 is
    assert list(result.variables) == ["FLEET_BASE_URL", "FLEET_TOKEN", "FLEET_ADMIN_API_KEY"]
    assert "FLEET_BASE_URL" in result.notes[0] and "--base-url" in result.notes[0]
    server = loopback(lambda request: Reply(200, {}))
    folder, outcome = imported(tmp_path, spec)
    assert outcome.exit_code == 0, outcome.output
    env = {"FLEET_BASE_URL": server.url + "/v1", "FLEET_TOKEN": "b-1", "FLEET_ADMIN_API_KEY": "a-2"}
    assert call_json(folder, "addTrucks", {"body": ["B-AB 1", "B-CD 2"]}, env=env)["is_error"] is False
    assert call_json(folder, "resetFleet", {}, env=env)["is_error"] is False
    add, reset = server.requests
    assert add.json() == ["B-AB 1", "B-CD 2"] and add.headers["authorization"] == "Bearer b-1"
    assert (reset.path, reset.query) == ("/v1/admin/reset", {"admin_key": ["a-2"]})


def test_a_selection_that_matches_nothing_is_an_error_not_an_empty_file(tmp_path: Path) -> None:
    outcome = cli("import", "openapi", str(FIXTURES / "uber.yaml"), "--tag", "Nope", "-o", str(tmp_path / "x.yaml"))
    assert outcome.exit_code == 2
    assert "none of the 5 operations of" in outcome.stderr and not (tmp_path / "x.yaml").exists()


def test_two_thousand_operations_without_operation_ids_get_unique_names(tmp_path: Path) -> None:
    paths = {f"/svc{i}/items/{{item-id}}": {
        method: {"parameters": [{"name": "item-id", "in": "path", "required": True, "schema": {"type": "string"}}]}
        for method in ("get", "delete")} for i in range(1000)}
    paths["/svc0/items/{item-id}"]["get"]["operationId"] = "delete_svc1_items_item_id"  # steals a derived name
    spec = tmp_path / "many.json"
    spec.write_text(json.dumps({"openapi": "3.0.0", "info": {"title": "Many", "version": "1"}, "paths": paths}))
    result = import_openapi(spec)
    names = [tool.name for tool in result.tools]
    assert len(names) == len(set(names)) == 2000
    assert names[:4] == ["delete_svc1_items_item_id", "delete_svc0_items_item_id", "get_svc1_items_item_id",
                         "delete_svc1_items_item_id_2"]
    assert result.tools[0].url == "/svc0/items/{item_id}"


def test_output_replaces_an_earlier_import_and_nothing_else(tmp_path: Path) -> None:
    folder, first = imported(tmp_path, FIXTURES / "uber.yaml")
    assert first.exit_code == 0 and "(replacing" not in first.stderr
    again = cli("import", "openapi", str(FIXTURES / "uber.yaml"), "--tag", "Products", "-o", str(folder / "api.yaml"))
    assert again.exit_code == 0 and "to " + str(folder / "api.yaml") + " (replacing the earlier import)" in again.stderr
    assert [t.name for t in load_catalog(folder).catalog] == ["get_products"]

    hand_written = write(folder, "inventory.yaml", "name: count_stock\ndescription: Counts.\n")
    refused = cli("import", "openapi", str(FIXTURES / "uber.yaml"), "-o", str(hand_written))
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert f"{hand_written}: exists and was not written by `toolrun import openapi`: not replaced" in refused.stderr
    assert hand_written.read_text(encoding="utf-8") == "name: count_stock\ndescription: Counts.\n"


def test_an_output_that_cannot_be_written_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "notes").write_text("a file, not a folder", encoding="utf-8")
    outcome = cli("import", "openapi", str(FIXTURES / "uber.yaml"), "-o", str(tmp_path / "notes" / "api.yaml"))
    assert outcome.exit_code == 2 and "Traceback" not in outcome.output
    assert f"cannot write the toolset: {tmp_path / 'notes'} is a file, not a folder" in outcome.stderr


MEDIA_TYPES_DOCUMENT = """\
    swagger: "2.0"
    info: {title: Media, version: "1"}
    host: 127.0.0.1
    consumes: [application/xml]
    paths:
      /xml:
        post:
          operationId: postXml
          parameters:
            - {name: item, in: body, required: true, schema: {type: object, properties: {id: {type: integer}}}}
      /patch:
        patch:
          operationId: patchItem
          consumes: [application/merge-patch+json]
          parameters:
            - {name: item, in: body, required: true, schema: {type: object, properties: {id: {type: integer}}}}
      /json:
        post:
          operationId: postJson
          consumes: [application/json, application/xml]
          parameters:
            - {name: item, in: body, required: true, schema: {type: object, properties: {id: {type: integer}}}}
      /multipart:
        post:
          operationId: postParts
          consumes: [multipart/form-data]
          parameters:
            - {name: note, in: formData, type: string}
"""


def test_a_body_is_sent_with_the_media_type_the_document_names_or_skipped(tmp_path: Path, loopback) -> None:
    spec = write(tmp_path, "media.yaml", MEDIA_TYPES_DOCUMENT)
    result = import_openapi(spec)
    assert [str(s) for s in result.skipped] == [
        "POST /xml (postXml): its body is application/xml, not JSON: the http backend sends JSON or form bodies",
        "POST /multipart (postParts): its formData is sent as multipart/form-data: a multipart body cannot be "
        "sent by the http backend"]
    server = loopback(lambda request: Reply(200, {}))
    folder, outcome = imported(tmp_path, spec, "--base-url", server.url)
    assert outcome.exit_code == 0, outcome.output
    assert call_json(folder, "patchItem", {"id": 1})["is_error"] is False
    assert call_json(folder, "postJson", {"id": 2})["is_error"] is False
    patch, post = server.requests
    assert (patch.headers["content-type"], patch.json()) == ("application/merge-patch+json", {"id": 1})
    assert (post.headers["content-type"], post.json()) == ("application/json", {"id": 2})

    openapi3 = write(tmp_path, "vendor.yaml", """\
        openapi: 3.0.3
        info: {title: Vendor, version: "1"}
        paths:
          /articles:
            post:
              operationId: addArticle
              requestBody:
                content:
                  application/vnd.api+json:
                    schema: {type: object, properties: {data: {type: object}}}
              responses: {"201": {description: created}}
        """)
    (tool,) = import_openapi(openapi3, base_url=server.url).tools
    assert tool.content_type == "application/vnd.api+json"


HEADER_AND_PATH_STYLES_3 = """\
    openapi: 3.0.3
    info: {title: Styles, version: "1"}
    paths:
      /points/{point}:
        get:
          operationId: getPoint
          parameters:
            - {name: point, in: path, required: true, explode: true, schema: {type: object}}
            - {name: X-Color, in: header, explode: true, schema: {type: object}}
            - {name: X-Shape, in: header, schema: {type: object}}
          responses: {"200": {description: ok}}
"""
HEADER_AND_PATH_STYLES_2 = """\
    swagger: "2.0"
    info: {title: Styles Two, version: "1"}
    host: 127.0.0.1
    paths:
      /rows/{ids}:
        get:
          operationId: getRows
          parameters:
            - {name: ids, in: path, required: true, type: array, items: {type: integer}, collectionFormat: pipes}
            - {name: X-Tags, in: header, type: array, items: {type: string}, collectionFormat: ssv}
            - {name: X-Keys, in: header, type: array, items: {type: string}}
"""


def test_header_and_path_arrays_and_objects_keep_their_style(tmp_path: Path, loopback) -> None:
    server = loopback(lambda request: Reply(200, {}))
    for name, text in (("styles3.yaml", HEADER_AND_PATH_STYLES_3), ("styles2.yaml", HEADER_AND_PATH_STYLES_2)):
        spec = write(tmp_path, name, text)
        assert cli("import", "openapi", str(spec), "--base-url", server.url,
                   "-o", str(tmp_path / "tools.d" / name)).exit_code == 0
    folder = tmp_path / "tools.d"
    call_json(folder, "getPoint", {"point": {"x": 1, "y": 2}, "X_Color": {"r": 9, "g": 8}, "X_Shape": {"kind": "dot"}})
    call_json(folder, "getRows", {"ids": [1, 2], "X_Tags": ["a", "b"], "X_Keys": ["k", "l"]})
    point, rows = server.requests
    assert point.path == "/points/x=1,y=2"  # simple, exploded; the separators as themselves (RFC 6570)
    assert (point.headers["x-color"], point.headers["x-shape"]) == ("r=9,g=8", "kind,dot")
    assert rows.path == "/rows/1%7C2"  # pipes: 1|2
    assert (rows.headers["x-tags"], rows.headers["x-keys"]) == ("a b", "k,l")  # ssv; csv, Swagger's default


def test_a_3_1_nullable_union_says_its_description_once_on_top(tmp_path: Path) -> None:
    # OpenAI's document writes nullable members so: the lint said "no description" for most of them
    spec = write(tmp_path, "nullable.yaml", """\
        openapi: 3.1.0
        info: {title: Assistants, version: "1"}
        paths:
          /assistants:
            post:
              operationId: createAssistant
              summary: Create an assistant with a model and instructions, for the chat to use later on.
              requestBody:
                required: true
                content:
                  application/json:
                    schema:
                      type: object
                      properties:
                        name:
                          anyOf:
                            - {type: string, maxLength: 256, description: The name of the assistant.}
                            - {type: "null"}
                        model:
                          anyOf:
                            - {type: string, description: A model id.}
                            - {type: string, enum: [gpt-5], description: A known model.}
              responses: {"200": {description: ok}}
        """)
    (tool,) = import_openapi(spec).tools
    name, model = tool.parameters["properties"]["name"], tool.parameters["properties"]["model"]
    assert name == {"description": "The name of the assistant.",
                    "anyOf": [{"type": "string", "maxLength": 256}, {"type": "null"}]}
    assert "description" not in model  # two described branches: each keeps its own
    findings = lint_toolset(import_openapi(spec).text).findings
    assert [f.message for f in findings if f.rule == "parameter-missing-description"] == [
        "parameter 'model' has no description: say what it is, its format and an example"]


def test_reimporting_over_a_cached_toolset_is_never_served_stale(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(tmp_path / "cache"))
    hour_ago = (int(time.time()) - 3600) * 1_000_000_000
    document = (FIXTURES / "uber.yaml").read_text(encoding="utf-8")
    target = tmp_path / "tools.d" / "api.yaml"
    for word in ("Alpha", "Bravo"):  # two documents whose toolsets differ in one word of the same length
        spec = write(tmp_path, f"{word}.yaml", document.replace("The Products endpoint", f"{word} endpoint"))
        assert cli("import", "openapi", str(spec), "-o", str(target)).exit_code == 0
        os.utime(target, ns=(hour_ago, hour_ago))  # the same mtime both times, as within one tick of a coarse clock
        shown = cli("tools", "show", "get_products", "--tools-dir", str(target.parent))
        assert f"{word} endpoint" in shown.stdout
        assert list((tmp_path / "cache").glob("catalog-*.index"))  # an hour old: kept, and checked the second time


def test_a_server_variable_without_a_default_takes_its_first_value_or_asks_for_the_url(tmp_path: Path) -> None:
    text = """\
        openapi: 3.0.0
        info: {title: Regional, version: "1"}
        servers: [{url: "https://{region}.example.com/{version}", variables: {region: REGION, version: {default: v2}}}]
        paths:
          /a: {get: {operationId: getA, responses: {"200": {description: ok}}}}
        """
    chosen = import_openapi(write(tmp_path, "enum.yaml", text.replace("REGION", "{enum: [eu, us]}")))
    assert chosen.base_url == "https://eu.example.com/v2"
    unknown = import_openapi(write(tmp_path, "free.yaml", text.replace("REGION", "{description: Where.}")))
    assert unknown.base_url == "${env:REGIONAL_BASE_URL}"  # never a {region} the model would have to fill
    assert unknown.notes[0] == ("its server URL https://{region}.example.com/v2 has a variable without a value (region): "
                                "set REGIONAL_BASE_URL, or import again with --base-url")


def test_form_fields_keep_their_encoding_and_a_style_that_does_not_apply_is_noted(tmp_path: Path, loopback) -> None:
    spec = write(tmp_path, "form.yaml", """\
        openapi: 3.0.3
        info: {title: Form, version: "1"}
        paths:
          /orders:
            post:
              operationId: addOrder
              parameters:
                - {name: ids, in: query, style: simple, schema: {type: array, items: {type: integer}}}
              requestBody:
                content:
                  application/x-www-form-urlencoded:
                    schema:
                      type: object
                      properties:
                        sizes: {type: array, items: {type: string}}
                        codes: {type: array, items: {type: string}}
                        colors: {type: array, items: {type: string}}
                    encoding:
                      sizes: {style: pipeDelimited}
                      codes: {explode: false}
                      colors: {style: deepObject}
              responses: {"200": {description: ok}}
        """)
    server = loopback(lambda request: Reply(200, {}))
    folder, outcome = imported(tmp_path, spec, "--base-url", server.url)
    assert outcome.exit_code == 0, outcome.output
    notes = [line.strip() for line in outcome.stderr.splitlines() if line.strip().startswith("note: POST")]
    assert notes == [
        "note: POST /orders (addOrder): query parameter 'ids' says style simple, which does not apply there: "
        "sent in the form style",
        "note: POST /orders (addOrder): form field 'colors' says style deepObject, which does not apply there: "
        "sent in the form style"]
    arguments = {"ids": [1, 2], "sizes": ["s", "m"], "codes": ["a", "b"], "colors": ["red", "blue"]}
    assert call_json(folder, "addOrder", arguments)["is_error"] is False
    (request,) = server.requests
    assert request.query == {"ids": ["1", "2"]}
    assert request.body == b"sizes=s%7Cm&codes=a%2Cb&colors=red&colors=blue"


def test_an_imported_csv_array_sends_a_comma_inside_an_item_encoded_and_refuses_a_pipe_inside_a_pipe_item(
        tmp_path: Path, loopback) -> None:
    spec = write(tmp_path, "tags.yaml", """\
        openapi: 3.0.3
        info: {title: Tags, version: "1"}
        paths:
          /notes:
            get:
              operationId: findNotes
              parameters:
                - {name: tags, in: query, style: form, explode: false, schema: {type: array, items: {type: string}}}
                - {name: ids, in: query, style: pipeDelimited, schema: {type: array, items: {type: string}}}
              responses: {"200": {description: ok}}
        """)
    server = loopback(lambda request: Reply(200, {}))
    folder, outcome = imported(tmp_path, spec, "--base-url", server.url)
    assert outcome.exit_code == 0, outcome.output
    assert call_json(folder, "findNotes", {"tags": ["red,green", "blue"]})["is_error"] is False
    refused = call_json(folder, "findNotes", {"ids": ["7|8"]})
    assert refused["is_error"] is True and "argument 'ids' has an item '7|8' that holds '|'" in refused["result"]
    (request,) = server.requests
    assert request.raw_query == "tags=red%2Cgreen,blue"  # two items; the first one's comma is data


def test_an_imported_get_with_a_request_body_sends_none_when_no_member_is_given(tmp_path: Path, loopback) -> None:
    spec = write(tmp_path, "search.yaml", """\
        openapi: 3.1.0
        info: {title: Search, version: "1"}
        paths:
          /search:
            get:
              operationId: search
              parameters: [{name: q, in: query, schema: {type: string}}]
              requestBody:
                content:
                  application/json:
                    schema: {type: object, properties: {filter: {type: string}}}
              responses: {"200": {description: ok}}
        """)
    server = loopback(lambda request: Reply(200, {}))
    folder, outcome = imported(tmp_path, spec, "--base-url", server.url)
    assert outcome.exit_code == 0, outcome.output
    assert call_json(folder, "search", {"q": "roses"})["is_error"] is False
    (request,) = server.requests
    assert (request.method, request.query, request.body) == ("GET", {"q": ["roses"]}, b"")


def test_free_form_and_malformed_schemas_still_give_a_toolset_that_loads(tmp_path: Path) -> None:
    spec = write(tmp_path, "free.yaml", """\
        openapi: 3.0.0
        info: {title: Free, version: "1"}
        servers: [{url: "https://api.example.com"}]
        paths:
          /notes:
            post:
              operationId: addNote
              parameters:
                - {name: tag, in: query, description: Any label., schema: {}}
                - {name: odd, in: query, style: 5, explode: "perhaps", schema: {type: string, enum: abc, items: 3}}
              requestBody:
                content:
                  application/json:
                    schema:
                      type: object
                      required: [text]
                      properties:
                        text: {type: string, description: The note., required: true}
                        extra: {description: Whatever the client keeps with it.}
              responses: {"200": {description: ok}}
        """)
    folder, outcome = imported(tmp_path, spec)
    assert outcome.exit_code == 0, outcome.output
    assert "0 errors" in outcome.stderr
    tool = load_catalog(folder).catalog.tools["addNote"]
    any_value = ["string", "number", "integer", "boolean", "object", "array", "null"]
    properties = tool.parameters["properties"]
    assert properties["tag"] == {"type": any_value, "description": "Any label."}
    assert properties["odd"] == {"type": "string"}  # `enum: abc` and `items: 3` are not JSON Schema: left out
    assert properties["extra"] == {"type": any_value, "description": "Whatever the client keeps with it."}
    assert properties["text"] == {"type": "string", "description": "The note."}
    assert tool.backend.config["arguments"]["odd"] == "query"  # style 5 and explode "perhaps": the defaults


def test_the_review_says_each_load_problem_once(tmp_path: Path) -> None:
    text = textwrap.dedent("""\
        tools:
          - name: get_rows
            description: Lists the rows of a table, newest first. Use it to read a table; not to change it.
            parameters:
              type: object
              properties:
                ids: {type: array, items: 3, description: Row ids.}
            backend: {http: {method: GET, url: "https://api.example.com/rows"}}
        """)
    problems = [str(problem) for problem in lint_toolset(text).problems]
    assert problems and len(problems) == len(set(problems))


def test_the_only_security_scheme_adds_nothing_to_its_variable_name(tmp_path: Path) -> None:
    spec = write(tmp_path, "search.yaml", """\
        swagger: "2.0"
        info: {title: Article Search, version: "1"}
        host: api.example.com
        securityDefinitions:
          nyt_key: {type: apiKey, in: query, name: api-key}
        security: [{nyt_key: []}]
        paths:
          /articles: {get: {operationId: searchArticles, responses: {"200": {description: ok}}}}
        """)
    result = import_openapi(spec)
    assert list(result.variables) == ["ARTICLE_SEARCH_API_KEY"]  # not ARTICLE_SEARCH_NYT_API_KEY
    assert "api-key: ${env:ARTICLE_SEARCH_API_KEY}" in result.text


def test_a_base_url_without_a_scheme_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    outcome = cli("import", "openapi", str(FIXTURES / "uber.yaml"), "--base-url", "api.example.com",
                  "-o", str(tmp_path / "api.yaml"))
    assert outcome.exit_code == 2 and not (tmp_path / "api.yaml").exists()
    assert "the base URL 'api.example.com' is not an http(s) URL — give its scheme and host" in outcome.stderr
    assert import_openapi(FIXTURES / "uber.yaml", base_url="${env:UBER_URL}").base_url == "${env:UBER_URL}"


def test_webhooks_outside_the_selection_are_not_listed_as_skipped() -> None:
    spec = FIXTURES / "webhook-example.yaml"
    selected = import_openapi(spec, include=["list*"])
    assert selected.skipped == [] and selected.not_selected == 1
    assert [str(s) for s in import_openapi(spec, include=["list*", "newPet"]).skipped] == [
        "webhook 'newPet': the API calls you with it: nothing for a tool to send"]


def test_odd_values_where_the_document_wants_a_mapping_are_handled_not_a_traceback(tmp_path: Path) -> None:
    # Each found by mutating the fixture documents: a boolean schema, components as a list, a server URL
    # that does not parse, a parameter named "".
    spec = write(tmp_path, "odd.yaml", """\
        openapi: 3.0.3
        info: {title: Odd, version: "1"}
        servers: [{url: "http://{host}/v1", variables: {host: {default: "[none]"}}}]
        components: [not, a, mapping]
        paths:
          /pets:
            post:
              operationId: addPet
              parameters:
                - {name: verbose, in: query, schema: true}
              requestBody:
                content:
                  application/json:
                    schema: {type: object, properties: {name: true, never: false, tag: {type: string}}}
              responses: {"200": {description: ok}}
          /other:
            get:
              operationId: getOther
              parameters: [{name: "", in: query, schema: {type: string}}]
              responses: {"200": {description: ok}}
        """)
    result = import_openapi(spec)
    assert result.base_url == "${env:ODD_BASE_URL}"
    assert [str(s) for s in result.skipped] == ["GET /other (getOther): a parameter has no name"]
    any_value = {"type": ["string", "number", "integer", "boolean", "object", "array", "null"]}
    assert result.tools[0].parameters["properties"] == {"verbose": any_value, "name": any_value,
                                                       "tag": {"type": "string"}}
    review = lint_toolset(result.text)
    assert review.problems == [] and not [f for f in review.findings if f.severity == "error"]
    bad_url = cli("import", "openapi", "http://[bad")
    assert bad_url.exit_code == 2 and "http://[bad is not a URL that can be read" in bad_url.stderr


def test_a_deprecated_operation_says_so_in_the_first_sentence_tools_list_shows(tmp_path: Path) -> None:
    spec = write(tmp_path, "old.yaml", """\
        openapi: 3.0.3
        info: {title: Old, version: "1"}
        servers: [{url: "https://api.example.com"}]
        paths:
          /assistants:
            get: {operationId: listAssistants, deprecated: true, summary: Returns a list of assistants.,
                  responses: {"200": {description: ok}}}
        """)
    folder, outcome = imported(tmp_path, spec)
    assert outcome.exit_code == 0, outcome.output
    listed = cli("tools", "list", "--tools-dir", str(folder))
    assert "Deprecated: Returns a list of assistants." in listed.stdout


def test_yaml_1_1_booleans_and_base_60_numbers_stay_the_text_written(tmp_path: Path, loopback) -> None:
    # OpenAPI recommends YAML 1.2: NO is Norway, `on` and `no` are names, 12:30 is a time, not 750.
    server = loopback(lambda request: Reply(200, {"ok": True}))
    spec = write(tmp_path, "shops.yaml", f"""\
        openapi: 3.0.3
        info: {{title: Shops, version: '1'}}
        servers: [{{url: '{server.url}'}}]
        paths:
          /shops:
            get:
              operationId: listShops
              summary: Lists the shops of one country that are open at a time of day.
              parameters:
                - {{name: country, in: query, required: true, schema: {{type: string, enum: [DE, NO, SE]}}}}
                - {{name: no, in: query, schema: {{type: string, default: 12:30}}}}
                - {{name: on, in: query, schema: {{type: boolean}}}}
              responses: {{'200': {{description: ok}}}}
        """)
    folder, outcome = imported(tmp_path, spec)
    assert outcome.exit_code == 0, outcome.stderr
    assert "; 0 skipped" in outcome.stderr
    schema = load_catalog(folder).catalog.tools["listShops"].parameters
    assert schema["properties"]["country"]["enum"] == ["DE", "NO", "SE"]
    assert schema["properties"]["no"]["default"] == "12:30"
    assert set(schema["properties"]) == {"country", "no", "on"}
    answer = call_json(folder, "listShops", {"country": "NO", "no": "12:30", "on": True})
    assert not answer["is_error"], answer
    assert server.requests[-1].query == {"country": ["NO"], "no": ["12:30"], "on": ["true"]}


def test_yaml_1_1_booleans_where_openapi_takes_only_a_boolean_stay_booleans(tmp_path: Path) -> None:
    # Documents written for YAML 1.1 readers (Swagger's own) say `required: no`: as the text "no" that was a
    # required parameter, and `nullable: yes` was lost. Where only a boolean fits, the word is the boolean.
    spec = write(tmp_path, "shops.yaml", """\
        openapi: 3.0.3
        info: {title: Shops, version: '1'}
        servers: [{url: 'https://shops.example.com'}]
        paths:
          /shops:
            get:
              operationId: listShops
              summary: Lists the shops of one country that are open at a time of day.
              parameters:
                - {name: country, in: query, required: no, schema: {type: string, nullable: yes, enum: [DE, NO]}}
                - {name: no, in: query, required: Yes, schema: {type: string}}
              responses: {'200': {description: ok}}
        """)
    folder, outcome = imported(tmp_path, spec)
    assert outcome.exit_code == 0, outcome.stderr
    schema = load_catalog(folder).catalog.tools["listShops"].parameters
    assert schema["required"] == ["no"], "required: no is not required; required: Yes is"
    assert schema["properties"]["country"]["type"] == ["string", "null"]
    assert schema["properties"]["country"]["enum"][:2] == ["DE", "NO"], "an enum's NO stays Norway"
    assert parse_text("a: &x {b: [*x], required: off}\n", "x.yaml")["a"]["required"] is False, "an alias of itself ends"
