"""Gemini generateContent (POST {base}/v1beta/models/{model}:generateContent): mapping.

Pure functions (``build_request_body``, ``parse_response``) and a stream assembler
(``GeminiStreamAssembler``) do all the translation; ``GeminiProvider`` only adds the
endpoint, the key header and the transport.

Wire rules handled here:
- roles are ``user`` / ``model``; the system prompt is ``systemInstruction``;
- calls often come without an id: parsed as ``ToolCall(id="", provider_id=None)`` (the
  runner makes ids unique) and answered by name, with ``id`` only when Gemini sent one;
- a call without a name is ``unreadable``: never echoed (its signature moves to the next call sent
  back, or an empty text part), its error result goes back as text;
- a call's ``thoughtSignature`` is kept in ``ToolCall.provider_data["gemini"]`` and put
  back on the same part unchanged (Gemini 3 rejects a follow-up without it);
- all results of a turn go into ONE user turn, in the order of the calls;
- ``finishReason`` is STOP even when the model called tools; MALFORMED_FUNCTION_CALL adds an
  ``unreadable`` call (the model is told and may send it again), other failed answers are errors;
- streamed calls usually arrive whole; with streamed arguments (``willContinue`` /
  ``partialArgs``) they are put back together here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, ClassVar
from urllib.parse import quote

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
    TextDelta,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolResult,
    Usage,
)
from toolrun.core.schema_dialects import to_gemini
from toolrun.core.secrets import redact
from toolrun.core.text import excerpt
from toolrun.providers.alternation import alternating_turns
from toolrun.providers.answer_numbers import token_count
from toolrun.providers.base import Provider, StreamAssembler, WireItem, WireTool
from toolrun.providers.structured import output_mode, system_with_json_instruction
from toolrun.providers.transport import WireRequest

PROVIDER = "gemini"
CONTEXT_WINDOWS = {"gemini-1.5-pro": 2_097_152, "gemini-1.5-flash": 1_048_576, "gemini-2": 1_048_576}
SIGNATURE = "thoughtSignature"
TEXT_SIGNATURES = "text_signatures"  # Message.provider_data["gemini"][...]: part index -> signature

FILTERED = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
                      "IMAGE_SAFETY", "LANGUAGE"})
# The model made a call it was not allowed to make, or too many: nothing usable came back and nothing
# was cut off, so "error", not "length".
FAILED = frozenset({"UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS", "OTHER"})
# The model made a call Gemini could not parse: no part holds it (finishMessage may quote it). It is a call
# that could not be read, which the model is told about and may send again, as it may a call with bad JSON.
MALFORMED_CALL = "MALFORMED_FUNCTION_CALL"
RETRYABLE_STATUSES = frozenset({"RESOURCE_EXHAUSTED", "UNAVAILABLE", "INTERNAL", "DEADLINE_EXCEEDED"})


# ---------------------------------------------------------------------------- request


def tool_definition(definition: ToolDefinition) -> WireTool:
    """A tool as one function declaration: its schema converted to Gemini's ``parameters`` subset.

    The subset is the one every Gemini model accepts (``parametersJsonSchema`` is newer);
    the changes say what the conversion dropped or rewrote, and ``toolrun tools show
    --format gemini`` and lint report them, so what the user inspects is what is sent.
    """
    converted = to_gemini(definition.parameters)
    declaration: dict[str, Any] = {"name": definition.name, "description": definition.description}
    if converted.schema is not None:
        declaration["parameters"] = converted.schema
    return WireTool(declaration, [f"gemini: {change}" for change in converted.changes])


def tools_value(declarations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``tools`` value of a request: one tool holding every function declaration."""
    return [{"functionDeclarations": declarations}]


def tool_config(choice: str) -> dict[str, Any]:
    """``toolConfig`` for a neutral choice. Gemini has no switch for parallel calls."""
    if choice == "auto":
        config: dict[str, Any] = {"mode": "AUTO"}
    elif choice == "required":
        config = {"mode": "ANY"}
    elif choice == "none":
        config = {"mode": "NONE"}
    else:
        config = {"mode": "ANY", "allowedFunctionNames": [choice]}
    return {"functionCallingConfig": config}


def _signed(part: dict[str, Any], signature: str | None) -> dict[str, Any]:
    return {**part, SIGNATURE: signature} if signature else part


