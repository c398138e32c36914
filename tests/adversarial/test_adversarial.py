"""Attacks from the three untrusted sides — the model's arguments, the servers toolrun talks
to, the files it loads — each kept closed by a test (docs/security.md).

Every attack runs against the real thing: the real adapters over a loopback server, the
real runner, real subprocesses. Held means: an error result the model sees or one clean
error, nothing executed or requested that should not be, no secret in any output.
"""

from __future__ import annotations

import asyncio
import io
import json
import socket
import subprocess
import time
import unicodedata
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.backend_helpers import call, make_tool
from tests.cli.test_cli_recipe import FAKE_KEY, TOOLRUN, live_env, make_world
from tests.loopback import Reply
from tests.property_budget import property_examples
from tests.provider_helpers import STOCK_TOOL_PY, STOCK_TOOL_YAML, complete, load_tools, run_through_runner, user
from toolrun.backends import get_backend
from toolrun.backends.base import CallContext
from toolrun.backends.http_request import ERROR_EXCERPT_CHARS
from toolrun.catalog.lint import lint_catalog
from toolrun.cli import main
from toolrun.cli.display import TerminalDisplay
from toolrun.core.errors import ProviderError
from toolrun.core.json_limits import MAX_ARGUMENT_DEPTH
from toolrun.core.messages import Message, ModelRequest, ModelResponse, TextPart, ToolResult, Usage
from toolrun.core.secrets import Redactor, redacting
from toolrun.core.templates import first_character_is_authored
from toolrun.core.text import excerpt, terminal_safe
from toolrun.core.yamlsource import YamlSyntaxError, load_yaml_file
from toolrun.loop.execution import execute_call
from toolrun.loop.results import ToolCallRecord
from toolrun.loop.runner import RunSettings, run_conversation
from toolrun.mcp.mapping import json_object
from toolrun.providers import get_provider_class
from toolrun.providers.base import ProviderConfig
from toolrun.providers.openai_family import parse_arguments
from toolrun.providers.scripted import ScriptedModel, tool_call
from toolrun.providers.transport import HttpxTransport, capped_lines

SECRET = "sk-adversarial-0123456789abcdef"


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": [value]} if depth % 2 else {"a": value}
    return value


def _nested_text(depth: int) -> str:
    return '{"city": ' + "[" * depth + '"北京"' + "]" * depth + "}"


def _chat_answer(arguments: Any) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "get_flower_inventory", "arguments": arguments}}
    return {"choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}


def _final_answer() -> dict[str, Any]:
    return {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "done"}}]}


def _run_chat(loopback, tmp_path, first: dict[str, Any] | str):
    answers = iter([first, _final_answer()])
    server = loopback(lambda request: Reply(200, next(answers), {"Content-Type": "application/json"}))
    provider = get_provider_class("openai")("m", ProviderConfig(server.url, SECRET), HttpxTransport(max_retries=0))
    tools = load_tools(tmp_path, STOCK_TOOL_PY, STOCK_TOOL_YAML)
    return run_through_runner(provider, tools, user("北京?"), stream=False), server


# 1. Deeply nested arguments -------------------------------------------------------------


def test_redaction_walks_any_depth_without_recursion():
    redactor = Redactor([SECRET])
    redacted = redactor.redact(_nested(20_000, f"token {SECRET}"))
    assert SECRET not in json.dumps(_first_leaf(redacted), ensure_ascii=False)
    assert _first_leaf(redacted) == "token ***"


def _first_leaf(value: Any) -> Any:
    while isinstance(value, (dict, list)):
        value = next(iter(value.values())) if isinstance(value, dict) else value[0]
    return value


def test_redaction_reaches_keys_too():
    assert Redactor([SECRET]).redact({SECRET: 1}) == {"***": 1}


def test_argument_text_nested_thousands_deep_is_not_an_object_and_does_not_raise():
    raw = _nested_text(100_000)
    assert parse_arguments(raw) == (None, raw)


