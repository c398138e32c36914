"""A toolset's credentials go only to the origin of its base_url (docs/security.md, docs/tools.md).

Real YAML in a temp folder, loaded by the real loader, calls to two real loopback servers on
two ports (two origins): the one named by ``base_url`` gets the toolset's ``${env:...}``
headers and query values, the other does not, and the lint says what a tool no longer receives.
"""

from __future__ import annotations

import asyncio
import os
import textwrap
import time
from pathlib import Path

import pytest

from tests.loopback import Reply
from toolrun.backends.base import CallContext
from toolrun.catalog.cache import CatalogCache
from toolrun.catalog.lint import lint_catalog
from toolrun.catalog.loader import load_catalog
from toolrun.core.credentials import credential_names, credentials_withheld, is_credential, same_origin
from toolrun.loop.execution import execute_call

TOKEN = "tok-credentials-origin-0123456789"


def _toolset(folder: Path, home: str, elsewhere: str) -> Path:
    (folder / "tools.yaml").write_text(textwrap.dedent(f"""
        defaults:
          http:
            base_url: "{home}"
            headers:
              Authorization: "Bearer ${{env:API_TOKEN}}"
              Accept: application/json
            query:
              api_key: "${{env:API_TOKEN}}"
        tools:
          - name: list_items
            description: List the items of the home API, newest first, at most fifty of them.
            backend:
              http: {{url: /items}}
          - name: fetch_elsewhere
            description: Fetch the status page of another service, which needs no credentials at all.
            backend:
              http: {{url: "{elsewhere}/status"}}
          - name: list_public_items
            description: List the public items of the home API, which answers without a token.
            backend:
              http: {{url: /public, headers: {{Authorization: null}}}}
          - name: fetch_partner
            description: Fetch the partner service with its own token, written by the author here.
            backend:
              http: {{url: "{elsewhere}/partner", headers: {{Authorization: "Bearer ${{env:API_TOKEN}}"}}}}
        """), encoding="utf-8")
    return folder


def _call(catalog, name: str) -> str:
    tool = catalog.tools[name]
    outcome = asyncio.run(execute_call(tool, {}, CallContext(environ={"API_TOKEN": TOKEN}), None))
    assert not outcome.is_error, outcome.result
    return outcome.result


@pytest.fixture
def two_origins(tmp_path, loopback):
    home = loopback(lambda request: Reply(200, "home"))
    elsewhere = loopback(lambda request: Reply(200, "elsewhere"))
    return _toolset(tmp_path, home.url, elsewhere.url), home, elsewhere


def test_defaults_credentials_reach_only_the_base_urls_origin(two_origins):
    folder, home, elsewhere = two_origins
    catalog = load_catalog(folder).catalog
    _call(catalog, "list_items")
    _call(catalog, "fetch_elsewhere")
    assert home.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert home.requests[0].query["api_key"] == [TOKEN]
    sent = elsewhere.requests[0]
    assert "authorization" not in sent.headers and "api_key" not in sent.query
    assert sent.headers["accept"] == "application/json"  # what is no credential is still inherited


def test_a_tool_drops_a_default_with_null_and_may_write_its_own_credential(two_origins):
    folder, home, elsewhere = two_origins
    catalog = load_catalog(folder).catalog
    _call(catalog, "list_public_items")
    _call(catalog, "fetch_partner")
    assert "authorization" not in home.requests[0].headers
    assert home.requests[0].query["api_key"] == [TOKEN]  # only the header was dropped
    assert elsewhere.requests[0].headers["authorization"] == f"Bearer {TOKEN}"  # the author's own choice


def test_the_lint_names_what_a_tool_on_another_origin_no_longer_receives(two_origins):
    folder, _, _ = two_origins
    findings = [f for f in lint_catalog(list(load_catalog(folder).catalog)) if f.rule == "credentials-withheld"]
    assert [f.tool for f in findings] == ["fetch_elsewhere", "fetch_partner"]
    assert "headers Authorization, query api_key" in findings[0].message and findings[0].severity == "warning"


