"""What the adapters share to ask for a structured final answer; each sends it its own way.

Pure helpers over the neutral model: the JSON-mode instruction (the word "JSON" in the
system prompt, which OpenAI's JSON mode insists on and which keeps a model from emitting
whitespace until its limit), and the forced final tool for a format whose models lack
structured output (its input is the answer; ``answer_from_final_tool`` turns the call back
into the answer's text, so the runner sees an answer like any other).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from toolrun.core.messages import (
    ModelRequest,
    ModelResponse,
    OutputMode,
    StructuredOutput,
    TextPart,
    ToolCall,
    ToolDefinition,
)

FINAL_ANSWER_TOOL = "final_answer"
_WRAPPED_KEY = "answer"  # a tool's input is an object: any other answer travels inside one


def output_mode(request: ModelRequest, default: OutputMode) -> OutputMode | None:
    """How ``request`` asks for its final answer: the author's mode, else the adapter's default; None: no output."""
    output = request.settings.output
    if output is None:
        return None
    return output.mode or default


def json_instruction(output: StructuredOutput) -> str:
    """The system prompt's sentence asking for JSON (with the schema when there is one)."""
    sentence = "Give your final answer as one JSON value and nothing else: no prose, no code fences."
    if output.schema is not None:
        schema = json.dumps(output.schema, ensure_ascii=False, sort_keys=True)
        sentence += f" The JSON must match this JSON Schema: {schema}"
    return sentence


def system_with_json_instruction(system: str | None, output: StructuredOutput) -> str:
    """``system`` with the JSON instruction added as its last paragraph."""
    instruction = json_instruction(output)
    return f"{system}\n\n{instruction}" if system else instruction


def _wraps(output: StructuredOutput) -> bool:
    schema = output.schema
    return schema is None or schema.get("type") != "object"


def final_answer_tool(output: StructuredOutput) -> ToolDefinition:
    """The forced final tool: its parameters are the answer's schema (an object; anything else wrapped)."""
    schema = output.schema
    if _wraps(output):
        parameters: dict[str, Any] = {"type": "object", "properties": {_WRAPPED_KEY: schema or {}},
                                      "required": [_WRAPPED_KEY]}
    else:
        assert schema is not None
        parameters = schema
    return ToolDefinition(FINAL_ANSWER_TOOL, "Give your final answer with this tool, once you have it.", parameters)


def answer_from_final_tool(response: ModelResponse, output: StructuredOutput) -> ModelResponse:
    """``response`` with a call of the final tool turned into the answer's JSON text (the other calls kept)."""
    final = next((part for part in response.message.tool_calls if part.name == FINAL_ANSWER_TOOL), None)
    if final is None:
        return response
    # Text said beside the final call is not the answer: only the call's input is.
    parts: list[Any] = [part for part in response.message.parts
                        if not isinstance(part, TextPart) and part is not final]
    parts.append(TextPart(_answer_text(final, output)))
    message = dataclasses.replace(response.message, parts=parts)
    has_calls = bool(message.tool_calls)
    stop_reason = "stop" if response.stop_reason == "tool_calls" and not has_calls else response.stop_reason
    return dataclasses.replace(response, message=message, stop_reason=stop_reason)


def _answer_text(call: ToolCall, output: StructuredOutput) -> str:
    if call.arguments is None:  # cut off or broken: the runner reports it as it is
        return call.raw_arguments
    value = call.arguments.get(_WRAPPED_KEY) if _wraps(output) else call.arguments
    return json.dumps(value, ensure_ascii=False)


def request_with_final_tool(request: ModelRequest) -> tuple[list[ToolDefinition], str]:
    """The tools and the neutral tool choice of a request answered by the final tool.

    Without other tools the final tool is forced; with them the model must call one of the
    tools each turn (``required``), so it works with the others first and answers through
    the final tool — unless the run forces a tool of its own.
    """
    output = request.settings.output
    assert output is not None
    tools = [*request.tools, final_answer_tool(output)]
    choice = request.settings.tool_choice
    if not request.tools:
        return tools, FINAL_ANSWER_TOOL
    if choice in ("auto", "none"):
        return tools, "required"
    return tools, choice
