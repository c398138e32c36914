"""What a model reads of an HTTP error: the API's own message first, within error_excerpt; and the
User-Agent toolrun's requests carry."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import httpx
import pytest

import toolrun
from tests.backend_helpers import call, make_tool
from tests.loopback import Recorded, Reply
from toolrun.backends.http_errors import error_text, summary
from toolrun.catalog.loader import load_catalog
from toolrun.core.version import USER_AGENT, VERSION
from toolrun.providers.transport import HttpxTransport, WireRequest

ROOT = Path(__file__).resolve().parents[2]

# GitHub's answer to an issue without a title (docs.github.com, "Client errors"): the reason sits
# after a documentation URL in the body, past what a 300-character cut kept once padded.
GITHUB_422 = {"documentation_url": "https://docs.github.com/rest/issues/issues#create-an-issue" + "#" * 300,
              "message": "Validation Failed",
              "errors": [{"resource": "Issue", "field": "title", "code": "missing_field"}]}
FASTAPI_422 = {"detail": [{"loc": ["query", "since"], "msg": "Input should be a valid datetime", "type": "datetime"}]}
OPENAI_400 = {"error": {"message": "Unknown parameter: 'colour'.", "type": "invalid_request_error", "param": "colour"}}


@pytest.mark.parametrize(("body", "said"), [
    (GITHUB_422, "Validation Failed; title: missing_field"),
    (FASTAPI_422, "query.since: Input should be a valid datetime"),
    (OPENAI_400, "colour: Unknown parameter: 'colour'."),
    ({"errors": ["name is taken", {"reason": 7}]}, 'name is taken; {"reason":7}'),
    ({"status": "bad"}, ""),
    ([1, 2], ""),
])
def test_the_api_s_own_fields_are_read_first(body: object, said: str) -> None:
    assert summary(json.dumps(body)) == said


def test_github_s_reason_comes_before_the_excerpt_and_the_whole_fits_the_cap() -> None:
    text = error_text("HTTP 422 Unprocessable Entity", json.dumps(GITHUB_422), 300)
    assert text.startswith("HTTP 422 Unprocessable Entity: Validation Failed; title: missing_field | body: {")
    assert len(text) <= len("HTTP 422 Unprocessable Entity: ") + 301
    assert error_text("HTTP 500", "<html>\n oops </html>", 300) == "HTTP 500: <html> oops </html>"


def test_error_excerpt_from_the_toolset_defaults_and_the_tool(tmp_path: Path, loopback) -> None:
    server = loopback(lambda request: Reply(422, {"message": "since must be a date-time", "trace": "x" * 5000}))
    (tmp_path / "api.yaml").write_text(f"""\
defaults:
  http: {{base_url: "{server.url}", error_excerpt: 120}}
tools:
  - name: narrow
    description: Lists the open incidents of the team, newest first; use it to see what is on fire.
    backend: {{http: {{url: /a}}}}
  - name: wide
    description: Lists the closed incidents of the team, newest first; use it to review what happened.
    backend: {{http: {{url: /b, error_excerpt: 4000}}}}
""")
    loaded = load_catalog(tmp_path)
    assert not loaded.problems, loaded.problems
    narrow, wide = call(loaded.catalog.get("narrow"), {}), call(loaded.catalog.get("wide"), {})
    assert narrow.result.startswith("HTTP 422 Unprocessable Entity: since must be a date-time | body:")
    assert len(narrow.result) < 160 and len(wide.result) > 4000


def test_a_bad_error_excerpt_is_a_load_problem(tmp_path: Path) -> None:
    (tmp_path / "api.yaml").write_text("""\
tools:
  - name: t
    description: Lists the open incidents of the team, newest first; use it to see what is on fire.
    backend: {http: {url: "https://api.example/a", error_excerpt: 0}}
""")
    problems = load_catalog(tmp_path).problems
    assert problems and "error_excerpt" in str(problems[0]), problems


def _agent(request: Recorded) -> Reply:
    return Reply(200, {"agent": request.headers.get("user-agent")})


def test_http_tools_say_toolrun_unless_the_tool_names_its_own_agent(tmp_path: Path, loopback) -> None:
    server = loopback(_agent)
    plain = make_tool("http", {"url": server.url + "/a"}, folder=tmp_path)
    own = make_tool("http", {"url": server.url + "/a", "headers": {"user-agent": "ops-bot/2"}}, folder=tmp_path)
    assert json.loads(call(plain, {}).result) == {"agent": f"toolrun/{VERSION}"}
    assert json.loads(call(own, {}).result) == {"agent": "ops-bot/2"}


def test_provider_requests_say_toolrun(loopback) -> None:
    import asyncio

    server = loopback(_agent)

    async def send() -> object:
        async with httpx.AsyncClient() as client:
            transport = HttpxTransport(client=client, max_retries=0)
            return await transport.send(WireRequest("POST", server.url + "/v1/chat", {}, {"x": 1}))

    response = asyncio.run(send())
    assert response.body == {"agent": USER_AGENT}  # type: ignore[attr-defined]


def test_the_version_is_said_alike_everywhere() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert VERSION == toolrun.__version__ == project["version"]
