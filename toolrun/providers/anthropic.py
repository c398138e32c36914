"""Anthropic Messages API (POST {base}/v1/messages): mapping to and from the neutral model.

Pure functions (``build_request_body``, ``parse_response``) and a stream assembler
(``AnthropicStreamAssembler``) do all the translation; ``AnthropicProvider`` only adds the
endpoint, the headers and the transport.

Wire rules handled here:
- the system prompt is top-level, ``max_tokens`` is required;
- the assistant turn goes back whole: text, ``tool_use`` and ``thinking`` /
  ``redacted_thinking`` blocks (kept as ``OpaquePart("anthropic", block)``) in their order;
- every tool result of a turn goes into ONE user message, ``tool_result`` blocks first;
- ``pause_turn`` is the stop reason ``paused``: the loop sends the answer back as the last
  message and asks again; the answers of that one turn go back as one assistant message;
- streamed ``tool_use`` input arrives as ``input_json_delta`` pieces per block index.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

from toolrun.core.content import shown_as_image, text_with_notes
from toolrun.core.errors import ProviderError
from toolrun.core.json_limits import MAX_ARGUMENT_DEPTH, MAX_BODY_DEPTH, loads_bounded
from toolrun.core.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    OpaquePart,
    OutputMode,
    Part,
    StopReason,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResult,
    Usage,
)
from toolrun.core.schema_dialects import SUBSCHEMA_MAPS, holds_subschemas
from toolrun.core.secrets import redact
from toolrun.providers.alternation import alternating_turns
from toolrun.providers.answer_numbers import stream_index, token_count
from toolrun.providers.base import Provider, StreamAssembler, WireItem, WireTool
from toolrun.providers.structured import (
    answer_from_final_tool,
    output_mode,
    request_with_final_tool,
    system_with_json_instruction,
)
from toolrun.providers.transport import WireRequest

PROVIDER = "anthropic"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096  # the API refuses a request without max_tokens
# Every Claude model's standard window (the 1M-token beta needs a header this adapter does not send).
CONTEXT_WINDOWS = {"claude-": 200_000}

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    # A long turn paused (a server-side tool loop, e.g. web search through settings.extra): sent back
    # as it came, as the last message, it goes on where it stopped.
    "pause_turn": "paused",
}

# Error types worth another attempt (the same ones the API sends as 429/500/529).
RETRYABLE_ERROR_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})


# ---------------------------------------------------------------------------- request


def tool_definition(definition: ToolDefinition) -> WireTool:
    """A tool as a Messages ``tools`` entry: ``{name, description, input_schema}``, the schema unchanged."""
    return WireTool({"name": definition.name, "description": definition.description,
                     "input_schema": copy.deepcopy(definition.parameters)})


def tool_choice_body(choice: str, parallel: bool) -> dict[str, Any]:
    """``tool_choice`` for a neutral choice: auto | required (-> any) | none | a tool's name."""
    if choice == "none":
        return {"type": "none"}  # takes no disable_parallel_tool_use
    if choice == "auto":
        body: dict[str, Any] = {"type": "auto"}
    elif choice == "required":
        body = {"type": "any"}
    else:
        body = {"type": "tool", "name": choice}
    if not parallel:
        body["disable_parallel_tool_use"] = True
    return body


def _assistant_content(message: Message) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:  # the API rejects empty text blocks
                content.append({"type": "text", "text": part.text})
        elif isinstance(part, ToolCall):
            content.append({"type": "tool_use", "id": part.id, "name": part.name,
                            "input": part.arguments if isinstance(part.arguments, dict) else {}})
        elif isinstance(part, OpaquePart) and part.provider == PROVIDER:
            content.append(part.data)  # thinking blocks: their signature breaks if touched
    return content


IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})  # an image block's media types


def _result_content(result: ToolResult) -> str | list[dict[str, Any]]:
    """A tool_result's ``content``: its text, or text and ``image`` blocks when it has images (audio and
    resources are named in a note: a tool_result holds only text, image and document blocks)."""
    images = [block for block in result.blocks if shown_as_image(block, IMAGE_TYPES)]
    text = text_with_notes(result.content, [block for block in result.blocks if block not in images])
    if not images:
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    return parts + [{"type": "image", "source": {"type": "base64", "media_type": block.mime_type,
                                                 "data": block.base64_data}} for block in images]


def _tool_result_block(result: ToolResult) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": result.call_id}
    content = _result_content(result)
    if content:  # content is optional; an empty string is not worth the risk
        block["content"] = content
    if result.is_error:
        block["is_error"] = True
    return block


