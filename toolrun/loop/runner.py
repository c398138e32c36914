"""The loop: ask the model, run the tools it calls, send the results back, until it answers.

The runner knows nothing of any provider: it speaks ``toolrun.core.messages`` and leaves every
wire detail (result order, id spelling, ``tool_choice`` spelling) to the adapters. What it
does own:

- ids: every call gets an id unique in the run (``toolrun.loop.call_ids``);
- resolution: unknown tools and arguments that are not JSON become error results the model
  can act on (``toolrun.loop.refusals``); schema validation, approval, timeouts and output caps are
  ``toolrun.loop.execution.execute_call``'s job;
- scheduling: independent calls of a turn run concurrently, ``sequential`` tools are
  barriers, ``parallel=False`` serialises everything (``toolrun.loop.scheduling``);
- limits: ``max_turns`` model requests and ``max_consecutive_failures`` failing calls in a
  row (a streak must outlast the turn it began in: the model first sees its errors).

A tool's failure never ends the run by itself; a provider error does, keeping every turn
done so far.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from toolrun.backends.base import CallContext
from toolrun.core.errors import Problem, ProviderError, UserError
from toolrun.core.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StreamEvent,
    StructuredOutput,
    TextDelta,
    ToolCall,
    ToolResult,
    Usage,
)
from toolrun.core.secrets import Redactor, active_redactor, redact, redacting
from toolrun.core.text import counted
from toolrun.core.tool import Tool
from toolrun.core.tracing import chat_span, tool_span
from toolrun.loop.call_ids import CallIdAllocator
from toolrun.loop.context_settings import ContextOverflow, ContextSettings, open_window
from toolrun.loop.execution import ToolOutcome, execute_call
from toolrun.loop.refusals import refusal, short_excerpt
from toolrun.loop.results import RunResult, ToolCallRecord, TurnRecord
from toolrun.loop.scheduling import plan_batches
from toolrun.loop.tool_offer import ToolOffer, ToolSelection, check_selection
from toolrun.providers.base import Provider

if TYPE_CHECKING:
    from toolrun.catalog.model import Catalog
    from toolrun.loop.approval import Approver
    from toolrun.loop.context_window import ContextEvent
    from toolrun.replay.divergence import Divergence

_TOOL_CHOICE_KEYWORDS = ("auto", "none", "required")


@dataclass
class RunSettings:
    """How one run behaves; a recipe's ``settings:`` section maps onto these fields."""

    max_turns: int = 10
    parallel: bool = True
    tool_choice: str = "auto"
    temperature: float | None = None
    max_tokens: int | None = None
    stream: bool = True
    max_consecutive_failures: int = 5
    max_concurrency: int = 16  # tool calls running at once; the others of a turn wait, none is dropped
    # A forced choice ("required" or a tool's name) applies to the first request only;
    # forcing it on every turn would make the model call tools forever.
    reset_tool_choice: bool = True
    output: StructuredOutput | None = None  # a final answer that must be JSON (of a schema)
    # How each request's history is kept under a token limit; None: every request sends it all.
    context: ContextSettings | None = None
    tool_selection: ToolSelection | None = None  # None: every tool in every request


class CallExecutor(Protocol):
    """Runs one call that names a known tool with JSON arguments; ``turn`` is every call of its turn."""

    async def __call__(self, tool: Tool, call: ToolCall, context: CallContext, approver: Approver | None,
                       *, turn: Sequence[ToolCall] = ()) -> ToolOutcome: ...


async def run_tool(tool: Tool, call: ToolCall, context: CallContext, approver: Approver | None,
                   *, turn: Sequence[ToolCall] = ()) -> ToolOutcome:
    """The default executor: validate, approve and run the call through the tool's backend."""
    return await execute_call(tool, call.arguments, context, approver)


