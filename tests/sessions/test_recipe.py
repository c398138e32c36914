"""Recipes: loading with file:line problems, templates over vars, tool selection, expect checks."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from tests.flower_shop import INVENTORY_PY, INVENTORY_TOOL_ITEM
from toolrun.catalog.loader import load_catalog_or_raise
from toolrun.cli import main
from toolrun.core.errors import UserError
from toolrun.core.messages import Usage
from toolrun.loop.runner import RunResult, ToolCallRecord, TurnRecord, run_conversation
from toolrun.providers.scripted import ScriptedModel
from toolrun.sessions.expect import Expectations, check_expectations
from toolrun.sessions.recipe import load_recipe, recipe_schema, select_tools

TOOL_YAML = "tools:\n" + textwrap.indent(INVENTORY_TOOL_ITEM, "  ") + """\
  - name: get_flower_price
    description: >-
      Returns today's price of one flower. Use it when asked what a flower costs;
      do not use it for stock.
    parameters:
      type: object
      properties:
        flower: {type: string, description: Flower name}
      required: [flower]
    backend: {python: "flowers.py:get_flower_price"}
  - name: place_order
    description: >-
      Orders flowers for a shop. Use it only when the user explicitly asks to order;
      never to check stock.
    parameters:
      type: object
      properties:
        flower: {type: string, description: Flower name}
      required: [flower]
    backend: {python: "flowers.py:place_order"}
"""

FLOWERS_PY = INVENTORY_PY + """
def get_flower_price(flower):
    return "12 元"

def place_order(flower):
    return "ordered"
"""

GOOD_RECIPE = """\
name: inventory
description: Stock of three cities.
model: openai:gpt-4o-mini
tools: [get_flower_inventory]
tools_dir: ../tools.d
system: You answer questions about our {{ shop }} flower shops.
messages:
  - user: "{{ question }}"
  - assistant: Which cities?
  - user: "{{ cities | join('、') }}"
vars:
  shop: 花花
  question: 鲜花库存是多少?
  cities: [北京, 上海, 深圳]
settings: {max_turns: 8, parallel: false, tool_choice: auto, temperature: 0, max_tokens: 500,
           stream: false, max_consecutive_failures: 2}
expect:
  tools_called: [get_flower_inventory]
  final_contains: [玫瑰]
