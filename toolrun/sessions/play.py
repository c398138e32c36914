"""Play a recipe: choose live or replay, load and lint the catalog, run the loop, check ``expect``.

This is everything ``toolrun recipe`` does except printing; the CLI, tests and embedding
programs all call ``arun`` (public as ``toolrun.arun``, and ``toolrun.run`` blocking). What a
person sees comes through the observer (``on_catalog``, ``on_notice``, ``on_divergence``
and the loop's hooks); the outcome is the returned ``RunResult``.

How the model is reached:

- ``model`` a ``Provider`` object (``ScriptedModel`` for an offline run): that object,
  as it is — no credentials, no recording (asking for one with ``record=``, ``replay=`` or
  ``mode="replay"`` is bad input);
- ``mode="replay"`` (or ``replay=FILE``): the recording is played back offline, the tools
  still run for real, and every divergence from the recording is reported;
- ``mode="live"``: the provider, with credentials from the environment;
- ``mode="auto"`` (the default): live when the provider has credentials, else the
  recording beside the recipe (``NAME.cassette.json``) with a notice, else bad input
  naming the variable to set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolrun.catalog.gate import load_checked_catalog
from toolrun.catalog.model import Catalog
from toolrun.core.errors import Problem, ProviderError, UserError
from toolrun.core.messages import Message, TextPart
from toolrun.core.secrets import redacting, run_redactor
from toolrun.core.tool import Tool
from toolrun.core.tracing import INPUT_TOKENS, OUTPUT_TOKENS, PROVIDER_NAME, REQUEST_MODEL, Attributes, run_span
from toolrun.loop.results import RunResult
from toolrun.loop.runner import RunObserver, run_conversation
from toolrun.providers import SCRIPTED_PROVIDER, get_provider_class, split_model
from toolrun.providers.base import Provider
from toolrun.providers.transport import HttpxTransport, Transport, WireRequest, WireResponse
from toolrun.replay.divergence import Divergence
from toolrun.replay.playback import (
    ModeChoice,
    check_cassette_provider,
    choose_mode,
    follow_recorded_endpoint,
    offline_config,
)
from toolrun.replay.recording import (
    Cassette,
    CassetteFile,
    RecordingTransport,
    ReplayTransport,
    cassette_beside,
    load_cassette,
)
from toolrun.sessions.recipe import Recipe, load_recipe
from toolrun.sessions.recipe_cache import cached_script, keep_script
from toolrun.sessions.recipe_output import check_final_tool_name, check_output_mode
from toolrun.sessions.run_options import MODES, Mode, RunOptions
from toolrun.sessions.tool_refresh import ServerToolWatch

if TYPE_CHECKING:
    from toolrun.loop.approval import Approver

STRICT_DIVERGENCE = ("strict: the run diverged from its recording (record it again with --record "
                     "if the change is intended)")


class ReplayDiverged(ProviderError):
    """A strict replay met a request its recording does not hold."""

    reason = "the replay stopped"


async def arun(
    recipe: str | Path | Recipe,
    *,
    vars: Mapping[str, Any] | None = None,
    model: str | Provider | None = None,
    mode: Mode = "auto",
    prompt: str | None = None,
    tools_dir: str | Path | None = None,
    catalog: Catalog | None = None,
    observer: RunObserver | None = None,
    approver: Approver | None = None,
    stream: bool | None = None,
    max_turns: int | None = None,
    record: str | Path | None = None,
    replay: str | Path | None = None,
    strict: bool = False,
    replay_tools: bool = False,
    environ: Mapping[str, str] | None = None,
    transport: Transport | None = None,
) -> RunResult:
    """Play a recipe (a path or a loaded ``Recipe``) until the model answers.

    - ``vars``: override the recipe's vars; ``prompt``: one user message in place of the
      recipe's messages (its system prompt stays); ``model``: ``"provider:model"``,
      ``"scripted:FILE"`` (a YAML list of model turns), or a ``Provider`` object such as
      ``ScriptedModel`` — both offline, with the real tools;
    - ``mode``: ``"auto"`` (live with credentials, else the recording beside the recipe),
      ``"live"`` or ``"replay"``; ``replay=FILE`` replays that recording, ``record=FILE``
      saves every model exchange of a live run; ``strict``: a replay that diverges from its
      recording fails (``stop_reason == "error"``), as CI wants; ``replay_tools``: a replay
      also plays back the tools' recorded results, so no tool runs and no service is needed;
    - ``observer``: a ``RunObserver`` that sees the run as it happens (streamed text, tool
      calls, notices, divergences); ``approver``: says yes or no to tools that need approval;
    - ``transport``: a live run sends its model requests through this transport instead of a
      new one — many runs sharing one connection pool and rate limiter (``toolrun batch``);
      it stays open, the caller's to close.

    Returns the ``RunResult``: ``final``, ``stop_reason``, ``usage``, ``turns``,
    ``expect_failures``, ``divergences``; ``to_json()`` is ``toolrun recipe --json``.
    Raises ``UserError`` (``LoadError`` for files) for bad input before any model is asked;
    a provider failure does not raise (``stop_reason == "error"``, ``error`` says why).
    """
    return await run_recipe(recipe, RunOptions(
        vars=vars, model=model, mode=mode, prompt=prompt, tools_dir=tools_dir, catalog=catalog, observer=observer,
        approver=approver, stream=stream, max_turns=max_turns, record=record, replay=replay, strict=strict,
        replay_tools=replay_tools, environ=environ, transport=transport))


async def run_recipe(recipe: str | Path | Recipe, options: RunOptions) -> RunResult:
    """``toolrun.arun`` with its keyword arguments as one ``RunOptions``: the package's own way in."""
    if options.mode not in MODES:
        raise UserError(Problem(None, None, f"mode {options.mode!r} is not one of {', '.join(MODES)}",
                                "use auto, live or replay"))
    if options.prompt is not None and not options.prompt.strip():
        raise UserError(Problem(None, None, "the prompt is empty", "say what to ask, or leave the prompt out to use "
                                                                   "the recipe's own messages"))
    if options.replay_tools and options.mode == "auto":
        options = replace(options, mode="replay")  # the tools' results come from a recording: the model's side does too
    redactor = run_redactor()
    with redacting(redactor):  # every secret this run reads stays in this run
        play = _Play(recipe if isinstance(recipe, Recipe) else load_recipe(Path(recipe)), options)
        with run_span(play.recipe.name) as span:
            result = await play.run()
            if span.recording:
                span.set(_traced_outcome(result))
            if result.failed:
                span.fail(result.stop_reason)
    result.redactor = redactor
    return result