class RunObserver:
    """Hooks for progress output and incremental transcripts. Every method is a no-op here.

    Callbacks run on the event loop's thread; they must not block for long. The first four
    are called by a recipe run (``toolrun.run``) around the conversation; the rest by the loop.
    """

    def on_catalog(self, catalog: Catalog) -> None:
        """The catalog loaded; ``catalog.findings`` holds its lint findings."""

    def on_run_start(self, *, recipe: str, model: str, mode: str) -> None:
        """The run is about to ask its model (``mode``: live or replay)."""

    def on_notice(self, message: str) -> None:
        """Something the person running toolrun should know (a fallback, a mode forced by a recording)."""

    def on_divergence(self, divergence: Divergence) -> None:
        """A replayed run asked something its recording did not (see ``toolrun.replay.divergence``)."""

    def on_run_end(self, result: RunResult) -> None:
        """The run finished (answer, failure or limit); ``result.to_json()`` is its document."""

    def on_text_delta(self, text: str) -> None:
        """A piece of streamed assistant text."""

    def on_message(self, message: Message) -> None:
        """A message joined the conversation: each of the run's first messages as the loop starts,
        then every answer (before ``on_model_response``) and every turn's tool results (before
        ``on_turn_end``). Together they are ``result.messages``, as the model saw them (unredacted)."""

    def on_model_response(self, turn_index: int, response: ModelResponse) -> None:
        """The model answered (call ids already made unique)."""

    def on_tool_call_start(self, call: ToolCall) -> None:
        """A call is about to run (or be refused)."""

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        """A call finished, with its result and duration."""

    def on_turn_end(self, turn: TurnRecord) -> None:
        """A turn is complete: the model's answer and every call it led to."""

    def on_context(self, event: ContextEvent) -> None:
        """A request went out with part of the history left out, cleared, summarized or cut to fit."""


class ObserverGroup(RunObserver):
    """Passes every event to each of several observers, in order (None entries are skipped)."""

    def __init__(self, *observers: RunObserver | None):
        self.observers = [o for o in observers if o is not None]

    def on_catalog(self, catalog: Catalog) -> None:
        for observer in self.observers:
            observer.on_catalog(catalog)

    def on_run_start(self, *, recipe: str, model: str, mode: str) -> None:
        for observer in self.observers:
            observer.on_run_start(recipe=recipe, model=model, mode=mode)

    def on_notice(self, message: str) -> None:
        for observer in self.observers:
            observer.on_notice(message)

    def on_divergence(self, divergence: Divergence) -> None:
        for observer in self.observers:
            observer.on_divergence(divergence)

    def on_run_end(self, result: RunResult) -> None:
        for observer in self.observers:
            observer.on_run_end(result)

    def on_text_delta(self, text: str) -> None:
        for observer in self.observers:
            observer.on_text_delta(text)

    def on_message(self, message: Message) -> None:
        for observer in self.observers:
            observer.on_message(message)

    def on_model_response(self, turn_index: int, response: ModelResponse) -> None:
        for observer in self.observers:
            observer.on_model_response(turn_index, response)

    def on_tool_call_start(self, call: ToolCall) -> None:
        for observer in self.observers:
            observer.on_tool_call_start(call)

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        for observer in self.observers:
            observer.on_tool_call_end(record)

    def on_turn_end(self, turn: TurnRecord) -> None:
        for observer in self.observers:
            observer.on_turn_end(turn)

    def on_context(self, event: ContextEvent) -> None:
        for observer in self.observers:
            observer.on_context(event)


def _unwrapped(observer: RunObserver | None) -> RunObserver:
    """The observer the loop calls: a group of one is that one (the group would pass each event on, two calls a tool call)."""
    if type(observer) is ObserverGroup and len(observer.observers) == 1:
        return observer.observers[0]
    return observer or RunObserver()


# the run's tools when they changed, else None; asked on the loop, so a slow look takes a thread itself
ToolsUpdate = Callable[[], Awaitable["list[Tool] | None"]]


