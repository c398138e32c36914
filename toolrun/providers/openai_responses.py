"""OpenAI Responses API — POST {OPENAI_BASE_URL}/responses.

Stateless on purpose: ``store: false`` and the whole history re-sent as input items each
turn. Calls are ``function_call`` output items answered by ``function_call_output`` items
with the same ``call_id`` (toolrun's ``ToolCall.id``); the ``fc_…`` item id is kept in
``provider_data`` but only echoed next to the reasoning item it belongs to — OpenAI rejects a
``function_call`` with an id whose ``reasoning`` item is missing, and without ``store`` it
only accepts reasoning items that carry ``encrypted_content`` (ask for it with
``settings.extra: {include: [reasoning.encrypted_content]}``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, ClassVar

from toolrun.core.content import shown_as_image, text_with_notes
from toolrun.core.errors import ProviderError
from toolrun.core.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    OpaquePart,
    OutputMode,
    Part,
    StopReason,
    StreamEvent,
    StructuredOutput,
    TextDelta,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResult,
    Usage,
)
from toolrun.core.secrets import redact
from toolrun.providers.base import Provider, StreamAssembler, WireItem, WireTool
from toolrun.providers.openai_family import (
    CONTEXT_WINDOWS,
    CREDENTIAL_HEADERS,
    OFFICIAL_BASE_URL,
    bearer_headers,
    json_schema_format,
    parse_arguments,
    strict_parameters,
    token_usage,
    tool_choice_value,
)
from toolrun.providers.structured import output_mode, system_with_json_instruction
from toolrun.providers.transport import WireRequest

PROVIDER = "openai-responses"
INCOMPLETE_REASONS: dict[str, StopReason] = {"max_output_tokens": "length", "content_filter": "content_filter"}


# ---------------------------------------------------------------- request


def tool_definition(definition: ToolDefinition, *, strict: bool = False) -> WireTool:
    """A tool as a Responses ``tools`` entry: the flat ``{type, name, description, parameters, strict}``."""
    changes: list[str] = []
    if strict:
        schema, is_strict = strict_parameters(definition.parameters, changes)
    else:
        schema, is_strict = copy.deepcopy(definition.parameters), False
    # Responses treats a missing `strict` as true, so it is always written out.
    return WireTool({"type": "function", "name": definition.name, "description": definition.description,
                     "parameters": schema, "strict": is_strict}, changes)


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    echoes_reasoning = any(
        isinstance(part, OpaquePart) and part.provider == PROVIDER and part.data.get("encrypted_content")
        for part in message.parts
    )
    items: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.text:
            items.append({"role": "assistant", "content": part.text})
        elif isinstance(part, OpaquePart) and part.provider == PROVIDER and part.data.get("encrypted_content"):
            items.append(part.data)  # a reasoning item, unchanged
        elif isinstance(part, ToolCall):
            item = {"type": "function_call", "call_id": part.id, "name": part.name, "arguments": part.raw_arguments or "{}"}
            item_id = part.provider_data.get(PROVIDER, {}).get("item_id")
            if echoes_reasoning and item_id:
                item["id"] = item_id
            items.append(item)
    return items


IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})  # input_image's formats


def _output(result: ToolResult) -> str | list[dict[str, Any]]:
    """A result's ``output``: its text, or ``input_text`` and ``input_image`` parts when it has images (the
    output may be a list of text, image and file parts); audio and resources are named in a note."""
    images = [block for block in result.blocks if shown_as_image(block, IMAGE_TYPES)]
    if not images:
        return text_with_notes(result.content, result.blocks)
    text = text_with_notes(result.content, [block for block in result.blocks if block not in images])
    parts: list[dict[str, Any]] = [{"type": "input_text", "text": text}] if text else []
    return parts + [{"type": "input_image", "image_url": f"data:{block.mime_type};base64,{block.base64_data}"}
                     for block in images]


def input_items(messages: list[Message]) -> list[dict[str, Any]]:
    """The neutral conversation as Responses ``input`` items, in order."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "assistant":
            items.extend(_assistant_items(message))
            continue
        for result in message.tool_results:
            items.append({"type": "function_call_output", "call_id": result.call_id, "output": _output(result)})
        if message.text is not None:
            items.append({"role": "user", "content": message.text})
    return items


