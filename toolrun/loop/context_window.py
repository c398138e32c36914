"""A history that never overflows: each request's messages fitted to ``settings.context``.

The run's history keeps everything that happened; each request sends a view of it that fits
``max_input_tokens`` by the estimate. The view is made of whole units — a question (a user
message), a step (an assistant message with its calls and the message of their results), an
answer — so a call never goes without its result and every provider's alternation holds:

- ``drop-oldest``: earlier exchanges whole (a question and all that answered it), then the
  current question's oldest steps; never the question being answered, never the newest step;
- ``clear-tool-results``: old results become a one-line placeholder naming the call, oldest
  first; when the placeholders alone are still too many, drop-oldest goes on from there;
- ``summarize``: what drop-oldest leaves out is condensed by one model request into a summary
  that travels at the end of the system prompt (so no message order changes).

A newest result that alone exceeds the limit is cut to fit, with a marker. A trim goes down to
``TRIM_TO`` of the limit, so the next requests share one prefix (and a provider's prompt cache).
Estimates: the adapter's characters per token, CJK characters one token each, times the ratio
of the input tokens the last answer reported to what was estimated for its request.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from toolrun.catalog.tokens import estimate_definition_tokens
from toolrun.core.messages import (
    Message,
    ModelRequest,
    OpaquePart,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResult,
    Usage,
)
from toolrun.core.text import counted
from toolrun.loop.context_estimate import cut_to_tokens, estimate_text
from toolrun.loop.context_settings import (
    DEFAULT_STRATEGY,
    ContextOverflow,
    ContextSettings,
    resolve_limit,
)
from toolrun.loop.context_summary import SUMMARY_HEADER, Summarizer, summarize_dropped

TRIM_TO = 0.75  # of the limit, once a trim is needed: room for a few turns before the next one
MESSAGE_OVERHEAD = 4  # tokens a message costs beyond its text (role, separators)
PART_OVERHEAD = 8  # tokens a call or a result costs beyond its text (id, name, type)
SUMMARY_SHARE = 8  # a summary may take 1/8 of the limit
_CORRECTION_RANGE = (0.25, 4.0)  # a usage report outside this is another request's, not a bias


@dataclass
class ContextEvent:
    """What one request's view left out or changed, and the estimate before and after."""

    request: int  # 1-based: the model request this view went out with
    tokens_before: int
    tokens_after: int
    limit: int
    dropped_messages: int = 0
    dropped_calls: list[str] = field(default_factory=list)
    cleared_calls: list[str] = field(default_factory=list)
    cut_calls: list[str] = field(default_factory=list)
    summarized: bool = False

    def to_json(self) -> dict[str, Any]:
        """``{"request", "tokens_before", "tokens_after", "limit", ...}`` with only what happened."""
        document: dict[str, Any] = {"request": self.request, "tokens_before": self.tokens_before,
                                    "tokens_after": self.tokens_after, "limit": self.limit}
        if self.dropped_messages:
            document["dropped_messages"] = self.dropped_messages
        for key in ("dropped_calls", "cleared_calls", "cut_calls"):
            if getattr(self, key):
                document[key] = list(getattr(self, key))
        if self.summarized:
            document["summarized"] = True
        return document

    def __str__(self) -> str:
        said = []
        if self.dropped_messages:
            said.append(f"dropped {self.dropped_messages} earlier message{'s' if self.dropped_messages != 1 else ''}"
                        + (f" ({counted(len(self.dropped_calls), 'call')})" if self.dropped_calls else ""))
        if self.summarized:
            said.append("summarized them")
        if self.cleared_calls:
            said.append(f"cleared {len(self.cleared_calls)} old tool results")
        if self.cut_calls:
            said.append(f"cut the newest result of {', '.join(self.cut_calls)}")
        return (f"context, request {self.request}: {'; '.join(said)} — "
                f"~{self.tokens_before:,} → ~{self.tokens_after:,} tokens (limit {self.limit:,})")


@dataclass
class _Unit:
    """Messages that go out or stay out together (their indices in the request's messages)."""

    kind: str  # question | step | answer
    indices: list[int]


def placeholder(result: ToolResult) -> str:
    """The one line an old result is replaced with."""
    return (f"[result of {result.name} (call {result.call_id}, {len(result.content):,} characters) cleared to "
            "save context; call the tool again if you need it]")