async def run_conversation(
    provider: Provider,
    tools: list[Tool],
    *,
    system: str | None,
    messages: list[Message],
    settings: RunSettings,
    context: CallContext,
    approver: Approver | None = None,
    observer: RunObserver | None = None,
    execute: CallExecutor | None = None,
    tools_update: ToolsUpdate | None = None,
) -> RunResult:
    """Play a conversation against ``provider`` with ``tools`` until the model answers.

    ``execute`` runs one valid call (default: the tool's backend, through
    ``execute_call``); a replay of recorded tool results gives its own. ``tools_update``
    is asked before each request whether the tools changed (an MCP server said so): the
    new list is offered from that request on, and a call of a removed tool is an unknown tool.

    Returns a ``RunResult`` whose ``stop_reason`` is the last answer's (``stop``,
    ``length``, ``content_filter``), or ``max_turns`` / ``error`` with ``error`` saying why.
    Raises ``UserError`` for settings that cannot work (a ``tool_choice`` naming no tool, ``required`` with none).
    """
    redactor = active_redactor() or Redactor()  # a recipe run brings its own; a bare loop gets one
    with redacting(redactor):
        redactor.add(provider.config.api_key)  # however the provider was made, its key never shows
        loop = _ConversationLoop(provider, tools, system, messages, settings, context, approver, observer,
                                 execute or run_tool)
        loop.tools_update = tools_update
        result = await loop.run()
    result.redactor = redactor
    return result