def _model_parts(message: Message) -> list[dict[str, Any]]:
    text_signatures = (message.provider_data.get(PROVIDER) or {}).get(TEXT_SIGNATURES) or {}
    parts: list[dict[str, Any]] = []
    carried: str | None = None  # the signature of an unreadable call left out, for the next call sent back
    for index, part in enumerate(message.parts):
        if isinstance(part, TextPart):
            signature = text_signatures.get(str(index))
            if part.text or signature:
                parts.append(_signed({"text": part.text}, signature))
        elif isinstance(part, ToolCall):
            signature = (part.provider_data.get(PROVIDER) or {}).get(SIGNATURE)
            if part.unreadable is not None:  # no wire form; its signature (the first call's, of parallel ones) stays
                carried = carried or signature
                continue
            call: dict[str, Any] = {"name": part.name,
                                    "args": part.arguments if isinstance(part.arguments, dict) else {}}
            if part.provider_id:  # echo an id only when Gemini sent one
                call["id"] = part.provider_id
            parts.append(_signed({"functionCall": call}, signature or carried))
            carried = None
        elif isinstance(part, OpaquePart) and part.provider == PROVIDER:
            parts.append(part.data)  # thought parts and anything else, exactly as received
    if carried:  # no call after it: echoed as Gemini sends a signature of its own, on an empty text part
        parts.append({"text": "", SIGNATURE: carried})
    return parts


IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/webp"})  # a function response part's image types


def _function_response(result: ToolResult, call: ToolCall | None) -> dict[str, Any]:
    provider_id = result.provider_id or (call.provider_id if call else None)
    response: dict[str, Any] = {"name": (call.name if call else None) or result.name}
    if provider_id:
        response["id"] = provider_id
    images = [block for block in result.blocks if shown_as_image(block, IMAGE_TYPES)]
    text = text_with_notes(result.content, [block for block in result.blocks if block not in images])
    response["response"] = {"error": text} if result.is_error else {"output": text}
    if images:  # a multimodal function response: the images as inline data parts of it
        response["parts"] = [{"inlineData": {"mimeType": block.mime_type, "data": block.base64_data}} for block in images]
    return {"functionResponse": response}


def _user_parts(messages: list[Message], calls: dict[str, ToolCall], order: dict[str, int],
                unreadable: set[str]) -> list[dict[str, Any]]:
    """One user turn out of consecutive user/tool messages: results in call order, then text.

    The result of a call in ``unreadable`` (ids) is text: the call was never sent back, and Gemini wants
    as many function responses as the model turn has function calls.
    """
    results: list[ToolResult] = []
    others: list[dict[str, Any]] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolResult) and part.call_id in unreadable:
                others.append({"text": part.content})
            elif isinstance(part, ToolResult):
                results.append(part)
            elif isinstance(part, TextPart) and part.text:
                others.append({"text": part.text})
            elif isinstance(part, OpaquePart) and part.provider == PROVIDER:
                others.append(part.data)
    results.sort(key=lambda result: order.get(result.call_id, len(order)))  # stable for unknown ids
    return [_function_response(result, calls.get(result.call_id)) for result in results] + others


def wire_contents(messages: list[Message]) -> list[dict[str, Any]]:
    """The ``contents`` array: model turns as they came, user-side runs merged into one turn."""
    unreadable = {call.id for message in messages for call in message.tool_calls if call.unreadable is not None}

    def model_turn(message: Message) -> dict[str, Any] | None:
        parts = _model_parts(message)
        return {"role": "model", "parts": parts} if parts else None

    def user_turn(run: list[Message], answered: Message | None) -> dict[str, Any] | None:
        answered_calls = answered.tool_calls if answered is not None else []
        calls = {call.id: call for call in answered_calls}
        order = {call.id: position for position, call in enumerate(answered_calls)}
        parts = _user_parts(run, calls, order, unreadable)
        return {"role": "user", "parts": parts} if parts else None

    return alternating_turns(messages, model_turn, user_turn)