class ContextWindow:
    """One run's view of its history: what was dropped, cleared and summarized so far.

    ``fit`` takes each request as the runner builds it (its messages the whole history, a
    list that only grows) and returns the request to send; ``observe`` learns from the usage
    each answer reports. ``limit`` None: every request goes out whole.
    """

    def __init__(self, settings: ContextSettings | None, *, window: int | None, max_tokens: int | None,
                 chars_per_token: float = 4.0, on_event: Callable[[ContextEvent], None] | None = None) -> None:
        self.on_event = on_event
        self.limit = resolve_limit(settings, window, max_tokens)
        self.strategy = settings.strategy if settings is not None else DEFAULT_STRATEGY
        self.chars_per_token = chars_per_token
        self.correction = 1.0
        self.events: list[ContextEvent] = []
        self.summary: str | None = None
        self._dropped: set[int] = set()
        self._cleared: dict[int, int] = {}  # tool messages whose results are placeholders: index -> raw estimate
        self._costs: dict[int, tuple[Message, int]] = {}  # id -> (message kept alive, raw estimate)
        self._requests = 0
        self._units: list[_Unit] = []
        self._units_made = 0  # messages already split into units
        self._sent_estimate = 0  # raw estimate of the last request sent

    def to_json(self) -> dict[str, Any]:
        """``{"max_input_tokens", "strategy", "events": [...]}`` for the run document."""
        return {"max_input_tokens": self.limit, "strategy": self.strategy,
                "events": [event.to_json() for event in self.events]}

    def observe(self, usage: Usage) -> None:
        """Correct later estimates by the input tokens the last request really took."""
        if self.limit is None or usage.input_tokens <= 0 or self._sent_estimate <= 0:
            return
        low, high = _CORRECTION_RANGE
        self.correction = min(high, max(low, usage.input_tokens / self._sent_estimate))

    async def fit(self, request: ModelRequest, summarize: Summarizer) -> ModelRequest:
        """``request`` with a history that fits the limit; ``summarize`` sends a summary request.

        Raises ``ContextOverflow`` when even the view of last resort does not fit.
        """
        self._requests += 1
        if self.limit is None:
            return request
        budget = math.floor(self.limit / self.correction)  # in raw estimate tokens
        messages = request.messages
        units = self._units_of(messages)
        before = self._estimate(request, messages)
        event = ContextEvent(self._requests, self._shown(before), 0, self.limit)
        total = before
        if total > budget:
            total = await self._trim(request, units, math.floor(budget * TRIM_TO), event, summarize)
        view = self._view(messages)
        if total > budget:
            view, total = self._cut_newest(view, units[-1] if units else None, total, budget, event)
        fixed = self._fixed(request)
        if total > budget:
            raise ContextOverflow(
                f"the system prompt, the tools, the question and the newest tool results take "
                f"~{self._shown(total):,} tokens, more than the limit of {self.limit:,} input tokens; raise "
                f"settings.context.max_input_tokens if the model takes more, or send fewer or shorter tools "
                f"(~{self._shown(fixed):,} tokens go to the system prompt and tool definitions)")
        self._sent_estimate = total
        if event.dropped_messages or event.cleared_calls or event.cut_calls or event.summarized:
            event.tokens_after = self._shown(total)
            self.events.append(event)
            if self.on_event is not None:
                self.on_event(event)
        return replace(request, messages=view, system=self._system(request.system))

    def _units_of(self, messages: list[Message]) -> list[_Unit]:
        """The units of ``messages``, made once per message: the history only grows."""
        if len(messages) < self._units_made:  # not the history seen so far: start again
            self._units, self._units_made = [], 0
        for index in range(self._units_made, len(messages)):
            _add_unit(self._units, index, messages[index])
        self._units_made = len(messages)
        return self._units

    # -- estimates ----------------------------------------------------------------------

    def _shown(self, raw: int) -> int:
        return math.ceil(raw * self.correction)

    def _fixed(self, request: ModelRequest) -> int:
        """What every request holds whatever its history: system prompt (with the summary) and tools."""
        system = self._system(request.system) or ""
        return estimate_text(system, self.chars_per_token) + sum(_definition_cost(d) for d in request.tools)

    def _estimate(self, request: ModelRequest, messages: list[Message]) -> int:
        return self._fixed(request) + sum(self._cost(i, m) for i, m in enumerate(messages) if i not in self._dropped)

    def _cost(self, index: int, message: Message) -> int:
        if index in self._cleared:
            return self._cleared[index]
        kept = self._costs.get(id(message))
        if kept is None or kept[0] is not message:
            kept = (message, self._message_cost(message))
            self._costs[id(message)] = kept
        return kept[1]

    def _message_cost(self, message: Message) -> int:
        cost = MESSAGE_OVERHEAD
        for part in message.parts:
            if isinstance(part, TextPart):
                cost += estimate_text(part.text, self.chars_per_token)
            elif isinstance(part, ToolCall):
                cost += PART_OVERHEAD + estimate_text(part.name + part.raw_arguments, self.chars_per_token)
            elif isinstance(part, ToolResult):
                cost += PART_OVERHEAD + estimate_text(part.content, self.chars_per_token)
            elif isinstance(part, OpaquePart):
                cost += estimate_text(str(part.data), self.chars_per_token)
        return cost

    # -- trimming -----------------------------------------------------------------------

    async def _trim(self, request: ModelRequest, units: list[_Unit], target: int, event: ContextEvent,
                    summarize: Summarizer) -> int:
        """Clear, drop (and summarize) until the estimate is at most ``target``; the new estimate."""
        messages, limit = request.messages, self.limit
        assert limit is not None  # fit trims only under a limit
        total = self._estimate(request, messages)
        if self.strategy == "clear-tool-results":
            total = self._clear(messages, units, total, target, event)
        reserve = limit // SUMMARY_SHARE if self.strategy == "summarize" else 0
        newly_dropped: list[int] = []
        for unit in _droppable(units):
            if total + reserve <= target:
                break
            if unit.indices[-1] in self._dropped:  # left out by an earlier request
                continue
            fresh = [i for i in unit.indices if i not in self._dropped]
            total -= sum(self._cost(i, messages[i]) for i in fresh)
            self._dropped.update(fresh)
            newly_dropped += fresh
        event.dropped_messages = len(newly_dropped)
        event.dropped_calls = [call.id for i in newly_dropped for call in messages[i].tool_calls]
        if newly_dropped and self.strategy == "summarize":
            dropped = [messages[i] for i in newly_dropped]
            summary_room = reserve - estimate_text(SUMMARY_HEADER, self.chars_per_token) - MESSAGE_OVERHEAD
            self.summary = await summarize_dropped(request, dropped, self.summary, summary_room, limit,
                                                   self.chars_per_token, summarize)
            event.summarized = True
            total = self._estimate(request, messages)
        return total

    def _clear(self, messages: list[Message], units: list[_Unit], total: int, target: int, event: ContextEvent) -> int:
        for unit in units[:-1]:  # the newest unit's results are what the model is about to read
            for index in unit.indices:
                if total <= target:
                    return total
                message = messages[index]
                if index in self._dropped or index in self._cleared or not message.tool_results:
                    continue
                old = self._cost(index, message)
                self._cleared[index] = self._message_cost(_cleared(message))
                total += self._cleared[index] - old
                event.cleared_calls += [result.call_id for result in message.tool_results]
        return total

    def _view(self, messages: list[Message]) -> list[Message]:
        return [_cleared(message) if index in self._cleared else message
                for index, message in enumerate(messages) if index not in self._dropped]

    def _system(self, system: str | None) -> str | None:
        if self.summary is None:
            return system
        return f"{system}\n\n{SUMMARY_HEADER}\n{self.summary}" if system else f"{SUMMARY_HEADER}\n{self.summary}"

    def _cut_newest(self, view: list[Message], newest: _Unit | None, total: int, budget: int,
                    event: ContextEvent) -> tuple[list[Message], int]:
        """The newest results cut, each in proportion to its size, so the request fits."""
        if newest is None or newest.kind != "step" or len(newest.indices) < 2:
            return view, total
        position = len(view) - 1  # the newest unit is last in the view, its results message last of all
        message = view[position]
        results = message.tool_results
        current = self._message_cost(message)
        room = budget - (total - current) - MESSAGE_OVERHEAD - PART_OVERHEAD * len(results)
        sizes = [max(1, estimate_text(r.content, self.chars_per_token)) for r in results]
        if room <= 0:
            return view, total
        parts: list[Any] = []
        for part in message.parts:
            if isinstance(part, ToolResult):
                share = room * estimate_text(part.content, self.chars_per_token) // sum(sizes)
                if estimate_text(part.content, self.chars_per_token) > share:
                    part = replace(part, content=cut_to_tokens(part.content, share, self.chars_per_token,
                                                               what=f"the result of {part.name}"))
                    event.cut_calls.append(part.call_id)
            parts.append(part)
        cut = replace(message, parts=parts)
        view = [*view[:position], cut]
        return view, total - current + self._message_cost(cut)


