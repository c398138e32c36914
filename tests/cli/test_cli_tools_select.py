"""`toolrun tools select TEXT`: the ranking a request with that text would get, through click's runner."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.sessions.test_recipe import make_project
from toolrun.cli import main


def test_json_lists_the_ranked_tools_with_scores_best_first(tmp_path: Path) -> None:
    tools_dir = make_project(tmp_path) / "tools.d"
    result = CliRunner().invoke(main, ["tools", "select", "what does a rose cost, the price?", "--tools-dir",
                                       str(tools_dir), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    ranked = json.loads(result.stdout)["tools"]
    assert ranked[0]["name"] == "get_flower_price"
    assert [tool["score"] for tool in ranked] == sorted((tool["score"] for tool in ranked), reverse=True)
    assert all(set(tool) == {"name", "score"} and tool["score"] > 0 for tool in ranked)


def test_k_limits_the_table_and_no_match_says_so(tmp_path: Path) -> None:
    tools_dir = str(make_project(tmp_path) / "tools.d")
    result = CliRunner().invoke(main, ["tools", "select", "order roses", "-k", "1", "--tools-dir", tools_dir])
    assert result.exit_code == 0
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["SCORE", "NAME"] and len(rows) == 1 and rows[0].split()[1] == "place_order"
    nothing = CliRunner().invoke(main, ["tools", "select", "zzz", "--tools-dir", tools_dir])
    assert nothing.exit_code == 0 and nothing.stdout == "" and "shares a word" in nothing.stderr