def build_request_body(request: ModelRequest, *, stream: bool) -> dict[str, Any]:
    """The JSON body of generateContent / streamGenerateContent (the same for both)."""
    settings = request.settings
    generation, system = _structured(request)
    body: dict[str, Any] = {"contents": wire_contents(request.messages)}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    if request.tools:
        body["tools"] = tools_value([tool_definition(definition).definition for definition in request.tools])
        body["toolConfig"] = tool_config(settings.tool_choice)
    if settings.temperature is not None:
        generation["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        generation["maxOutputTokens"] = settings.max_tokens
    if generation:
        body["generationConfig"] = generation
    for key, value in settings.extra.items():
        # merged one level deep: extra {"generationConfig": {"thinkingConfig": ...}} keeps temperature
        if isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return body


# Models that take a response schema beside function declarations; older ones refuse the pair.
_SCHEMA_WITH_TOOLS = re.compile(r"gemini-(?:[3-9]|\d{2,})")


def _structured(request: ModelRequest) -> tuple[dict[str, Any], str | None]:
    """The ``generationConfig`` entries of a structured answer, and the system prompt as sent.

    ``responseSchema`` (the same subset as tools) with ``responseMimeType``; a schema the
    subset cannot hold goes as ``responseJsonSchema``. Before Gemini 3 a model with tools
    refuses a response MIME type: then the system prompt asks for the JSON.
    """
    output = request.settings.output
    mode = output_mode(request, "native")
    if output is None:
        return {}, request.system
    if request.tools and not _SCHEMA_WITH_TOOLS.search(request.model):
        return {}, system_with_json_instruction(request.system, output)
    generation: dict[str, Any] = {"responseMimeType": "application/json"}
    if mode == "json" or output.schema is None:
        return generation, system_with_json_instruction(request.system, output)
    converted = to_gemini(output.schema)
    if converted.schema is not None and not any(change.lossy for change in converted.changes):
        generation["responseSchema"] = converted.schema
    else:
        generation["responseJsonSchema"] = output.schema
    return generation, request.system


# --------------------------------------------------------------------------- response


def normalise_stop_reason(raw: str | None, has_calls: bool) -> StopReason:
    """Gemini's ``finishReason`` as a toolrun stop reason (STOP with calls -> tool_calls)."""
    if raw in FILTERED:
        return "content_filter"
    if raw == "MAX_TOKENS":
        return "length"
    if raw in FAILED or (raw == MALFORMED_CALL and not has_calls):
        return "error"
    return "tool_calls" if has_calls else "stop"


def parse_usage(metadata: dict[str, Any] | None) -> Usage:
    """Tokens of one request. Thinking tokens are billed as output, so they count as output."""
    metadata = metadata or {}
    input_tokens = token_count(metadata, "promptTokenCount", "usageMetadata") \
        + token_count(metadata, "toolUsePromptTokenCount", "usageMetadata")
    output_tokens = token_count(metadata, "candidatesTokenCount", "usageMetadata") \
        + token_count(metadata, "thoughtsTokenCount", "usageMetadata")
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, requests=1)


def raise_for_error(body: dict[str, Any], status: int | None = None) -> None:
    """Raise ``ProviderError`` for a Google error object ``{"error": {code, status, message}}``."""
    error = body.get("error")
    if not isinstance(error, dict):
        return
    code = error.get("code")
    status_name = str(error.get("status") or "")
    message = error.get("message") or status_name or "error"
    raise ProviderError(redact(f"Gemini {status_name or code}: {message}"),
                        status=status or (code if isinstance(code, int) else None),
                        retryable=status_name in RETRYABLE_STATUSES or code in (429, 500, 503, 504))


def _tool_call(function_call: dict[str, Any], signature: str | None, arguments: Any = None) -> ToolCall:
    sent = function_call.get("args") if arguments is None else arguments
    # No args is a call without arguments; anything but an object is kept as sent, for an error result.
    args = sent if isinstance(sent, dict) else ({} if sent is None else None)
    provider_id = function_call.get("id") or None
    name = function_call.get("name") or ""
    return ToolCall(id=provider_id or "", name=name, arguments=args,
                    raw_arguments=json.dumps(sent if sent is not None else {}, ensure_ascii=False),
                    provider_id=provider_id,
                    provider_data={PROVIDER: {SIGNATURE: signature}} if signature else {},
                    unreadable=None if name else "it names no function")


