"""One ``RunOptions`` for a run's options: ``toolrun.run``/``arun`` keep their keyword arguments, and
their defaults are the dataclass's; the commands that play a recipe share their click options."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import click
import pytest

import toolrun
from tests.cli.test_cli_recipe import INVENTORY
from toolrun.cli.ask import ask_command
from toolrun.cli.batch import batch_command
from toolrun.cli.chat import chat_command
from toolrun.cli.recipe import recipe_command
from toolrun.sessions.run_options import RunOptions

# The public keyword arguments, in their order: changing them changes toolrun's API.
RUN_KEYWORDS = ["vars", "model", "mode", "prompt", "tools_dir", "catalog", "observer", "approver", "stream", "max_turns",
                "record", "replay", "strict", "replay_tools", "environ"]
ARUN_KEYWORDS = [*RUN_KEYWORDS, "transport"]


def _keywords(function: object) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(function).parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]


@pytest.mark.parametrize(("function", "names"), [(toolrun.run, RUN_KEYWORDS), (toolrun.arun, ARUN_KEYWORDS)],
                         ids=["run", "arun"])
def test_run_and_arun_keep_their_keywords_and_take_their_defaults_and_types_from_run_options(function: object,
                                                                                              names: list[str]) -> None:
    fields = {field.name: field for field in dataclasses.fields(RunOptions)}
    keywords = _keywords(function)
    assert [p.name for p in keywords] == names
    assert [list(inspect.signature(function).parameters)[0]] == ["recipe"]
    for parameter in keywords:
        field = fields[parameter.name]
        assert parameter.default == field.default, parameter.name
        assert parameter.annotation == field.type, parameter.name  # both strings: from __future__ import annotations
    assert set(ARUN_KEYWORDS) == set(fields)  # nothing in RunOptions that arun cannot be asked for


def test_run_options_are_frozen_and_the_batch_shares_them() -> None:
    import toolrun.batch

    options = RunOptions(max_turns=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_turns = 3  # type: ignore[misc]
    assert dataclasses.replace(options, model="scripted:x").max_turns == 2
    assert toolrun.batch.RunOptions is RunOptions


def test_run_builds_one_run_options_from_its_keywords(tmp_path: Path) -> None:
    model = toolrun.ScriptedModel(["上海: 百合 80"])
    result = toolrun.run(INVENTORY, model=model, prompt="上海?", max_turns=1, vars={"question": "unused"})
    assert result.final == "上海: 百合 80" and result.mode == "scripted"


COMMANDS = {"recipe": recipe_command, "ask": ask_command, "chat": chat_command, "batch": batch_command}


def _option_shape(option: click.Option) -> str:
    """Everything click knows of the option but its help (which says what it does in that command)."""
    info = {key: value for key, value in option.to_info_dict().items() if key != "help"}
    return repr(sorted(info.items()))


def test_an_option_two_commands_share_is_the_same_option_in_both() -> None:
    by_flag: dict[str, dict[str, str]] = {}
    for name, command in COMMANDS.items():
        for param in command.params:
            if isinstance(param, click.Option):
                by_flag.setdefault(param.opts[0], {})[name] = _option_shape(param)
    shared = {flag: shapes for flag, shapes in by_flag.items() if len(shapes) > 1}
    assert {"--tools-dir", "--stream", "--replay", "--yes", "--max-turns", "--json", "--logs", "--no-log"} <= set(shared)
    differing = {flag: shapes for flag, shapes in shared.items() if len(set(shapes.values())) > 1 and flag != "--model"}
    assert differing == {}  # batch's --model is repeatable (every row with each model): the one that differs
