"""Ollama's native API — POST {OLLAMA_HOST}/api/chat, streamed as NDJSON (one JSON object a line).

Tools and tool choice have the OpenAI shape (the helpers come from ``openai_family``); the
differences: call arguments are JSON *objects* both ways, calls arrive whole (several may
come in one line), a result names its tool (``tool_name``), sampling settings live under
``options``, and the server needs no key. Ollama has no ``tool_choice``: "none" is honoured
by not offering the tools; the others are left to the model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from toolrun.core.content import text_with_notes
from toolrun.core.errors import ProviderError
from toolrun.core.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    OutputMode,
    StreamEvent,
    TextDelta,
    TextPart,
    ToolCall,
    ToolDefinition,
    Usage,
)
from toolrun.core.secrets import redact
from toolrun.providers.base import Provider, ProviderConfig, ProviderOverrides, StreamAssembler, WireItem, WireTool
from toolrun.providers.openai_family import (
    bearer_headers,
    chat_conversation_item,
    function_tool,
    function_tool_names,
    normalise_stop_reason,
    parse_arguments,
    token_usage,
)
from toolrun.providers.streaming import ndjson_json
from toolrun.providers.structured import output_mode, system_with_json_instruction
from toolrun.providers.transport import WireRequest

DEFAULT_HOST = "http://127.0.0.1:11434"


# ---------------------------------------------------------------- request


def _wire_call(call: ToolCall) -> dict[str, Any]:
    # A call whose arguments did not parse (from another provider) still needs an object here.
    wire: dict[str, Any] = {"function": {"name": call.name, "arguments": call.arguments if call.arguments is not None else {}}}
    if call.provider_id:  # only echo an id Ollama itself sent
        wire["id"] = call.id
    return wire


def ollama_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The neutral conversation as /api/chat ``messages`` (system first)."""
    wire: list[dict[str, Any]] = []
    if request.system:
        wire.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "assistant":
            assistant: dict[str, Any] = {"role": "assistant", "content": message.text or ""}
            if message.tool_calls:
                assistant["tool_calls"] = [_wire_call(call) for call in message.tool_calls]
            wire.append(assistant)
            continue
        for result in message.tool_results:
            tool_message = {"role": "tool", "tool_name": result.name, "content": text_with_notes(result.content, result.blocks)}
            if result.provider_id:  # Ollama sent an id for this call: tie the result to it
                tool_message["tool_call_id"] = result.call_id
            wire.append(tool_message)
        if message.text is not None:
            wire.append({"role": "user", "content": message.text})
    return wire