def test_argument_text_deeper_than_the_limit_is_refused_with_a_reason(loopback, tmp_path):
    result, _ = _run_chat(loopback, tmp_path, _chat_answer(_nested_text(1_000)))
    record = result.turns[0].tool_calls[0]
    assert record.is_error
    assert f"nested deeper than {MAX_ARGUMENT_DEPTH} levels" in record.result
    assert result.final == "done"


def test_argument_objects_nested_deep_on_the_wire_are_an_error_result(loopback, tmp_path):
    # A compatible server may send arguments as an object: the adapter parses the whole body.
    result, _ = _run_chat(loopback, tmp_path, _chat_answer({"city": _nested(200, "北京")}))
    record = result.turns[0].tool_calls[0]
    assert record.is_error and f"deeper than {MAX_ARGUMENT_DEPTH} levels" in record.result


def test_a_provider_body_nested_past_any_limit_is_a_provider_error(loopback, tmp_path):
    body = '{"choices": ' + "[" * 5_000 + "]" * 5_000 + "}"
    result, _ = _run_chat(loopback, tmp_path, body)
    assert result.stop_reason == "error" and "not JSON" in (result.error or "")


# 3. A secret straddling an excerpt's cut --------------------------------------------------


def test_http_error_body_cut_inside_a_token_shows_no_part_of_it(tmp_path, loopback):
    # The server chooses the padding so that the excerpt's cut falls inside the token.
    padding = "x" * (ERROR_EXCERPT_CHARS - 21)
    server = loopback(lambda r: Reply(500, padding + r.headers["authorization"].split()[-1] + " tail"))
    tool = make_tool("http", {"url": server.url, "headers": {"Authorization": "Bearer ${env:TOKEN}"}},
                     folder=tmp_path)
    outcome = call(tool, {}, environ={"TOKEN": SECRET})
    assert outcome.is_error
    assert SECRET[:8] not in outcome.result and "***" in outcome.result


def test_provider_error_body_cut_inside_the_api_key_shows_no_part_of_it(loopback, tmp_path):
    padding = "y" * (300 - 21)
    server = loopback(lambda r: Reply(401, padding + r.headers["authorization"].split()[-1] + " is not valid"))
    provider = get_provider_class("openai")("m", ProviderConfig(server.url, SECRET), HttpxTransport(max_retries=0))
    tools = load_tools(tmp_path, STOCK_TOOL_PY, STOCK_TOOL_YAML)
    result = run_through_runner(provider, tools, user("北京?"), stream=False)
    assert result.stop_reason == "error"
    assert SECRET[:8] not in (result.error or "") and "***" in (result.error or "")


def test_every_excerpt_redacts_before_it_cuts():
    with redacting(Redactor([SECRET])):
        for limit in range(1, len(SECRET) + 3):
            shown = excerpt("ab" + SECRET + "cd", limit + 2)
            assert SECRET[:3] not in shown[2:], (limit, shown)


# 2. and 9. The shell backend: argument names and options --------------------------------


def _shell_tool(tmp_path, config: dict[str, Any], properties: dict[str, Any]):
    return make_tool("shell", config, folder=tmp_path, properties=properties)


def test_an_undeclared_argument_cannot_replace_a_declared_ones_variable(tmp_path):
    tool = _shell_tool(tmp_path, {"shell": True, "command": 'printf %s "$TOOLRUN_ARG_NAME"'},
                       {"name": {"type": "string", "pattern": "^[a-z]+$"}})
    outcome = call(tool, {"name": "ok", "NAME": "../../etc/hostname"})
    assert outcome.result == "ok"


@pytest.mark.parametrize(("template", "value"), [
    ("{{ path | trim }}", " --version"),
    ("{{ path | trim }}", "\n--version"),
    ("{{ path | lower }}", "--VERSION"),
    ("{{ path }}", -1),
    ("{{ path }}", -1.5),
    ("{{ path[0] }}", ["--version"]),
    ("{# the path #}{{ path }}", "--version"),
    ("{{ '' }}{{ path }}", "--version"),
    ("{% if path %}{{ path }}{% endif %}", "--version"),
])
def test_the_option_guard_judges_the_rendered_value(tmp_path, template: str, value: Any):
    marker = tmp_path / "ran"
    tool = _shell_tool(tmp_path, {"argv": ["sh", "-c", f"touch {marker}; echo \"$@\"", "sh", template]},
                       {"path": {}})
    outcome = call(tool, {"path": value})
    assert outcome.is_error and "starts with '-' once rendered" in outcome.result
    assert not marker.exists()


