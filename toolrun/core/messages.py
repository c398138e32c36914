"""The provider-neutral message model every part of toolrun speaks.

Adapters in ``toolrun.providers`` translate it to and from each wire format; the runner
never sees a provider's dicts. Provider-specific data that must be echoed back unchanged
(Gemini ``thoughtSignature``, Anthropic ``thinking`` blocks, Responses item ids) travels in
``provider_data`` fields, keyed by provider name, and only that provider reads it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from toolrun.core.content import ContentBlock

# "paused": the model's turn is not over; it goes on when its answer is sent back as it came (Anthropic's
# pause_turn). A run never ends with it: the loop asks again, within max_turns.
StopReason = Literal["stop", "tool_calls", "length", "content_filter", "error", "max_turns", "paused"]
Role = Literal["user", "assistant", "tool"]


@dataclass
class TextPart:
    """Text of a message: what the user asked, or what the model answered."""

    text: str

    def __post_init__(self) -> None:
        _check_text(self.text)


@dataclass
class ToolCall:
    """One call the model asked for.

    ``id`` is unique within a run (toolrun makes one up when the provider sent none, an
    empty one or a repeated one); ``provider_id`` is what the provider actually sent.
    ``arguments`` is the parsed JSON object, or None when ``raw_arguments`` did not parse.
    ``unreadable`` says, in words for the model, why a call the provider reported cannot be
    read at all (Gemini's MALFORMED_FUNCTION_CALL, a call without a name): nothing runs, the
    model is told so in the call's result, and the adapter never sends the call back as one.
    """

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str
    provider_id: str | None = None
    provider_data: dict[str, Any] = field(default_factory=dict)
    unreadable: str | None = None

    def __post_init__(self) -> None:
        # A model's wire JSON may hold any value where a name or an id belongs ("name": 5, "id": 7): as text,
        # the call becomes an unknown tool the model is told about, and its id one that can be sent back.
        if not isinstance(self.name, str):
            self.name = _as_text(self.name)
        if not isinstance(self.id, str):
            self.id = _as_text(self.id)
        if self.provider_id is not None and not isinstance(self.provider_id, str):
            self.provider_id = _as_text(self.provider_id)


def _as_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass
class ToolResult:
    """The outcome of one call, sent back tied to the call's id; ``blocks`` are the images, audio and
    resources beside the text, which each adapter sends as its format allows (or names in a note)."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    provider_id: str | None = None
    blocks: list[ContentBlock] = field(default_factory=list)


@dataclass
class OpaquePart:
    """A block only its own provider understands (e.g. Anthropic ``thinking``); echoed unchanged."""

    provider: str
    data: dict[str, Any]


Part = TextPart | ToolCall | ToolResult | OpaquePart


@dataclass
class Message:
    """A message of the conversation. Tool results travel in a ``role="tool"`` message."""

    role: Role
    parts: list[Part]
    provider_data: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str | None:
        texts = [p.text for p in self.parts if isinstance(p, TextPart)]
        return "".join(texts) if texts else None

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p for p in self.parts if isinstance(p, ToolCall)]

    @property
    def tool_results(self) -> list[ToolResult]:
        return [p for p in self.parts if isinstance(p, ToolResult)]


@dataclass
class Usage:
    """Tokens in and out, and how many model requests they took; usages add up with ``+``."""

    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.requests + other.requests,
        )


@dataclass
class ToolDefinition:
    """What the model is told about a tool: never code, only these three things."""

    name: str
    description: str
    parameters: dict[str, Any]


ToolChoice = Literal["auto", "none", "required"] | str  # any other string: that tool's name
OutputMode = Literal["native", "tool", "json"]


@dataclass
class StructuredOutput:
    """A final answer that must be JSON: of ``schema`` (the author's JSON Schema), or any JSON when None.

    ``mode`` says how the provider is asked: ``native`` (its structured output), ``tool`` (a
    forced final tool whose input is the answer), ``json`` (JSON mode and the word JSON in the
    system prompt); None lets the adapter pick for the model. ``name`` names the schema on the wire.
    """

    schema: dict[str, Any] | None = None
    mode: OutputMode | None = None
    retries: int = 1
    name: str = "answer"


@dataclass
class ModelSettings:
    """How the model is asked to answer: sampling, length, which tools it may or must call."""

    temperature: float | None = None
    max_tokens: int | None = None
    tool_choice: ToolChoice = "auto"
    parallel_tool_calls: bool = True
    output: StructuredOutput | None = None  # the final answer's shape, asked the provider's way
    extra: dict[str, Any] = field(default_factory=dict)  # passed through into the body


@dataclass
class ModelRequest:
    """One request to a model: the conversation so far, the tools it may call, the settings."""

    model: str
    system: str | None
    messages: list[Message]
    tools: list[ToolDefinition]
    settings: ModelSettings = field(default_factory=ModelSettings)
    # "summary": a context-window summary the run asks for itself (a scripted model answers it alone)
    purpose: Literal["answer", "summary"] = "answer"


@dataclass
class ModelResponse:
    """One answer of the model: an assistant message, why it stopped, what it cost."""

    message: Message
    stop_reason: StopReason
    usage: Usage
    raw_stop_reason: str | None = None
    model: str | None = None


# Events an adapter emits while it reads a stream, so a terminal can show progress.
@dataclass
class TextDelta:
    """A piece of the answer's text as it streams in."""

    text: str

    def __post_init__(self) -> None:
        _check_text(self.text)


def _check_text(text: Any) -> None:
    """A provider's JSON may hold anything where text belongs ("text": 5): an answer toolrun cannot read.

    Raised while an adapter reads the answer, it becomes the provider's ``UnreadableAnswer``, not a crash of
    whatever prints or joins the text later."""
    if not isinstance(text, str):
        raise TypeError(f"text that is not a string: {json.dumps(text, ensure_ascii=False, default=str)[:80]}")


StreamEvent = TextDelta  # the one event a terminal shows today