def _definition_cost(definition: ToolDefinition) -> int:
    return estimate_definition_tokens({"name": definition.name, "description": definition.description,
                                       "parameters": definition.parameters})


def _cleared(message: Message) -> Message:
    return replace(message, parts=[replace(part, content=placeholder(part)) if isinstance(part, ToolResult) else part
                                   for part in message.parts])


def _add_unit(units: list[_Unit], index: int, message: Message) -> None:
    """Message ``index`` into ``units``: a question, a step (calls with their results) or an answer."""
    if message.role == "user":
        units.append(_Unit("question", [index]))
    elif message.role == "assistant":
        units.append(_Unit("step" if message.tool_calls else "answer", [index]))
    elif units:  # results go with the calls they answer
        units[-1].indices.append(index)
    else:
        units.append(_Unit("step", [index]))


def _droppable(units: list[_Unit]) -> list[_Unit]:
    """What may be left out, oldest first: earlier exchanges whole, then the current question's
    steps — never the current question, never the newest unit."""
    last_question = max((i for i, unit in enumerate(units) if unit.kind == "question"), default=0)
    exchanges: list[_Unit] = []
    for unit in units[:last_question]:
        if unit.kind == "question" or not exchanges:
            exchanges.append(_Unit("exchange", []))
        exchanges[-1].indices += unit.indices
    current = units[last_question:]
    if current and current[0].kind == "question":
        current = current[1:]
    return exchanges + current[:-1]
