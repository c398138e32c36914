"""``toolrun recipe RECIPE``: play a recipe live, or replay its recording, and show the run.

This module is the command's options, for click; what it does with them is
``toolrun.cli.recipe_play.run_recipe_command``, which the direct run of ``toolrun.cli.direct``
calls too: keep its tables (``RECIPE_VALUE_OPTIONS``, ``RECIPE_FLAGS``, ``RECIPE_DEFAULTS``) in step
with the options here (a test compares them).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from toolrun.cli.recipe_options import (
    assume_yes_option,
    json_option,
    live_option,
    max_turns_option,
    model_option,
    record_option,
    replay_option,
    run_log_options,
    stream_option,
    tools_dir_option,
    transcript_option,
)
from toolrun.cli.recipe_play import run_recipe_command
from toolrun.cli.text_param import TYPED_TEXT


@click.command("recipe")
@click.argument("recipe_path", metavar="RECIPE", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("prompt", required=False, type=TYPED_TEXT)
@model_option("provider:model, overriding the recipe's model; scripted:FILE plays a YAML list of model turns offline")
@tools_dir_option("the recipe's tools_dir")
@click.option("--var", "var_pairs", multiple=True, metavar="K=V", type=TYPED_TEXT, help="override one of the recipe's vars (repeatable)")
@json_option("print the run's transcript as one JSON document on stdout")
@stream_option
@max_turns_option("most model requests in the run")
@record_option
@replay_option
@live_option
@click.option("--strict", is_flag=True, help="a replay that diverges from its recording fails the run (exit 1), for CI")
@click.option("--replay-tools", is_flag=True,
              help="in a replay, play back the tools' recorded results too: no tool runs, no service is needed")
@assume_yes_option()
@transcript_option
@run_log_options
def recipe_command(**params: Any) -> None:
    """Play RECIPE: ask the model, run the tools it calls, until it answers.

    PROMPT, if given, is sent as the user's message in place of the recipe's messages
    (its system prompt, tools and settings stay).

    \b
    Exit codes: 0 done; 1 the run failed; 2 bad input; 3 an expect check failed.
    """
    sys.exit(run_recipe_command(**params))  # the options by their names, typed there