provider: {base_url: "http://127.0.0.1:9/v1", api_key_env: GATEWAY_KEY, headers: {X-Team: "${env:TEAM_TOKEN}"}}
allow_hosts: [api.example.com]
"""


def make_project(folder: Path) -> Path:
    """tools.d with the flower tools, and an empty recipes/, in ``folder``."""
    tools_dir = folder / "tools.d"
    tools_dir.mkdir()
    (tools_dir / "flowers.yaml").write_text(TOOL_YAML, encoding="utf-8")
    (tools_dir / "flowers.py").write_text(FLOWERS_PY, encoding="utf-8")
    (folder / "recipes").mkdir()
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def write(project: Path, text: str, name: str = "r.yaml") -> Path:
    path = project / "recipes" / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problems_of(path: Path) -> list:
    with pytest.raises(UserError) as caught:
        load_recipe(path)
    return caught.value.problems


def test_a_full_recipe_loads(project):
    recipe = load_recipe(write(project, GOOD_RECIPE))
    assert recipe.name == "inventory" and recipe.model == "openai:gpt-4o-mini"
    assert recipe.tools == ["get_flower_inventory"]
    assert recipe.tools_dir == project / "tools.d"
    assert (recipe.settings.max_turns, recipe.settings.parallel, recipe.settings.temperature) == (8, False, 0)
    assert recipe.settings.max_consecutive_failures == 2 and recipe.settings.stream is False
    assert recipe.expect.tools_called == ["get_flower_inventory"] and recipe.expect.final_contains == ["玫瑰"]
    assert recipe.provider.base_url == "http://127.0.0.1:9/v1" and recipe.provider.api_key_env == "GATEWAY_KEY"
    assert recipe.allow_hosts == ["api.example.com"] and recipe.call_context({}).allow_hosts == ["api.example.com"]
    assert recipe.line_of("settings") == 15


def test_defaults_name_from_the_file_and_tools_dir_beside_it(project):
    recipe = load_recipe(write(project, "messages: [{user: hi}]\n", name="stock-check.yaml"))
    assert recipe.name == "stock-check" and recipe.model is None and recipe.tools is None
    assert recipe.tools_dir == project / "recipes" / "tools.d"
    assert recipe.settings.max_turns == 10 and recipe.settings.parallel is True
    assert not recipe.expect


def test_templates_render_over_vars_and_overrides(project):
    recipe = load_recipe(write(project, GOOD_RECIPE))
    messages = recipe.render_messages({"question": "玫瑰还有多少?"})
    assert [(m.role, m.text) for m in messages] == [
        ("user", "玫瑰还有多少?"), ("assistant", "Which cities?"), ("user", "北京、上海、深圳")]
    assert recipe.render_system() == "You answer questions about our 花花 flower shops."
    assert recipe.render_messages()[0].text == "鲜花库存是多少?"


def test_an_unknown_var_override_is_a_user_error_with_a_guess(project):
    recipe = load_recipe(write(project, GOOD_RECIPE))
    with pytest.raises(UserError, match="did you mean 'question'") as caught:
        recipe.render_messages({"questoin": "x"})
    assert caught.value.problems[0].file == recipe.path


def test_a_template_var_missing_everywhere_names_line_and_fix(project):
    path = write(project, """\
        messages:
          - user: hello
          - user: "{{ city }} stock?"
        """)
    recipe = load_recipe(path)
    with pytest.raises(UserError) as caught:
        recipe.render_messages()
    problem = caught.value.problems[0]
    assert (problem.file, problem.line) == (path, 3)
    assert "city" in problem.message and "--var city=" in problem.fix
    assert recipe.render_messages({"city": "北京"})[1].text == "北京 stock?"


def test_unknown_keys_are_reported_with_line_and_did_you_mean(project):
    path = write(project, """\
        name: r
        messages: [{user: hi}]
        setings: {max_turns: 3}
        expect:
          final_contain: [x]
        """)
    problems = problems_of(path)
    assert [(p.line, p.message, p.fix) for p in problems] == [
        (3, "unknown key 'setings' in the document", "did you mean 'settings'?"),
        (5, "unknown key 'final_contain' in expect", "did you mean 'final_contains'?"),
    ]
    assert all(p.file == path for p in problems)


def test_wrong_types_and_shapes_are_reported_with_their_lines(project):
    path = write(project, """\
        model: gpt-4o
        messages:
          - user: hi
            assistant: both in one item
          - system: nope
        settings:
          max_turns: many
          parallel: yes please
          temperature: 5
        """)
    problems = {p.line: p for p in problems_of(path)}
    assert "provider:model" in problems[1].message and "openai:gpt-4o-mini" in problems[1].fix
    assert "messages[0]" in problems[3].message
    assert "unknown key 'system' in messages[1]" == problems[5].message
    assert "settings.max_turns must be an integer, not a string \"many\"" == problems[7].message
    assert "settings.parallel must be true or false" in problems[8].message
    assert "at most 2" in problems[9].message


def test_missing_messages_and_non_mapping_documents(project):
    problem = problems_of(write(project, "name: r\n"))[0]
    assert "missing the required key 'messages'" in problem.message
    problem = problems_of(write(project, "- user: hi\n"))[0]
    assert "must be a mapping" in problem.message and problem.line == 1


def test_yaml_syntax_errors_have_a_line(project):
    problem = problems_of(write(project, "name: r\nmessages: [{user: hi}\nsettings: {}\n"))[0]
    assert "YAML syntax error" in problem.message and problem.line is not None


def test_broken_templates_and_env_references_are_load_errors(project):
    path = write(project, """\
        system: "token ${env:OPENAI_API_KEY}"
        messages:
          - user: "{{ question "
        """)
    problems = problems_of(path)
    assert [p.line for p in problems] == [1, 3]
    assert "the model would see its value" in problems[0].message
    assert "template syntax error" in problems[1].message


@pytest.mark.parametrize(("template", "said"), [
    ("{{ shop.__class__ }}", "unsafe"),                       # the sandbox's refusal
    ("{{ 1 / 0 }}", "ZeroDivisionError"),
    ("{{ shop + 1 }}", "TypeError"),
    ("{{ range(100000000) | list | length }}", "Range too big"),
    ("{{ shop.index('x') }}", "ValueError"),                 # a str method that raises
    ("{{ '{0:d}'.format(shop) }}", "ValueError"),
    ("{{ shop.encode('no-such-codec') }}", "LookupError"),
    ("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "RecursionError"),
    ("{{ shop * 10**12 }}", "template value too large: 2 ×"),  # the sandbox's own words, not wrapped again
])
def test_a_template_that_fails_while_rendering_is_a_user_error_with_its_line(project, template, said):
    path = write(project, f"""\
        vars: {{shop: 花花}}
        messages:
          - user: "{template}"
        """)
    recipe = load_recipe(path)
    with pytest.raises(UserError) as caught:
        recipe.render_messages()
    problem = caught.value.problems[0]
    assert (problem.file, problem.line) == (path, 3) and said in problem.message and problem.fix


def test_var_choices_that_leave_out_the_vars_own_value_or_name_no_var_are_load_errors(project):
    problems = problems_of(write(project, """\
        messages: [{user: "{{ environment }} in {{ region }}"}]
        vars: {environment: prod, region: eu}
        var_choices:
          environment: [production, staging]
          regoin: [eu, us]
        """))
    assert [(p.line, p.message, p.fix) for p in problems] == [
        (4, "var_choices of 'environment' leave out its own value 'prod' (vars: environment)",
         "add it to the choices, or change vars: environment"),
        (5, "var_choices names 'regoin', which is neither in vars nor used by a template", "did you mean 'region'?")]
    fine = load_recipe(write(project, """\
        messages: [{user: "{{ environment }}"}]
        var_choices: {environment: [production, staging]}
        """, "fine.yaml"))
    assert fine.variables({"environment": "staging"}) == {"environment": "staging"}


def test_nan_passes_no_bound_and_is_refused_at_its_line(project):
    problems = problems_of(write(project, """\
        messages: [{user: hi}]
        settings:
          temperature: .nan
        output:
          schema: {type: number, maximum: .NaN}
        vars: {limit: -.inf}
        """))
    assert [(p.line, p.message) for p in problems] == [
        (3, "settings.temperature is .nan, which is not a number JSON can carry"),
        (5, "output.schema.maximum is .nan, which is not a number JSON can carry"),
        (6, "vars.limit is .inf, which is not a number JSON can carry")]  # --json could not print it


def test_a_missing_recipe_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="recipe file not found"):
        load_recipe(tmp_path / "nope.yaml")


def test_select_tools_by_name_glob_and_default(project):
    catalog = load_catalog_or_raise(project / "tools.d")
    assert [t.name for t in select_tools(catalog, None)] == ["get_flower_inventory", "get_flower_price", "place_order"]
    assert [t.name for t in select_tools(catalog, ["get_*"])] == ["get_flower_inventory", "get_flower_price"]
    assert [t.name for t in select_tools(catalog, ["place_order", "get_*", "place_order"])] == [
        "place_order", "get_flower_inventory", "get_flower_price"]
    assert select_tools(catalog, []) == []


def test_a_tool_name_matching_nothing_points_at_its_line(project):
    path = write(project, """\
        tools:
          - get_flower_inventory
          - get_flower_prices
          - delete_*
        messages: [{user: hi}]
        tools_dir: ../tools.d
        """)
    recipe = load_recipe(path)
    catalog = load_catalog_or_raise(recipe.locate_tools_dir())
    with pytest.raises(UserError) as caught:
        recipe.select_tools(catalog)
    first, second = caught.value.problems
    assert (first.file, first.line, first.fix) == (path, 3, "did you mean 'get_flower_price'?")
    assert second.line == 4 and "delete_*" in second.message


def test_tool_choice_and_expect_must_name_selected_tools(project):
    path = write(project, """\
        tools_dir: ../tools.d
        tools: [get_flower_inventory]
        messages: [{user: hi}]
        settings: {tool_choice: get_flower_inventry}
        """)
    recipe = load_recipe(path)
    with pytest.raises(UserError) as caught:
        recipe.select_tools(load_catalog_or_raise(recipe.tools_dir))
    assert caught.value.problems[0].line == 4 and "get_flower_inventory" in caught.value.problems[0].fix

    path = write(project, """\
        tools_dir: ../tools.d
        tools: [get_*]
        messages: [{user: hi}]
        expect: {tools_called: [place_order], tools_not_called: [place_ordr]}
        """)
    recipe = load_recipe(path)
    with pytest.raises(UserError) as caught:
        recipe.select_tools(load_catalog_or_raise(recipe.tools_dir))
    called, not_called = caught.value.problems
    assert "expect.tools_called names 'place_order', which is not one of the recipe's tools" in called.message
    assert "not one of the catalog" in not_called.message and not_called.fix == "did you mean 'place_order'?"


def test_tool_choice_required_with_no_tools_offered_is_a_problem_at_its_line(project):
    # No request can carry "required" without tools: it was dropped and the model answered in text.
    path = write(project, """\
        tools_dir: ../tools.d
        tools: []
        messages: [{user: hi}]
        settings: {max_turns: 2, tool_choice: required}
        """)
    script = project / "turns.yaml"
    script.write_text("- text: 北京有玫瑰\n", encoding="utf-8")
    outcome = CliRunner().invoke(main, ["recipe", str(path), "--model", f"scripted:{script}"])
    assert outcome.exit_code == 2, outcome.output
    assert f"{path}:4: tool_choice required makes the model call a tool, but the recipe offers none" in outcome.output
    assert "tool_choice: auto" in outcome.output and "北京有玫瑰" not in outcome.output

    path = write(project, """\
        tools_dir: ../tools.d
        tools: []
        messages: [{user: hi}]
        settings: {tool_choice: none}
        """)
    recipe = load_recipe(path)
    assert recipe.select_tools(load_catalog_or_raise(recipe.tools_dir)) == []  # nothing to call, nothing forced


def test_tools_not_called_may_name_a_catalog_tool_the_recipe_does_not_offer(project):
    path = write(project, """\
        tools_dir: ../tools.d
        tools: [get_*]
        messages: [{user: hi}]
        expect: {tools_not_called: [place_order]}
        """)
    recipe = load_recipe(path)
    assert [t.name for t in recipe.select_tools(load_catalog_or_raise(recipe.tools_dir))] == [
        "get_flower_inventory", "get_flower_price"]


def test_a_missing_tools_dir_points_at_the_key(project):
    path = write(project, "tools_dir: ../tool.d\nmessages: [{user: hi}]\n")
    recipe = load_recipe(path)
    with pytest.raises(UserError) as caught:
        recipe.locate_tools_dir()
    assert caught.value.problems[0].line == 1 and "does not exist" in caught.value.problems[0].message
    assert recipe.locate_tools_dir(project / "tools.d") == project / "tools.d"


def test_run_settings_take_command_line_overrides(project):
    recipe = load_recipe(write(project, GOOD_RECIPE))
    settings = recipe.run_settings(max_turns=2, stream=True)
    assert (settings.max_turns, settings.stream, settings.parallel, settings.max_tokens) == (2, True, False, 500)
    assert recipe.settings.max_turns == 8


def test_model_spec_prefers_the_override_and_needs_one(project):
    assert load_recipe(write(project, GOOD_RECIPE)).model_spec("anthropic:claude") == "anthropic:claude"
    with pytest.raises(UserError, match="names no model"):
        load_recipe(write(project, "messages: [{user: hi}]\n")).model_spec(None)


def test_provider_headers_resolve_env_references(project):
    recipe = load_recipe(write(project, GOOD_RECIPE))
    assert recipe.provider_overrides({"TEAM_TOKEN": "team-secret"}).headers == {"X-Team": "team-secret"}
    with pytest.raises(UserError, match="TEAM_TOKEN"):
        recipe.provider_overrides({})


def result(final: str | None, calls: list[tuple[str, bool]], stop_reason: str = "stop", turns: int = 2) -> RunResult:
    records = [ToolCallRecord(f"c{i}", name, {}, "boom" if error else "ok", error, 1)
               for i, (name, error) in enumerate(calls)]
    turn_list = [TurnRecord("tool_calls", None, Usage(), records)] + [TurnRecord("stop", final, Usage())] * (turns - 1)
    return RunResult(final, stop_reason, Usage(), turn_list, [])


def test_expectations_pass_when_everything_holds():
    expect = Expectations(tools_called=["get_*"], tools_not_called=["place_order"], final_contains=["玫瑰"],
                          final_not_contains=["sorry"], max_turns=2, stop_reason="stop")
    assert check_expectations(expect, result("玫瑰: 100", [("get_flower_inventory", False)])) == []
    assert check_expectations(Expectations(), result(None, [])) == []


def test_each_failing_expectation_says_what_happened():
    expect = Expectations(tools_called=["get_flower_inventory", "get_flower_price"], tools_not_called=["place_order"],
                          final_contains=["玫瑰"], final_not_contains=["sorry"], max_turns=1, stop_reason="stop")
    failures = check_expectations(expect, result("sorry, no data", [("get_flower_inventory", True), ("place_order", False)],
                                                 stop_reason="max_turns"))
    assert len(failures) == 7
    assert "get_flower_inventory was called 1 time but every call failed" in failures[0]
    assert "get_flower_price was not called (called: get_flower_inventory, place_order)" in failures[1]
    assert "place_order was called 1 time" in failures[2] and "time(s)" not in failures[2]
    assert "'玫瑰' is not in the final answer: 'sorry, no data'" in failures[3]
    assert "'sorry' is in the final answer" in failures[4]
    assert "took 2 model requests, more than 1" in failures[5]
    assert "stopped with 'max_turns'" in failures[6]


def test_a_recipe_runs_end_to_end_with_a_scripted_model(project):
    recipe = load_recipe(write(project, GOOD_RECIPE))
    tools = recipe.select_tools(load_catalog_or_raise(recipe.locate_tools_dir()))
    model = ScriptedModel([
        ScriptedModel.calls([("get_flower_inventory", {"city": c}) for c in ("北京", "上海", "深圳")]),
        ScriptedModel.text("北京玫瑰100, 上海玫瑰80, 深圳玫瑰60"),
    ])
    run = asyncio.run(run_conversation(
        model, tools, system=recipe.render_system(), messages=recipe.render_messages(),
        settings=recipe.run_settings(), context=recipe.call_context({}),
    ))
    assert recipe.check(run) == []
    assert model.requests[0].settings.parallel_tool_calls is False and model.requests[0].settings.temperature == 0
    assert [m.role for m in model.requests[0].messages] == ["user", "assistant", "user"]
    failing = Expectations(final_contains=["百合"])
    assert check_expectations(failing, run) == ["expect.final_contains: '百合' is not in the final answer: "
                                                "'北京玫瑰100, 上海玫瑰80, 深圳玫瑰60'"]


def test_the_recipe_schema_is_published_and_valid():
    Draft202012Validator.check_schema(recipe_schema())
    printed = CliRunner().invoke(main, ["schema", "recipe"])
    assert printed.exit_code == 0 and json.loads(printed.output) == recipe_schema()


def test_the_shipped_recipes_validate():
    # NAME.script.yaml beside a recipe holds a scripted model's turns, not a recipe.
    shipped = sorted(path for path in (Path(__file__).resolve().parents[2] / "recipes").glob("*.yaml")
                     if not path.name.endswith(".script.yaml"))
    assert {path.name for path in shipped} >= {"inventory.yaml", "inventory-anthropic.yaml", "inventory-gemini.yaml",
                                               "inventory-responses.yaml", "inventory-ollama.yaml", "ops-triage.yaml",
                                               "tickets.yaml"}
    for path in shipped:
        recipe = load_recipe(path)
        assert recipe.render_messages(), path
        catalog = load_catalog_or_raise(recipe.locate_tools_dir(), wanted=recipe.wants_tool)
        assert recipe.select_tools(catalog), path
        assert ("search_tickets" in catalog) == (path.name == "tickets.yaml"), path  # its server starts for it alone


def test_the_recipe_command_reports_recipe_errors_like_tool_file_errors(project):
    path = write(project, "messages: [{user: hi}]\nsettings: {max_turn: 3}\n")
    outcome = CliRunner().invoke(main, ["recipe", str(path), "--model", "openai:gpt-4o-mini"])
    assert outcome.exit_code == 2
    assert f"{path}:2: unknown key 'max_turn' in settings — did you mean 'max_turns'?" in outcome.output
    assert "Traceback" not in outcome.output
