"""What a run produced — turns, calls, usage, outcome — and its JSON document.

``RunResult.to_json()`` is the document ``toolrun recipe --json`` prints, the same data a
library caller gets from ``toolrun.run``. Secrets are redacted with the run's own redactor
once more, whatever the tools already did: a transcript is written to disk and shared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from toolrun.core.content import ContentBlock
from toolrun.core.messages import Message, Usage
from toolrun.core.secrets import Redactor, redact
from toolrun.core.text import json_printable

if TYPE_CHECKING:
    from toolrun.replay.divergence import Divergence

INTERRUPTED = "interrupted"  # the stop reason of a run stopped by Ctrl-C (toolrun.loop.run_so_far)
FAILED_STOP_REASONS = frozenset({"error", "max_turns", INTERRUPTED})


@dataclass
class ToolCallRecord:
    """One executed (or refused) call, as the transcript shows it.

    ``arguments`` is the parsed object, or the raw string when it was not valid JSON.
    """

    id: str
    name: str
    arguments: Any
    result: str
    is_error: bool
    duration_ms: int
    blocks: list[ContentBlock] = field(default_factory=list)  # images, audio, resources beside the text

    def to_json(self) -> dict[str, Any]:
        """``{"id", "name", "arguments", "result", "is_error", "duration_ms"}``, and ``content`` (the MCP blocks
        beside the text) when there are any."""
        shown = {
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "result": self.result,
            "is_error": self.is_error,
            "duration_ms": self.duration_ms,
        }
        if self.blocks:
            shown["content"] = [block.wire for block in self.blocks]
        return shown


@dataclass
class TurnRecord:
    """One model request and the calls it led to."""

    stop_reason: str
    text: str | None
    usage: Usage
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    # Under settings.tool_selection: the names of the tools the request offered, or "all"; None without one.
    tools_offered: list[str] | Literal["all"] | None = None

    def to_json(self) -> dict[str, Any]:
        """One turn: its stop reason, text, token usage and calls; and ``tools_offered`` under a tool selection."""
        document: dict[str, Any] = {
            "stop_reason": self.stop_reason,
            "text": self.text,
            "usage": {"input_tokens": self.usage.input_tokens, "output_tokens": self.usage.output_tokens},
            "tool_calls": [call.to_json() for call in self.tool_calls],
        }
        if self.tools_offered is not None:
            document["tools_offered"] = self.tools_offered
        return document


@dataclass
class RunResult:
    """Everything a run produced. ``error`` explains a stop that is not a normal answer.

    A recipe run (``toolrun.run``) also fills ``recipe``, ``model`` and ``mode``,
    ``divergences`` (a replay's differences from its recording; None for a live run) and
    ``expect_failures`` (the recipe's failing ``expect`` checks).
    """

    final: str | None
    stop_reason: str
    usage: Usage
    turns: list[TurnRecord]
    messages: list[Message]
    error: str | None = None
    recipe: str | None = None
    model: str | None = None
    mode: str | None = None
    divergences: list[Divergence] | None = None
    expect_failures: list[str] = field(default_factory=list)
    recorded_exchanges: int | None = None  # with record=: how many model exchanges were saved
    output: Any = None  # the structured final answer (parsed, validated); None without one
    output_requested: bool = False  # the run asked for a structured answer (``output:``)
    output_valid: bool = False  # an answer passed its checks (``output`` may then be null, if the schema allows it)
    # With settings.context: the limit, the strategy and what each request left out (see context_window)
    context: dict[str, Any] | None = None
    redactor: Redactor | None = field(default=None, repr=False, compare=False)

    @property
    def tool_calls(self) -> list[ToolCallRecord]:
        """Every call of every turn, in order."""
        return [call for turn in self.turns for call in turn.tool_calls]

    @property
    def failed(self) -> bool:
        """The run did not reach an answer: the provider failed, the turn limit was hit, it was interrupted, or
        a structured answer was asked for and none came (cut off, filtered, invalid)."""
        return self.stop_reason in FAILED_STOP_REASONS or (self.output_requested and not self.output_valid)

    def redact(self, value: Any) -> Any:
        """``value`` with this run's secrets replaced (the active scope's, for a bare result)."""
        return self.redactor.redact(value) if self.redactor is not None else redact(value)

    def to_json(self) -> dict[str, Any]:
        """The JSON document of the run, as ``toolrun recipe --json`` prints it.

        ``error``, ``divergences``, ``expect_failures`` and ``context`` are present only when they
        say something (a failed run, a replay, a failed check, a run under a context limit);
        ``output`` when the run asked for a structured answer (null when none could be used).
        """
        document: dict[str, Any] = {
            "recipe": self.recipe,
            "model": self.model,
            "mode": self.mode,
            "final": self.final,
            "stop_reason": self.stop_reason,
            "usage": usage_totals(self.usage),
            "turns": [turn.to_json() for turn in self.turns],
        }
        if self.output_requested:
            document["output"] = self.output
        if self.error:
            document["error"] = self.error
        if self.divergences is not None:
            document["divergences"] = [divergence.to_json() for divergence in self.divergences]
        if self.expect_failures:
            document["expect_failures"] = list(self.expect_failures)
        if self.context is not None:
            document["context"] = self.context
        return self.redact(document)


def usage_totals(usage: Usage) -> dict[str, int]:
    """Run totals: tokens and the number of model requests."""
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens, "requests": usage.requests}


def dumps(document: dict[str, Any], *, indent: int | None = 2) -> str:
    """JSON text of a run document to print: Chinese stays Chinese, a lone surrogate is its ``\\u`` escape."""
    return json_printable(document, indent=indent)
