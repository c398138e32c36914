"""OpenAI Chat Completions — and every compatible server (vLLM, llama.cpp, Ollama /v1, DeepSeek ...).

Mapping (pure functions over dicts): ``build_request_body``, ``parse_response`` and
``ChatStreamAssembler`` (fed one parsed SSE chunk at a time). Transport: the thin
``OpenAIChatProvider.complete``. What it shares with the Responses and Ollama adapters
comes from ``openai_family``.

Quirks of compatible servers handled here (see docs/providers.md): ``arguments`` sent as an
object instead of a string; a missing or empty call ``id`` (kept as ``id=""`` — the runner
makes ids unique); ``index`` stuck at 0 while a new id starts a new call; deltas without
``index``; a last chunk repeating an empty arguments delta. DeepSeek's ``reasoning_content``
is not text; on a turn with tool calls it is kept and sent back (DeepSeek's thinking mode
answers 400 when it is missing there; on other turns it would be ignored, so it is not kept).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from toolrun.core.content import text_with_notes
from toolrun.core.errors import ProviderError
from toolrun.core.json_limits import MAX_BODY_DEPTH, loads_bounded
from toolrun.core.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    OutputMode,
    StreamEvent,
    StructuredOutput,
    TextDelta,
    TextPart,
    ToolCall,
    ToolDefinition,
    Usage,
)
from toolrun.core.secrets import redact
from toolrun.providers.base import Provider, StreamAssembler, WireItem, WireTool
from toolrun.providers.openai_family import (
    CONTEXT_WINDOWS,
    CREDENTIAL_HEADERS,
    OFFICIAL_BASE_URL,
    bearer_headers,
    chat_conversation_item,
    function_tool,
    function_tool_names,
    json_schema_format,
    normalise_stop_reason,
    parse_arguments,
    token_usage,
    tool_choice_value,
)
from toolrun.providers.structured import output_mode, system_with_json_instruction
from toolrun.providers.transport import WireRequest

PROVIDER = "openai"


def text_of(content: Any) -> str:
    """Message text: a string, or (Mistral) a list of parts of which only ``text`` ones count; null is none.

    Anything else (``"content": 42``) is an answer toolrun cannot read, as text that is not a string is in
    every format: a TypeError, which reading the answer turns into ``UnreadableAnswer`` — never text left out.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content if isinstance(part, dict) and part.get("type") == "text")
    if content is None:
        return ""
    raise TypeError(f"message content that is neither text nor a list of parts: "
                    f"{json.dumps(content, ensure_ascii=False, default=str)[:80]}")


def parse_usage(usage: Any) -> Usage:
    """Tokens of one request (zeros when the server sent none)."""
    return token_usage(usage, "prompt_tokens", "completion_tokens")


# ---------------------------------------------------------------- request


def _assistant_message(message: Message) -> dict[str, Any]:
    calls = message.tool_calls
    # null content is how OpenAI itself sends a calls-only message; a text-less answer needs "".
    wire: dict[str, Any] = {"role": "assistant", "content": message.text or (None if calls else "")}
    reasoning = message.provider_data.get(PROVIDER, {}).get("reasoning_content")
    if calls and reasoning:
        wire["reasoning_content"] = reasoning
    if calls:
        wire["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.raw_arguments or "{}"}}
            for call in calls
        ]
    return wire