class _PartsBuilder:
    """Collects response parts into neutral parts, merging adjacent text as a stream needs."""

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.text_signatures: dict[str, str] = {}

    def add_text(self, text: str, signature: str | None) -> None:
        last = self.parts[-1] if self.parts else None
        if isinstance(last, TextPart) and str(len(self.parts) - 1) not in self.text_signatures:
            last.text += text
        elif text:
            self.parts.append(TextPart(text))
        else:
            if signature:  # an empty part carrying only a signature: echo it, but it is no text
                self.parts.append(OpaquePart(PROVIDER, {"text": "", SIGNATURE: signature}))
            return
        if signature:
            self.text_signatures[str(len(self.parts) - 1)] = signature

    def add_thought(self, part: dict[str, Any]) -> None:
        last = self.parts[-1] if self.parts else None
        if (isinstance(last, OpaquePart) and last.provider == PROVIDER and last.data.get("thought")
                and SIGNATURE not in last.data):  # a streamed thought continues the previous piece
            last.data["text"] = (last.data.get("text") or "") + (part.get("text") or "")
            if part.get(SIGNATURE):
                last.data[SIGNATURE] = part[SIGNATURE]
        else:
            self.parts.append(OpaquePart(PROVIDER, dict(part)))

    def message(self) -> Message:
        provider_data = {PROVIDER: {TEXT_SIGNATURES: dict(self.text_signatures)}} if self.text_signatures else {}
        return Message(role="assistant", parts=list(self.parts), provider_data=provider_data)


def _add_part(builder: _PartsBuilder, part: dict[str, Any]) -> None:
    """One whole (non-partial) response part into ``builder``."""
    signature = part.get(SIGNATURE)
    if part.get("thought"):
        builder.add_thought(part)
    elif "text" in part:
        builder.add_text(part.get("text") or "", signature)
    elif "functionCall" in part:
        builder.parts.append(_tool_call(part["functionCall"] or {}, signature))
    else:  # executableCode, inlineData, ...: echo unchanged
        builder.parts.append(OpaquePart(PROVIDER, dict(part)))


def _malformed_call(finish_message: Any) -> ToolCall:
    """The call a MALFORMED_FUNCTION_CALL answer reports: unreadable, with what ``finishMessage`` quotes of it."""
    quoted = finish_message if isinstance(finish_message, str) else ""
    reason = f"Gemini could not parse it ({MALFORMED_CALL}{': ' + excerpt(quoted, 300) if quoted else ''})"
    return ToolCall(id="", name="", arguments=None, raw_arguments=quoted, unreadable=reason)


def _finish(builder: _PartsBuilder, finish_reason: str | None, usage: dict[str, Any] | None,
            model: str | None, finish_message: Any = None) -> ModelResponse:
    if finish_reason == MALFORMED_CALL:
        builder.parts.append(_malformed_call(finish_message))
    message = builder.message()
    return ModelResponse(message=message,
                         stop_reason=normalise_stop_reason(finish_reason, bool(message.tool_calls)),
                         usage=parse_usage(usage), raw_stop_reason=finish_reason, model=model)


def parse_response(body: dict[str, Any]) -> ModelResponse:
    """A whole generateContent response as a ``ModelResponse`` (first candidate)."""
    raise_for_error(body)
    candidates = body.get("candidates") or []
    builder = _PartsBuilder()
    if not candidates:
        # the prompt itself was blocked: no candidate, a promptFeedback.blockReason instead
        reason = (body.get("promptFeedback") or {}).get("blockReason")
        return ModelResponse(Message("assistant", []), "content_filter" if reason else "error",
                             parse_usage(body.get("usageMetadata")), reason, body.get("modelVersion"))
    candidate = candidates[0]
    for part in (candidate.get("content") or {}).get("parts") or []:
        _add_part(builder, part)
    return _finish(builder, candidate.get("finishReason"), body.get("usageMetadata"), body.get("modelVersion"),
                   candidate.get("finishMessage"))


# ----------------------------------------------------------------------------- stream

_PATH_STEP = re.compile(r"\.([A-Za-z_$][\w$-]*)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")


