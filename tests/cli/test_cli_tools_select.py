"""`toolrun tools select TEXT`: the ranking a request with that text would get, through click's runner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import toolrun
from tests.sessions.test_recipe import make_project
from toolrun.cli import main
from toolrun.core.messages import Message, TextPart
from toolrun.loop.tool_offer import ToolOffer, ToolSelection


def test_json_lists_the_ranked_tools_with_scores_best_first(tmp_path: Path) -> None:
    tools_dir = make_project(tmp_path) / "tools.d"
    result = CliRunner().invoke(main, ["tools", "select", "what does a rose cost, the price?", "--tools-dir",
                                       str(tools_dir), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    ranked = json.loads(result.stdout)["tools"]
    assert ranked[0]["name"] == "get_flower_price"
    assert [tool["score"] for tool in ranked] == sorted((tool["score"] for tool in ranked), reverse=True)
    assert all(set(tool) == {"name", "score"} for tool in ranked)


def test_tools_sharing_no_word_are_shown_where_a_request_offers_them_in_catalog_order(tmp_path: Path) -> None:
    tools_dir = make_project(tmp_path) / "tools.d"
    catalog_order = list(toolrun.load_catalog(tools_dir).tools)
    result = CliRunner().invoke(main, ["tools", "select", "what does a rose cost?", "--tools-dir", str(tools_dir),
                                       "--json"], catch_exceptions=False)
    shown = json.loads(result.stdout)["tools"]
    ranked = [tool["name"] for tool in shown if tool["score"] > 0]
    fillers = [tool["name"] for tool in shown if tool["score"] == 0]
    assert ranked and fillers and [tool["name"] for tool in shown] == ranked + fillers
    assert fillers == [name for name in catalog_order if name not in ranked]
    request = ToolOffer(list(toolrun.load_catalog(tools_dir)), ToolSelection(max_tools=len(shown)))
    offered = request.definitions([Message("user", [TextPart("what does a rose cost?")])])
    assert sorted(definition.name for definition in offered) == sorted(ranked + fillers)  # what a request offers


def test_k_limits_the_table_and_no_match_says_so(tmp_path: Path) -> None:
    tools_dir = str(make_project(tmp_path) / "tools.d")
    result = CliRunner().invoke(main, ["tools", "select", "order roses", "-k", "1", "--tools-dir", tools_dir])
    assert result.exit_code == 0
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["SCORE", "NAME"] and len(rows) == 1 and rows[0].split()[1] == "place_order"
    nothing = CliRunner().invoke(main, ["tools", "select", "zzz", "-k", "2", "--tools-dir", tools_dir])
    assert nothing.exit_code == 0 and "shares a word with the text: a request offers these" in nothing.stderr
    assert [row.split() for row in nothing.stdout.splitlines()[1:]] == [
        ["0.00", name] for name in list(toolrun.load_catalog(Path(tools_dir)).tools)[:2]]