def chat_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The neutral conversation as Chat Completions ``messages`` (system first)."""
    wire: list[dict[str, Any]] = []
    if request.system:
        wire.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "assistant":
            wire.append(_assistant_message(message))
            continue
        # One role:tool message per result, in call order, tied by the runner's call id.
        for result in message.tool_results:
            # A tool message takes text parts only: images, audio and resources are named in a note.
            wire.append({"role": "tool", "tool_call_id": result.call_id,
                         "content": text_with_notes(result.content, result.blocks)})
        if message.text is not None:
            wire.append({"role": "user", "content": message.text})
    return wire


def build_request_body(
    request: ModelRequest, *, stream: bool, max_tokens_field: str = "max_completion_tokens"
) -> dict[str, Any]:
    """The JSON body of ``POST /chat/completions``.

    ``max_tokens_field``: OpenAI deprecated ``max_tokens`` (o-series refuse it); most
    compatible servers only know ``max_tokens`` — the provider picks by base URL.
    """
    settings = request.settings
    mode = output_mode(request, "native")
    if mode == "json" or (mode == "native" and settings.output and settings.output.schema is None):
        assert settings.output is not None  # JSON mode refuses a conversation that never says "JSON"
        request = dataclasses.replace(request, system=system_with_json_instruction(request.system, settings.output))
    body: dict[str, Any] = {"model": request.model, "messages": chat_messages(request)}
    if settings.output is not None:
        body["response_format"] = response_format(settings.output, mode)
    if request.tools:
        body["tools"] = [function_tool(definition).definition for definition in request.tools]
        if settings.tool_choice != "auto":  # "auto" is the default; old servers choke on the key
            body["tool_choice"] = tool_choice_value(settings.tool_choice)
        if not settings.parallel_tool_calls:
            body["parallel_tool_calls"] = False
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        body[max_tokens_field] = settings.max_tokens
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    body.update(settings.extra)
    return body


def response_format(output: StructuredOutput, mode: OutputMode | None) -> dict[str, Any]:
    """``response_format`` for a structured answer: a strict ``json_schema``, or JSON mode (``json_object``)."""
    if mode == "json" or output.schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": json_schema_format(output)}


# ---------------------------------------------------------------- response


def raise_for_error(body: Any, *, mid_stream: bool = False) -> None:
    """Raise ``ProviderError`` for a body (or a stream chunk) that carries an ``error``."""
    if not (isinstance(body, dict) and body.get("error")):
        return
    error = body["error"]
    message = str(error.get("message") or error) if isinstance(error, dict) else str(error)
    where = "reported an error mid-stream" if mid_stream else "answered with an error"
    raise ProviderError(redact(f"the provider {where}: {message}"))


def parse_response(body: dict[str, Any]) -> ModelResponse:
    """A whole ``chat.completion`` body -> the neutral answer."""
    raise_for_error(body)
    choices = body.get("choices") or []
    if not choices:
        raise ProviderError("the provider's answer has no choices")
    choice = choices[0]
    wire_message = choice.get("message") or {}
    parts: list[TextPart | ToolCall] = []
    if text := text_of(wire_message.get("content")):
        parts.append(TextPart(text))
    for wire_call in wire_message.get("tool_calls") or []:
        function = wire_call.get("function") or {}
        arguments, raw = parse_arguments(function.get("arguments"))
        provider_id = wire_call.get("id")
        parts.append(ToolCall(provider_id or "", function.get("name") or "", arguments, raw, provider_id))
    raw_reason = choice.get("finish_reason")
    reason = raw_reason
    refusal = wire_message.get("refusal")
    if isinstance(refusal, str) and refusal and not parts:  # structured output: the model declined
        parts.append(TextPart(refusal))
        reason = "content_filter"
    has_calls = any(isinstance(part, ToolCall) for part in parts)
    message = Message("assistant", list(parts), _provider_data(wire_message.get("reasoning_content"), has_calls))
    return ModelResponse(
        message=message,
        stop_reason=normalise_stop_reason(reason, bool(message.tool_calls)),
        usage=parse_usage(body.get("usage")),
        raw_stop_reason=raw_reason,
        model=body.get("model"),
    )


def _provider_data(reasoning: str | None, has_calls: bool) -> dict[str, Any]:
    # Only a tool-call turn's reasoning must travel back (DeepSeek thinking mode).
    return {PROVIDER: {"reasoning_content": reasoning}} if reasoning and has_calls else {}


@dataclass
class _PartialCall:
    """A tool call still arriving in pieces: its id, name and argument fragments so far."""

    provider_id: str | None
    name: str = ""
    arguments: Any = ""  # text fragments joined; an object when the server sent one whole


@dataclass
class ChatStreamAssembler:
    """Builds one answer from ``chat.completion.chunk`` objects, in arrival order.

    A ``StreamAssembler``: ``feed`` returns the text deltas to show; ``finish`` gives the
    assembled ``ModelResponse`` once the stream has ended.
    """

    text: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[_PartialCall] = field(default_factory=list)
    by_index: dict[int, int] = field(default_factory=dict)  # wire index -> position in calls
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str | None = None

    def feed(self, event: dict[str, Any], name: str | None = None) -> list[StreamEvent]:
        """Take one ``chat.completion.chunk`` (the SSE event name plays no part)."""
        chunk = event
        raise_for_error(chunk, mid_stream=True)
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = parse_usage(chunk["usage"])
        events: list[StreamEvent] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue  # only the first choice is used (we never ask for n > 1)
            delta = choice.get("delta") or {}
            if text := text_of(delta.get("content")):
                self.text.append(text)
                events.append(TextDelta(text))
            if isinstance(delta.get("refusal"), str):
                self.refusal.append(delta["refusal"])
            if isinstance(delta.get("reasoning_content"), str):
                self.reasoning.append(delta["reasoning_content"])
            for fragment in delta.get("tool_calls") or []:
                self._add_fragment(fragment)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return events

    def _add_fragment(self, fragment: dict[str, Any]) -> None:
        function = fragment.get("function") or {}
        provider_id = fragment.get("id") or None
        call = self.calls[self._position_of(fragment.get("index"), provider_id, bool(function.get("name")))]
        if provider_id and call.provider_id is None:
            call.provider_id = provider_id
        if function.get("name") and not call.name:
            call.name = function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            call.arguments = arguments  # the object quirk: a whole value, not a fragment
        elif isinstance(arguments, str) and not isinstance(call.arguments, dict):
            call.arguments += arguments

    def _position_of(self, index: Any, provider_id: str | None, named: bool) -> int:
        """Which call a fragment continues (by its index, else the last one), or a new call's position."""
        position = self.by_index.get(index) if index is not None else None
        if position is not None and provider_id and self.calls[position].provider_id not in (None, provider_id):
            position = None  # index stuck at 0 but a new id: a new call (lmdeploy, SGLang)
        if position is None and index is None and self.calls and not provider_id and not named:
            position = len(self.calls) - 1  # no index at all: a continuation of the last call
        if position is None:
            self.calls.append(_PartialCall(provider_id))
            position = len(self.calls) - 1
            if index is not None:
                self.by_index[index] = position
        return position

    def finish(self) -> ModelResponse:
        """The assembled answer; ``ProviderError`` when the stream stopped before a finish_reason."""
        if self.finish_reason is None:  # a cut stream would otherwise pass for a whole answer
            raise ProviderError("the stream ended before its finish_reason: the answer is incomplete", retryable=True)
        parts: list[TextPart | ToolCall] = []
        finish_reason = self.finish_reason
        if self.text:
            parts.append(TextPart("".join(self.text)))
        elif self.refusal:  # structured output: the model declined
            parts.append(TextPart("".join(self.refusal)))
            finish_reason = "content_filter"
        for call in self.calls:
            arguments, raw = parse_arguments(call.arguments)
            parts.append(ToolCall(call.provider_id or "", call.name, arguments, raw, call.provider_id))
        message = Message("assistant", list(parts), _provider_data("".join(self.reasoning), bool(self.calls)))
        return ModelResponse(
            message=message,
            stop_reason=normalise_stop_reason(finish_reason, bool(message.tool_calls)),
            usage=self.usage or Usage(0, 0, 1),
            raw_stop_reason=self.finish_reason,
            model=self.model,
        )