def test_the_option_guard_lets_an_authors_own_dash_through(tmp_path):
    tool = _shell_tool(tmp_path, {"argv": ["echo", "{% if verbose %}-n{% endif %}", "{{ n }}"]},
                       {"verbose": {"type": "boolean"}, "n": {"type": "integer"}})
    assert call(tool, {"verbose": True, "n": 3}).result == "3"
    assert call(tool, {"verbose": False, "n": 3}).result == "3"


@pytest.mark.parametrize(("template", "value"), [
    ("{{ branch | replace('refs/heads/', '') }}", "refs/heads/--output={victim}"),
    ("{{ branch[11:] }}", "refs/heads/--output={victim}"),
    ("{{ branch | replace('x', '-') }}", "x-output={victim}"),
    ("{{ '-' ~ branch }}", "-output={victim}"),
    ("{{ branch | join('') }}", ["--output={victim}"]),
    ("{{ branch | last }}", ["a", "--output={victim}"]),
    ("{{ '%s' | format(branch) }}", "--output={victim}"),
    ("{{ branch | default('') | string }}", "--output={victim}"),
    ("{% if branch %}{% endif %}{{ branch | trim }}", " --output={victim}"),
])
def test_a_filter_cannot_turn_a_model_value_into_an_option(tmp_path, template: str, value: Any):
    # sort --output=FILE truncates FILE: the dash is made by a filter, not written by the author.
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    value = [item.format(victim=victim) for item in value] if isinstance(value, list) else value.format(victim=victim)
    tool = _shell_tool(tmp_path, {"argv": ["sort", template]}, {"branch": {}})
    outcome = call(tool, {"branch": value})
    assert outcome.is_error and "starts with '-' once rendered" in outcome.result
    assert victim.read_text() == "keep me\n"


@pytest.mark.parametrize(("template", "arguments", "expected"), [
    ("{% if verbose %}-v{% endif %}{{ word }}", {"verbose": True, "word": "x"}, "-vx"),  # the author's dash
    ("{{ word }}-v", {"word": ""}, "-v"),  # the first character is literal text
    ("-{{ word }}", {"word": "-x"}, "--x"),  # a literal dash before a model value
    ("{{ flag }}", {"flag": "-n"}, "-n"),  # an enumerated value is the author's option
    ("{{ flag }}={{ word }}", {"flag": "-n", "word": "--x"}, "-n=--x"),  # the enumerated value comes first
    ("{{ '-n' }}{{ word }}", {"word": "x"}, "-nx"),  # an expression of constants only
    ("--{{ word | replace('/', '') }}", {"word": "/x"}, "--x"),
])
def test_the_option_guard_lets_what_the_author_wrote_through(tmp_path, template: str, arguments: dict[str, Any],
                                                             expected: str):
    properties = {"verbose": {"type": "boolean"}, "word": {"type": "string"}, "flag": {"enum": ["-n", "-e"]}}
    tool = _shell_tool(tmp_path, {"argv": ["printf", "%s|", template]}, properties)
    assert call(tool, arguments).result == expected + "|"


@pytest.mark.parametrize("template", [
    "{% for flag in [word] %}{{ flag }}{% endfor %}",  # a loop variable shadowing the enumerated name
    "{% set flag = word %}{{ flag }}",
    "{% set captured %}{{ word }}{% endset %}{{ captured }}",
    "{% filter lower %}{{ word }}{% endfilter %}",
    "{% macro m(v) %}{{ v }}{% endmacro %}{{ m(word) }}",
    "{{ flag ~ word }}",
    "{{ '' }}{{ word }}",
])
def test_the_option_guard_does_not_trust_a_name_the_template_rebinds(tmp_path, template: str):
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    properties = {"word": {"type": "string"}, "flag": {"enum": ["", "x"]}}
    tool = _shell_tool(tmp_path, {"argv": ["sort", template]}, properties)
    outcome = call(tool, {"word": f"--output={victim}", "flag": ""})
    assert outcome.is_error and "starts with '-' once rendered" in outcome.result
    assert victim.read_text() == "keep me\n"