def json_path_steps(path: str) -> list[str | int]:
    """``$.a.b[0]['c d']`` -> ["a", "b", 0, "c d"]; ValueError for anything else."""
    if not path.startswith("$"):
        raise ValueError(f"not a JSONPath: {path!r}")
    steps: list[str | int] = []
    position = 1
    while position < len(path):
        match = _PATH_STEP.match(path, position)
        if match is None:
            raise ValueError(f"unsupported JSONPath: {path!r}")
        name, index, single, double = match.groups()
        steps.append(int(index) if index is not None else (name or single or double or ""))
        position = match.end()
    return steps


def _partial_value(partial: dict[str, Any]) -> Any:
    for key in ("stringValue", "numberValue", "boolValue"):
        if key in partial:
            return partial[key]
    return None  # nullValue, or nothing


def _set_path(root: dict[str, Any], steps: list[str | int], value: Any, append: bool) -> None:
    """Set ``value`` at ``steps`` under ``root`` (creating containers); ``append`` extends strings."""
    node: Any = root
    for step, following in pairwise(steps):
        empty: Any = [] if isinstance(following, int) else {}
        if isinstance(step, int):
            while len(node) <= step:
                node.append(None)
            if node[step] is None:
                node[step] = empty
            node = node[step]
        else:
            node = node.setdefault(step, empty)
    last = steps[-1]
    if isinstance(last, int):
        while len(node) <= last:
            node.append(None)
        current = node[last]
        node[last] = current + value if append and isinstance(current, str) else value
    else:
        current = node.get(last)
        node[last] = current + value if append and isinstance(current, str) else value


@dataclass
class _StreamedCall:
    """A call whose arguments arrive in pieces (``willContinue`` / ``partialArgs``)."""

    head: dict[str, Any]
    signature: str | None
    arguments: dict[str, Any] = field(default_factory=dict)
    open_strings: set[str] = field(default_factory=set)  # paths whose string continues

    def apply(self, partials: list[dict[str, Any]]) -> None:
        for partial in partials:
            path = str(partial.get("jsonPath") or "")
            try:
                steps = json_path_steps(path)
            except ValueError as exc:
                raise ProviderError(f"Gemini streamed an argument with {exc}") from None
            if not steps:
                continue
            value = _partial_value(partial)
            _set_path(self.arguments, steps, value, append=path in self.open_strings)
            if isinstance(value, str) and partial.get("willContinue"):
                self.open_strings.add(path)
            else:
                self.open_strings.discard(path)


class GeminiStreamAssembler:
    """Builds one ``ModelResponse`` from the chunks of streamGenerateContent.

    Each chunk is a whole GenerateContentResponse: text parts are deltas, calls arrive
    whole (or, with streamed arguments, as a head, ``partialArgs`` pieces and an empty
    closing ``functionCall``). Usage and finishReason come with the last chunks. A
    ``StreamAssembler``: ``feed`` returns the text deltas to show.
    """

    def __init__(self) -> None:
        self._builder = _PartsBuilder()
        self._streamed: _StreamedCall | None = None
        self._finish_reason: str | None = None
        self._finish_message: Any = None
        self._usage: dict[str, Any] | None = None
        self._model: str | None = None
        self._block_reason: str | None = None

    def feed(self, event: dict[str, Any], name: str | None = None) -> list[StreamEvent]:
        """Take one chunk (the JSON of an SSE ``data:`` line; the event name plays no part)."""
        chunk = event
        raise_for_error(chunk)
        self._usage = chunk.get("usageMetadata") or self._usage
        self._model = chunk.get("modelVersion") or self._model
        self._block_reason = (chunk.get("promptFeedback") or {}).get("blockReason") or self._block_reason
        events: list[StreamEvent] = []
        for candidate in (chunk.get("candidates") or [])[:1]:
            for part in (candidate.get("content") or {}).get("parts") or []:
                if part.get("functionCall") is None and "text" in part and not part.get("thought") and part.get("text"):
                    events.append(TextDelta(part["text"]))
                self._part(part)
            self._finish_reason = candidate.get("finishReason") or self._finish_reason
            self._finish_message = candidate.get("finishMessage") or self._finish_message
        return events

    def _part(self, part: dict[str, Any]) -> None:
        function_call = part.get("functionCall")
        if function_call is None:
            _add_part(self._builder, part)
            return
        signature = part.get(SIGNATURE)
        if self._streamed is not None:
            self._streamed.apply(function_call.get("partialArgs") or [])
            if signature:
                self._streamed.signature = signature
            if not function_call.get("willContinue"):  # the closing piece: the call is whole
                call = self._streamed
                self._streamed = None
                self._builder.parts.append(_tool_call(call.head, call.signature, call.arguments))
            return
        if function_call.get("willContinue"):
            self._streamed = _StreamedCall(head=dict(function_call), signature=signature,
                                           arguments=dict(function_call.get("args") or {}))
            self._streamed.apply(function_call.get("partialArgs") or [])
        else:  # whole; one without a name is an unreadable call the model is told about, never dropped
            self._builder.parts.append(_tool_call(function_call, signature))

    def finish(self) -> ModelResponse:
        """The assembled response; ``ProviderError`` when the stream stopped half-way."""
        if self._streamed is not None or (self._finish_reason is None and self._block_reason is None):
            raise ProviderError("Gemini stream ended before its finishReason", retryable=True)
        if self._finish_reason is None:
            return ModelResponse(Message("assistant", []), "content_filter", parse_usage(self._usage),
                                 self._block_reason, self._model)
        return _finish(self._builder, self._finish_reason, self._usage, self._model, self._finish_message)


