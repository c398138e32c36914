"""`arguments:` of the http backend: each argument sent where it belongs, against a real loopback server."""

from __future__ import annotations

import textwrap
from pathlib import Path
from urllib.parse import unquote_plus

import pytest

from tests.backend_helpers import call, make_tool
from tests.loopback import Reply
from toolrun.backends.http import HttpBackend
from toolrun.catalog.loader import load_catalog

PROPERTIES = {name: {} for name in ("ids", "flag", "page", "filter", "trace", "session", "name", "note", "items")}


def tool_for(tmp_path: Path, url: str, config: dict):
    return make_tool("http", {"url": url, **config}, folder=tmp_path, properties=PROPERTIES)


def test_query_header_cookie_and_body_members(tmp_path: Path, loopback) -> None:
    server = loopback(lambda request: Reply(200, {"ok": 1}))
    tool = tool_for(tmp_path, server.url + "/things", {
        "method": "POST",
        "headers": {"Cookie": "theme=dark"},
        "arguments": {"ids": "query", "flag": "query", "page": {"in": "query", "name": "page[size]"},
                      "filter": {"in": "query", "style": "deepObject"}, "trace": {"in": "header", "name": "X-Trace"},
                      "session": "cookie", "name": "body", "note": {"in": "body", "name": "comment"}},
    })
    outcome = call(tool, {"ids": [1, 2], "flag": True, "page": 5, "filter": {"a": "x"}, "trace": "t-1",
                          "session": "s", "name": "Rex", "note": None})
    assert outcome.is_error is False, outcome.result
    (request,) = server.requests
    assert request.query == {"ids": ["1", "2"], "flag": ["true"], "page[size]": ["5"], "filter[a]": ["x"]}
    assert request.headers["x-trace"] == "t-1" and request.headers["cookie"] == "theme=dark; session=s"
    assert request.json() == {"name": "Rex", "comment": None}  # a JSON null is a value in a body


def test_absent_and_null_arguments_are_left_out(tmp_path: Path, loopback) -> None:
    server = loopback(lambda request: Reply(200, {}))
    tool = tool_for(tmp_path, server.url + "/x", {"arguments": {"ids": "query", "trace": "header", "flag": "query"}})
    call(tool, {"flag": None})
    (request,) = server.requests
    assert request.query == {} and "trace" not in request.headers


def test_array_styles(tmp_path: Path, loopback) -> None:
    server = loopback(lambda request: Reply(200, {}))
    tool = tool_for(tmp_path, server.url + "/x", {"arguments": {
        "ids": {"in": "query", "explode": False}, "page": {"in": "query", "style": "pipeDelimited"},
        "flag": {"in": "query", "style": "spaceDelimited"}, "trace": "header"}})
    call(tool, {"ids": ["a", "b"], "page": [1, 2], "flag": [True, False], "trace": ["x", "y"]})
    (request,) = server.requests
    assert request.query == {"ids": ["a,b"], "page": ["1|2"], "flag": ["true false"]}
    assert request.headers["trace"] == "x,y"


def test_whole_json_body_and_form_fields(tmp_path: Path, loopback) -> None:
    server = loopback(lambda request: Reply(200, {}))
    whole = tool_for(tmp_path, server.url + "/bulk", {"method": "POST", "arguments": {"items": "json"}})
    form = tool_for(tmp_path, server.url + "/form", {"method": "POST", "form": {"kind": "fixed"},
                                                   "arguments": {"ids": "form", "name": "form"}})
    call(whole, {"items": [1, {"a": 2}]})
    call(form, {"ids": [1, 2], "name": "Rex"})
    bulk, posted = server.requests
    assert bulk.json() == [1, {"a": 2}]
    assert posted.body == b"kind=fixed&ids=1&ids=2&name=Rex"


def test_a_get_whose_body_members_are_left_out_sends_no_body_and_a_post_sends_an_empty_object(
        tmp_path: Path, loopback) -> None:
    server = loopback(lambda request: Reply(200, {}))
    members = {"arguments": {"name": "body", "note": "body"}}
    get = tool_for(tmp_path, server.url + "/search", {"method": "GET", **members})
    post = tool_for(tmp_path, server.url + "/notes", {"method": "POST", **members})
    call(get, {})
    call(get, {"name": "Rex"})  # given: sent as the operation describes it
    call(post, {})
    empty_get, filled_get, empty_post = server.requests
    assert (empty_get.body, "content-type" in empty_get.headers) == (b"", False)
    assert filled_get.json() == {"name": "Rex"}
    assert empty_post.json() == {}


def test_path_arguments_join_arrays(tmp_path: Path, loopback) -> None:
    server = loopback(lambda request: Reply(200, {}))
    tool = tool_for(tmp_path, server.url + "/items/{ids}", {"arguments": {"ids": "path"}})
    call(tool, {"ids": [3, 4]})
    assert server.requests[0].path == "/items/3,4"  # the comma between items as itself (RFC 6570)


