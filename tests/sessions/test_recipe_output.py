"""A recipe's ``output:``: loading and its mistakes (file:line:fix), a scripted structured answer,
``expect.output``, ``ask --output-schema``, the provider's modes, and a recorded run replayed."""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.loopback import Recorded, Reply
from tests.sessions.test_recipe import make_project, problems_of, write
from toolrun.cli import main
from toolrun.core.errors import LoadError, UserError
from toolrun.core.messages import StructuredOutput
from toolrun.providers.scripted_file import load_scripted_model
from toolrun.sessions.expect import value_at
from toolrun.sessions.play import arun
from toolrun.sessions.recipe import load_recipe, recipe_schema

SCHEMA_YAML = """\
  schema:
    type: object
    properties:
      city: {type: string}
      stock: {type: object, properties: {flower: {type: string}, count: {type: integer}}}
    required: [city, stock]
"""
RECIPE = """\
name: stock
model: scripted:script.yaml
tools: [get_flower_inventory]
tools_dir: ../tools.d
messages:
  - user: 北京的玫瑰有多少?
output:
{schema}  retries: 1
expect:
  output: {{city: 北京, stock.count: 100}}
"""
SCRIPT = """\
- tool_calls: [{name: get_flower_inventory, arguments: {city: 北京}}]
- output: {city: 北京, stock: {flower: 玫瑰, count: 100}}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def _recipe(project: Path, script: str = SCRIPT, recipe: str = RECIPE) -> Path:
    (project / "recipes" / "script.yaml").write_text(script, encoding="utf-8")
    return write(project, recipe.format(schema=SCHEMA_YAML))


# ---------------------------------------------------------------- loading


def test_output_loads_into_the_run_settings(project):
    recipe = load_recipe(_recipe(project))
    output = recipe.settings.output
    assert output is not None and output.mode is None and output.retries == 1
    assert output.schema is not None and output.schema["required"] == ["city", "stock"]
    assert recipe.expect.output == {"city": "北京", "stock.count": 100}
    any_json = load_recipe(write(project, "messages: [{user: hi}]\noutput: {json: true}\n", "j.yaml"))
    assert any_json.settings.output == StructuredOutput(None)
    assert "output" in recipe_schema()["properties"] and "output" in recipe_schema()["properties"]["expect"]["properties"]


@pytest.mark.parametrize(("section", "line", "message", "fix"), [
    ("output: {json: true, schema: {type: object}}", 2, "output has both schema and json", "not both"),
    ("output: {retries: 2}", 2, "neither what schema", "output: {json: true}"),
    ("output:\n  schema: {type: objekt}", 3, "output.schema is not a valid JSON Schema (at type)", "fix the schema"),
    ("output: {json: true, retrys: 2}", 2, "retrys", "retries"),
    ("output: {json: true, mode: strict}", 2, "mode", "native"),
    ("output:\n  schema: {$ref: '#/$defs/city'}", 3, "$ref '#/$defs/city' points to nothing", "output.schema.$defs"),
    ("output:\n  schema: {properties: {a: {$ref: 'https://example.com/a.json'}}}", 3, "at properties/a", "#/$defs/Name"),
])
def test_output_mistakes_name_their_line_and_a_fix(project, section, line, message, fix):
    problems = problems_of(write(project, f"messages: [{{user: hi}}]\n{section}\n"))
    assert len(problems) == 1
    problem = problems[0]
    assert problem.line == line and message in problem.message and fix in (problem.fix or "") + problem.message


def test_a_scripted_output_turn_cannot_also_hold_text(project):
    script = project / "bad.yaml"
    script.write_text("- output: {a: 1}\n  text: hello\n", encoding="utf-8")
    with pytest.raises(LoadError) as caught:
        load_scripted_model(script)
    assert caught.value.problems[0].line == 1 and "final answer" in caught.value.problems[0].message


# ---------------------------------------------------------------- running


def test_tools_then_a_scripted_structured_answer_checked_by_expect_output(project):
    result = asyncio.run(arun(_recipe(project)))
    assert [call.name for call in result.tool_calls] == ["get_flower_inventory"]
    assert result.output == {"city": "北京", "stock": {"flower": "玫瑰", "count": 100}}
    assert result.expect_failures == [] and not result.failed
    assert result.to_json()["output"] == result.output


def test_expect_output_names_the_path_and_both_values(project):
    script = SCRIPT.replace("count: 100", "count: 90")
    result = asyncio.run(arun(_recipe(project, script)))
    assert result.expect_failures == ["expect.output: stock.count is 90, not 100"]


def test_expect_output_tells_true_from_1_and_takes_a_list_index_yaml_read_as_a_number(project):
    recipe = """\
        model: scripted:script.yaml
        tools: []
        tools_dir: ../tools.d
        messages: [{user: hi}]
        output: {json: true}
        expect:
          output: {0.open: 1, 0.count: 0, 1: [true]}
        """
    (project / "recipes" / "script.yaml").write_text(
        "- output: [{open: true, count: false}, [1]]\n", encoding="utf-8")
    result = asyncio.run(arun(write(project, recipe, "e.yaml")))
    assert result.expect_failures == ["expect.output: 0.open is true, not 1", "expect.output: 0.count is false, not 0",
                                      "expect.output: 1 is [1], not [true]"]
    (project / "recipes" / "script.yaml").write_text(
        "- output: [{open: 1, count: 0.0}, [true]]\n", encoding="utf-8")
    assert asyncio.run(arun(project / "recipes" / "e.yaml")).expect_failures == []


def test_a_run_without_output_keeps_its_document(project):
    plain = write(project, "model: scripted:script.yaml\nmessages: [{user: hi}]\ntools: []\ntools_dir: ../tools.d\n", "p.yaml")
    (project / "recipes" / "script.yaml").write_text("- text: hello\n", encoding="utf-8")
    result = asyncio.run(arun(plain))
    assert "output" not in result.to_json() and result.output is None and not result.failed


def test_value_at_follows_dots_into_objects_and_lists():
    answer = {"a": {"b": [{"c": 1}]}, "x.y": 2}
    assert value_at(answer, "a.b.0.c") == 1 and value_at(answer, "x.y") == 2
    assert value_at(answer, "a.z") is value_at(None, "a") is value_at(answer, "a.b.5")


def test_a_mode_the_provider_does_not_have_is_bad_input_at_its_line(project):
    path = write(project, RECIPE.format(schema=SCHEMA_YAML).replace("model: scripted:script.yaml", "model: openai:gpt-4o")
                 .replace("tools: [get_flower_inventory]", "tools: []")
                 .replace("  retries: 1", "  mode: tool"))
    environ = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}  # a local server: no key, and never asked
    with pytest.raises(UserError) as caught:
        asyncio.run(arun(path, environ=environ))
    problem = caught.value.problems[0]
    assert "output.mode 'tool'" in problem.message and "'openai'" in problem.message
    assert problem.line == 14 and "native, json" in (problem.fix or "")


# ---------------------------------------------------------------- ask --output-schema


def _invoke(*args: str, cwd: Path):
    environment = {name: None for name in os.environ if name.endswith(("_API_KEY", "_BASE_URL"))}
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, list(args), env=environment, catch_exceptions=False)
    finally:
        os.chdir(previous)


@pytest.mark.parametrize(("answer", "code"), [("{city: 北京, roses: 100}", 0), ("{city: 北京}", 1)])
def test_ask_with_an_output_schema_file(project, answer, code):
    (project / "answer.schema.json").write_text(json.dumps(
        {"type": "object", "properties": {"city": {"type": "string"}, "roses": {"type": "integer"}},
         "required": ["city", "roses"]}), encoding="utf-8")
    (project / "script.yaml").write_text(f"- output: {answer}\n- output: {answer}\n", encoding="utf-8")
    result = _invoke("ask", "北京的玫瑰?", "--model", "scripted:script.yaml", "--output-schema", "answer.schema.json",
                     "--json", "--no-log", "--tools", "get_flower_inventory", cwd=project)
    assert result.exit_code == code, result.stderr
    document = json.loads(result.stdout)
    if code == 0:
        assert document["output"] == {"city": "北京", "roses": 100}
    else:
        assert document["output"] is None and document["stop_reason"] == "error"
        assert "missing required property 'roses'" in result.stderr


def test_ask_with_a_missing_output_schema_file_is_bad_input(project):
    (project / "script.yaml").write_text("- text: hi\n", encoding="utf-8")
    result = _invoke("ask", "hi", "--model", "scripted:script.yaml", "--output-schema", "nope.json", "--no-log",
                     cwd=project)
    assert result.exit_code == 2 and "--output-schema" in result.stderr


# ---------------------------------------------------------------- recorded, then replayed


def _structured_openai(request: Recorded) -> Reply:
    body = request.json()
    assert body["response_format"]["json_schema"]["strict"] is True
    content = json.dumps({"city": "北京", "stock": {"flower": "玫瑰", "count": 100}}, ensure_ascii=False)
    return Reply(200, {"id": "c", "object": "chat.completion", "model": "gpt-4o-mini",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop"}], "usage": {"prompt_tokens": 9, "completion_tokens": 9}})


def test_a_recorded_structured_run_replays_with_the_same_output(project, loopback):
    server = loopback(_structured_openai)
    recipe = RECIPE.format(schema=SCHEMA_YAML).replace("model: scripted:script.yaml", "model: openai:gpt-4o-mini")
    path = write(project, textwrap.dedent(recipe).replace("tools: [get_flower_inventory]", "tools: []"))
    cassette = project / "recipes" / "stock.cassette.json"
    live = asyncio.run(arun(path, mode="live", record=cassette, stream=False,
                            environ={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.url}))
    replayed = asyncio.run(arun(path, mode="replay", replay=cassette, strict=True, environ={}))
    assert live.output == replayed.output == {"city": "北京", "stock": {"flower": "玫瑰", "count": 100}}
    assert replayed.divergences == [] and not replayed.failed and replayed.expect_failures == []
    recorded = json.loads(cassette.read_text(encoding="utf-8"))
    assert "response_format" in json.dumps(recorded)


def test_a_tool_named_final_answer_clashes_with_the_final_tool_mode_at_load(project):
    tool_file = project / "tools.d" / "final.yaml"
    tool_file.write_text("name: final_answer\ndescription: Records the final answer of a flower order in the shop's log.\n"
                         "backend:\n  shell:\n    argv: [echo, done]\n", encoding="utf-8")
    recipe = RECIPE.replace("tools: [get_flower_inventory]", "tools: [get_flower_inventory, final_answer]")
    with pytest.raises(UserError) as caught:
        asyncio.run(arun(_recipe(project, recipe=recipe.replace("  retries: 1", "  mode: tool\n  retries: 1"))))
    problem = caught.value.problems[0]
    assert problem.file == project / "recipes" / "r.yaml" and problem.line == 7  # output:
    assert f"{tool_file}:1 defines a tool of that name" in problem.message and "'final_answer'" in problem.message
    assert "rename that tool" in (problem.fix or "")
    # asked natively (the scripted model's default), the name is free
    assert not asyncio.run(arun(_recipe(project, recipe=recipe))).failed
