"""run_until_done: asyncio.run without writing out the result (Python's asyncio.run reprs its
finished main task, result included, twice a run); the blocking entry points use it."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import toolrun
from toolrun.core.event_loop import run_until_done
from toolrun.loop.results import RunResult


class CountsItsRepr:
    """A result that counts how often it is written out."""

    written = 0

    def __repr__(self) -> str:
        CountsItsRepr.written += 1
        return "CountsItsRepr()"


async def make_result() -> CountsItsRepr:
    return CountsItsRepr()


def test_the_result_comes_back_and_is_never_written_out() -> None:
    CountsItsRepr.written = 0
    result = run_until_done(make_result())
    assert isinstance(result, CountsItsRepr) and CountsItsRepr.written == 0


def test_an_exception_of_the_coroutine_reaches_the_caller() -> None:
    async def fails() -> None:
        raise ValueError("the tool broke")

    with pytest.raises(ValueError, match="the tool broke"):
        run_until_done(fails())


def test_inside_a_running_loop_it_refuses_without_an_unawaited_coroutine_warning() -> None:
    async def outer() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(RuntimeError, match="running event loop"):
                run_until_done(make_result())

    run_until_done(outer())


TOOL = """\
name: get_stock
description: Returns the flower stock of one city's shop. Use it when asked what a shop has.
parameters: {type: object, properties: {city: {type: string, description: City of the shop}}, required: [city]}
backend: {python: "stock.py:get_stock"}
"""


def test_a_recipe_run_does_not_write_out_its_run_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tools.d").mkdir()
    (tmp_path / "tools.d" / "stock.yaml").write_text(TOOL, encoding="utf-8")
    (tmp_path / "tools.d" / "stock.py").write_text("def get_stock(city):\n    return 'roses: 100'\n", encoding="utf-8")
    recipe = tmp_path / "stock.yaml"
    recipe.write_text("name: stock\nmodel: openai:gpt-4o-mini\nmessages: [{user: roses?}]\n", encoding="utf-8")
    written: list[int] = []
    monkeypatch.setattr(RunResult, "__repr__", lambda self: written.append(1) or "RunResult(...)")
    model = toolrun.ScriptedModel([toolrun.ScriptedModel.calls([("get_stock", {"city": "Lyon"})]), "100 roses"])
    result = toolrun.run(recipe, model=model)
    assert result.tool_calls[0].result == "roses: 100" and result.final == "100 roses"
    assert written == []
