"""A model's values in cookies and headers stay one value (docs/security.md).

A cookie value is percent-encoded outside RFC 6265's cookie-octet, so ``; role=admin`` adds no
cookie; a header value holding a line break, NUL, another control or a character outside
Latin-1 is refused before anything is sent, by an error result naming the header. Checked
against a real loopback server, with arbitrary text from hypothesis.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.backend_helpers import call, make_tool
from tests.loopback import LoopbackServer, Reply
from tests.property_budget import property_examples


@pytest.fixture(scope="module")
def echo_server() -> Iterator[LoopbackServer]:
    """One server for every example of a property: it answers 200 and keeps what it was sent."""
    server = LoopbackServer(lambda request: Reply(200, "ok")).start()
    yield server
    server.stop()


def _cookie_pairs(header: str) -> list[tuple[str, str]]:
    """The (name, value) pairs a server reads from a Cookie header (RFC 6265: split at "; ")."""
    return [tuple(pair.split("=", 1)) for pair in header.split("; ")]  # type: ignore[misc]


def _cookie_tool(folder: Path, url: str):
    return make_tool("http", {"url": url, "headers": {"Cookie": "session=author-set"},
                              "arguments": {"lang": "cookie"}}, folder=folder,
                     properties={"lang": {"type": "string"}})


def test_a_cookie_value_cannot_add_or_replace_cookies(tmp_path, loopback):
    server = loopback(lambda request: Reply(200, "ok"))
    outcome = call(_cookie_tool(tmp_path, server.url), {"lang": "en; role=admin; session=stolen"})
    assert not outcome.is_error
    pairs = _cookie_pairs(server.requests[0].headers["cookie"])
    assert [name for name, _ in pairs] == ["session", "lang"]
    assert dict(pairs)["session"] == "author-set"
    assert unquote(dict(pairs)["lang"]) == "en; role=admin; session=stolen"


@settings(max_examples=property_examples(100), deadline=None)
@given(value=st.text(max_size=40))
def test_any_cookie_value_arrives_as_one_value_and_decodes_back(tmp_path_factory, echo_server, value: str):
    before = len(echo_server.requests)
    outcome = call(_cookie_tool(tmp_path_factory.mktemp("c"), echo_server.url), {"lang": value})
    assert not outcome.is_error, outcome.result
    header = echo_server.requests[before].headers["cookie"]
    pairs = _cookie_pairs(header)
    assert [name for name, _ in pairs] == ["session", "lang"] and dict(pairs)["session"] == "author-set"
    assert unquote(dict(pairs)["lang"]) == value
    assert not set(dict(pairs)["lang"]) & set(' ",;\\'), header  # nothing RFC 6265 forbids in a value


def _header_tool(folder: Path, url: str, placed: bool):
    config = {"url": url, "arguments": {"city": {"in": "header", "name": "X-City"}}} if placed else \
        {"url": url, "headers": {"X-City": "{{ city }}"}}
    return make_tool("http", config, folder=folder, properties={"city": {"type": "string"}})


@pytest.mark.parametrize("placed", [False, True])
@pytest.mark.parametrize("value", ["Beijing\r\nX-Injected: 1", "a\nb", "a\rb", "a\x00b", "a\x1bb", "北京", "emoji 🙂",
                                   "a\x85b", "a\x9bb", "a\x7fb"])  # NEL and CSI: C1 controls, inside Latin-1
def test_a_header_value_that_cannot_be_sent_is_refused_naming_the_header(tmp_path, loopback, value, placed):
    server = loopback(lambda request: Reply(200, "ok"))
    outcome = call(_header_tool(tmp_path, server.url, placed), {"city": value})
    assert outcome.is_error and "header X-City" in outcome.result and "\n" not in outcome.result
    assert server.requests == []


def test_a_latin_1_header_value_is_sent_as_latin_1(tmp_path, loopback):
    server = loopback(lambda request: Reply(200, "ok"))
    outcome = call(_header_tool(tmp_path, server.url, placed=False), {"city": "Zürich"})
    assert not outcome.is_error and server.requests[0].headers["x-city"] == "Zürich"  # http.server reads Latin-1


@settings(max_examples=property_examples(100), deadline=None)
@given(value=st.text(max_size=30), placed=st.booleans())
def test_any_header_value_is_sent_whole_or_refused_never_split(tmp_path_factory, echo_server, value, placed):
    before = len(echo_server.requests)
    outcome = call(_header_tool(tmp_path_factory.mktemp("h"), echo_server.url, placed), {"city": value})
    if outcome.is_error:
        assert "header X-City" in outcome.result and len(echo_server.requests) == before
        assert any(ord(c) < 32 and c != "\t" or 127 <= ord(c) <= 159 or ord(c) > 255 for c in value)
        return
    received = echo_server.requests[before].headers
    assert received["x-city"] == value.strip(" \t")  # HTTP itself drops a value's outer whitespace
    assert set(received) <= {"host", "accept", "accept-encoding", "connection", "user-agent", "x-city"}