class _ConversationLoop:
    """The state of one run; ``run_conversation`` is its only entry point."""

    def __init__(
        self,
        provider: Provider,
        tools: list[Tool],
        system: str | None,
        messages: list[Message],
        settings: RunSettings,
        context: CallContext,
        approver: Approver | None,
        observer: RunObserver | None,
        execute: CallExecutor,
    ) -> None:
        _check_settings(settings, tools)
        self.execute = execute
        self.provider = provider
        self.tools = {tool.name: tool for tool in tools}
        self.offer = ToolOffer(tools, settings.tool_selection)
        self.offer.check_limit(provider.name, provider.max_tools)
        self.tools_update: ToolsUpdate | None = None
        self.system = system
        self.history: list[Message] = list(messages)
        self.settings = settings
        self.context = context
        self.approver = approver
        self.observer = _unwrapped(observer)
        self.ids = CallIdAllocator()
        for message in self.history:  # ids already in a given history stay taken
            self.ids.assign_all(message.tool_calls)
        self.turns: list[TurnRecord] = []
        self.usage = Usage()
        self.consecutive_failures = 0
        self.last_failure: ToolCallRecord | None = None
        self.running = asyncio.Semaphore(settings.max_concurrency)
        self.running_per_tool = {tool.name: asyncio.Semaphore(tool.max_concurrency) for tool in tools
                                 if tool.max_concurrency is not None}
        self.final: str | None = None  # the model's last text; a recipe's own assistant lines never count
        self.output: Any = None  # the structured answer, once one passed its checks
        self.output_valid = False  # one passed: null is an answer too where the schema allows it
        self.output_errors: list[str] = []  # why the last structured answer cannot be used
        self.repairs = 0  # repair turns asked for a structured answer that failed its checks
        self.turn_limit = settings.max_turns  # repair turns come on top of max_turns
        self.paused_text: str | None = None  # the text so far of a turn the model paused (stop reason "paused")
        self.window = open_window(settings.context, window=provider.context_window(provider.model),
                                  max_tokens=settings.max_tokens, chars_per_token=provider.chars_per_token,
                                  on_event=self.observer.on_context)

    async def run(self) -> RunResult:
        for message in self.history:
            self.observer.on_message(message)
        turn_index = -1
        while turn_index + 1 < self.turn_limit:
            turn_index += 1
            await self._take_changed_tools()
            try:
                request = await self.window.fit(self._request(turn_index), self._summarize)
                response = await self._complete(request, self._on_event)
            except (ProviderError, ContextOverflow) as exc:
                return self._finish("error", f"{exc.reason}: {exc}")
            self.window.observe(response.usage)
            self.usage = self.usage + response.usage
            calls = self.ids.assign_all(response.message.tool_calls)
            self.history.append(response.message)
            text = self._answer_text(response)
            self.final = text or self.final
            self.observer.on_message(response.message)
            self.observer.on_model_response(turn_index, response)
            # Records are what callers keep and print: a secret the model repeats is redacted there (the
            # history sent back to the model stays as the model wrote it).
            turn = TurnRecord(response.stop_reason, redact(response.message.text), response.usage,
                              tools_offered=self.offer.offered(request.tools))
            if not calls:
                self._end_turn(turn)
                if response.stop_reason == "paused" or self._wants_repair(response, text):
                    continue  # a paused turn goes on from its answer, sent back as it came
                return self._finish_answer(response)
            turn.tool_calls = await self._run_calls(calls, response.stop_reason)
            results = Message("tool", [ToolResult(r.id, r.name, r.result, r.is_error, c.provider_id, r.blocks)
                                       for c, r in zip(calls, turn.tool_calls, strict=True)])
            self.history.append(results)
            self.observer.on_message(results)
            self._end_turn(turn)
            if self._count_failures(turn.tool_calls):
                last = self.last_failure
                assert last is not None
                return self._finish(
                    "error",
                    f"stopped after {self.consecutive_failures} consecutive failing tool calls; "
                    f"last: {last.name or 'a call without a name'}: {short_excerpt(last.result)}",
                )
        return self._finish(
            "max_turns",
            f"stopped after {counted(self.turn_limit, 'model request')} without a final answer "
            f"(max_turns is {self.settings.max_turns}); raise settings.max_turns or --max-turns "
            "if the task needs more rounds",
        )

    async def _take_changed_tools(self) -> None:
        """Offer the tools ``tools_update`` gives, if any, from the next request; say what changed."""
        if self.tools_update is None:
            return
        changed = await self.tools_update()
        if changed is None:
            return
        added = [tool.name for tool in changed if tool.name not in self.tools]
        removed = [name for name in self.tools if name not in {tool.name for tool in changed}]
        self.tools = {tool.name: tool for tool in changed}
        self.offer.replace_tools(changed)
        for tool in changed:
            if tool.max_concurrency is not None and tool.name not in self.running_per_tool:
                self.running_per_tool[tool.name] = asyncio.Semaphore(tool.max_concurrency)
        if added or removed:
            self.observer.on_notice("the tools changed (an MCP server said so): "
                                    + "; ".join(part for part in (f"added {', '.join(added)}" if added else "",
                                                                  f"removed {', '.join(removed)}" if removed else "") if part))

    def _request(self, turn_index: int) -> ModelRequest:
        tool_choice = self.settings.tool_choice
        forced = tool_choice not in ("auto", "none")
        if forced and self.settings.reset_tool_choice and turn_index > 0:
            tool_choice = "auto"
        settings = ModelSettings(
            temperature=self.settings.temperature,
            max_tokens=self.settings.max_tokens,
            tool_choice=tool_choice,
            parallel_tool_calls=self.settings.parallel,
            output=self.settings.output,
        )
        definitions = self.offer.definitions(self.history, self.provider.max_tools,
                                             forced=tool_choice if tool_choice not in ("auto", "none", "required") else None)
        return ModelRequest(self.provider.model, self.system, list(self.history), definitions, settings)

    async def _complete(self, request: ModelRequest, on_event: Callable[[StreamEvent], None] | None = None) -> ModelResponse:
        """One model request, in a ``chat`` span when tracing: every provider's, a plugin's and a script's alike."""
        provider = self.provider
        with chat_span(provider.telemetry_name or provider.name, request, base_url=provider.config.base_url,
                       stream=self.settings.stream) as span:
            response = await provider.complete(request, stream=self.settings.stream, on_event=on_event)
            span.record(response)
        return response

    async def _summarize(self, request: ModelRequest) -> ModelResponse:
        """The context window's summary request: recorded like any other, its tokens in the run's usage."""
        response = await self._complete(request)
        self.usage = self.usage + response.usage
        return response

    def _on_event(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self.observer.on_text_delta(event.text)

    async def _run_calls(self, calls: list[ToolCall], stop_reason: str) -> list[ToolCallRecord]:
        """Run one turn's calls batch by batch; records come back in call order."""
        batches = plan_batches(calls, is_sequential=self._is_sequential, parallel=self.settings.parallel)
        records: list[ToolCallRecord] = []
        for batch in batches:
            records.extend(await self._run_batch(batch, stop_reason, calls))
        return records

    async def _run_batch(self, batch: list[ToolCall], stop_reason: str, turn: list[ToolCall]) -> list[ToolCallRecord]:
        """One batch's calls, at most ``max_concurrency`` at once; records in call order."""
        slots = self.settings.max_concurrency
        if len(batch) <= slots or any(call.name in self.running_per_tool for call in batch):
            return list(await asyncio.gather(*(self._run_call(call, stop_reason, turn) for call in batch)))
        # More calls than slots: one worker per slot starts the next call as it finishes one. The
        # same order and bound as a task per call waiting on the semaphore, without hundreds of
        # waiting tasks woken one by one. Each call is still a task of its own (its own context
        # variables, cancelled with its worker), and a cancelled worker starts no further call even
        # when the call it waited for swallowed the cancellation.
        records: list[ToolCallRecord | None] = [None] * len(batch)
        waiting = iter(enumerate(batch))
        loop = asyncio.get_running_loop()  # its create_task: asyncio.create_task asks for the loop on every call

        async def worker() -> None:
            me = asyncio.current_task()
            for index, call in waiting:
                if me is not None and me.cancelling():
                    raise asyncio.CancelledError
                records[index] = await loop.create_task(self._run_call_now(call, stop_reason, turn))

        await asyncio.gather(*(worker() for _ in range(slots)))
        return cast(list[ToolCallRecord], records)  # every worker ran to the end: each index is filled

    def _is_sequential(self, call: ToolCall) -> bool:
        tool = self.tools.get(call.name)
        return bool(tool and tool.sequential)

    async def _run_call(self, call: ToolCall, stop_reason: str, turn: list[ToolCall]) -> ToolCallRecord:
        # The tool's own slot first, then the run's: a call waiting for its tool holds no run slot.
        per_tool = self.running_per_tool.get(call.name)
        if per_tool is None:
            async with self.running:
                return await self._run_call_now(call, stop_reason, turn)
        async with per_tool, self.running:
            return await self._run_call_now(call, stop_reason, turn)

    async def _run_call_now(self, call: ToolCall, stop_reason: str, turn: list[ToolCall]) -> ToolCallRecord:
        self.observer.on_tool_call_start(call)
        shown_arguments = redact(call.arguments if call.arguments is not None else call.raw_arguments)
        refused = refusal(call, self.tools, cut_off=stop_reason == "length")
        if self.offer.answers(call.name):  # a search of the catalog, answered here
            found, failed = self.offer.find(call.arguments)
            record = ToolCallRecord(call.id, call.name, shown_arguments, found, failed, 0)
        elif refused is not None:
            record = ToolCallRecord(call.id, call.name, shown_arguments, refused, True, 0)
        else:
            tool = self.tools[call.name]
            with tool_span(call.name, call.id, call.arguments, description=tool.description) as span:
                outcome = await self.execute(tool, call, self.context, self.approver, turn=turn)
                span.finish(outcome.result, outcome.is_error)
            record = ToolCallRecord(call.id, call.name, shown_arguments, outcome.result, outcome.is_error,
                                    outcome.duration_ms, outcome.blocks)
        self.observer.on_tool_call_end(record)
        return record

    def _count_failures(self, records: list[ToolCallRecord]) -> bool:
        """Update the consecutive-failure count; True when the limit is reached.

        A streak that began in this turn never stops the run: the model has not yet seen
        one of these errors, and one answer may hold many bad calls it can fix at once.
        """
        for record in records:
            if record.is_error:
                self.consecutive_failures += 1
                self.last_failure = record
            else:
                self.consecutive_failures = 0
        outlasted_turn = self.consecutive_failures > len(records)
        return outlasted_turn and self.consecutive_failures >= self.settings.max_consecutive_failures

    def _end_turn(self, turn: TurnRecord) -> None:
        self.turns.append(turn)
        self.observer.on_turn_end(turn)

    def _answer_text(self, response: ModelResponse) -> str | None:
        """The answer's text; an answer that continues a paused turn has that turn's text before its own."""
        text = (self.paused_text or "") + (response.message.text or "") or None
        paused = response.stop_reason == "paused" and not response.message.tool_calls
        self.paused_text = text if paused else None
        return text

    def _wants_repair(self, response: ModelResponse, text: str | None) -> bool:
        """Check a structured answer; True when a repair turn was added to the history to fix it."""
        output = self.settings.output
        if output is None or response.stop_reason not in ("stop", "tool_calls"):
            return False
        from toolrun.loop.final_answer import check_answer, repair_request  # start-up: only a structured answer is checked

        checked = check_answer(text, output)
        if checked.valid:
            self.output, self.output_valid = checked.value, True
            return False
        if self.repairs >= output.retries:
            self.output_errors = checked.errors
            return False
        self.repairs += 1
        self.turn_limit += 1
        repair = repair_request(checked.errors, output)
        self.history.append(repair)
        self.observer.on_message(repair)
        return True

    def _finish_answer(self, response: ModelResponse) -> RunResult:
        stop_reason = response.stop_reason
        if stop_reason == "tool_calls":  # said it would call tools but sent none: it is done
            stop_reason = "stop"
        error = None
        if stop_reason == "length" and response.raw_stop_reason == "model_context_window_exceeded":
            cut = "structured answer was cut off (incomplete, not used)" if self.settings.output is not None else "answer was cut off"
            error = (f"the {cut}: the conversation filled the model's context window (stop reason: model_context_window_exceeded); "
                     "bound it with settings.context: {max_input_tokens: N, strategy: clear-tool-results}")
        elif stop_reason == "length" and self.settings.output is not None:
            from toolrun.loop.final_answer import CUT_OFF  # start-up: only a structured answer is checked

            error = CUT_OFF
        elif stop_reason == "length":
            error = "the answer was cut off by the output limit (stop reason: length); raise settings.max_tokens"
        elif stop_reason == "content_filter":
            error = "the provider's content filter stopped the answer"
        elif stop_reason == "error":
            error = f"the provider reported an error (stop reason: {response.raw_stop_reason or 'error'})"
        elif self.output_errors:
            from toolrun.loop.final_answer import failure_message  # start-up: only a structured answer is checked

            return self._finish("error", failure_message(self.output_errors, self.repairs))
        return self._finish(stop_reason, error)

    def _finish(self, stop_reason: str, error: str | None) -> RunResult:
        return RunResult(
            final=redact(self.final),
            stop_reason=stop_reason,
            usage=self.usage,
            turns=self.turns,
            messages=self.history,
            error=error,
            output=redact(self.output),
            output_requested=self.settings.output is not None,
            output_valid=self.output_valid,
            context=self.window.to_json() if self.window.limit is not None else None,
        )


def _check_settings(settings: RunSettings, tools: list[Tool]) -> None:
    if settings.max_turns < 1:
        raise UserError(Problem(None, None, f"max_turns is {settings.max_turns}", "set max_turns to 1 or more"))
    if settings.max_concurrency < 1:
        raise UserError(Problem(None, None, f"max_concurrency is {settings.max_concurrency}",
                                "set max_concurrency to 1 or more"))
    if settings.tool_selection is not None:
        check_selection(settings.tool_selection, tools)
    if settings.max_consecutive_failures < 1:
        raise UserError(Problem(None, None, f"max_consecutive_failures is {settings.max_consecutive_failures}",
                                "set max_consecutive_failures to 1 or more"))
    choice = settings.tool_choice
    names = [tool.name for tool in tools]
    if choice not in _TOOL_CHOICE_KEYWORDS and choice not in names:
        raise UserError(Problem(None, None, f"tool_choice {choice!r} is neither auto/none/required nor a selected tool",
                                f"use auto, none, required or one of: {', '.join(names) or '(no tools selected)'}"))
    if choice == "required" and not names:  # no request would carry it: every format sends it beside tools only
        raise UserError(Problem(None, None, "tool_choice 'required' makes the model call a tool, but no tools are selected",
                                "select the tools it may call, or use tool_choice 'auto'"))
