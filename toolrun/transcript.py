"""The JSON document of a run (the transcript), as ``toolrun recipe --json`` prints it.

Secrets are redacted here once more, whatever the tools already did: a transcript is
written to disk and shared, and a secret must never reach it.
"""

from __future__ import annotations

import json
from typing import Any

from toolrun.messages import Usage
from toolrun.runner import RunResult, ToolCallRecord, TurnRecord
from toolrun.secrets import redact


def transcript_document(result: RunResult, *, recipe: str, model: str, mode: str) -> dict[str, Any]:
    """The transcript document: recipe, model, mode, final, stop_reason, usage totals and turns.

    ``error`` is added (additively) when the run stopped for a reason worth explaining.
    """
    document: dict[str, Any] = {
        "recipe": recipe,
        "model": model,
        "mode": mode,
        "final": result.final,
        "stop_reason": result.stop_reason,
        "usage": usage_totals(result.usage),
        "turns": [turn_document(turn) for turn in result.turns],
    }
    if result.error:
        document["error"] = result.error
    return redact(document)


def usage_totals(usage: Usage) -> dict[str, int]:
    """Run totals: tokens and the number of model requests."""
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens, "requests": usage.requests}


def turn_document(turn: TurnRecord) -> dict[str, Any]:
    """One turn: its stop reason, text, token usage and calls."""
    return {
        "stop_reason": turn.stop_reason,
        "text": turn.text,
        "usage": {"input_tokens": turn.usage.input_tokens, "output_tokens": turn.usage.output_tokens},
        "tool_calls": [tool_call_document(call) for call in turn.tool_calls],
    }


def tool_call_document(record: ToolCallRecord) -> dict[str, Any]:
    """One call: id, name, arguments (object, or the raw string when unparsable), result."""
    return redact({
        "id": record.id,
        "name": record.name,
        "arguments": record.arguments,
        "result": record.result,
        "is_error": record.is_error,
        "duration_ms": record.duration_ms,
    })


def dumps(document: dict[str, Any], *, indent: int | None = 2) -> str:
    """JSON text of a transcript: Chinese stays Chinese (``ensure_ascii=False``)."""
    return json.dumps(document, ensure_ascii=False, indent=indent)