def build_request_body(request: ModelRequest, *, stream: bool) -> dict[str, Any]:
    """The JSON body of ``POST /responses`` (system prompt as ``instructions``)."""
    settings = request.settings
    body: dict[str, Any] = {"model": request.model, "input": input_items(request.messages), "store": False}
    instructions = request.system
    if settings.output is not None:
        mode = output_mode(request, "native")
        body["text"] = {"format": text_format(settings.output, mode)}
        if body["text"]["format"]["type"] == "json_object":  # JSON mode refuses a conversation that never says "JSON"
            instructions = system_with_json_instruction(instructions, settings.output)
    if instructions:
        body["instructions"] = instructions
    if request.tools:
        body["tools"] = [tool_definition(definition).definition for definition in request.tools]
        if settings.tool_choice != "auto":
            body["tool_choice"] = tool_choice_value(settings.tool_choice, flat=True)
        if not settings.parallel_tool_calls:
            body["parallel_tool_calls"] = False
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        body["max_output_tokens"] = settings.max_tokens
    if stream:
        body["stream"] = True
    body.update(settings.extra)
    return body


def text_format(output: StructuredOutput, mode: OutputMode | None) -> dict[str, Any]:
    """``text.format`` for a structured answer: a strict ``json_schema`` (flat), or JSON mode."""
    if mode == "json" or output.schema is None:
        return {"type": "json_object"}
    return {"type": "json_schema", **json_schema_format(output)}


# ---------------------------------------------------------------- response


def _parts_of(output: list[dict[str, Any]]) -> tuple[list[Part], bool]:
    """Output items -> message parts, and whether the model refused."""
    parts: list[Part] = []
    refused = False
    for item in output:
        kind = item.get("type")
        if kind == "message":
            for content in item.get("content") or []:
                if content.get("type") == "output_text" and content.get("text"):
                    parts.append(TextPart(content["text"]))
                elif content.get("type") == "refusal":
                    refused = True
                    parts.append(TextPart(content.get("refusal") or ""))
        elif kind == "function_call":
            arguments, raw = parse_arguments(item.get("arguments"))
            call_id = item.get("call_id")
            parts.append(ToolCall(call_id or "", item.get("name") or "", arguments, raw, call_id,
                                  {PROVIDER: {"item_id": item.get("id")}}))
        elif kind == "reasoning":
            parts.append(OpaquePart(PROVIDER, item))
    return parts, refused


def _stop_reason(response: dict[str, Any], has_calls: bool, refused: bool) -> tuple[StopReason, str | None]:
    status = response.get("status")
    if status == "failed":
        error = response.get("error") or {}
        raise ProviderError(redact(f"the response failed: {error.get('message') or error or 'no reason given'}"))
    if status == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return INCOMPLETE_REASONS.get(reason or "", "length"), reason
    if has_calls:
        return "tool_calls", status
    return ("content_filter" if refused else "stop"), status


def parse_usage(usage: Any) -> Usage:
    """Tokens of one request (zeros when the server sent none)."""
    return token_usage(usage, "input_tokens", "output_tokens")


def raise_for_error(body: dict[str, Any]) -> None:
    """Raise ``ProviderError`` for an ``error`` body; a failed response says why in ``_stop_reason``."""
    if body.get("error") and body.get("status") != "failed":
        error = body["error"]
        raise ProviderError(redact(f"the provider answered with an error: {error.get('message') if isinstance(error, dict) else error}"))


def parse_response(body: dict[str, Any]) -> ModelResponse:
    """A whole ``response`` object -> the neutral answer."""
    raise_for_error(body)
    parts, refused = _parts_of(body.get("output") or [])
    message = Message("assistant", parts)
    stop_reason, raw = _stop_reason(body, bool(message.tool_calls), refused)
    return ModelResponse(message, stop_reason, parse_usage(body.get("usage")), raw_stop_reason=raw, model=body.get("model"))