def test_an_item_holding_a_comma_is_percent_encoded_where_the_separating_comma_goes_as_itself(tmp_path: Path,
                                                                                                loopback) -> None:
    # RFC 6570 / OpenAPI form and simple styles: ?ids=a%2Cb,c is two items, the first holding a comma.
    server = loopback(lambda request: Reply(200, {}))
    tool = tool_for(tmp_path, server.url + "/items/{ids}", {"arguments": {
        "ids": "path", "filter": {"in": "query", "explode": False}, "page": {"in": "query", "explode": False}}})
    outcome = call(tool, {"ids": ["x,y", "z"], "filter": {"a,b": "c d", "e": "f,g"}, "page": ["1,2", "3 4"]})
    assert outcome.is_error is False, outcome.result
    (request,) = server.requests
    assert request.path == "/items/x%2Cy,z"
    assert request.raw_query == "filter=a%2Cb,c+d,e,f%2Cg&page=1%2C2,3+4"
    split_then_decoded = [unquote_plus(item) for item in request.raw_query.split("&")[1].split("=")[1].split(",")]
    assert split_then_decoded == ["1,2", "3 4"]


@pytest.mark.parametrize(("placement", "value", "where"), [
    ({"in": "query", "style": "pipeDelimited"}, ["a|b", "c"], "'|', which separates its items in the query"),
    ({"in": "query", "style": "spaceDelimited"}, ["a b"], "' ', which separates its items in the query"),
    ({"in": "header", "name": "X-Tags"}, ["a,b"], "',', which separates its items in header X-Tags"),
    ({"in": "header", "explode": True}, {"a=b": "c"}, "'=', which separates its items in header ids"),
    ({"in": "cookie"}, ["a,b"], "',', which separates its items in cookie ids"),
    ({"in": "form", "explode": False}, ["a,b"], "',', which separates its items in the form body"),
    ({"in": "path", "style": "pipeDelimited"}, ["a|b"], "'|', which separates its items in the path"),
])
def test_an_item_holding_a_delimiter_that_cannot_be_told_apart_is_refused(tmp_path: Path, loopback, placement: dict,
                                                                          value: object, where: str) -> None:
    # Where the separator is encoded as the item's own characters are, or not encoded at all, no server could
    # tell "a|b" from two items: the model is told, and nothing is sent.
    server = loopback(lambda request: Reply(200, {}))
    url = server.url + ("/items/{ids}" if placement["in"] == "path" else "/items")
    tool = tool_for(tmp_path, url, {"method": "POST", "arguments": {"ids": placement}})
    outcome = call(tool, {"ids": value})
    assert outcome.is_error is True
    assert outcome.result.startswith("the request was not sent: argument 'ids' has an item ")
    assert where in outcome.result
    assert server.requests == []


def test_arguments_count_as_used_and_bad_entries_are_load_problems(tmp_path: Path) -> None:
    tool = tool_for(tmp_path, "https://api.example.com/x", {"arguments": {"ids": "query", "items": "json",
                                                                           "name": "body"}})
    assert HttpBackend().placeholders(tool) >= {"ids", "items", "name"}
    assert [p.message for p in HttpBackend().check(tool)] == [
        "arguments.items: an argument that is the whole body (in: json) excludes body and form members"]
    unplaced = tool_for(tmp_path, "https://api.example.com/x", {"arguments": {"ids": "path"}})
    assert [p.message for p in HttpBackend().check(unplaced)] == ["arguments.ids: in: path, but the url has no {ids}"]
    (tmp_path / "t.yaml").write_text(textwrap.dedent("""\
        name: t
        description: A tool with a misplaced argument, to check that the loader names the line.
        parameters: {type: object, properties: {ids: {type: string, description: Ids.}}}
        backend:
          http:
            url: https://api.example.com/x
            arguments:
              ids: {in: querystring}
        """), encoding="utf-8")
    problems = load_catalog(tmp_path).problems
    assert problems and problems[0].line == 8 and "querystring" in problems[0].message


def test_the_urls_own_query_goes_as_written_beside_the_arguments(tmp_path: Path, loopback) -> None:
    # The tool's author wrote these bytes: a comma separating fields, a Latin-1 escape of an older API, a bare
    # flag. Adding an argument must not re-encode them (fields=id%2Cname is one field to a server that splits
    # before decoding; %FC is no UTF-8 and came back as %EF%BF%BD).
    server = loopback(lambda request: Reply(200, {}))
    tool = tool_for(tmp_path, server.url + "/items?fields=id,name&city=M%FCnchen&verbose&q=old&b=x%20y", {
        "arguments": {"ids": {"in": "query", "explode": False}, "name": {"in": "query", "name": "q"}}})
    assert call(tool, {}).is_error is False
    assert call(tool, {"ids": ["a,b", "c"], "name": "new one"}).is_error is False
    alone, merged = server.requests
    assert alone.raw_query == "fields=id,name&city=M%FCnchen&verbose&q=old&b=x%20y"
    assert merged.raw_query == "fields=id,name&city=M%FCnchen&verbose&q=new+one&b=x%20y&ids=a%2Cb,c"
