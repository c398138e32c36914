"""``--replay-tools``: a replay that plays back the tools' recorded results as well.

A recording holds every request the run sent; the request after a turn carries that turn's
tool results, in the adapter's wire format. Played back, a recipe's recording runs in CI
with no provider and no tool service reachable: nothing runs, nothing is requested.

A call's result is found by its id in the next recorded request (the id the model sent,
which a replay reproduces), or — for formats without ids, such as Gemini's — by the tool's
name and the call's place among the turn's calls of that name. A format that does not
carry the error flag (OpenAI Chat, Responses) replays every result as a plain result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toolrun.backends.base import CallContext
from toolrun.core.messages import ToolCall
from toolrun.core.tool import Tool
from toolrun.loop.approval import Approver
from toolrun.loop.execution import ToolOutcome
from toolrun.providers.base import Provider, WireItem
from toolrun.replay.divergence import WireReading
from toolrun.replay.recording import ReplayTransport

NOT_RECORDED = ("no result for this call in the recording (the recorded run did not make it); "
                "replay without --replay-tools to run the tool")


class RecordedToolResults:
    """A call executor (see ``run_conversation(execute=...)``) answering from the recording."""

    def __init__(self, replay: ReplayTransport, provider_class: type[Provider]) -> None:
        self.replay = replay
        self.reading = WireReading([provider_class])
        self._results: dict[int, list[WireItem]] = {}  # exchange index -> the tool results its request carries

    async def __call__(self, tool: Tool, call: ToolCall, context: CallContext, approver: Approver | None,
                       *, turn: Sequence[ToolCall] = ()) -> ToolOutcome:
        found = self._find(self.replay.served, call, turn)
        if found is None:
            return ToolOutcome(NOT_RECORDED, True, 0)
        return ToolOutcome(_text(found.content), bool(found.is_error), 0)

    def _find(self, exchange: int, call: ToolCall, turn: Sequence[ToolCall]) -> WireItem | None:
        """The result sent after ``call``'s turn: the request following the answer that made the call."""
        results = self._results_of(exchange)
        wanted = {call.provider_id, call.id} - {None, ""}
        by_id = next((item for item in reversed(results) if item.call_id in wanted), None)
        if by_id is not None:
            return by_id
        # No ids on the wire: this turn's results of a name are the last ones of that name, in call order.
        same_name = [item for item in results if item.name == call.name]
        siblings = [other for other in turn if other.name == call.name] or [call]
        position = next((index for index, other in enumerate(siblings) if other is call), len(siblings) - 1)
        this_turn = same_name[-len(siblings):] if len(same_name) >= len(siblings) else []
        return this_turn[position] if position < len(this_turn) else None

    def _results_of(self, exchange: int) -> list[WireItem]:
        if exchange not in self._results:
            exchanges = self.replay.cassette.exchanges
            body = exchanges[exchange].request.get("body") if exchange < len(exchanges) else None
            found: list[WireItem] = []
            _collect(body, self.reading, found)
            self._results[exchange] = found
        return self._results[exchange]


def _collect(node: Any, reading: WireReading, found: list[WireItem]) -> None:
    stack = [node]
    while stack:  # iterative: a recording is data, and data may nest deeply
        current = stack.pop()
        if isinstance(current, dict):
            item = reading.item(current)
            if item is not None and item.kind == "tool_result":
                found.append(item)
                continue
            stack.extend(reversed(list(current.values())))
        elif isinstance(current, list):
            stack.extend(reversed(current))


def _text(content: Any) -> str:
    """A recorded result as the text the tool gave: a string, or the text parts of a block list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False)