def _user_content(messages: list[Message]) -> list[dict[str, Any]]:
    """One user message out of consecutive user/tool messages: tool_result blocks first."""
    results: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolResult):
                results.append(_tool_result_block(part))
            elif isinstance(part, TextPart):
                if part.text:
                    others.append({"type": "text", "text": part.text})
            elif isinstance(part, OpaquePart) and part.provider == PROVIDER:
                others.append(part.data)
    return results + others  # the API wants tool results before any text in the message


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The ``messages`` array: assistant turns as they came, user-side runs merged into one, and the
    answers of one paused turn (consecutive assistant messages) one assistant message again."""

    def assistant_turn(message: Message) -> dict[str, Any] | None:
        content = _assistant_content(message)
        return {"role": "assistant", "content": content} if content else None

    def user_turn(run: list[Message], answered: Message | None) -> dict[str, Any] | None:
        content = _user_content(run)
        return {"role": "user", "content": content} if content else None

    wire: list[dict[str, Any]] = []
    for turn in alternating_turns(messages, assistant_turn, user_turn):
        if turn["role"] == "assistant" and wire and wire[-1]["role"] == "assistant":
            wire[-1] = {"role": "assistant", "content": wire[-1]["content"] + turn["content"]}
        else:
            wire.append(turn)
    return wire


def build_request_body(request: ModelRequest, *, stream: bool) -> dict[str, Any]:
    """The JSON body of POST /v1/messages for ``request``."""
    settings = request.settings
    request, output_config = _structured(request)
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": settings.max_tokens or DEFAULT_MAX_TOKENS,
        "messages": wire_messages(request.messages),
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        # the same shape `toolrun tools show --format anthropic` prints: one place
        body["tools"] = [tool_definition(definition).definition for definition in request.tools]
        body["tool_choice"] = tool_choice_body(request.settings.tool_choice, settings.parallel_tool_calls)
    if output_config is not None:
        body["output_config"] = output_config
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if stream:
        body["stream"] = True
    body.update(settings.extra)
    return body


# Models with structured output (``output_config``); older ones answer through a forced final tool.
_NATIVE_OUTPUT_FROM = (4, 5)
_NATIVE_OUTPUT_ALSO = frozenset({("opus", 4, 1)})
_MODEL_VERSION = re.compile(r"claude-(opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?!\d)")


def default_output_mode(model: str) -> OutputMode:
    """``native`` for models with structured output (Claude 4.5 and later, Opus 4.1), else ``tool``."""
    match = _MODEL_VERSION.search(model)
    if match is None:
        return "tool"
    family, major, minor = match.group(1), int(match.group(2)), int(match.group(3) or 0)
    native = (major, minor) >= _NATIVE_OUTPUT_FROM or (family, major, minor) in _NATIVE_OUTPUT_ALSO
    return "native" if native else "tool"


def _structured(request: ModelRequest) -> tuple[ModelRequest, dict[str, Any] | None]:
    """The request as sent for its structured answer, and the ``output_config`` (None: not that way)."""
    output = request.settings.output
    mode = output_mode(request, default_output_mode(request.model))
    if output is None:
        return request, None
    if mode == "native" and output.schema is not None:
        return request, {"format": {"type": "json_schema", "schema": closed_objects(output.schema)}}
    if mode == "tool":
        tools, choice = request_with_final_tool(request)
        settings = dataclasses.replace(request.settings, tool_choice=choice)
        return dataclasses.replace(request, tools=tools, settings=settings), None
    # no JSON mode on this API: the instruction in the system prompt is all there is
    return dataclasses.replace(request, system=system_with_json_instruction(request.system, output)), None


def closed_objects(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object that does not say (structured output wants it)."""
    if isinstance(schema, list):
        return [closed_objects(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed: dict[str, Any] = {}
    for key, value in schema.items():
        if key in SUBSCHEMA_MAPS and isinstance(value, dict):
            closed[key] = {name: closed_objects(subschema) for name, subschema in value.items()}
        else:
            closed[key] = closed_objects(value) if holds_subschemas(key, value) else value
    if (closed.get("type") == "object" or "properties" in closed) and "additionalProperties" not in closed:
        closed["additionalProperties"] = False
    return closed


# --------------------------------------------------------------------------- response


def normalise_stop_reason(raw: str | None) -> StopReason:
    """Anthropic's ``stop_reason`` as one of toolrun's stop reasons."""
    if raw is None:
        return "stop"
    return STOP_REASONS.get(raw, "stop")


def parse_usage(usage: dict[str, Any] | None) -> Usage:
    """Tokens of one request; cache writes and reads are input the request paid for."""
    usage = usage or {}
    input_tokens = sum(token_count(usage, key) for key in
                       ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    return Usage(input_tokens=input_tokens, output_tokens=token_count(usage, "output_tokens"), requests=1)


def _tool_call(block: dict[str, Any], raw_arguments: str | None = None) -> ToolCall:
    provider_id = block.get("id")
    arguments: dict[str, Any] | None
    if raw_arguments is None:
        value = block.get("input")
        # No input is a call without arguments; anything but an object is kept as sent, for an error result.
        arguments = value if isinstance(value, dict) else ({} if value is None else None)
        raw_arguments = json.dumps(value if value is not None else {}, ensure_ascii=False)
    elif raw_arguments.strip() == "":
        arguments, raw_arguments = {}, "{}"  # a tool without arguments streams only ""
    else:
        try:
            parsed = loads_bounded(raw_arguments, MAX_ARGUMENT_DEPTH, finite=True, unique_keys=True)
        except ValueError:
            parsed = None
        arguments = parsed if isinstance(parsed, dict) else None
    return ToolCall(id=provider_id or "", name=block.get("name") or "", arguments=arguments,
                    raw_arguments=raw_arguments, provider_id=provider_id)


def content_part(block: dict[str, Any]) -> Part | None:
    """The neutral part for one response content block (None for an empty text block)."""
    kind = block.get("type")
    if kind == "text":
        return TextPart(block.get("text") or "") if block.get("text") else None
    if kind == "tool_use":
        return _tool_call(block)
    # thinking, redacted_thinking and anything newer: only Anthropic understands them,
    # and they must go back exactly as received.
    return OpaquePart(PROVIDER, block)


def raise_for_error(body: dict[str, Any], status: int | None = None) -> None:
    """Raise ``ProviderError`` for an Anthropic error object ``{"type": "error", ...}``."""
    if body.get("type") != "error":
        return
    error = body.get("error") or {}
    kind = str(error.get("type") or "error")
    message = error.get("message") or kind
    raise ProviderError(redact(f"Anthropic {kind}: {message}"), status=status,
                        retryable=kind in RETRYABLE_ERROR_TYPES)


def parse_response(body: dict[str, Any]) -> ModelResponse:
    """A whole (non-streamed) Messages response as a ``ModelResponse``."""
    raise_for_error(body)
    parts = [part for block in body.get("content") or [] if (part := content_part(block)) is not None]
    raw_stop = body.get("stop_reason")
    return ModelResponse(
        message=Message(role="assistant", parts=parts),
        stop_reason=normalise_stop_reason(raw_stop),
        usage=parse_usage(body.get("usage")),
        raw_stop_reason=raw_stop,
        model=body.get("model"),
    )


# ----------------------------------------------------------------------------- stream


@dataclass
class _Block:
    """A content block being streamed: its start object plus what the deltas added."""

    start: dict[str, Any]
    text: list[str] = field(default_factory=list)
    json_pieces: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    signature: str | None = None

    def finish(self) -> Part | None:
        kind = self.start.get("type")
        if kind == "text":
            text = (self.start.get("text") or "") + "".join(self.text)
            return TextPart(text) if text else None
        if kind == "tool_use":
            return _tool_call(self.start, "".join(self.json_pieces))
        block = dict(self.start)
        if self.json_pieces:  # server_tool_use and other blocks whose input streams like tool_use
            try:
                block["input"] = loads_bounded("".join(self.json_pieces) or "{}", MAX_BODY_DEPTH)
            except ValueError:
                pass
        if kind == "thinking":
            block["thinking"] = (block.get("thinking") or "") + "".join(self.thinking)
            if self.signature is not None:
                block["signature"] = self.signature
        return OpaquePart(PROVIDER, block)


class AnthropicStreamAssembler:
    """Builds one ``ModelResponse`` from the parsed events of a Messages stream.

    A ``StreamAssembler``: ``feed`` takes every event's JSON and returns the text deltas to
    show; ``finish`` gives the answer at the end of the stream.
    """

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, Any] = {}
        self._stop_reason: str | None = None
        self._model: str | None = None
        self._stopped = False

    def feed(self, event: dict[str, Any], name: str | None = None) -> list[StreamEvent]:
        """Take one event (the JSON of an SSE ``data:`` line; ``name`` is its ``event:``)."""
        kind = event.get("type") or name
        if kind == "message_start":
            message = event.get("message") or {}
            self._model = message.get("model")
            self._usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            block = dict(event.get("content_block") or {})
            self._blocks[stream_index(event.get("index", len(self._blocks)))] = _Block(block)
            if block.get("type") == "text" and block.get("text"):
                return [TextDelta(block["text"])]
        elif kind == "content_block_delta":
            return self._delta(stream_index(event.get("index", 0)), event.get("delta") or {})
        elif kind == "message_delta":
            delta = event.get("delta") or {}
            self._stop_reason = delta.get("stop_reason") or self._stop_reason
            # message_delta carries cumulative counts: the latest value wins
            self._usage.update({k: v for k, v in (event.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self._stopped = True
        elif kind == "error":
            raise_for_error({"type": "error", "error": event.get("error") or {}})
        # ping, content_block_stop and unknown events change nothing
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamEvent]:
        block = self._blocks.get(index)
        if block is None:  # a delta for a block that never started: keep it rather than lose it
            block = self._blocks[index] = _Block({"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text") or ""
            block.text.append(text)
            if text:
                return [TextDelta(text)]
        elif kind == "input_json_delta":
            block.json_pieces.append(delta.get("partial_json") or "")
        elif kind == "thinking_delta":
            block.thinking.append(delta.get("thinking") or "")
        elif kind == "signature_delta":
            block.signature = delta.get("signature")
        return []

    def finish(self) -> ModelResponse:
        """The assembled response; ``ProviderError`` when the stream stopped half-way."""
        if not self._stopped and self._stop_reason is None:
            raise ProviderError("Anthropic stream ended before message_stop", retryable=True)
        parts = [part for _, block in sorted(self._blocks.items()) if (part := block.finish()) is not None]
        return ModelResponse(
            message=Message(role="assistant", parts=parts),
            stop_reason=normalise_stop_reason(self._stop_reason),
            usage=parse_usage(self._usage),
            raw_stop_reason=self._stop_reason,
            model=self._model,
        )


# --------------------------------------------------------------------------- provider


class AnthropicProvider(Provider):
    """Anthropic Messages over the transport: headers, endpoint, whole or streamed answers."""

    name: ClassVar[str] = PROVIDER
    default_base_url: ClassVar[str] = "https://api.anthropic.com"
    base_url_env: ClassVar[tuple[str, ...]] = ("ANTHROPIC_BASE_URL",)
    api_key_env: ClassVar[tuple[str, ...]] = ("ANTHROPIC_API_KEY",)
    credential_headers: ClassVar[frozenset[str]] = frozenset({"x-api-key", "anthropic-organization-id"})
    conversation_key: ClassVar[str | None] = "messages"
    output_modes: ClassVar[tuple[OutputMode, ...]] = ("native", "tool", "json")
    context_windows: ClassVar[dict[str, int]] = CONTEXT_WINDOWS
    chars_per_token: ClassVar[float] = 3.5  # Claude's tokenizer splits Latin text finer than OpenAI's

    @classmethod
    def tool_definition(cls, definition: ToolDefinition, *, strict: bool = False) -> WireTool:
        return tool_definition(definition)  # Anthropic has no strict mode

    @classmethod
    def output_mode_for(cls, model: str) -> OutputMode:
        return default_output_mode(model)

    def final_answer(self, request: ModelRequest, response: ModelResponse) -> ModelResponse:
        output = request.settings.output
        if output is None or output_mode(request, default_output_mode(request.model)) != "tool":
            return response
        return answer_from_final_tool(response, output)

    @classmethod
    def tool_names(cls, entry: Any) -> list[str] | None:
        return [str(entry["name"])] if isinstance(entry, dict) and "name" in entry else None

    @classmethod
    def conversation_item(cls, item: dict[str, Any]) -> WireItem | None:
        if item.get("type") == "tool_result":
            return WireItem("tool_result", item.get("tool_use_id"), content=item.get("content", ""),
                            is_error=bool(item.get("is_error")))
        if item.get("type") == "tool_use":
            return WireItem("tool_call", item.get("id"), item.get("name"))
        return None

    def headers(self) -> dict[str, str]:
        """Request headers: the version pin, the key, then any gateway headers."""
        headers = {"anthropic-version": ANTHROPIC_VERSION, "content-type": "application/json"}
        if self.config.api_key:
            headers["x-api-key"] = self.config.api_key
        headers.update(self.config.headers)
        return headers

    def build_request(self, request: ModelRequest, *, stream: bool) -> WireRequest:
        return WireRequest("POST", f"{self.config.base_url}/v1/messages", self.headers(),
                           build_request_body(request, stream=stream), stream=stream)

    def parse_answer(self, body: dict[str, Any]) -> ModelResponse:
        return parse_response(body)

    def stream_assembler(self) -> StreamAssembler:
        return AnthropicStreamAssembler()
