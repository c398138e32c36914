"""``toolrun ask PROMPT``: one question with tools from the catalog, shown like a recipe run.

The recipe is made in memory (``toolrun.ask.adhoc_recipe``) and played by the same code
as ``toolrun recipe``: same output, options, approvals, run log and exit codes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from toolrun.ask import adhoc_recipe, choose_model
from toolrun.cli.recipe import play_recipe
from toolrun.cli.run_log_options import open_run_log, run_log_options
from toolrun.errors import Problem, UserError


@click.command("ask")
@click.argument("prompt")
@click.option("--tools", "tool_patterns", multiple=True, metavar="GLOB",
              help="a tool the model may call, by name or glob (repeatable; default: the whole catalog)")
@click.option("--tools-dir", type=click.Path(path_type=Path, file_okay=False), help="tools directory (default: ./tools.d)")
@click.option("--model", "model_spec", metavar="P:M",
              help="provider:model (default: $TOOLRUN_MODEL, or the model of the --replay recording); scripted:FILE plays a script")
@click.option("--system", help="the system prompt")
@click.option("--json", "as_json", is_flag=True, help="print the run as one JSON document on stdout (as recipe --json)")
@click.option("--stream/--no-stream", default=None, help="use the provider's streaming API (default) or not")
@click.option("--max-turns", type=click.IntRange(min=1), help="most model requests in the run (default 8)")
@click.option("--record", type=click.Path(path_type=Path, dir_okay=False), help="save every model exchange to this cassette")
@click.option("--replay", type=click.Path(path_type=Path, dir_okay=False), help="play the model side back from this cassette, offline")
@click.option("--yes", "assume_yes", is_flag=True, help="approve every call of a tool that asks for confirmation")
@click.option("--transcript", "transcript_path", type=click.Path(path_type=Path, dir_okay=False),
              help="write the run as JSON Lines, one event per line, as it happens")
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
) -> None:
    """Ask PROMPT (- reads it from stdin) with tools from the catalog, until the model answers.

    \b
    Exit codes: 0 done; 1 the run failed; 2 bad input.
    """
    if prompt == "-":
        prompt = sys.stdin.read().strip()
    if not prompt.strip():
        raise UserError(Problem(None, None, "the prompt is empty", "ask a question, or pipe one in with -"))
    recipe = adhoc_recipe(name="ask", model=choose_model(model_spec, replay=replay), tools=tool_patterns,
                          tools_dir=tools_dir, system=system)
    code = play_recipe(
        recipe, as_json=as_json, stream=stream, max_turns=max_turns, record=record, replay=replay,
        live=replay is None,  # no recipe, so no recording beside it to fall back to
        prompt=prompt, assume_yes=assume_yes, transcript_path=transcript_path,
        run_log=open_run_log(logs, no_log), command="ask",
    )
    sys.exit(code)
