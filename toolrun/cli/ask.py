"""``toolrun ask PROMPT``: one question with tools from the catalog, shown like a recipe run.

The recipe is made in memory (``toolrun.sessions.ask.adhoc_recipe``) and played by the same code
as ``toolrun recipe``: same output, options, approvals, run log and exit codes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from toolrun.cli.recipe_options import (
    assume_yes_option,
    json_option,
    max_turns_option,
    model_option,
    record_option,
    replay_option,
    run_log_options,
    stream_option,
    system_option,
    tool_patterns_option,
    tools_dir_option,
    transcript_option,
)
from toolrun.cli.recipe_play import play_recipe
from toolrun.cli.run_log_options import open_run_log
from toolrun.cli.text_param import TYPED_TEXT
from toolrun.core.errors import Problem, UserError
from toolrun.loop.runner import RunSettings
from toolrun.sessions.ask import adhoc_recipe, choose_model
from toolrun.sessions.recipe_output import read_output_schema
from toolrun.sessions.run_options import RunOptions


@click.command("ask")
@click.argument("prompt", type=TYPED_TEXT)
@tool_patterns_option
@tools_dir_option("./tools.d")
@model_option("provider:model (default: $TOOLRUN_MODEL, or the model of the --replay recording); scripted:FILE plays a script")
@system_option
@json_option("print the run as one JSON document on stdout (as recipe --json)")
@stream_option
@max_turns_option("most model requests in the run (default 10)")
@record_option
@replay_option
@assume_yes_option()
@transcript_option
@click.option("--output-schema", "output_schema", type=click.Path(path_type=Path), default=None,
              help="a JSON Schema file (JSON or YAML): the answer is JSON of that shape, validated (--json carries it as output)")
@run_log_options
def ask_command(
    prompt: str,
    tool_patterns: tuple[str, ...],
    tools_dir: Path | None,
    model_spec: str | None,
    system: str | None,
    as_json: bool,
    stream: bool | None,
    max_turns: int | None,
    record: Path | None,
    replay: Path | None,
    assume_yes: bool,
    transcript_path: Path | None,
    logs: Path | None,
    no_log: bool,
    output_schema: Path | None = None,
) -> None:
    """Ask PROMPT (- reads it from stdin) with tools from the catalog, until the model answers.

    \b
    Exit codes: 0 done; 1 the run failed; 2 bad input.
    """
    if prompt == "-":
        prompt = _prompt_from_stdin()
    if not prompt.strip():
        raise UserError(Problem(None, None, "the prompt is empty", "ask a question, or pipe one in with -"))
    settings = RunSettings(output=read_output_schema(output_schema)) if output_schema is not None else None
    recipe = adhoc_recipe(name="ask", model=choose_model(model_spec, replay=replay), tools=tool_patterns,
                          tools_dir=tools_dir, system=system, settings=settings)
    options = RunOptions(mode="live" if replay is None else "auto",  # no recipe file, so no recording beside it to fall back to
                         prompt=prompt, stream=stream, max_turns=max_turns, record=record, replay=replay)
    code = play_recipe(recipe, options, as_json=as_json, assume_yes=assume_yes, transcript_path=transcript_path,
                       run_log=open_run_log(logs, no_log), command="ask")
    sys.exit(code)


def _prompt_from_stdin() -> str:
    """All of stdin, stripped; a closed or unreadable stdin (``<&-``, ``0>file``) is bad input, not a bug."""
    try:
        if sys.stdin is None:
            raise OSError("it is closed")
        return sys.stdin.read().strip()
    except OSError as exc:
        raise UserError(Problem(None, None, f"cannot read the prompt from stdin: {exc.strerror or exc}",
                                "pipe the prompt in, or pass it as the argument instead of -")) from None
