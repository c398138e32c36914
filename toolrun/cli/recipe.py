"""``toolrun recipe RECIPE``: play a recipe live, or replay its recording, and show the run.

Mode: ``--replay F`` replays F; otherwise the run is live when the recipe's provider has
credentials (``--record F`` then saves every exchange); otherwise the recording beside the
recipe (``NAME.cassette.json``) is replayed with a notice, unless ``--live`` forbids it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import click

from toolrun.cli import main
from toolrun.errors import EXIT_EXPECT_FAILED, EXIT_OK, EXIT_RUN_FAILED, Problem, UserError
from toolrun.providers import get_provider_class, split_model
from toolrun.providers.base import Provider, ProviderConfig, ProviderOverrides
from toolrun.providers.transport import HttpxTransport, Transport
from toolrun.recording import (
    Cassette,
    Divergence,
    RecordingTransport,
    ReplayTransport,
    cassette_beside,
    load_cassette,
    save_cassette,
)

if TYPE_CHECKING:
    from toolrun.display import TerminalDisplay

FAILED_STOP_REASONS = frozenset({"error", "max_turns"})


@dataclass
class ModeChoice:
    """Live or replay, the cassette replayed, and the notice to show for a fallback."""

    mode: str  # "live" | "replay"
    cassette: Path | None = None
    notice: str | None = None


def choose_mode(
    provider_class: type[Provider],
    overrides: ProviderOverrides | None,
    recipe_path: Path,
    *,
    replay: Path | None,
    live: bool,
    record: Path | None,
    environ: Mapping[str, str] | None = None,
    model_line: int | None = None,
) -> ModeChoice:
    """Decide how to reach the model. Raises UserError for a combination that cannot work."""
    if replay is not None:
        if live:
            raise UserError(Problem(None, None, "--live and --replay contradict each other",
                                    "use --replay FILE for an offline run, or --live for a live one"))
        if record is not None:
            raise UserError(Problem(None, None, "--record and --replay together would record nothing new",
                                    "drop --record, or drop --replay to record a live run"))
        return ModeChoice("replay", replay)
    if provider_class.has_credentials(overrides, environ):
        return ModeChoice("live")
    key_names = credential_names(provider_class, overrides)
    beside = cassette_beside(recipe_path)
    if not live and record is None and beside.is_file():
        notice = (f"no {key_names} set: replaying {beside}; "
                  "set the key for a live run, --live to refuse this")
        return ModeChoice("replay", beside, notice)
    reason = "--record needs a live run" if record is not None else "a live run needs credentials"
    fix = f"set {key_names} in the environment"
    if not live and record is None:
        fix += f" (or ship a recording beside the recipe: {beside.name}, made with --record)"
    raise UserError(Problem(recipe_path, model_line, f"no {key_names} set: {reason}", fix))


def credential_names(provider_class: type[Provider], overrides: ProviderOverrides | None) -> str:
    """The variable(s) that hold the provider's key, as a user would set them."""
    if overrides is not None and overrides.api_key_env:
        return overrides.api_key_env
    return " or ".join(provider_class.api_key_env) or "the API key variable"


def offline_config(provider_class: type[Provider], overrides: ProviderOverrides | None,
                   environ: Mapping[str, str] | None = None) -> ProviderConfig:
    """The endpoint a replay pretends to reach: no key is needed, none is read."""
    env = os.environ if environ is None else environ
    overrides = overrides or ProviderOverrides()
    base_url = overrides.base_url or next(
        (env[name] for name in provider_class.base_url_env if env.get(name)), provider_class.default_base_url)
    return ProviderConfig(base_url=base_url.rstrip("/"), api_key=None, headers=dict(overrides.headers))


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
    # Imported here: these modules belong to other parts and pull in the whole runner.
    from toolrun.approval import TerminalApprover
    from toolrun.cli.common import load_catalog_for_cli
    from toolrun.display import ObserverGroup, TerminalDisplay
    from toolrun.recipe import load_recipe
    from toolrun.runner import run_conversation
    from toolrun.transcript import dumps, transcript_document
    from toolrun.transcript_log import TranscriptLog

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

    divergences: list[Divergence] = []
    log = TranscriptLog(transcript_path) if transcript_path is not None else None

    def report_divergence(divergence: Divergence) -> None:
        divergences.append(divergence)
        display.notice(str(divergence))
        if log is not None:
            log.write("divergence", **divergence.to_json())

    transport: Transport
    replay_transport: ReplayTransport | None = None
    if choice.mode == "replay":
        assert choice.cassette is not None
        cassette = load_cassette(choice.cassette)
        if choice.notice:
            display.notice(choice.notice)
        if cassette.model and cassette.model != spec:
            display.notice(f"the recording was made with {cassette.model}, this run asks for {spec}")
        stream = replay_stream_mode(cassette, stream, display)
        replay_transport = ReplayTransport(cassette, on_divergence=report_divergence)
        transport = replay_transport
        config = offline_config(provider_class, recipe.provider)
    else:
        config = provider_class.resolve_config(recipe.provider_overrides())
        transport = HttpxTransport()
        if record is not None:
            destination = record
            transport = RecordingTransport(transport, recipe=recipe.name, model=spec,
                                           on_exchange=lambda cassette: save_cassette(cassette, destination))
    settings = recipe.run_settings(max_turns=max_turns, stream=stream)
    provider = provider_class(model_name, config, transport=transport)

    if log is not None:
        log.run_start(recipe=recipe.name, model=spec, mode=choice.mode)
        if choice.notice:
            log.write("notice", message=choice.notice)

    async def run() -> Any:
        try:
            return await run_conversation(
                provider, tools, system=system, messages=messages, settings=settings,
                context=recipe.call_context(), approver=TerminalApprover(assume_yes=assume_yes),
                observer=ObserverGroup(display, log),
            )
        finally:
            await provider.aclose()

    try:
        result = asyncio.run(run())
        if replay_transport is not None and replay_transport.unused and result.stop_reason not in FAILED_STOP_REASONS:
            served = replay_transport.served
            report_divergence(Divergence(
                served + 1, "request", "$", None, None,
                f"the run finished after {served} model request{'s' if served != 1 else ''}; "
                f"the recording holds {len(replay_transport.cassette.exchanges)}"))

        document = transcript_document(result, recipe=recipe.name, model=spec, mode=choice.mode)
        if choice.mode == "replay":
            document["divergences"] = [d.to_json() for d in divergences]
        failures = [] if result.stop_reason in FAILED_STOP_REASONS else recipe.check(result)
        if failures:
            document["expect_failures"] = failures
        if log is not None:
            log.run_end(document)
    finally:
        if log is not None:
            log.close()

    if as_json:
        click.echo(dumps(document))
    display.summary(result, choice.mode)
    if record is not None and choice.mode == "live":
        display.notice(f"recorded {result.usage.requests} model exchange(s) to {record}")
    if result.stop_reason in FAILED_STOP_REASONS:
        display.notice(f"error: the run failed: {result.error or result.stop_reason}")
        return EXIT_RUN_FAILED
    if result.error:
        display.notice(f"warning: {result.error}")
    if failures:
        for failure in failures:
            display.notice(f"expect failed: {failure}")
        return EXIT_EXPECT_FAILED
    return EXIT_OK
