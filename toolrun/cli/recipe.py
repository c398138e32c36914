"""``toolrun recipe RECIPE``: play a recipe live, or replay its recording, and show the run.

Which mode a run uses is ``toolrun.replay.playback``'s rule; what a person sees is
``toolrun.display``; ``--transcript`` is ``toolrun.transcript_log``. This module parses the
options, wires those together, and turns the outcome into the exit code.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from toolrun.approval import TerminalApprover
from toolrun.cli import main
from toolrun.cli.common import load_catalog_for_cli
from toolrun.display import ObserverGroup, TerminalDisplay
from toolrun.errors import EXIT_EXPECT_FAILED, EXIT_OK, EXIT_RUN_FAILED, Problem, UserError
from toolrun.providers import get_provider_class, split_model
from toolrun.providers.transport import HttpxTransport, Transport
from toolrun.recipe import load_recipe
from toolrun.replay.playback import check_cassette_provider, choose_mode, offline_config
from toolrun.replay.recording import (
    Cassette,
    Divergence,
    RecordingTransport,
    ReplayTransport,
    load_cassette,
    save_cassette,
)
from toolrun.runner import RunResult, run_conversation
from toolrun.transcript import dumps, transcript_document
from toolrun.transcript_log import TranscriptLog

T = TypeVar("T")
FAILED_STOP_REASONS = frozenset({"error", "max_turns"})
EXIT_INTERRUPTED = 130  # the shell's convention for a run stopped by Ctrl-C


def writable(path: Path, option: str, create: Callable[[], T]) -> T:
    """Create an output file before the run starts: a bad path is bad input, not a crash mid-run."""
    try:
        return create()
    except OSError as exc:
        raise UserError(Problem(path, None, f"{option}: cannot write this file ({exc.strerror or exc})",
                                "choose a path in a folder you can write to")) from None


def parse_vars(pairs: tuple[str, ...]) -> dict[str, str]:
    """``--var city=北京`` pairs as a dict; UserError for one without ``=``."""
    values: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(Problem(None, None, f"--var {pair!r} is not KEY=VALUE", "write e.g. --var question=你好"))
        values[key.strip()] = value
    return values


def replay_stream_mode(cassette: Cassette, requested: bool | None, display: TerminalDisplay) -> bool | None:
    """The stream mode a replay must use: the recording's. Says so when the user asked otherwise."""
    recorded = cassette.streamed
    if recorded is None:
        return requested
    if requested is not None and requested != recorded:
        flag = "--stream" if recorded else "--no-stream"
        display.notice(f"the recording was made {'with' if recorded else 'without'} streaming: replaying as {flag}")
    return recorded