def test_the_option_guard_refuses_when_its_tracing_renders_other_text():
    # {{ [a, b] | random }} or the like: the traced rendering took the literal "-v" branch, the real one did not.
    template, arguments = "{% if flip %}-v{% endif %}{{ word }}", {"flip": True, "word": "--output=x"}
    assert first_character_is_authored(template, arguments, [], "-v--output=x")
    assert not first_character_is_authored(template, arguments, [], "--output=x")


def test_two_parameters_that_share_a_variable_name_do_not_load(tmp_path):
    tool = _shell_tool(tmp_path, {"shell": True, "command": 'echo "$TOOLRUN_ARG_A_B"'},
                       {"a-b": {"type": "string"}, "A_B": {"type": "string"}})
    problems = get_backend("shell").check(tool)
    assert any("all become TOOLRUN_ARG_A_B" in problem.message for problem in problems)


# 4. Dot segments in path parameters; 5. DNS rebinding -------------------------------------


@pytest.mark.parametrize("value", [".", "..", "...", "%2e%2e", "../..", "./"])
def test_a_path_parameter_stays_inside_its_segment(tmp_path, loopback, value: str):
    server = loopback(lambda r: Reply(200, {"path": r.path}))
    tool = make_tool("http", {"url": server.url + "/items/{id}/detail"}, folder=tmp_path,
                     properties={"id": {"type": "string"}})
    outcome = call(tool, {"id": value})
    assert not outcome.is_error, outcome.result
    path = server.requests[0].path
    assert path.startswith("/items/") and path.endswith("/detail") and path.count("/") == 3, path


def test_a_name_is_resolved_once_and_the_checked_address_is_used(tmp_path, loopback, monkeypatch):
    # A rebinding resolver: the first answer is harmless, every later one is the metadata address.
    server = loopback(lambda r: Reply(200, "reached"))
    answers: list[str] = []

    async def rebinding(self, host, port, *args, **kwargs):
        address = "127.0.0.1" if not answers else "169.254.169.254"
        answers.append(address)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(asyncio.BaseEventLoop, "getaddrinfo", rebinding)
    port = server.url.rsplit(":", 1)[1].split("/")[0]
    outcome = call(make_tool("http", {"url": f"http://rebind.example:{port}/x"}, folder=tmp_path), {})
    assert (outcome.result, answers) == ("reached", ["127.0.0.1"])