def test_the_rule(tmp_path):
    defaults = {"base_url": "https://api.example.com/v1", "headers": {"Authorization": "Bearer ${env:T}", "X": "1"},
                "query": {"key": "${env:K}"}}
    assert is_credential("Bearer ${env:T}") and not is_credential("Bearer literal") and not is_credential(None)
    assert credential_names(defaults) == {"headers": ["Authorization"], "query": ["key"]}
    assert same_origin("https://API.example.com/v1", "https://api.example.com:443/other")
    assert not same_origin("https://api.example.com", "http://api.example.com")
    assert not same_origin("https://api.example.com", "https://api.example.com:8443")
    assert not same_origin("https://api.example.com", "https://api.example.com.evil.net")
    assert same_origin("${env:API_URL}", "${env:API_URL}/items")
    assert not same_origin("${env:API_URL}", "${env:OTHER_URL}/items")
    assert not same_origin("https://{{ host }}", "https://{{ host }}")  # the model's choice is no origin
    kept: dict[str, list[str]] = {}
    assert credentials_withheld(defaults, {"url": "/items"}) == kept
    assert credentials_withheld(defaults, {"url": "https://api.example.com/v2/x"}) == kept
    assert credentials_withheld(defaults, {"url": "https://evil.example.net/x"}) == credential_names(defaults)
    assert credentials_withheld(defaults, {"url": "/x", "base_url": "https://other.example.com"}) != kept
    assert credentials_withheld(defaults, {"url": "{{ target }}"}) != kept  # may render to any absolute URL
    assert credentials_withheld({"headers": {"A": "${env:T}"}}, {"url": "https://x.example.com"}) == {"headers": ["A"]}
    templated = {**defaults, "base_url": "http://{{ host }}"}  # the model would choose where the token goes
    assert credentials_withheld(templated, {"url": "/items"}) == credential_names(defaults)
    assert credentials_withheld({**defaults, "base_url": "${env:API_URL}"}, {"url": "/items"}) == kept


def test_a_base_url_whose_host_the_model_fills_gets_no_credentials(tmp_path, loopback):
    received: list[str | None] = []
    chosen = loopback(lambda request: (received.append(request.headers.get("authorization")), Reply(200, "ok"))[1])
    (tmp_path / "tools.yaml").write_text(textwrap.dedent("""
        defaults:
          http:
            base_url: "http://{{ host }}"
            headers: {Authorization: "Bearer ${env:API_TOKEN}"}
        tools:
          - name: fetch_from_host
            description: Fetch the items of whichever host the caller names, as plain JSON text.
            parameters:
              type: object
              properties: {host: {type: string, description: The host and port to ask.}}
              required: [host]
            backend:
              http: {url: /items}
        """), encoding="utf-8")
    catalog = load_catalog(tmp_path).catalog
    tool = catalog.tools["fetch_from_host"]
    host = chosen.url.split("://", 1)[1]
    context = CallContext(environ={"API_TOKEN": TOKEN})
    outcome = asyncio.run(execute_call(tool, {"host": host}, context, None))
    assert not outcome.is_error, outcome.result
    assert received == [None]


def test_what_was_withheld_is_a_field_of_the_tool_not_a_key_of_its_config_and_survives_the_cache(
        tmp_path: Path) -> None:
    folder = _toolset(tmp_path, "https://api.example.com", "https://other.example.net")
    os.utime(folder / "tools.yaml", ns=(time.time_ns() - 10**10,) * 2)  # old enough for the cache to keep
    (tmp_path / "cache").mkdir()
    for where in ("read", "from the cache"):
        cache = CatalogCache(folder, tmp_path / "cache")
        kept = cache.get(folder / "tools.yaml", os.stat(folder / "tools.yaml"))
        assert (kept is not None) == (where == "from the cache")
        result = load_catalog(folder, cache=cache)
        cache.save()
        tool = result.catalog.tools["fetch_elsewhere"]
        assert tool.backend.withheld_credentials == (("headers", ("Authorization",)), ("query", ("api_key",)))
        assert "withheld_credentials" not in tool.backend.config
        assert result.catalog.tools["list_items"].backend.withheld_credentials == ()
