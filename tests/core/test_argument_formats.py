"""``format`` in tool arguments: date-time, date, time, uuid, email, ipv4, ipv6 and uri are checked,
the error saying the form expected; ``check_formats: false`` turns it off; a schema without a checked
format keeps the lean path (no jsonschema)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.backend_helpers import call, make_tool
from tests.loopback import Reply
from toolrun.catalog.loader import load_catalog
from toolrun.core.format_checks import matches_format
from toolrun.core.formats import uses_checked_format
from toolrun.core.tool import BackendSpec, SourceLocation, Tool
from toolrun.loop.execution import validate_arguments

ROOT = Path(__file__).resolve().parents[2]

GOOD_AND_BAD = {
    "date-time": (["2024-05-01T09:30:00Z", "2024-05-01t09:30:00.5+02:00"],
                  ["yesterday", "2024-05-01", "2024-05-01 09:30:00Z", "2024-05-01T09:30:00", "2024-13-01T09:30:00Z"]),
    "date": (["2024-05-01", "2024-02-29"], ["01/05/2024", "2023-02-29", "2024-5-1", "today"]),
    "time": (["09:30:00", "23:59:60Z", "09:30:00.25+02:00"], ["9:30", "25:00:00", "noon"]),
    "uuid": (["123e4567-e89b-12d3-a456-426614174000"],
             ["123e4567e89b12d3a456426614174000", "42", "{123e4567-e89b-12d3-a456-426614174000}"]),
    "email": (["oncall@example.com"], ["oncall", "a b@example.com", "@example.com"]),
    "ipv4": (["192.0.2.10"], ["192.0.2", "256.1.1.1", "192.0.2.010", "::1"]),
    "ipv6": (["2001:db8::1", "::1"], ["192.0.2.10", "2001:db8:::1"]),
    "uri": (["https://example.com/x?y=1", "urn:isbn:0451450523"], ["example.com/x", "/relative", "https://exa mple.com"]),
}


@pytest.mark.parametrize("name", sorted(GOOD_AND_BAD))
def test_each_format_takes_its_form_and_refuses_others(name: str) -> None:
    good, bad = GOOD_AND_BAD[name]
    assert [v for v in good if not matches_format(name, v)] == []
    assert [v for v in bad if matches_format(name, v)] == []


def _tool(parameters: dict[str, Any], **kwargs: Any) -> Tool:
    return Tool(name="t", description="a test tool", parameters=parameters, source=SourceLocation(Path("t.yaml"), 1),
                backend=BackendSpec("shell", {"argv": ["true"]}), **kwargs)


SINCE = {"type": "object", "properties": {"since": {"type": "string", "format": "date-time"},
                                          "watchers": {"type": "array", "items": {"type": "string", "format": "email"}}}}


def test_the_error_tells_the_model_the_form() -> None:
    assert validate_arguments(_tool(SINCE), {"since": "yesterday", "watchers": ["ops@example.com", "bob"]}) == [
        'at $.since: expected a date-time in RFC 3339 form with a time zone, like 2024-05-01T09:30:00Z, got "yesterday"',
        'at $.watchers[1]: expected an email address like name@example.com, got "bob"']
    assert validate_arguments(_tool(SINCE), {"since": "2024-05-01T09:30:00Z"}) == []


def test_check_formats_false_lets_any_text_through() -> None:
    assert validate_arguments(_tool(SINCE, check_formats=False), {"since": "yesterday"}) == []


def test_an_unchecked_format_and_a_property_named_format_are_no_checked_format() -> None:
    assert not uses_checked_format({"type": "object", "properties": {"format": {"type": "string"}}})
    assert not uses_checked_format({"type": "string", "format": "int64"})
    assert validate_arguments(_tool({"type": "object", "properties": {"n": {"type": "string", "format": "byte"}}}),
                              {"n": "not base64 !"}) == []


def test_check_formats_on_a_toolset_and_a_tool_and_every_backend(tmp_path: Path) -> None:
    (tmp_path / "tools.yaml").write_text("""\
defaults: {check_formats: false}
tools:
  - name: lax
    description: Lists the deploys since a moment, newest first; use it to see what changed lately.
    parameters: {type: object, properties: {since: {type: string, format: date-time, description: From when.}}}
    backend: {shell: {argv: [echo, "{{ since }}"]}}
  - name: strict
    description: Lists the incidents since a moment, newest first; use it to see what broke lately.
    check_formats: true
    parameters: {type: object, properties: {since: {type: string, format: date-time, description: From when.}}}
    backend: {shell: {argv: [echo, "{{ since }}"]}}
""")
    loaded = load_catalog(tmp_path)
    assert not loaded.problems, loaded.problems
    lax, strict = loaded.catalog.get("lax"), loaded.catalog.get("strict")
    assert lax is not None and strict is not None
    assert (call(lax, {"since": "yesterday"}).result.strip(), call(lax, {"since": "yesterday"}).is_error) == ("yesterday", False)
    refused = call(strict, {"since": "yesterday"})
    assert refused.is_error and "expected a date-time in RFC 3339 form" in refused.result


def test_an_http_tool_never_sends_a_malformed_date(tmp_path: Path, loopback) -> None:
    server = loopback(lambda request: Reply(200, {}))
    tool = make_tool("http", {"url": server.url + "/events", "arguments": {"since": "query"}}, folder=tmp_path,
                     properties={"since": {"type": "string", "format": "date-time"}})
    assert call(tool, {"since": "yesterday"}).is_error
    assert server.requests == []


LEAN = """\
import sys
from pathlib import Path
from toolrun.core.tool import BackendSpec, SourceLocation, Tool
from toolrun.loop.execution import validate_arguments
tool = Tool(name="t", description="d", parameters={"type": "object", "properties": {"city": {"type": "string"},
            "n": {"type": "integer", "format": "int32"}}}, backend=BackendSpec("shell", {"argv": ["true"]}),
            source=SourceLocation(Path("t.yaml"), 1))
assert validate_arguments(tool, {"city": "北京", "n": 3}) == []
print("jsonschema" in sys.modules, "toolrun.core.format_checks" in sys.modules)
"""


def test_a_schema_without_a_checked_format_stays_on_the_lean_path() -> None:
    completed = subprocess.run([sys.executable, "-c", LEAN], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.stdout.strip() == "False False", completed.stderr