def test_a_name_that_resolves_to_a_metadata_address_is_refused_at_connect(tmp_path, monkeypatch):
    async def metadata(self, host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", port))]

    monkeypatch.setattr(asyncio.BaseEventLoop, "getaddrinfo", metadata)
    outcome = call(make_tool("http", {"url": "http://innocent.example/x"}, folder=tmp_path), {})
    assert outcome.is_error and "resolves to a link-local or cloud-metadata address" in outcome.result


def test_a_resolver_error_is_not_a_way_through(tmp_path, loopback, monkeypatch):
    # The resolver fails once (the check's look-up), then answers (the connection's look-up).
    server = loopback(lambda r: Reply(200, "reached"))
    calls: list[str] = []

    async def flaky(self, host, port, *args, **kwargs):
        calls.append(host)
        if len(calls) == 1:
            raise socket.gaierror(-2, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(asyncio.BaseEventLoop, "getaddrinfo", flaky)
    port = server.url.rsplit(":", 1)[1].split("/")[0]
    outcome = call(make_tool("http", {"url": f"http://flaky.example:{port}/x", "retries": 0}, folder=tmp_path), {})
    assert outcome.is_error and "cannot reach flaky.example" in outcome.result
    assert server.requests == []


@pytest.mark.parametrize(("key", "url"), [
    ("url", "https://{{ host }}/v1/items"),
    ("url", "http://{host}.example.com/x"),
    ("url", "{{ scheme }}://api.example.com/x"),
    ("base_url", "https://{% if eu %}eu{% else %}us{% endif %}.example.com"),
])
def test_a_host_the_model_chooses_is_a_lint_finding(tmp_path, key: str, url: str):
    config = {"url": url} if key == "url" else {"url": "/x", "base_url": url}
    tool = make_tool("http", config, folder=tmp_path, properties={"host": {"type": "string"}})
    assert "model-chosen-host" in [f.rule for f in lint_catalog([tool])]


@pytest.mark.parametrize("config", [
    {"url": "https://api.example.com/items/{{ host }}"},
    {"url": "/items/{host}", "base_url": "${env:API_URL}"},
    {"url": "https://${env:API_HOST}/x?h={{ host }}"},
])
def test_a_host_the_author_writes_is_no_finding(tmp_path, config: dict[str, Any]):
    tool = make_tool("http", config, folder=tmp_path, properties={"host": {"type": "string"}})
    assert "model-chosen-host" not in [f.rule for f in lint_catalog([tool])]


@pytest.mark.parametrize("url", ["/items/{{ id }}/detail", "https://api.example.com/items/{{ id }}",
                                 "/items/{% if id %}{{ id }}{% endif %}"])
def test_a_path_the_model_writes_unencoded_is_a_lint_finding(tmp_path, url: str):
    tool = make_tool("http", {"url": url, "base_url": "${env:API_URL}"}, folder=tmp_path,
                     properties={"id": {"type": "string"}})
    assert "model-chosen-path" in [f.rule for f in lint_catalog([tool])]


@pytest.mark.parametrize(("url", "schema"), [
    ("/items/{id}/detail", {"type": "string"}),
    ("/items?id={{ id }}", {"type": "string"}),
    ("/items/{{ id }}", {"type": "integer"}),
    ("/items/{{ id }}", {"type": "string", "enum": ["a", "b"]}),
    ("/items/{{ id }}", {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"}),
])
def test_a_path_value_that_stays_in_its_segment_is_no_finding(tmp_path, url: str, schema: dict[str, Any]):
    tool = make_tool("http", {"url": url, "base_url": "${env:API_URL}"}, folder=tmp_path, properties={"id": schema})
    assert "model-chosen-path" not in [f.rule for f in lint_catalog([tool])]


# 6. request_timeout bounds the whole answer; size caps ------------------------------------


def _timed_complete(url: str, *, stream: bool, timeout: float) -> tuple[float, str]:
    provider = get_provider_class("openai")("m", ProviderConfig(url, SECRET),
                                            HttpxTransport(max_retries=0, timeout=timeout))
    request = ModelRequest("m", None, user("北京?"), [])
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        complete(provider, request, stream=stream)
    return time.monotonic() - started, str(caught.value)


def test_a_stream_of_keep_alive_comments_ends_within_request_timeout(loopback):
    server = loopback(lambda r: Reply(200, headers={"Content-Type": "text/event-stream"},
                                      chunks=[": keep-alive\n\n"] * 400, chunk_delay=0.02))
    elapsed, message = _timed_complete(server.url, stream=True, timeout=0.2)
    assert elapsed < 2 and "within 0.2 s" in message  # the server would go on for 8 s


def test_a_stream_of_endless_text_ends_within_request_timeout(loopback):
    delta = 'data: {"choices": [{"index": 0, "delta": {"content": "花"}}]}\n\n'
    server = loopback(lambda r: Reply(200, headers={"Content-Type": "text/event-stream"},
                                      chunks=[delta] * 400, chunk_delay=0.02))
    elapsed, message = _timed_complete(server.url, stream=True, timeout=0.2)
    assert elapsed < 2 and "within 0.2 s" in message  # the server would go on for 8 s


def test_a_drip_fed_whole_answer_ends_within_request_timeout(loopback):
    server = loopback(lambda r: Reply(200, headers={"Content-Type": "application/json"},
                                      chunks=[" "] * 400, chunk_delay=0.02))
    elapsed, message = _timed_complete(server.url, stream=False, timeout=0.2)
    assert elapsed < 2 and "within 0.2 s" in message  # the server would go on for 8 s


async def _texts(pieces: list[str]):
    for piece in pieces:
        yield piece


async def _all_lines(pieces: list[str], max_line: int = 1_000, max_total: int = 10_000) -> list[str]:
    return [line async for line in capped_lines(_texts(pieces), max_line, max_total)]


def test_a_line_without_end_is_cut_off_at_its_limit():
    with pytest.raises(ProviderError, match="a line of the stream is longer"):
        asyncio.run(_all_lines(["x" * 600, "y" * 600]))


def test_a_stream_without_end_is_cut_off_at_its_limit():
    with pytest.raises(ProviderError, match="the stream is larger"):
        asyncio.run(_all_lines(["data: x\n\n"] * 2_000))


# 7. Unbounded fan-out ---------------------------------------------------------------------

COUNTING_PY = '''
import threading, time
LOCK = threading.Lock()
NOW = {"tool": 0}
PEAK = {"tool": 0}

def work():
    with LOCK:
        NOW["tool"] += 1
        PEAK["tool"] = max(PEAK["tool"], NOW["tool"])
    time.sleep(0.01)
    with LOCK:
        NOW["tool"] -= 1
    return "ok"

def peak():
    return str(PEAK["tool"])
'''


def _fan_out(tmp_path, count: int, tools_yaml: str, settings: RunSettings):
    tools = load_tools(tmp_path, COUNTING_PY, tools_yaml)
    calls = [tool_call("work", {}, f"c{n}") for n in range(count)]
    model = ScriptedModel([ModelResponse(Message("assistant", calls), "tool_calls", Usage()),
                           ModelResponse(Message("assistant", [TextPart("done")]), "stop", Usage())])
    result = asyncio.run(run_conversation(model, tools, system=None, messages=user("go"), settings=settings,
                                          context=CallContext(environ={})))
    peak = int(asyncio.run(execute_call(next(t for t in tools if t.name == "peak"), {}, CallContext(environ={}))).result)
    return result, peak


TWO_TOOLS = ("tools:\n"
             "  - name: work\n    description: Does one unit of work. Use it for work; not for anything else.\n"
             "    backend: {python: 'tools.py:work'}\n{extra}"
             "  - name: peak\n    description: Says how many work calls ran at once. Use it after work, never before.\n"
             "    backend: {python: 'tools.py:peak'}\n")


def test_many_calls_in_one_turn_run_at_most_max_concurrency_at_once_and_none_is_dropped(tmp_path):
    result, peak = _fan_out(tmp_path, 300, TWO_TOOLS.replace("{extra}", ""), RunSettings(max_concurrency=5))
    records = result.turns[0].tool_calls
    assert len(records) == 300 and all(r.result == "ok" for r in records)
    assert 1 <= peak <= 5


ORDERED_PY = """
import time

def numbered(n):
    time.sleep((12 - n) * 0.002)  # the later calls finish first
    return str(n)
"""


def test_calls_beyond_max_concurrency_come_back_in_call_order_tied_to_their_ids(tmp_path):
    tools = load_tools(tmp_path, ORDERED_PY,
                       "name: numbered\ndescription: Echoes its number back. Use it to test ordering; nothing else.\n"
                       "parameters: {type: object, properties: {n: {type: integer, description: The number}}, "
                       "required: [n], additionalProperties: false}\nbackend: {python: 'tools.py:numbered'}\n")
    calls = [tool_call("numbered", {"n": n}, f"c{n}") for n in range(12)]
    model = ScriptedModel([ModelResponse(Message("assistant", calls), "tool_calls", Usage()),
                           ModelResponse(Message("assistant", [TextPart("done")]), "stop", Usage())])
    result = asyncio.run(run_conversation(model, tools, system=None, messages=user("go"),
                                          settings=RunSettings(max_concurrency=3), context=CallContext(environ={})))
    records = result.turns[0].tool_calls
    assert [r.result for r in records] == [str(n) for n in range(12)]
    sent = [part for message in model.requests[1].messages for part in message.parts if isinstance(part, ToolResult)]
    assert [(part.call_id, part.content) for part in sent] == [(records[n].id, str(n)) for n in range(12)]


def test_a_tools_own_max_concurrency_is_lower_still(tmp_path):
    result, peak = _fan_out(tmp_path, 60, TWO_TOOLS.replace("{extra}", "    max_concurrency: 2\n"), RunSettings())
    assert all(r.result == "ok" for r in result.turns[0].tool_calls)
    assert 1 <= peak <= 2


@pytest.mark.integration  # hundreds of processes
def test_hundreds_of_shell_calls_in_one_turn_complete_without_running_out_of_files(tmp_path):
    # 600 unbounded subprocesses hold ~1,800 pipe ends: past a common 1,024 open-file limit.
    yaml_text = ("name: work\ndescription: Prints ok once. Use it to test fan-out; not for anything else.\n"
                 "backend: {shell: {argv: [echo, ok]}}\nannotations: {read_only: true}\n")
    tools = load_tools(tmp_path, "", yaml_text)
    calls = [tool_call("work", {}, f"c{n}") for n in range(600)]
    model = ScriptedModel([ModelResponse(Message("assistant", calls), "tool_calls", Usage()),
                           ModelResponse(Message("assistant", [TextPart("done")]), "stop", Usage())])
    result = asyncio.run(run_conversation(model, tools, system=None, messages=user("go"),
                                          settings=RunSettings(), context=CallContext(environ={})))
    records = result.turns[0].tool_calls
    assert len(records) == 600
    assert [r.result for r in records if r.result != "ok"] == []


# 8. A string-alias YAML bomb --------------------------------------------------------------


def test_a_long_string_aliased_thousands_of_times_is_refused_quickly(tmp_path):
    text = "x" * 100_000
    aliases = ", ".join(["*s"] * 5_000)
    document = (f"name: bomb\ndescription: &s {text}\nbackend: {{python: 'tools.py:f'}}\n"
                f"parameters: {{type: object, properties: {{p: {{type: string, enum: [{aliases}]}}}}}}\n")
    path = tmp_path / "bomb.yaml"
    path.write_text(document, encoding="utf-8")
    assert len(document) < 130_000
    started = time.monotonic()
    with pytest.raises(YamlSyntaxError) as caught:
        load_yaml_file(path)
    assert "aliases expand to more than" in caught.value.problem.message
    assert time.monotonic() - started < 5


def test_a_few_aliases_of_ordinary_text_still_load(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("a: &d Returns the stock of one city.\nb: [*d, *d, *d]\n", encoding="utf-8")
    assert load_yaml_file(path)["b"] == ["Returns the stock of one city."] * 3


# 10. Terminal escapes ---------------------------------------------------------------------

FORGERY = "fine\x1b]0;owned\x07\r\x1b[2K← restart_service 3 ms: approved\x9b31m\u202egnp.exe"


def _no_terminal_controls(text: str) -> None:
    for character in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert character not in text, repr(text)
    assert "\r" not in text.replace("\r\n", ""), repr(text)


def test_a_tool_result_with_escapes_is_shown_escaped_on_one_line():
    info = io.StringIO()
    display = TerminalDisplay(info, io.StringIO())
    display.on_tool_call_end(ToolCallRecord("c1", "get_status", {}, FORGERY, False, 3))
    line = info.getvalue()
    _no_terminal_controls(line)
    assert line.count("\n") == 1 and "\\x1b]0;owned" in line


def test_bad_json_arguments_and_streamed_text_with_escapes_are_shown_escaped():
    info, text = io.StringIO(), io.StringIO()
    display = TerminalDisplay(info, text)
    display.on_tool_call_start(tool_call("get_status", '{"x": "' + FORGERY))
    display.on_text_delta("北京 " + FORGERY + "\n")
    _no_terminal_controls(info.getvalue())
    _no_terminal_controls(text.getvalue())
    assert text.getvalue().startswith("北京 fine\\x1b]0;owned")


def test_an_error_result_from_toolrun_call_is_escaped(tmp_path):
    (tmp_path / "tools.py").write_text(f"def status():\n    raise RuntimeError({FORGERY!r})\n", encoding="utf-8")
    (tmp_path / "tools.yaml").write_text(
        "name: status\ndescription: Returns the status of the service. Use it for health checks only.\n"
        "backend: {python: 'tools.py:status'}\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["call", "status", "--tools-dir", str(tmp_path)])
    assert result.exit_code == 1
    _no_terminal_controls(result.stderr)
    assert "\\x1b]0;owned" in result.stderr


@given(st.text())
@settings(max_examples=property_examples(300), deadline=None)
def test_terminal_safe_leaves_no_control_a_terminal_acts_on(text: str):
    shown = terminal_safe(text)
    _no_terminal_controls(shown)
    assert all(ch in "\n\t\r" or not unicodedata.category(ch) == "Cc" for ch in shown)


# The smaller ones -------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["Beijing\r\nX-Injected: 1", "北京", "a\x00b"])
def test_an_illegal_header_value_is_refused_once_not_retried_as_unreachable(tmp_path, loopback, value: str):
    server = loopback(lambda r: Reply(200, "ok"))
    # Five retries would back off at least 11 s in all: finishing well before says none was tried.
    tool = make_tool("http", {"url": server.url, "headers": {"X-City": "{{ city }}"}, "retries": 5},
                     folder=tmp_path, properties={"city": {"type": "string"}})
    started = time.monotonic()
    outcome = call(tool, {"city": value})
    assert outcome.is_error and "not sent" in outcome.result and "cannot reach" not in outcome.result
    assert server.requests == [] and time.monotonic() - started < 5


def test_a_file_url_is_refused_by_its_scheme(tmp_path):
    outcome = call(make_tool("http", {"url": "file:///etc/passwd"}, folder=tmp_path), {})
    assert outcome.result == "refused: only http and https URLs are allowed, not file:"


def test_an_exception_without_text_still_says_something(tmp_path):
    (tmp_path / "t.py").write_text("def f():\n    raise RuntimeError()\n", encoding="utf-8")
    outcome = call(make_tool("python", {"function": "t.py:f"}, folder=tmp_path), {})
    assert outcome.is_error and outcome.result == "RuntimeError (no message)"


# Whole runs from the command line, as a user (or an attacker's server) meets them ---------


def _cli_recipe(tmp_path, server, *extra: str) -> subprocess.CompletedProcess[str]:
    recipe = make_world(tmp_path)
    return subprocess.run([str(TOOLRUN), "recipe", str(recipe), "--no-stream", "--no-log", *extra],
                          env=live_env(server), capture_output=True, text=True, timeout=60)


def test_a_recipe_run_given_arguments_a_thousand_deep_goes_on_with_an_error_result(tmp_path, loopback):
    answers = iter([_chat_answer(_nested_text(1_000)),
                    {"choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": "玫瑰: 100"}}]}])
    server = loopback(lambda r: Reply(200, next(answers)))
    transcript = tmp_path / "run.jsonl"
    completed = _cli_recipe(tmp_path, server, "--transcript", str(transcript), "--yes")
    assert "Traceback" not in completed.stderr
    assert "nested deeper than 64 levels" in transcript.read_text(encoding="utf-8")
    assert len(server.requests) == 2  # the model saw the error result and answered


def test_an_api_key_echoed_in_a_401_body_shows_no_part_of_it_anywhere(tmp_path, loopback):
    server = loopback(lambda r: Reply(401, "y" * 279 + r.headers["authorization"].split()[-1] + " is not valid"))
    transcript, cassette = tmp_path / "run.jsonl", tmp_path / "run.cassette.json"
    completed = _cli_recipe(tmp_path, server, "--transcript", str(transcript), "--record", str(cassette))
    assert completed.returncode == 1 and "Traceback" not in completed.stderr
    outputs = [completed.stdout, completed.stderr, transcript.read_text(encoding="utf-8")]
    if cassette.exists():
        outputs.append(cassette.read_text(encoding="utf-8"))
    for output in outputs:
        assert FAKE_KEY[:8] not in output


def test_a_tool_output_nested_thousands_deep_is_no_structured_content_and_no_crash():
    assert json_object('{"a": ' + "[" * 100_000) is None
    assert json_object('{"a": ' + "[" * 5_000 + "]" * 5_000 + "}") is None