# --------------------------------------------------------------------------- provider


class GeminiProvider(Provider):
    """Gemini over the transport: the key in a header (never the URL), whole or streamed."""

    name: ClassVar[str] = PROVIDER
    default_base_url: ClassVar[str] = "https://generativelanguage.googleapis.com"
    base_url_env: ClassVar[tuple[str, ...]] = ("GEMINI_BASE_URL",)
    api_key_env: ClassVar[tuple[str, ...]] = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    credential_headers: ClassVar[frozenset[str]] = frozenset({"x-goog-api-key"})
    credential_query_keys: ClassVar[frozenset[str]] = frozenset({"key"})  # Gemini also accepts ?key=
    telemetry_name: ClassVar[str | None] = "gcp.gemini"
    conversation_key: ClassVar[str | None] = "contents"
    output_modes: ClassVar[tuple[OutputMode, ...]] = ("native", "json")
    context_windows: ClassVar[dict[str, int]] = CONTEXT_WINDOWS

    @classmethod
    def tool_definition(cls, definition: ToolDefinition, *, strict: bool = False) -> WireTool:
        return tool_definition(definition)  # Gemini has no strict mode

    @classmethod
    def tools_value(cls, entries: list[dict[str, Any]]) -> Any:
        return tools_value(entries)

    @classmethod
    def tool_names(cls, entry: Any) -> list[str] | None:
        if isinstance(entry, dict) and isinstance(entry.get("functionDeclarations"), list):
            return [str(d.get("name")) for d in entry["functionDeclarations"] if isinstance(d, dict)]
        return None

    @classmethod
    def conversation_item(cls, item: dict[str, Any]) -> WireItem | None:
        if isinstance(item.get("functionResponse"), dict):
            response = item["functionResponse"]
            payload = response.get("response") if isinstance(response.get("response"), dict) else {}
            failed = "error" in payload and "output" not in payload
            return WireItem("tool_result", response.get("id"), response.get("name"),
                            content=payload.get("error" if failed else "output", payload), is_error=failed)
        if isinstance(item.get("functionCall"), dict):
            call = item["functionCall"]
            return WireItem("tool_call", call.get("id"), call.get("name"))
        return None

    def headers(self) -> dict[str, str]:
        """Request headers: the key (URLs get logged, headers do not), then gateway headers."""
        headers = {"content-type": "application/json"}
        if self.config.api_key:
            headers["x-goog-api-key"] = self.config.api_key
        headers.update(self.config.headers)
        return headers

    def url(self, model: str, *, stream: bool) -> str:
        """The endpoint for ``model``; no key in it."""
        model = model.removeprefix("models/")
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        return f"{self.config.base_url}/v1beta/models/{quote(model, safe='-._~')}:{method}"

    def build_request(self, request: ModelRequest, *, stream: bool) -> WireRequest:
        return WireRequest("POST", self.url(request.model or self.model, stream=stream), self.headers(),
                           build_request_body(request, stream=stream), stream=stream)

    def parse_answer(self, body: dict[str, Any]) -> ModelResponse:
        return parse_response(body)

    def stream_assembler(self) -> StreamAssembler:
        return GeminiStreamAssembler()
