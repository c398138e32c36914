"""What ``toolrun recipe RECIPE`` does once its options are parsed, without click.

Both ways the command runs come here: click's ``toolrun.cli.recipe`` and the direct run of
``toolrun.cli.direct`` (the common ``toolrun recipe FILE``, which skips importing click).
The run itself is ``toolrun.sessions.play.run_recipe`` (``toolrun.arun``); what a person sees
is ``toolrun.cli.display``; ``--transcript`` is ``toolrun.runlog.transcript_log``. This module
wires those together and turns the outcome into the exit code; ``toolrun ask`` plays its
recipe made in memory with ``play_recipe`` too.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from toolrun.cli.approval_prompt import TerminalApprover
from toolrun.cli.display import TerminalDisplay
from toolrun.cli.echo import echo
from toolrun.cli.run_log_options import open_run_log
from toolrun.core.errors import EXIT_EXPECT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED, Problem, UserError
from toolrun.core.event_loop import run_until_done
from toolrun.core.text import counted
from toolrun.loop.results import RunResult, dumps
from toolrun.loop.run_so_far import RunSoFar
from toolrun.loop.runner import ObserverGroup
from toolrun.sessions.play import run_recipe
from toolrun.sessions.recipe import Recipe, load_recipe
from toolrun.sessions.run_options import RunOptions

if TYPE_CHECKING:
    from toolrun.runlog import RunLog

def parse_vars(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--var city=北京`` pairs as a dict; UserError for one without ``=``."""
    values: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(Problem(None, None, f"--var {pair!r} is not KEY=VALUE", "write e.g. --var question=你好"))
        values[key.strip()] = value
    return values


def run_recipe_command(
    *,
    recipe_path: Path,
    prompt: str | None,
    model_spec: str | None,
    tools_dir: Path | None,
    var_pairs: tuple[str, ...],
    as_json: bool,
    stream: bool | None,
    max_turns: int | None,
    record: Path | None,
    replay: Path | None,
    live: bool,
    strict: bool,
    replay_tools: bool,
    assume_yes: bool,
    transcript_path: Path | None,
    logs: Path | None,
    no_log: bool,
) -> int:
    """``toolrun recipe`` with its options by the names click gives them; returns the exit code. Raises UserError for bad input."""
    _check_transcript_apart(recipe_path, record, replay, transcript_path)
    options = RunOptions(vars=parse_vars(var_pairs), model=model_spec, mode="live" if live else "auto", prompt=prompt,
                         tools_dir=tools_dir, stream=stream, max_turns=max_turns, record=record, replay=replay,
                         strict=strict, replay_tools=replay_tools)
    return play_recipe(recipe_path, options, as_json=as_json, assume_yes=assume_yes, transcript_path=transcript_path,
                       run_log=open_run_log(logs, no_log))


def _check_transcript_apart(recipe: Path, record: Path | None, replay: Path | None, transcript: Path | None) -> None:
    """A transcript written over one of the run's inputs or its recording would lose it: bad input. (The
    recording's own place is checked by the run, for the library too.)"""
    if transcript is None:
        return
    beside = recipe.with_name(f"{recipe.stem}.cassette.json")  # --record there records it again; a transcript, never
    for what, source in (("the recipe", recipe), ("the recording it replays", replay),
                         ("the recording beside the recipe", beside), ("the file of --record", record)):
        if source is not None and transcript.resolve() == source.resolve():
            raise UserError(Problem(transcript, None, f"--transcript would overwrite {what}",
                                    "give --transcript a file of its own"))


def play_recipe(
    recipe_path: Path | Recipe,
    options: RunOptions,
    *,
    as_json: bool = False,
    assume_yes: bool = False,
    transcript_path: Path | None = None,
    run_log: RunLog | None = None,
    command: str = "recipe",
) -> int:
    """Everything ``toolrun recipe`` (and ``toolrun ask``) does; returns the exit code. Raises UserError for bad input.

    ``options``: the run's, less what this function adds — the terminal as observer and
    approver. ``run_log``: the run is written there as it happens (and the log is closed afterwards).
    """
    display = TerminalDisplay(info_out=sys.stderr, text_out=None if as_json else sys.stdout)
    log = None
    if transcript_path is not None:
        from toolrun.runlog.transcript_log import TranscriptLog  # start-up: only --transcript writes one

        log = TranscriptLog(transcript_path)  # opened when the run starts
    recipe = recipe_path if isinstance(recipe_path, Recipe) else load_recipe(recipe_path)
    # --json promises one document whatever happens: an interrupted run's is the run as far as it got
    so_far = RunSoFar(recipe=recipe.name, model=options.model if isinstance(options.model, str) else recipe.model,
                      output_requested=recipe.settings.output is not None) if as_json else None
    writer = None
    if run_log is not None:
        from toolrun.runlog import RunLogWriter  # start-up: --no-log does without the run log (and sqlite3)

        writer = RunLogWriter(run_log, command=command, prompt=options.prompt, vars={**recipe.vars, **(options.vars or {})})
    try:
        try:
            result = run_until_done(run_recipe(recipe, replace(
                options, observer=ObserverGroup(display, log, writer, so_far),
                approver=TerminalApprover(assume_yes, quiet=display.paused))))
        except KeyboardInterrupt:
            display.calls_stopped()
            display.notice("interrupted: the run stopped before it finished")
            if log is not None:
                log.write("interrupted", message="the run was interrupted (Ctrl-C)")
            if writer is not None:
                writer.interrupted()
            if so_far is not None:
                echo(dumps(so_far.interrupted().to_json()))
            return EXIT_INTERRUPTED
    finally:
        display.write_held()  # a run that broke off (a crash inside toolrun): every call line it had
        if log is not None:
            log.close()
        if writer is not None:
            writer.flush()  # what a run that broke off had done so far
        if run_log is not None:
            run_log.close()
    if writer is not None and writer.problem:
        display.notice(f"warning: {writer.problem}")
    if as_json:
        echo(dumps(result.to_json()))
    return report_outcome(display, result, options.record)


def report_outcome(display: TerminalDisplay, result: RunResult, record: str | Path | None) -> int:
    """The summary line and the closing messages on stderr; returns the exit code."""
    display.summary(result, result.mode or "live")
    if result.recorded_exchanges is not None:
        display.notice(f"recorded {counted(result.recorded_exchanges, 'model exchange')} to {record}")
    if result.failed:
        display.notice(f"error: the run failed: {result.error or result.stop_reason}")
        return EXIT_RUN_FAILED
    if result.error:
        display.notice(f"warning: {result.error}")
    for failure in result.expect_failures:
        display.notice(f"expect failed: {failure}")
    return EXIT_EXPECT_FAILED if result.expect_failures else EXIT_OK
