"""The run document and the run log say which tools each request offered under ``settings.tool_selection``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.sessions.test_recipe import make_project, write
from toolrun.cli.logs import format_run
from toolrun.providers.scripted import ScriptedModel
from toolrun.runlog import RunLog
from toolrun.runlog.writer import RunLogWriter
from toolrun.sessions.play import arun

RECIPE = """\
    tools_dir: ../tools.d
    messages: [{user: "How much does a rose cost today?"}]
    settings: {stream: false%s}
    """


def _logged_run(tmp_path: Path, selection: str) -> tuple[dict, dict, list[str]]:
    """The run's document, the run as the log gives it back, and ``logs show``'s lines."""
    path = write(make_project(tmp_path), RECIPE % selection)
    model = ScriptedModel([ScriptedModel.calls([("get_flower_price", {"flower": "玫瑰"})]), ScriptedModel.text("12 元")])
    log = RunLog.open(tmp_path / "logs.db")
    try:
        result = asyncio.run(arun(path, model=model, observer=RunLogWriter(log, command="recipe")))
        run = log.get_run(1)
    finally:
        log.close()
    assert run is not None and run["status"] == "ok", run
    return result.to_json(), run, format_run(run)


def test_each_turn_records_the_tools_its_request_offered(tmp_path: Path) -> None:
    document, run, lines = _logged_run(tmp_path, ", tool_selection: {max_tools: 1}")
    # the second request: the tool called, and the best of the others
    offered = [["get_flower_price"], ["get_flower_inventory", "get_flower_price"]]
    assert [turn["tools_offered"] for turn in document["turns"]] == offered
    assert [turn["tools_offered"] for turn in run["turns"]] == offered
    assert "  offered 1: get_flower_price" in lines and "  offered 2: get_flower_inventory, get_flower_price" in lines


@pytest.mark.parametrize("max_tools", [3, 20])
def test_a_selection_that_offers_every_tool_says_all(tmp_path: Path, max_tools: int) -> None:
    document, run, lines = _logged_run(tmp_path, f", tool_selection: {{max_tools: {max_tools}}}")
    assert [turn["tools_offered"] for turn in document["turns"]] == ["all", "all"]
    assert [turn["tools_offered"] for turn in run["turns"]] == ["all", "all"]
    assert "  offered: all the run's tools" in lines


def test_without_a_selection_nothing_is_recorded(tmp_path: Path) -> None:
    document, run, lines = _logged_run(tmp_path, "")
    assert all("tools_offered" not in turn for turn in document["turns"] + run["turns"])
    assert not any("offered" in line for line in lines)
