"""The http backend against a real loopback server: templates, secrets, retries, safety."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.backend_helpers import call, make_tool
from tests.loopback import Recorded, Reply
from toolrun.backends.http import HttpBackend

TOKEN = "tok-Zq81-very-secret"


def http_tool(folder: Path, config: dict, **kwargs):
    return make_tool("http", config, folder=folder, **kwargs)


def ok(request: Recorded) -> Reply:
    return Reply(200, {"path": request.path, "query": request.query})


def test_path_parameters_are_url_encoded_including_slashes(tmp_path: Path, loopback) -> None:
    server = loopback(ok)
    city = "北京/上海 a?b#c"
    tool = http_tool(tmp_path, {"method": "GET", "url": "/items/{city}/stock", "base_url": server.url + "/api/"},
                     properties={"city": {"type": "string"}})
    outcome = call(tool, {"city": city})
    assert not outcome.is_error, outcome.result
    assert server.requests[0].path == f"/api/items/{quote(city, safe='')}/stock"


def test_a_base_url_with_a_query_keeps_it_after_the_joined_path(tmp_path: Path, loopback) -> None:
    # "https://host/api?api-version=1" and "/items/{city}" made ".../api?api-version=1/items/x": the path in the query
    server = loopback(ok)
    tool = http_tool(tmp_path, {"url": "/items/{city}?full=1", "base_url": server.url + "/api/?api-version=2024-06-01",
                                "query": {"q": "{{ city }}"}}, properties={"city": {"type": "string"}})
    outcome = call(tool, {"city": "x"})
    assert not outcome.is_error, outcome.result
    (request,) = server.requests
    assert (request.path, request.raw_query) == ("/api/items/x", "api-version=2024-06-01&full=1&q=x")


def test_query_headers_and_optional_entries(tmp_path: Path, loopback) -> None:
    server = loopback(ok)
    tool = http_tool(tmp_path, {"url": server.url + "/search",
                                "query": {"q": "{{ term }}", "limit": "{{ limit }}", "fixed": 1},
                                "headers": {"X-Term": "{{ term | length }}", "X-Page": "{{ page }}"}},
                     properties={"term": {"type": "string"}, "limit": {"type": "integer"}, "page": {"type": "integer"}})
    call(tool, {"term": "玫瑰 & co"})
    request = server.requests[0]
    assert request.query == {"q": ["玫瑰 & co"], "fixed": ["1"]}  # limit was not given: left out
    assert request.headers["x-term"] == "7"
    assert "x-page" not in request.headers


def test_a_query_written_in_the_url_is_sent_beside_the_query_entries(tmp_path: Path, loopback) -> None:
    server = loopback(ok)
    plain = http_tool(tmp_path, {"url": server.url + "/search?format=json&tag=a&tag=b"})
    assert not call(plain, {}).is_error
    assert server.requests[0].query == {"format": ["json"], "tag": ["a", "b"]}

    both = http_tool(tmp_path, {"url": server.url + "/search?format=json&q=old&city={{ city }}", "query": {"q": "{{ term }}"}},
                     properties={"term": {"type": "string"}, "city": {"type": "string"}})
    assert not call(both, {"term": "玫瑰", "city": "北京"}).is_error
    assert server.requests[1].query == {"format": ["json"], "q": ["玫瑰"], "city": ["北京"]}  # the query entry wins


@pytest.mark.parametrize("config", [
    {"url": "/x", "query": {"q": "{{ value }}"}},
    {"url": "/x/{value}"},
    {"url": "/x", "method": "POST", "json": {"q": "{{ value }}"}},
    {"url": "/x", "method": "POST", "arguments": {"value": "body"}},
])
def test_a_lone_surrogate_in_an_argument_is_refused_in_toolruns_words(tmp_path: Path, loopback, config: dict) -> None:
    # JSON's "\udce9" is half of a UTF-16 pair: Python's UnicodeEncodeError reached the model as the result.
    server = loopback(ok)
    tool = http_tool(tmp_path, {**config, "base_url": server.url}, properties={"value": {"type": "string"}})
    outcome = call(tool, json.loads('{"value": "caf\\udce9"}'))
    assert outcome.is_error is True
    assert outcome.result.startswith("refused: argument 'value' holds \\udce9, a lone UTF-16 surrogate")
    assert "UnicodeEncodeError" not in outcome.result and server.requests == []


def test_a_lone_surrogate_deep_in_an_object_argument_is_named_by_its_path(tmp_path: Path, loopback) -> None:
    server = loopback(ok)
    tool = http_tool(tmp_path, {"url": server.url + "/x", "method": "POST", "json": "{{ filter }}"},
                     properties={"filter": {"type": "object"}})
    outcome = call(tool, json.loads('{"filter": {"tags": ["ok", "\\ud800"]}}'))
    assert outcome.is_error is True and "argument 'filter.tags[1]' holds \\ud800" in outcome.result


def test_json_body_keeps_argument_types_and_renders_strings(tmp_path: Path, loopback) -> None:
    server = loopback(ok)
    tool = http_tool(tmp_path, {"method": "POST", "url": server.url + "/orders",
                                "json": {"count": "{{ count }}", "note": "for {{ city }}", "tags": ["{{ tag }}", "x"],
                                         "optional": "{{ missing }}"}},
                     properties={"count": {"type": "integer"}, "city": {"type": "string"}, "tag": {"type": "string"},
                                 "missing": {"type": "string"}})
    call(tool, {"count": 3, "city": "深圳", "tag": "a"})
    assert server.requests[0].json() == {"count": 3, "note": "for 深圳", "tags": ["a", "x"]}
    assert server.requests[0].headers["content-type"] == "application/json"


def test_form_body(tmp_path: Path, loopback) -> None:
    server = loopback(ok)
    tool = http_tool(tmp_path, {"method": "POST", "url": server.url + "/f", "form": {"city": "{{ city }}"}},
                     properties={"city": {"type": "string"}})
    call(tool, {"city": "上海"})
    assert server.requests[0].body == b"city=%E4%B8%8A%E6%B5%B7"


def test_secret_is_sent_but_never_in_the_result_even_when_echoed(tmp_path: Path, loopback) -> None:
    server = loopback(lambda r: Reply(200, {"you_sent": r.headers.get("authorization")}))
    config = {"url": "/me", "base_url": "${env:API_URL}", "headers": {"Authorization": "Bearer ${env:API_TOKEN}"}}
    outcome = call(http_tool(tmp_path, config), {}, environ={"API_URL": server.url, "API_TOKEN": TOKEN})
    assert server.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in outcome.result
    assert outcome.result == '{"you_sent": "Bearer ***"}'


def test_secret_never_in_error_messages_even_when_echoed(tmp_path: Path, loopback) -> None:
    server = loopback(lambda r: Reply(401, f"token {r.query.get('key', ['?'])[0]} is not valid"))
    config = {"url": server.url + "/x", "query": {"key": "${env:API_KEY}"}}
    outcome = call(http_tool(tmp_path, config), {}, environ={"API_KEY": TOKEN})
    assert outcome.is_error
    assert outcome.result == "HTTP 401 Unauthorized: token *** is not valid"


def test_missing_secret_is_an_error_naming_the_variable(tmp_path: Path, loopback) -> None:
    server = loopback(ok)
    config = {"url": server.url, "headers": {"Authorization": "Bearer ${env:NOT_SET_TOKEN_VAR}"}}
    outcome = call(http_tool(tmp_path, config), {}, environ={})
    assert outcome.is_error and "NOT_SET_TOKEN_VAR" in outcome.result
    assert server.requests == []


def test_404_is_an_error_result_with_a_short_body_excerpt(tmp_path: Path, loopback) -> None:
    server = loopback(lambda r: Reply(404, "no such item " + "x" * 5000))
    outcome = call(http_tool(tmp_path, {"url": server.url + "/items/9"}), {})
    assert outcome.is_error
    assert outcome.result.startswith("HTTP 404 Not Found: no such item xxx")
    assert len(outcome.result) < 2100  # the default error_excerpt: 2000 characters


def test_retries_on_503_honouring_retry_after(tmp_path: Path, loopback) -> None:
    replies = iter([Reply(503, "busy", {"Retry-After": "0"}),
                    Reply(429, "slow down", {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
                    Reply(200, {"stock": 5})])
    server = loopback(lambda r: next(replies))
    outcome = call(http_tool(tmp_path, {"url": server.url + "/stock"}), {})
    assert (outcome.result, outcome.is_error) == ('{"stock": 5}', False)
    assert len(server.requests) == 3


def test_retries_are_bounded(tmp_path: Path, loopback) -> None:
    server = loopback(lambda r: Reply(503, "down", {"Retry-After": "0"}))
    outcome = call(http_tool(tmp_path, {"url": server.url, "retries": 1}), {})
    assert outcome.is_error and outcome.result.startswith("HTTP 503 Service Unavailable")
    assert len(server.requests) == 2


def test_no_retry_on_post(tmp_path: Path, loopback) -> None:
    server = loopback(lambda r: Reply(503, "down", {"Retry-After": "0"}))
    outcome = call(http_tool(tmp_path, {"method": "POST", "url": server.url, "json": {}}), {})
    assert outcome.is_error
    assert len(server.requests) == 1


def test_post_marked_idempotent_is_retried(tmp_path: Path, loopback) -> None:
    replies = iter([Reply(502, "bad gateway", {"Retry-After": "0"}), Reply(200, "done")])
    server = loopback(lambda r: next(replies))
    outcome = call(http_tool(tmp_path, {"method": "POST", "url": server.url, "idempotent": True, "json": {}}), {})
    assert outcome.result == "done"
    assert len(server.requests) == 2


def test_retry_after_longer_than_the_timeout_is_not_waited_for(tmp_path: Path, loopback) -> None:
    server = loopback(lambda r: Reply(503, "come back in an hour", {"Retry-After": "3600"}))
    outcome = call(http_tool(tmp_path, {"url": server.url}, timeout=2), {})
    # Waiting would have ended in the tool's 2 s timeout, and retrying in a second request.
    assert outcome.is_error and "503" in outcome.result and "timed out" not in outcome.result
    assert len(server.requests) == 1


def test_unreachable_host_is_an_error_result(tmp_path: Path, loopback) -> None:
    server = loopback(ok)
    url = server.url
    server.stop()
    outcome = call(http_tool(tmp_path, {"url": url, "retries": 0}), {})
    assert outcome.is_error and outcome.result.startswith("cannot reach 127.0.0.1")


def test_slow_server_hits_the_tool_timeout(tmp_path: Path, loopback) -> None:
    server = loopback(lambda r: Reply(200, "late", delay=3))
    outcome = call(http_tool(tmp_path, {"url": server.url, "retries": 0}, timeout=0.3), {})
    assert outcome.is_error and "timed out" in outcome.result  # not the "late" answer 3 s on


def test_extract_path(tmp_path: Path, loopback) -> None:
    body = {"data": {"items": [{"name": "玫瑰", "n": 1}, {"name": "百合", "n": 2}]}}
    server = loopback(lambda r: Reply(200, body))
    first = call(http_tool(tmp_path, {"url": server.url, "extract": "data.items[0].name"}), {})
    every = call(http_tool(tmp_path, {"url": server.url, "extract": "data.items[*].n"}), {})
    missing = call(http_tool(tmp_path, {"url": server.url, "extract": "data.nothing"}), {})
    assert (first.result, every.result) == ("玫瑰", "[1, 2]")
    assert missing.is_error and "found nothing" in missing.result and "data" in missing.result


def test_result_template_sees_response_and_arguments(tmp_path: Path, loopback) -> None:
    server = loopback(lambda r: Reply(201, {"id": 7}, {"X-Request-Id": "r-1"}))
    template = "{{ city }}: {{ response.status }} {{ response.json['id'] }} {{ response.headers['x-request-id'] }}"
    tool = http_tool(tmp_path, {"url": server.url, "result": template}, properties={"city": {"type": "string"}})
    assert call(tool, {"city": "北京"}).result == "北京: 201 7 r-1"


def test_default_result_is_compact_json_with_unicode(tmp_path: Path, loopback) -> None:
    server = loopback(lambda r: Reply(200, '{"city":"\\u5317\\u4eac"}', {"Content-Type": "application/json"}))
    assert call(http_tool(tmp_path, {"url": server.url}), {}).result == '{"city": "北京"}'


def test_allow_hosts_refuses_other_hosts_before_sending(tmp_path: Path, loopback) -> None:
    server = loopback(ok)
    by_tool = call(http_tool(tmp_path, {"url": server.url, "allow_hosts": ["api.internal"]}), {})
    by_context = call(http_tool(tmp_path, {"url": server.url}), {}, allow_hosts=["*.example.com"])
    allowed = call(http_tool(tmp_path, {"url": server.url}), {}, allow_hosts=["127.0.0.1"])
    assert by_tool.is_error and "not in allow_hosts" in by_tool.result
    assert by_context.is_error and "not in allow_hosts" in by_context.result
    assert not allowed.is_error
    assert len(server.requests) == 1


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/x",
                                 "http://metadata.google.internal/computeMetadata/v1/", "file:///etc/passwd"])
def test_link_local_metadata_and_non_http_urls_are_refused(tmp_path: Path, url: str) -> None:
    outcome = call(http_tool(tmp_path, {"url": url, "retries": 0}), {})
    assert outcome.is_error and outcome.result.startswith("refused")


def test_same_host_redirect_is_followed(tmp_path: Path, loopback) -> None:
    server = loopback(lambda r: Reply(302, "", {"Location": "/new"}) if r.path == "/old" else Reply(200, "moved here"))
    outcome = call(http_tool(tmp_path, {"url": server.url + "/old"}), {})
    assert outcome.result == "moved here"
    assert [r.path for r in server.requests] == ["/old", "/new"]


def test_redirect_to_another_host_is_not_followed_with_credentials(tmp_path: Path, loopback) -> None:
    elsewhere = loopback(lambda r: Reply(200, {"got": r.headers.get("authorization")}))
    server = loopback(lambda r: Reply(307, "", {"Location": elsewhere.url + "/steal"}))
    config = {"url": server.url, "headers": {"Authorization": "Bearer ${env:T}"}}
    outcome = call(http_tool(tmp_path, config), {}, environ={"T": TOKEN})
    assert outcome.is_error and "another origin" in outcome.result
    assert elsewhere.requests == []


def test_redirects_can_be_turned_off(tmp_path: Path, loopback) -> None:
    server = loopback(lambda r: Reply(301, "", {"Location": "/elsewhere"}))
    outcome = call(http_tool(tmp_path, {"url": server.url, "follow_redirects": False}), {})
    assert outcome.is_error and "not followed" in outcome.result
    assert len(server.requests) == 1


def test_placeholders_cover_path_query_headers_body_and_result(tmp_path: Path) -> None:
    tool = http_tool(tmp_path, {"url": "/a/{city}?x={{ x }}", "base_url": "${env:U}", "query": {"q": "{{ q }}"},
                                "headers": {"H": "{{ h }}"}, "json": {"b": ["{{ b }}"]},
                                "result": "{{ response.text }} {{ r }}"})
    assert HttpBackend().placeholders(tool) == {"city", "x", "q", "h", "b", "r"}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"method": "FETCH", "url": "http://x/"}, "unknown HTTP method"),
        ({"url": "/relative"}, "no base_url"),
        ({"url": "http://x/", "query": {"a": "{{ oops"}}, "template syntax error"),
        ({"url": "http://x/", "extract": "a..b"}, "extract path"),
        ({"url": "http://x/", "retries": -1}, "retries"),
        ({"url": "ftp://x/"}, "only http and https"),
    ],
)
def test_check_reports_static_problems(tmp_path: Path, config: dict, expected: str) -> None:
    problems = HttpBackend().check(http_tool(tmp_path, config))
    assert len(problems) == 1 and expected in problems[0].message


def test_check_accepts_env_base_urls_and_path_parameters(tmp_path: Path) -> None:
    config = {"url": "/items/{city}", "base_url": "${env:OPS_API_URL}", "headers": {"A": "Bearer ${env:T}"}}
    assert HttpBackend().check(http_tool(tmp_path, config)) == []
    assert HttpBackend().check(http_tool(tmp_path, {"url": "${env:FULL_URL}/x"})) == []


def test_huge_bodies_are_read_only_up_to_the_memory_guard(tmp_path: Path, loopback, monkeypatch) -> None:
    monkeypatch.setattr("toolrun.backends.http_request.MAX_BODY_BYTES", 1000)
    server = loopback(lambda r: Reply(200, "y" * 50_000))
    outcome = call(http_tool(tmp_path, {"url": server.url}), {})
    assert outcome.result == "y" * 1000


@pytest.mark.parametrize(
    ("pattern", "url", "matches"),
    [
        ("api.internal", "https://api.internal/x", True),
        ("API.internal", "https://api.internal/x", True),
        ("*.example.com", "https://a.example.com/", True),
        ("*.example.com", "https://example.com.evil.net/", False),
        ("127.0.0.1", "http://127.0.0.1:8080/", True),
        ("::1", "http://[::1]:8080/", True),
        ("api.internal:8443", "https://api.internal:8443/", True),
        ("api.internal:8443", "https://api.internal/", False),
        ("api.internal", "https://api.internal.evil.net/", False),
    ],
)
def test_allow_hosts_patterns(pattern: str, url: str, matches: bool) -> None:
    import httpx

    from toolrun.backends.http_safety import host_matches

    assert host_matches(pattern, httpx.URL(url)) is matches


@pytest.mark.parametrize("address", ["169.254.169.254", "fe80::1%eth0", "fd00:ec2::254", "::ffff:169.254.169.254",
                                     "100.100.100.200",
                                     # 169.254.169.254 inside IPv6: NAT64 (well-known, local-use), 6to4,
                                     # IPv4-compatible, Teredo (client address stored inverted)
                                     "64:ff9b::a9fe:a9fe", "64:ff9b:1::a9fe:a9fe", "2002:a9fe:a9fe::1",
                                     "::a9fe:a9fe", "2001:0:4136:e378:8000:63bf:5601:5601",
                                     "64:ff9b::6464:64c8",  # 100.100.100.200 through NAT64
                                     # NAT64 local-use prefixes of /48 and /64 (RFC 6052 layouts), SIIT's ::ffff:0:
                                     "64:ff9b:1:a9fe:a9:fe00::", "64:ff9b:1:abcd:a9:fea9:fe00:0",
                                     "::ffff:0:169.254.169.254"])
def test_metadata_addresses_are_forbidden(address: str) -> None:
    from toolrun.backends.http_safety import is_forbidden_address

    assert is_forbidden_address(address)
    assert not is_forbidden_address("10.0.0.1") and not is_forbidden_address("metadata-service.internal")
    assert not is_forbidden_address("64:ff9b::a00:1") and not is_forbidden_address("2002:a00:1::1")  # 10.0.0.1
    assert not is_forbidden_address("::1") and not is_forbidden_address("2606:4700::1111")


def test_result_template_that_does_not_fit_the_response_shows_the_response(tmp_path: Path, loopback) -> None:
    server = loopback(lambda r: Reply(200, {"unexpected": "shape"}))
    outcome = call(http_tool(tmp_path, {"url": server.url, "result": "{{ response.json['items'][0] }}"}), {})
    assert outcome.is_error
    assert "result template failed" in outcome.result and '"unexpected": "shape"' in outcome.result


def test_a_json_body_nested_past_any_real_one_is_text_not_an_internal_error(tmp_path: Path, loopback) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    server = loopback(lambda r: Reply(200, deep, {"Content-Type": "application/json"}))
    plain = call(http_tool(tmp_path, {"url": server.url}), {})
    extracted = call(http_tool(tmp_path, {"url": server.url, "extract": "[0]"}), {})
    assert not plain.is_error and plain.result.startswith("[[[")  # the body as the server sent it
    assert extracted.is_error and "the response is not JSON" in extracted.result
    assert "RecursionError" not in plain.result + extracted.result
