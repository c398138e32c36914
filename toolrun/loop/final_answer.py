"""A structured final answer: read it, hold it to the author's schema, ask for a repair.

Whatever the provider promised, the answer is checked here: an answer cut off by the
output limit is never read as complete; JSON that parses is still validated against the
author's schema (after removing the nulls the strict dialect made the model write for
optional properties); a failing answer is sent back with its errors for a repair.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from toolrun.core.json_limits import MAX_BODY_DEPTH, TooDeep, loads_bounded
from toolrun.core.messages import Message, StructuredOutput, TextPart
from toolrun.core.schema_dialects import allows_null
from toolrun.core.text import excerpt
from toolrun.loop.execution import schema_violations

_FENCED = re.compile(r"^```[A-Za-z]*\s*\n(.*)\n```$", re.DOTALL)
_SHOWN_CHARS = 200
CUT_OFF = ("the structured answer was cut off by the output limit (stop reason: length): it is incomplete "
           "and was not used; raise settings.max_tokens")


@dataclass
class AnswerCheck:
    """The parsed answer (``value``), or every reason it cannot be used (``errors``)."""

    value: Any = None
    errors: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not self.errors


def check_answer(text: str | None, output: StructuredOutput) -> AnswerCheck:
    """``text`` parsed as JSON and validated against ``output.schema`` (any JSON when there is none)."""
    if not text or not text.strip():
        return AnswerCheck(errors=["the answer is empty, not JSON"])
    body = text.strip()
    fenced = _FENCED.match(body)  # JSON mode on a weak model: a code fence around the JSON
    if fenced:
        body = fenced.group(1)
    try:
        value = loads_bounded(body, MAX_BODY_DEPTH, finite=True)  # NaN: no JSON a program can read
    except TooDeep as exc:
        return AnswerCheck(errors=[f"the answer is not usable JSON: {exc}"])
    except ValueError as exc:
        reason = f"{exc.msg}, character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        return AnswerCheck(errors=[f"the answer is not valid JSON ({reason}): {excerpt(body, _SHOWN_CHARS)}"])
    if output.schema is None:
        return AnswerCheck(value)
    value = without_added_nulls(value, output.schema)
    return AnswerCheck(value, schema_violations(output.schema, value))


def without_added_nulls(value: Any, schema: Any) -> Any:
    """``value`` without the nulls of optional properties whose schema does not allow null.

    Strict mode makes every property required and the optional ones nullable: a model
    that leaves one out answers null, which the author's schema would refuse.
    """
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = schema.get("required")
        required = required if isinstance(required, list) else []
        kept = {}
        for key, item in value.items():
            subschema = properties.get(key)
            if item is None and key in properties and key not in required and not allows_null(subschema):
                continue
            kept[key] = without_added_nulls(item, subschema)
        return kept
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [without_added_nulls(item, schema["items"]) for item in value]
    return value


def repair_request(errors: list[str], output: StructuredOutput) -> Message:
    """The user message that sends a failing answer's errors back to the model."""
    listing = "\n".join(f"- {error}" for error in errors)
    wanted = "JSON matching the schema" if output.schema is not None else "valid JSON"
    return Message("user", [TextPart(f"Your answer cannot be used:\n{listing}\n"
                                     f"Answer again with only the corrected {wanted}.")])


def failure_message(errors: list[str], repairs: int) -> str:
    """The run's error when the answer still fails after ``repairs`` repair turns."""
    after = f" after {repairs} repair turn{'s' if repairs != 1 else ''}" if repairs else ""
    return f"the structured answer is not valid{after}: {'; '.join(errors)}; " \
           "make the schema easier to satisfy, raise output.retries, or try a stronger model"