def _traced_outcome(result: RunResult) -> Attributes:
    """What a run's ``invoke_agent`` span says once it has ended: model, mode, tokens, how it stopped."""
    attributes: Attributes = {INPUT_TOKENS: result.usage.input_tokens, OUTPUT_TOKENS: result.usage.output_tokens,
                              "toolrun.run.stop_reason": result.stop_reason, "toolrun.run.mode": result.mode or "",
                              "toolrun.run.tool_calls": len(result.tool_calls),
                              "toolrun.run.expect_failures": len(result.expect_failures)}
    provider, _, model = (result.model or "").partition(":")
    if model:
        try:
            attributes[PROVIDER_NAME] = get_provider_class(provider).telemetry_name or provider
        except UserError:  # a name only a plugin knew: the run has said so already
            attributes[PROVIDER_NAME] = provider
        attributes[REQUEST_MODEL] = model
    return attributes


@dataclass
class _Connection:
    """How this run reaches its model: the provider object and what the run must say about it."""

    provider: Provider
    spec: str
    mode: str
    stream: bool | None
    notices: list[str] = field(default_factory=list)
    replay: ReplayTransport | None = None
    recorder: RecordingTransport | None = None


def _check_record_apart(record: Path | None, recipe: Path, replay: Path | None) -> None:
    """A recording written over the recipe, or over the recording the run replays, would lose it: bad input."""
    for what, source in (("the recipe", recipe), ("the recording it replays", replay)):
        if record is not None and source is not None and record.resolve() == source.resolve():
            raise UserError(Problem(record, None, f"the recording (--record) would overwrite {what}",
                                    "record to a file of its own"))