@dataclass
class ResponsesStreamAssembler:
    """Builds one answer from Responses stream events; deltas are matched by ``item_id``."""

    items: dict[int, dict[str, Any]] = field(default_factory=dict)  # output_index -> item so far
    texts: dict[str, list[str]] = field(default_factory=dict)  # message item id -> text deltas
    index_of: dict[str, int] = field(default_factory=dict)  # item id -> output_index
    final: dict[str, Any] | None = None

    def feed(self, event: dict[str, Any], name: str | None = None) -> list[StreamEvent]:
        """Take one event; its ``type`` says what it is, else its SSE event ``name``."""
        data = event
        kind = data.get("type") or name
        if kind == "error":
            raise ProviderError(redact(f"the provider reported an error mid-stream: {data.get('message') or data}"))
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self.final = data.get("response") or {}
            if kind == "response.failed":
                _stop_reason(self.final, False, False)  # raises with the provider's message
            return []
        if kind == "response.output_item.added":
            self._added(data.get("output_index", len(self.items)), dict(data.get("item") or {}))
            return []
        if kind == "response.output_item.done" and data.get("item"):
            item = data["item"]
            index = self.index_of.get(item.get("id") or "", data.get("output_index", len(self.items)))
            self.items[index] = item
            return []
        item = self._item(data)
        if item is None:
            return []
        if kind == "response.output_text.delta":
            self.texts.setdefault(item["id"], []).append(data.get("delta") or "")
            return [TextDelta(data["delta"])] if data.get("delta") else []
        if kind == "response.function_call_arguments.delta":
            item["arguments"] = (item.get("arguments") or "") + (data.get("delta") or "")
        elif kind == "response.function_call_arguments.done":
            item["arguments"] = data.get("arguments", item.get("arguments"))
        return []

    def _added(self, output_index: int, item: dict[str, Any]) -> None:
        self.items[output_index] = item
        if item.get("id"):
            self.index_of[item["id"]] = output_index

    def _item(self, data: dict[str, Any]) -> dict[str, Any] | None:
        index = self.index_of.get(data.get("item_id") or "", data.get("output_index"))
        return self.items.get(index) if index is not None else None

    def _assembled_output(self) -> list[dict[str, Any]]:
        output = []
        for _, item in sorted(self.items.items()):
            if item.get("type") == "message" and not item.get("content") and item.get("id") in self.texts:
                item = {**item, "content": [{"type": "output_text", "text": "".join(self.texts[item["id"]])}]}
            output.append(item)
        return output

    def finish(self) -> ModelResponse:
        """The assembled answer; ``ProviderError`` when the stream stopped before its end event."""
        if self.final is None:
            raise ProviderError("the stream ended before response.completed: the answer is incomplete")
        output = self._assembled_output() or self.final.get("output") or []
        return parse_response({**self.final, "output": output})


# ---------------------------------------------------------------- transport


class OpenAIResponsesProvider(Provider):
    """``openai-responses:MODEL`` — same endpoint variables and key as ``openai``."""

    name: ClassVar[str] = PROVIDER
    max_tools = 128  # "A max of 128 functions are supported" (the API reference)
    default_base_url: ClassVar[str] = OFFICIAL_BASE_URL
    base_url_env: ClassVar[tuple[str, ...]] = ("OPENAI_BASE_URL",)
    api_key_env: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY",)
    credential_headers: ClassVar[frozenset[str]] = CREDENTIAL_HEADERS
    conversation_key: ClassVar[str | None] = "input"
    output_modes: ClassVar[tuple[OutputMode, ...]] = ("native", "json")
    context_windows: ClassVar[dict[str, int]] = CONTEXT_WINDOWS

    @classmethod
    def tool_definition(cls, definition: ToolDefinition, *, strict: bool = False) -> WireTool:
        return tool_definition(definition, strict=strict)

    @classmethod
    def tool_names(cls, entry: Any) -> list[str] | None:
        return [str(entry["name"])] if isinstance(entry, dict) and "name" in entry else None

    @classmethod
    def conversation_item(cls, item: dict[str, Any]) -> WireItem | None:
        if item.get("type") == "function_call_output":
            return WireItem("tool_result", item.get("call_id"), content=item.get("output"))
        if item.get("type") == "function_call":
            return WireItem("tool_call", item.get("call_id"), item.get("name"))
        return None

    def build_request(self, request: ModelRequest, *, stream: bool) -> WireRequest:
        return WireRequest("POST", self.config.base_url + "/responses", bearer_headers(self.config),
                           build_request_body(request, stream=stream), stream=stream)

    def parse_answer(self, body: dict[str, Any]) -> ModelResponse:
        return parse_response(body)

    def stream_assembler(self) -> StreamAssembler:
        return ResponsesStreamAssembler()