# ---------------------------------------------------------------- transport


class OpenAIChatProvider(Provider):
    """``openai:MODEL`` — POST {OPENAI_BASE_URL}/chat/completions with a Bearer key."""

    name = "openai"
    max_tools = 128  # "A max of 128 functions are supported" (the API reference)
    default_base_url = OFFICIAL_BASE_URL
    base_url_env = ("OPENAI_BASE_URL",)
    api_key_env = ("OPENAI_API_KEY",)
    credential_headers = CREDENTIAL_HEADERS
    conversation_key = "messages"
    output_modes: ClassVar[tuple[OutputMode, ...]] = ("native", "json")
    context_windows = CONTEXT_WINDOWS
    path = "/chat/completions"

    @classmethod
    def tool_definition(cls, definition: ToolDefinition, *, strict: bool = False) -> WireTool:
        return function_tool(definition, strict=strict)

    @classmethod
    def tool_names(cls, entry: Any) -> list[str] | None:
        return function_tool_names(entry)

    @classmethod
    def conversation_item(cls, item: dict[str, Any]) -> WireItem | None:
        return chat_conversation_item(item)

    def headers(self) -> dict[str, str]:
        return bearer_headers(self.config)

    def max_tokens_field(self) -> str:
        # OpenAI itself wants the new name; compatible servers mostly know only the old one.
        return "max_completion_tokens" if self.config.base_url.startswith(OFFICIAL_BASE_URL) else "max_tokens"

    def build_request(self, request: ModelRequest, *, stream: bool) -> WireRequest:
        body = build_request_body(request, stream=stream, max_tokens_field=self.max_tokens_field())
        return WireRequest("POST", self.config.base_url + self.path, self.headers(), body, stream=stream)

    def parse_answer(self, body: dict[str, Any]) -> ModelResponse:
        return parse_response(body)

    def stream_assembler(self) -> StreamAssembler:
        return ChatStreamAssembler()

    def answer_instead_of_stream(self, text: str) -> dict[str, Any] | None:
        """A server that ignored "stream" and sent one plain JSON body: that body, when it holds choices."""
        try:
            body = loads_bounded(text, MAX_BODY_DEPTH)
        except ValueError:
            return None
        return body if isinstance(body, dict) and "choices" in body else None
