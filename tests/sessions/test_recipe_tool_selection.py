"""``settings.tool_selection`` in a recipe: parsed, checked with its line, run, and ``expect`` ignoring searches."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import toolrun
from tests.sessions.test_recipe import make_project, write
from toolrun.catalog.loader import load_catalog
from toolrun.core.errors import UserError
from toolrun.loop.tool_offer import ToolSelection
from toolrun.providers.scripted import ScriptedModel
from toolrun.sessions.recipe import load_recipe


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def test_the_settings_are_read(project: Path) -> None:
    recipe = load_recipe(write(project, """\
        messages: [{user: hi}]
        settings: {tool_selection: {max_tools: 2, tools_always: [get_flower_price], mode: search}}
        """))
    assert recipe.settings.tool_selection == ToolSelection(2, ("get_flower_price",), "search")
    assert load_recipe(write(project, "messages: [{user: hi}]\n", name="plain.yaml")).settings.tool_selection is None


def test_a_bad_mode_or_max_tools_is_a_load_error_with_its_line(project: Path) -> None:
    with pytest.raises(UserError, match=r"r.yaml:3.*tool_selection.*mode"):
        load_recipe(write(project, """\
            messages: [{user: hi}]
            settings:
              tool_selection: {mode: guess}
            """))


def test_tools_always_naming_no_recipe_tool_is_refused_with_its_line(project: Path) -> None:
    recipe = load_recipe(write(project, """\
        messages: [{user: hi}]
        tools: [get_flower_inventory]
        settings:
          tool_selection: {tools_always: [place_order]}
        """))
    catalog = load_catalog(project / "tools.d").catalog
    with pytest.raises(UserError, match=r"r.yaml:4: tool_selection.tools_always names 'place_order'"):
        recipe.select_tools(catalog)


def test_a_run_offers_the_ranked_tools_and_expect_does_not_count_a_search(project: Path) -> None:
    path = write(project, """\
        tools_dir: ../tools.d
        messages: [{user: "How much does a rose cost today?"}]
        settings: {stream: false, tool_selection: {max_tools: 1, mode: search}}
        expect: {tools_called: [get_flower_price]}
        """)
    model = ScriptedModel([ScriptedModel.calls([("find_tools", {"query": "flower price"})]),
                           ScriptedModel.text("12 元")])
    result = toolrun.run(path, model=model)
    assert [[tool.name for tool in request.tools] for request in model.requests] == [
        ["find_tools"], ["find_tools", "get_flower_price"]]
    assert result.expect_failures == ["expect.tools_called: get_flower_price was not called "
                                           "(called: no tool)"]


def test_a_catalog_tool_named_find_tools_is_a_load_error(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(textwrap.dedent("""\
        tools:
          - name: find_tools
            description: Finds tools in our internal registry. Use it to look up a tool by name.
            parameters: {type: object, properties: {}}
            backend: {shell: {argv: [echo, hi]}}
        """))
    problems = load_catalog(tmp_path).problems
    assert [str(problem) for problem in problems] == [
        f"{tmp_path / 't.yaml'}:2: the tool name 'find_tools' is reserved (the search tool of "
        "settings.tool_selection's search mode) — rename the tool"]