class _Play:
    """One recipe run: its recipe, its options and the divergences found so far."""

    def __init__(self, recipe: Recipe, options: RunOptions) -> None:
        self.recipe = recipe
        self.options = options
        self.observer = options.observer or RunObserver()
        self.vars = dict(options.vars or {})
        self.environ = options.environ
        self.divergences: list[Divergence] = []

    async def run(self) -> RunResult:
        options = self.options
        recipe, model = self.recipe, options.model
        record_path = Path(options.record) if options.record is not None else None
        replay = Path(options.replay) if options.replay is not None else None
        _check_record_apart(record_path, recipe.path, replay)
        # A scripted model's script is a file of the run like the recipe: read and checked before the tools
        # load (which may start their servers), so a missing one is said at once.
        scripted = self._connect_script(model, record_path, replay, options.stream)
        # The recipe, its tools and its messages are checked before credentials are looked
        # for: a typo in the tool list is reported as such, not as a missing key.
        catalog = options.catalog
        if catalog is None:
            directory = recipe.locate_tools_dir(Path(options.tools_dir) if options.tools_dir is not None else None)
            # Tools side by side are linted as the recipe offers them: its own selection.
            catalog = load_checked_catalog(directory, on_loaded=self.observer.on_catalog, lint_together=recipe.select_tools,
                                            wanted=recipe.tool_test, required=recipe.named_tools)
        tools = recipe.select_tools(catalog)
        system = recipe.render_system(self.vars)
        prompt = options.prompt
        messages = [Message("user", [TextPart(prompt)])] if prompt is not None else recipe.render_messages(self.vars)
        connection = scripted or self._connect(model, options.mode, record_path, replay, options.stream)
        await self._check_output_mode(connection, tools)
        execute = None
        if options.replay_tools:
            if connection.replay is None:
                raise UserError(Problem(None, None, f"replaying the tools' results needs a replay; this run is {connection.mode}",
                                        "add --replay FILE (or drop --replay-tools)"))
            from toolrun.loop.recorded_tools import RecordedToolResults  # only --replay-tools plays results back

            execute = RecordedToolResults(connection.replay, type(connection.provider))
            connection.notices.append("tool results are played back from the recording: no tool runs")
        elif options.strict and connection.replay is None:
            connection.notices.append(f"--strict applies to replays; this run is {connection.mode}")

        self.observer.on_run_start(recipe=recipe.name, model=connection.spec, mode=connection.mode)
        for notice in connection.notices:
            self.observer.on_notice(notice)
        try:
            result = await run_conversation(
                connection.provider, tools, system=system, messages=messages,
                settings=recipe.run_settings(max_turns=options.max_turns, stream=connection.stream),
                context=recipe.call_context(self.environ), approver=options.approver, observer=self.observer,
                execute=execute, tools_update=None if options.replay_tools else ServerToolWatch(catalog, recipe.tools).changed_tools,
            )
        finally:
            if not isinstance(model, Provider):  # a caller's own provider object stays theirs to close
                await connection.provider.aclose()
        self._check_replay_complete(connection, result)
        result.recipe, result.model, result.mode = recipe.name, connection.spec, connection.mode
        result.divergences = self.divergences if connection.mode == "replay" else None
        if options.strict and self.divergences and not result.failed:  # found after the answer: one request too few
            result.stop_reason = "error"
            result.error = f"{STRICT_DIVERGENCE}: {self.divergences[-1]}"
        result.expect_failures = [] if result.failed else recipe.check(result)
        if connection.recorder is not None:
            result.recorded_exchanges = len(connection.recorder.cassette.exchanges)
        self.observer.on_run_end(result)
        return result

    async def _check_output_mode(self, connection: _Connection, tools: list[Tool]) -> None:
        """Bad input when ``output.mode`` is not a way this run's provider can ask, or when it asks through the
        final tool and a tool of the run has that name (its connection closed)."""
        recipe, provider_class = self.recipe, type(connection.provider)
        output = recipe.settings.output
        try:
            check_output_mode(output, provider_class.name, provider_class.output_modes, recipe.path,
                              recipe.line_of("output", "mode"))
            mode = (output.mode if output is not None else None) or provider_class.output_mode_for(connection.provider.model)
            check_final_tool_name(output, mode, tools, recipe.path, recipe.line_of("output"))
        except UserError:
            if not isinstance(self.options.model, Provider):  # a caller's own provider object stays theirs to close
                await connection.provider.aclose()
            raise

    # -- reaching the model -------------------------------------------------------------

    def _connect(self, model: str | Provider | None, mode: str, record: Path | None, replay: Path | None,
                 stream: bool | None) -> _Connection:
        """How the run reaches its model: a given object, a script file, a recording, or the provider."""
        recipe = self.recipe
        if isinstance(model, Provider):
            asked = record is not None or replay is not None or (mode == "replay" and not self.options.replay_tools)
            if asked:  # the object would be used anyway: say so rather than ignore the request
                raise UserError(Problem(None, None, "a model object is used as it is: there is nothing to record "
                                        "or replay", 'drop record=, replay= and mode="replay", or name the model '
                                        'as "provider:model"'))
            from toolrun.providers.scripted import ScriptedModel  # a caller's object: only then told apart

            kind = "scripted" if isinstance(model, ScriptedModel) else "live"
            return _Connection(model, f"{model.name}:{model.model}", kind, stream)
        scripted = self._connect_script(model, record, replay, stream)
        if scripted is not None:
            return scripted
        spec = recipe.model_spec(model)
        provider_name, model_name = split_model(spec)
        provider_class = get_provider_class(provider_name)
        if mode == "replay" and replay is None:
            replay = cassette_beside(recipe.path)
            if not replay.is_file():
                raise UserError(Problem(recipe.path, None, f"no recording to replay: {replay} does not exist",
                                        "record one with --record, or name the recording to replay"))
        choice = choose_mode(provider_class, recipe.provider, recipe.path, replay=replay, live=mode == "live",
                             record=record, environ=self.environ,
                             model_line=None if model else recipe.line_of("model"))
        return self._open(provider_class, model_name, spec, choice, record, stream)

    def _connect_script(self, model: str | Provider | None, record: Path | None, replay: Path | None,
                        stream: bool | None) -> _Connection | None:
        """The connection of a ``scripted:FILE`` model, its script read and checked; None for any other model."""
        if isinstance(model, Provider):
            return None
        script = script_of(self.recipe, model)
        if script is None:
            return None
        if record is not None or replay is not None:
            raise UserError(Problem(None, None, "a scripted model is offline: there is nothing to record or replay",
                                    "drop --record / --replay, or use a provider's model"))
        return _Connection(_scripted_model(script), self.recipe.model_spec(model), "scripted", stream)

    def _open(self, provider_class: type[Provider], model_name: str, spec: str, choice: ModeChoice,
              record: Path | None, stream: bool | None) -> _Connection:
        """The provider object, its transport, and the notices the person running toolrun should see."""
        recipe = self.recipe
        notices: list[str] = []
        replay: ReplayTransport | None = None
        recorder: RecordingTransport | None = None
        transport: Transport
        if choice.mode == "replay":
            assert choice.cassette is not None
            cassette = load_cassette(choice.cassette)
            check_cassette_provider(cassette, choice, provider_class, recipe.provider, spec)
            if choice.notice:
                notices.append(choice.notice)
            if cassette.model and cassette.model != spec:
                notices.append(f"the recording was made with {cassette.model}, this run asks for {spec}")
            stream = self._replay_stream_mode(cassette, stream, notices)
            transport = replay = ReplayTransport(cassette, on_divergence=self._report_divergence)
            config = offline_config(provider_class, recipe.provider, self.environ)
        else:
            config = provider_class.resolve_config(recipe.provider_overrides(self.environ), self.environ)
            if self.options.transport is not None:
                transport = _Borrowed(self.options.transport)
            else:
                transport = HttpxTransport(max_retries=recipe.max_retries, timeout=recipe.request_timeout)
            if record is not None:
                cassette_file = CassetteFile(record)  # saved after every exchange, by its tail
                recorder = RecordingTransport(transport, recipe=recipe.name, model=spec,
                                              on_exchange=cassette_file.save)
                _writable(record, "--record", lambda: cassette_file.save(recorder.cassette))
                transport = recorder
        provider = provider_class(model_name, config, transport=transport)
        if replay is not None and not recipe.provider.base_url:  # the recipe's own base_url is what it asks for
            follow_recorded_endpoint(provider, replay.cassette)
        return _Connection(provider, spec, choice.mode, stream, notices, replay, recorder)

    @staticmethod
    def _replay_stream_mode(cassette: Cassette, requested: bool | None, notices: list[str]) -> bool | None:
        """The stream mode a replay must use: the recording's. Says so when the caller asked otherwise."""
        recorded = cassette.streamed
        if recorded is None:
            return requested
        if requested is not None and requested != recorded:
            flag = "--stream" if recorded else "--no-stream"
            notices.append(f"the recording was made {'with' if recorded else 'without'} streaming: replaying as {flag}")
        return recorded

    # -- divergences --------------------------------------------------------------------

    def _report_divergence(self, divergence: Divergence) -> None:
        self.divergences.append(divergence)
        self.observer.on_divergence(divergence)
        if self.options.strict:  # stop before a tool runs on a conversation the recording never had
            raise ReplayDiverged(STRICT_DIVERGENCE)  # the divergence itself is reported just above

    def _check_replay_complete(self, connection: _Connection, result: RunResult) -> None:
        """A replay that answered before using every recorded exchange diverged too."""
        replay = connection.replay
        if replay is None or not replay.unused or result.failed:
            return
        served, recorded = replay.served, len(replay.cassette.exchanges)
        divergence = Divergence(
            served + 1, "request", "$", None, None,
            f"the run finished after {served} model request{'s' if served != 1 else ''}; "
            f"the recording holds {recorded}")
        # Reported, not raised even when strict: the run is over, and run() fails it with a result
        self.divergences.append(divergence)
        self.observer.on_divergence(divergence)