@main.command("recipe")
@click.argument("recipe_path", metavar="RECIPE", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--model", "model_spec", metavar="P:M", help="provider:model, overriding the recipe's model")
@click.option("--tools-dir", type=click.Path(path_type=Path, file_okay=False), help="tools directory (default: the recipe's tools_dir)")
@click.option("--var", "var_pairs", multiple=True, metavar="K=V", help="override one of the recipe's vars (repeatable)")
@click.option("--json", "as_json", is_flag=True, help="print the run's transcript as one JSON document on stdout")
@click.option("--stream/--no-stream", default=None, help="use the provider's streaming API (default) or not")
@click.option("--max-turns", type=click.IntRange(min=1), help="most model requests in the run")
@click.option("--record", type=click.Path(path_type=Path, dir_okay=False), help="save every model exchange to this cassette")
@click.option("--replay", type=click.Path(path_type=Path, dir_okay=False), help="play the model side back from this cassette, offline")
@click.option("--live", is_flag=True, help="never fall back to the recording beside the recipe")
@click.option("--yes", "assume_yes", is_flag=True, help="approve every call of a tool that asks for confirmation")
@click.option("--transcript", "transcript_path", type=click.Path(path_type=Path, dir_okay=False),
              help="write the run as JSON Lines, one event per line, as it happens")
def recipe_command(
    recipe_path: Path,
    model_spec: str | None,
    tools_dir: Path | None,
    var_pairs: tuple[str, ...],
    as_json: bool,
    stream: bool | None,
    max_turns: int | None,
    record: Path | None,
    replay: Path | None,
    live: bool,
    assume_yes: bool,
    transcript_path: Path | None,
) -> None:
    """Play RECIPE: ask the model, run the tools it calls, until it answers.

    \b
    Exit codes: 0 done; 1 the run failed; 2 bad input; 3 an expect check failed.
    """
    code = play_recipe(
        recipe_path, model_spec=model_spec, tools_dir=tools_dir, var_overrides=parse_vars(var_pairs),
        as_json=as_json, stream=stream, max_turns=max_turns, record=record, replay=replay, live=live,
        assume_yes=assume_yes, transcript_path=transcript_path,
    )
    sys.exit(code)


def play_recipe(
    recipe_path: Path,
    *,
    model_spec: str | None = None,
    tools_dir: Path | None = None,
    var_overrides: dict[str, str] | None = None,
    as_json: bool = False,
    stream: bool | None = None,
    max_turns: int | None = None,
    record: Path | None = None,
    replay: Path | None = None,
    live: bool = False,
    assume_yes: bool = False,
    transcript_path: Path | None = None,
) -> int:
    """Everything ``toolrun recipe`` does; returns the exit code. Raises UserError for bad input."""
    display = TerminalDisplay(info_out=sys.stderr, text_out=None if as_json else sys.stdout)
    recipe = load_recipe(recipe_path)
    spec = recipe.model_spec(model_spec)
    provider_name, model_name = split_model(spec)
    provider_class = get_provider_class(provider_name)
    choice = choose_mode(provider_class, recipe.provider, recipe_path, replay=replay, live=live, record=record,
                         model_line=None if model_spec else recipe.line_of("model"))

    catalog = load_catalog_for_cli(recipe.locate_tools_dir(tools_dir))
    tools = recipe.select_tools(catalog)
    system = recipe.render_system(var_overrides)
    messages = recipe.render_messages(var_overrides)

    session = _Session(display)
    if choice.mode == "replay":
        assert choice.cassette is not None
        cassette = load_cassette(choice.cassette)
        check_cassette_provider(cassette, choice, provider_class, recipe.provider, spec)
        if choice.notice:
            display.notice(choice.notice)
        if cassette.model and cassette.model != spec:
            display.notice(f"the recording was made with {cassette.model}, this run asks for {spec}")
        stream = replay_stream_mode(cassette, stream, display)
        session.replay = ReplayTransport(cassette, on_divergence=session.report_divergence)
        transport: Transport = session.replay
        config = offline_config(provider_class, recipe.provider)
    else:
        config = provider_class.resolve_config(recipe.provider_overrides())
        transport = HttpxTransport(max_retries=recipe.max_retries, timeout=recipe.request_timeout)
        if record is not None:
            destination = record
            session.recorder = RecordingTransport(transport, recipe=recipe.name, model=spec,
                                                  on_exchange=lambda cassette: save_cassette(cassette, destination))
            writable(record, "--record", lambda: save_cassette(session.recorder.cassette, destination))
            transport = session.recorder
    settings = recipe.run_settings(max_turns=max_turns, stream=stream)
    provider = provider_class(model_name, config, transport=transport)

    async def run() -> RunResult:
        try:
            return await run_conversation(
                provider, tools, system=system, messages=messages, settings=settings,
                context=recipe.call_context(), approver=TerminalApprover(assume_yes=assume_yes),
                observer=ObserverGroup(display, session.log),
            )
        finally:
            await provider.aclose()

    if transcript_path is not None:
        session.log = writable(transcript_path, "--transcript", lambda: TranscriptLog(transcript_path))
        session.log.run_start(recipe=recipe.name, model=spec, mode=choice.mode)
        if choice.notice:
            session.log.write("notice", message=choice.notice)
    try:
        try:
            result = asyncio.run(run())
        except KeyboardInterrupt:
            display.notice("interrupted: the run stopped before it finished")
            if session.log is not None:
                session.log.write("interrupted", message="the run was interrupted (Ctrl-C)")
            return EXIT_INTERRUPTED
        session.check_replay_complete(result)
        document = transcript_document(result, recipe=recipe.name, model=spec, mode=choice.mode)
        if choice.mode == "replay":
            document["divergences"] = [d.to_json() for d in session.divergences]
        failures = [] if result.stop_reason in FAILED_STOP_REASONS else recipe.check(result)
        if failures:
            document["expect_failures"] = failures
        if session.log is not None:
            session.log.run_end(document)
    finally:
        if session.log is not None:
            session.log.close()

    if as_json:
        click.echo(dumps(document))
    return report_outcome(display, result, choice.mode, failures, session.recorder, record)


class _Session:
    """What one ``toolrun recipe`` run accumulates besides the RunResult."""

    def __init__(self, display: TerminalDisplay):
        self.display = display
        self.divergences: list[Divergence] = []
        self.log: TranscriptLog | None = None
        self.replay: ReplayTransport | None = None
        self.recorder: RecordingTransport | None = None

    def report_divergence(self, divergence: Divergence) -> None:
        """Shown on stderr as it is found, kept for --json, logged in the transcript."""
        self.divergences.append(divergence)
        self.display.notice(str(divergence))
        if self.log is not None:
            self.log.write("divergence", **divergence.to_json())

    def check_replay_complete(self, result: RunResult) -> None:
        """A replay that answered before using every recorded exchange diverged too."""
        if self.replay is None or not self.replay.unused or result.stop_reason in FAILED_STOP_REASONS:
            return
        served, recorded = self.replay.served, len(self.replay.cassette.exchanges)
        self.report_divergence(Divergence(
            served + 1, "request", "$", None, None,
            f"the run finished after {served} model request{'s' if served != 1 else ''}; "
            f"the recording holds {recorded}"))


def report_outcome(display: TerminalDisplay, result: RunResult, mode: str, failures: list[str],
                   recorder: RecordingTransport | None, record: Path | None) -> int:
    """The summary line and the closing messages on stderr; returns the exit code."""
    display.summary(result, mode)
    if recorder is not None:
        count = len(recorder.cassette.exchanges)
        display.notice(f"recorded {count} model exchange{'s' if count != 1 else ''} to {record}")
    if result.stop_reason in FAILED_STOP_REASONS:
        display.notice(f"error: the run failed: {result.error or result.stop_reason}")
        return EXIT_RUN_FAILED
    if result.error:
        display.notice(f"warning: {result.error}")
    for failure in failures:
        display.notice(f"expect failed: {failure}")
    return EXIT_EXPECT_FAILED if failures else EXIT_OK