def build_request_body(request: ModelRequest, *, stream: bool) -> dict[str, Any]:
    """The JSON body of ``POST /api/chat``; ``stream`` is always explicit (Ollama streams by default)."""
    settings = request.settings
    output = settings.output
    json_mode = output is not None and (output_mode(request, "native") == "json" or output.schema is None)
    if json_mode:
        assert output is not None  # "json" alone lets a model answer any JSON: the prompt says which
        request = dataclasses.replace(request, system=system_with_json_instruction(request.system, output))
    body: dict[str, Any] = {"model": request.model, "messages": ollama_messages(request), "stream": stream}
    if output is not None:
        body["format"] = "json" if json_mode else output.schema
    if request.tools and settings.tool_choice != "none":
        body["tools"] = [function_tool(definition).definition for definition in request.tools]
    options: dict[str, Any] = {}
    if settings.temperature is not None:
        options["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        options["num_predict"] = settings.max_tokens
    extra = dict(settings.extra)
    options.update(extra.pop("options", None) or {})
    if options:
        body["options"] = options
    body.update(extra)
    return body


# ---------------------------------------------------------------- response


def _calls_of(wire_message: Mapping[str, Any]) -> list[ToolCall]:
    calls = []
    for wire_call in wire_message.get("tool_calls") or []:
        function = wire_call.get("function") or {}
        arguments, raw = parse_arguments(function.get("arguments"))
        provider_id = wire_call.get("id")
        calls.append(ToolCall(provider_id or "", function.get("name") or "", arguments, raw, provider_id))
    return calls


def raise_for_error(body: Any) -> None:
    """Raise ``ProviderError`` for a body (or a stream line) that carries an ``error``."""
    if isinstance(body, dict) and body.get("error"):
        raise ProviderError(redact(f"Ollama answered with an error: {body['error']}"))


def parse_usage(body: Mapping[str, Any]) -> Usage:
    """Tokens of one request: Ollama counts them in the final body itself."""
    return token_usage(body, "prompt_eval_count", "eval_count")


def parse_response(body: dict[str, Any]) -> ModelResponse:
    """A whole (``stream: false``) /api/chat body -> the neutral answer."""
    raise_for_error(body)
    wire_message = body.get("message") or {}
    parts: list[TextPart | ToolCall] = []
    if wire_message.get("content"):
        parts.append(TextPart(wire_message["content"]))
    parts.extend(_calls_of(wire_message))
    message = Message("assistant", list(parts))
    raw = body.get("done_reason")
    return ModelResponse(message, normalise_stop_reason(raw, bool(message.tool_calls)), parse_usage(body), raw, body.get("model"))


@dataclass
class OllamaStreamAssembler:
    """Builds one answer from NDJSON chunks: text pieces, whole calls, counts in the last (``done``)."""

    text: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    last: dict[str, Any] | None = None

    def feed(self, event: dict[str, Any], name: str | None = None) -> list[StreamEvent]:
        """Take one NDJSON line's object (NDJSON has no event names)."""
        chunk = event
        raise_for_error(chunk)
        wire_message = chunk.get("message") or {}
        events: list[StreamEvent] = []
        if wire_message.get("content"):
            self.text.append(wire_message["content"])
            events.append(TextDelta(wire_message["content"]))
        self.calls.extend(_calls_of(wire_message))
        if chunk.get("done"):
            self.last = chunk
        return events

    def finish(self) -> ModelResponse:
        """The assembled answer; ``ProviderError`` when the stream stopped before its ``done`` line."""
        if self.last is None:
            raise ProviderError("Ollama's stream ended before its final (done) line: the answer is incomplete")
        parts: list[TextPart | ToolCall] = [TextPart("".join(self.text))] if self.text else []
        parts.extend(self.calls)
        message = Message("assistant", list(parts))
        raw = self.last.get("done_reason")
        return ModelResponse(message, normalise_stop_reason(raw, bool(self.calls)), parse_usage(self.last), raw,
                             self.last.get("model"))


# ---------------------------------------------------------------- transport


def normalise_host(host: str) -> str:
    """``OLLAMA_HOST`` as Ollama itself reads it: "0.0.0.0:11434" -> "http://0.0.0.0:11434"."""
    host = host.strip().rstrip("/")
    return host if "://" in host else f"http://{host}"


class OllamaProvider(Provider):
    """``ollama:MODEL`` — the native API of a local Ollama; no key needed."""

    name = "ollama"
    default_base_url = DEFAULT_HOST
    base_url_env = ("OLLAMA_HOST",)
    api_key_env = ("OLLAMA_API_KEY",)  # only for a gateway in front of Ollama
    requires_api_key = False
    credential_headers = frozenset({"authorization"})  # a gateway's Bearer key
    conversation_key = "messages"
    output_modes: ClassVar[tuple[OutputMode, ...]] = ("native", "json")
    # No window table: the server's num_ctx decides, and it cuts a longer prompt silently —
    # a recipe for Ollama states settings.context.max_input_tokens.

    @classmethod
    def tool_definition(cls, definition: ToolDefinition, *, strict: bool = False) -> WireTool:
        return function_tool(definition)  # Ollama has no strict mode

    @classmethod
    def tool_names(cls, entry: Any) -> list[str] | None:
        return function_tool_names(entry)

    @classmethod
    def conversation_item(cls, item: dict[str, Any]) -> WireItem | None:
        found = chat_conversation_item(item)
        if found is not None and found.kind == "tool_result" and item.get("tool_name"):
            return dataclasses.replace(found, name=item["tool_name"])  # a result names its tool here
        return found

    @classmethod
    def resolve_config(
        cls, overrides: ProviderOverrides | None = None, environ: Mapping[str, str] | None = None
    ) -> ProviderConfig:
        config = super().resolve_config(overrides, environ)
        config.base_url = normalise_host(config.base_url)
        return config

    def headers(self) -> dict[str, str]:
        return bearer_headers(self.config)

    def build_request(self, request: ModelRequest, *, stream: bool) -> WireRequest:
        return WireRequest("POST", normalise_host(self.config.base_url) + "/api/chat", self.headers(),
                           build_request_body(request, stream=stream), stream=stream)

    def parse_answer(self, body: dict[str, Any]) -> ModelResponse:
        return parse_response(body)

    def stream_assembler(self) -> StreamAssembler:
        return OllamaStreamAssembler()

    async def stream_events(self, lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, dict[str, Any]]]:
        async for chunk in ndjson_json(lines, "Ollama"):  # NDJSON: one object a line, no event names
            yield None, chunk