class _Borrowed(Transport):
    """A caller's shared transport: used by this run, left open when the run closes its provider."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner

    async def send(self, request: WireRequest) -> WireResponse:
        return await self.inner.send(request)

    def stream(self, request: WireRequest) -> AsyncIterator[str]:
        return self.inner.stream(request)


def script_of(recipe: Recipe, model: str | None) -> Path | None:
    """The script a run of ``recipe`` plays when its model — ``model`` (``--model``), else the recipe's own —
    is ``scripted:FILE``: ``--model``'s relative to where the command runs, the recipe's own relative to the
    recipe. None for a provider's model (or none named: the run says so)."""
    provider, _, name = (model or recipe.model or "").partition(":")
    if provider != SCRIPTED_PROVIDER or not name:
        return None
    return Path(name) if model else recipe.path.parent / name


def check_script(recipe: Recipe, model: str | None) -> None:
    """LoadError naming the file when the script of a ``scripted:FILE`` model (``script_of``) is missing or
    broken: what a batch checks before its first run. Nothing for a provider's model."""
    script = script_of(recipe, model)
    if script is not None:
        _scripted_model(script)  # its checked turns are kept: the runs read them back


def _scripted_model(script: Path) -> Provider:
    """The model of a script file: its checked turns from the cache when the file is unchanged since it passed."""
    from toolrun.providers.scripted_file import model_of_turns, read_script, script_turns  # only a scripted: model

    try:
        status = script.stat()
    except OSError:
        return model_of_turns(script_turns(read_script(script), script), script)  # read_script says what is wrong
    turns = cached_script(script, status)
    if turns is None:
        turns = script_turns(read_script(script), script)  # a LoadError here: nothing is kept
        keep_script(script, status, turns)
    return model_of_turns(turns, script)


def _writable(path: Path, option: str, create: Callable[[], object]) -> None:
    """Create an output file before the run starts: a bad path is bad input, not a crash mid-run."""
    if not path.parent.exists():  # a typo in a folder name must not grow a new folder tree
        raise UserError(Problem(path, None, f"{option}: the folder {path.parent} does not exist",
                                "create it first, or choose a path in an existing folder"))
    try:
        create()
    except OSError as exc:
        raise UserError(Problem(path, None, f"{option}: cannot write this file ({exc.strerror or exc})",
                                "choose a path in a folder you can write to")) from None
