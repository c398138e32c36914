"""What the OpenAI-shaped wire formats share: OpenAI Chat, OpenAI Responses and Ollama.

Pure helpers over dicts, imported by those adapters (none of them borrows another's code):
call arguments, tool choice, token counts, finish reasons, the ``function`` tool shape and
its strict-mode schema, the Bearer headers, and how a Chat-shaped conversation is read.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from toolrun.core.json_limits import MAX_ARGUMENT_DEPTH, loads_bounded
from toolrun.core.messages import StopReason, StructuredOutput, ToolDefinition, Usage
from toolrun.providers.answer_numbers import token_count
from toolrun.providers.base import ProviderConfig, WireItem, WireTool

OFFICIAL_BASE_URL = "https://api.openai.com/v1"
# Context windows (input tokens) of OpenAI's models by name prefix; a compatible server's models
# are not here (their window is the server's setting): settings.context.max_input_tokens says it.
CONTEXT_WINDOWS = {
    "gpt-3.5-turbo": 16_385, "gpt-4": 8_192, "gpt-4-32k": 32_768, "gpt-4-turbo": 128_000, "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576, "gpt-5": 272_000, "o1": 200_000, "o1-mini": 128_000, "o3": 200_000, "o4-mini": 200_000,
}
# Bearer key, Azure's key header, and the headers that name the account.
CREDENTIAL_HEADERS = frozenset({"authorization", "api-key", "openai-organization", "openai-project"})

FINISH_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "error": "error",
}


def bearer_headers(config: ProviderConfig) -> dict[str, str]:
    """JSON content type, the key as a Bearer token (when there is one), then the gateway's headers."""
    headers = {"Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    return {**headers, **config.headers}


def parse_arguments(value: Any) -> tuple[dict[str, Any] | None, str]:
    """A call's ``arguments`` as sent -> (parsed object or None, raw JSON text).

    A string is parsed (None when it is not a JSON object; the runner turns that into an
    error result the model can fix); an object (a compatible-server quirk) is used as is
    and re-serialised; nothing or an empty string means a call without arguments.
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}, "{}"
    if isinstance(value, dict):
        return value, json.dumps(value, ensure_ascii=False)
    if not isinstance(value, str):
        return None, json.dumps(value, ensure_ascii=False)
    try:
        parsed = loads_bounded(value, MAX_ARGUMENT_DEPTH, finite=True, unique_keys=True)
    except ValueError:  # TooDeep too: the runner's error result says which
        return None, value
    return (parsed if isinstance(parsed, dict) else None), value


def tool_choice_value(choice: str, *, flat: bool = False) -> str | dict[str, Any]:
    """"auto" | "none" | "required" as is; any other string names the one tool to call.

    ``flat`` is the Responses shape ``{type, name}``; Chat nests it under ``function``.
    """
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "name": choice} if flat else {"type": "function", "function": {"name": choice}}


def token_usage(body: Any, input_key: str, output_key: str) -> Usage:
    """Token counts of one request under the format's own keys (zeros when the server sent none)."""
    if not isinstance(body, dict):
        return Usage(0, 0, 1)
    return Usage(token_count(body, input_key), token_count(body, output_key), 1)


def normalise_stop_reason(raw: str | None, has_tool_calls: bool) -> StopReason:
    """A Chat-style ``finish_reason`` -> toolrun's; calls win over a plain "stop" (some servers)."""
    reason = FINISH_REASONS.get(raw or "", "stop")
    if has_tool_calls and reason == "stop":
        return "tool_calls"
    return reason


# ---------------------------------------------------------------- tools


def strict_parameters(parameters: dict[str, Any], changes: list[str]) -> tuple[dict[str, Any], bool]:
    """(parameters for strict mode, True), or (a copy of the original, False) when they cannot be strict.

    What the conversion changed, or why it could not be done, is added to ``changes``.
    """
    from toolrun.core.schema_dialects import to_openai_strict  # start-up: strict mode is opt-in (or an output schema)

    converted = to_openai_strict(parameters)
    if not converted.compatible or converted.schema is None:
        reasons = "; ".join(str(change) for change in converted.incompatible)
        changes.append(f"strict: false — the schema cannot be made strict ({reasons})")
        return copy.deepcopy(parameters), False
    changes.extend(f"strict mode: {change}" for change in converted.changes)
    return converted.schema, True


def json_schema_format(output: StructuredOutput) -> dict[str, Any]:
    """``{name, schema, strict}`` of a ``json_schema`` answer format: strict when the schema can be.

    The strict dialect makes optional properties required and nullable; the runner removes
    the nulls it adds before it validates the answer against the author's schema.
    """
    assert output.schema is not None
    schema, strict = strict_parameters(output.schema, [])
    return {"name": output.name, "schema": schema, "strict": strict}


def function_tool(definition: ToolDefinition, *, strict: bool = False) -> WireTool:
    """A tool in the Chat Completions shape ``{type: function, function: {name, description, parameters}}``."""
    changes: list[str] = []
    function: dict[str, Any] = {"name": definition.name, "description": definition.description}
    if strict:
        function["parameters"], function["strict"] = strict_parameters(definition.parameters, changes)
    else:
        function["parameters"] = copy.deepcopy(definition.parameters)
    return WireTool({"type": "function", "function": function}, changes)


def function_tool_names(entry: Any) -> list[str] | None:
    """The name a Chat-shaped ``tools`` entry declares; None for another shape."""
    if isinstance(entry, dict) and isinstance(entry.get("function"), dict):
        return [str(entry["function"].get("name"))]
    return None


def chat_conversation_item(item: dict[str, Any]) -> WireItem | None:
    """A Chat-shaped conversation object: a ``role: tool`` result, or a call with ``function.arguments``."""
    if item.get("role") == "tool":
        return WireItem("tool_result", item.get("tool_call_id"), content=item.get("content"))
    function = item.get("function")
    if isinstance(function, dict) and "arguments" in function:
        return WireItem("tool_call", item.get("id"), function.get("name"))
    return None
