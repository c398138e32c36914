"""What a run had done when it was stopped before its end: its turns so far, as a ``RunResult``.

A run stopped by Ctrl-C returns no result. ``RunSoFar`` watches the run as an observer, so a
command that promised one JSON document (``--json``) can still print one: ``interrupted()``
gives every turn that ended, the turn in progress with the calls that finished (a call that
did not is an error result saying so), and ``stop_reason`` ``"interrupted"``. Secrets are
redacted with the run's own redactor, as in any run's document.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from toolrun.core.messages import ModelResponse, ToolCall, Usage
from toolrun.core.secrets import Redactor, active_redactor
from toolrun.loop.results import INTERRUPTED, RunResult, ToolCallRecord, TurnRecord
from toolrun.loop.runner import RunObserver

if TYPE_CHECKING:
    from toolrun.replay.divergence import Divergence

INTERRUPTED_ERROR = "the run was interrupted (Ctrl-C) before it finished"
UNFINISHED_CALL = "the run was interrupted before this call finished: no result"


class RunSoFar(RunObserver):
    """The turns, calls and usage of a run as it goes, for the document of a run that never ended.

    ``recipe`` and ``model`` name the run until it starts (an interruption while its tools load);
    ``output_requested``: the run asks for a structured answer (the document then has ``output``).
    """

    def __init__(self, *, recipe: str | None = None, model: str | None = None, output_requested: bool = False) -> None:
        self.recipe = recipe
        self.model = model
        self.mode: str | None = None
        self.output_requested = output_requested
        self.turns: list[TurnRecord] = []
        self.usage = Usage()
        self.final: str | None = None
        self.divergences: list[Divergence] = []
        self.redactor: Redactor | None = None
        self._answer: ModelResponse | None = None  # the answer of the turn in progress
        self._finished: dict[str, ToolCallRecord] = {}  # its calls that ended, by id
        self._started: dict[str, float] = {}  # when each of its calls started (time.monotonic)

    def on_run_start(self, *, recipe: str, model: str, mode: str) -> None:
        self.recipe, self.model, self.mode = recipe, model, mode
        self.redactor = active_redactor()  # the run's: it goes on learning the secrets the run reads

    def on_divergence(self, divergence: Divergence) -> None:
        self.divergences.append(divergence)

    def on_model_response(self, turn_index: int, response: ModelResponse) -> None:
        self._answer, self._finished, self._started = response, {}, {}
        self.usage = self.usage + response.usage
        self.final = response.message.text or self.final

    def on_tool_call_start(self, call: ToolCall) -> None:
        self._started[call.id] = time.monotonic()

    def on_tool_call_end(self, record: ToolCallRecord) -> None:
        self._finished[record.id] = record

    def on_turn_end(self, turn: TurnRecord) -> None:
        self.turns.append(turn)
        self._answer = None

    def interrupted(self) -> RunResult:
        """The run as far as it got, ``stop_reason`` ``"interrupted"`` and ``error`` saying so."""
        turns = list(self.turns)
        if self._answer is not None:
            turns.append(self._turn_in_progress(self._answer))
        return RunResult(final=self.final, stop_reason=INTERRUPTED, usage=self.usage, turns=turns, messages=[],
                         error=INTERRUPTED_ERROR, recipe=self.recipe, model=self.model, mode=self.mode,
                         divergences=self.divergences if self.mode == "replay" else None,
                         output_requested=self.output_requested, redactor=self.redactor)

    def _turn_in_progress(self, answer: ModelResponse) -> TurnRecord:
        """The turn the interruption cut: the model's answer, each call finished or cut off."""
        calls = [self._finished.get(call.id) or self._cut_off(call) for call in answer.message.tool_calls]
        return TurnRecord(answer.stop_reason, answer.message.text, answer.usage, calls)

    def _cut_off(self, call: ToolCall) -> ToolCallRecord:
        """A call that had not finished (or not started) when the run was stopped."""
        started = self._started.get(call.id)
        ran_ms = int((time.monotonic() - started) * 1000) if started is not None else 0
        arguments = call.arguments if call.arguments is not None else call.raw_arguments
        return ToolCallRecord(call.id, call.name, arguments, UNFINISHED_CALL, True, ran_ms)
