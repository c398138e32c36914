"""Running one tool call: validate, ask approval, run the backend under a timeout, cap, redact.

``execute_call`` never raises for a tool's failure: every problem becomes an error result
the model can read and act on. Only cancellation from outside propagates.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any

from toolrun.backends import get_backend
from toolrun.backends.base import BackendOutput, CallContext
from toolrun.core.call_timeouts import call_timeout
from toolrun.core.content import ContentBlock
from toolrun.core.errors import TOOL_LOGGER
from toolrun.core.formats import EXPECTED_FORMS, expected_form, uses_checked_format
from toolrun.core.json_limits import MAX_ARGUMENT_DEPTH, nesting_depth
from toolrun.core.schema_subset import surely_valid
from toolrun.core.secrets import MissingSecret, Redactor, active_redactor, redacting
from toolrun.core.text import counted, exception_text, excerpt
from toolrun.core.tool import Tool

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator, FormatChecker, ValidationError

    from toolrun.loop.approval import Approver

DENIED_MESSAGE = "the user denied this call"
NO_APPROVER_MESSAGE = "this tool needs a human's approval for each call and nobody can approve it here"


class ApprovalWithheld(Exception):
    """Raised by an approver that got no answer, for a reason worded for the model and the client ("nobody
    answered the approval question within 10 minutes"): the call is refused with it, not with a traceback's words."""


_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
               float: "number", type(None): "null"}


@dataclass
class ToolOutcome:
    """What one call produced, as the model will see it."""

    result: str
    is_error: bool
    duration_ms: int
    blocks: list[ContentBlock] = field(default_factory=list)  # images, audio, resources beside the text


@lru_cache(maxsize=1024)
def _validator(schema_json: str, check_formats: bool = False) -> Draft202012Validator:
    from jsonschema import Draft202012Validator  # 50-65 ms to import: only once some arguments need it

    checker = _format_checker() if check_formats else None
    return Draft202012Validator(json.loads(schema_json), format_checker=checker)


@lru_cache(maxsize=1)
def _format_checker() -> FormatChecker:
    from jsonschema import FormatChecker  # only a schema that uses a checked format gets here

    from toolrun.core.format_checks import matches_format  # ipaddress, uuid, datetime: likewise

    checker = FormatChecker(formats=())  # toolrun's checks alone: jsonschema's need optional packages
    for name in EXPECTED_FORMS:
        checker.checks(name)(partial(matches_format, name))
    return checker


_by_schema_object: dict[tuple[int, bool], tuple[dict[str, Any], Draft202012Validator]] = {}
_formats_by_schema_object: dict[int, tuple[dict[str, Any], bool]] = {}


def _validator_for(tool: Tool, check_formats: bool) -> Draft202012Validator:
    # Fast path by identity (the entry keeps the dict alive, so its id cannot be reused);
    # equal schemas of different tools share one validator through the JSON-keyed cache.
    entry = _by_schema_object.get((id(tool.parameters), check_formats))
    if entry is not None and entry[0] is tool.parameters:
        return entry[1]
    validator = _validator(json.dumps(tool.parameters, sort_keys=True, default=str), check_formats)
    if len(_by_schema_object) < 4096:
        _by_schema_object[(id(tool.parameters), check_formats)] = (tool.parameters, validator)
    return validator


def _checks_formats(tool: Tool) -> bool:
    """The tool checks formats and its schema uses one (walked once per schema object)."""
    if not tool.check_formats:
        return False
    entry = _formats_by_schema_object.get(id(tool.parameters))
    if entry is not None and entry[0] is tool.parameters:
        return entry[1]
    uses = uses_checked_format(tool.parameters)
    if len(_formats_by_schema_object) < 4096:
        _formats_by_schema_object[id(tool.parameters)] = (tool.parameters, uses)
    return uses


def _json_path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if str(part).isidentifier()
                                                             else f"[{json.dumps(part, ensure_ascii=False)}]")
    return path


def _shown(value: Any) -> str:
    return excerpt(json.dumps(value, ensure_ascii=False, default=str), 200)


def _type_name(value: Any) -> str:
    return "integer" if isinstance(value, int) and not isinstance(value, bool) else _JSON_TYPES.get(type(value), "value")


def _describe(error: ValidationError) -> str:
    """One precise sentence: where, what was expected, what was given."""
    wording = _WORDINGS.get(error.validator)
    return f"at {_json_path(error.absolute_path)}: {wording(error) if wording else error.message}"


def _missing_property(error: ValidationError) -> str:
    given = error.instance
    missing = [p for p in error.validator_value if isinstance(given, dict) and p not in given]
    named = next((p for p in missing if repr(p) in error.message), missing[0] if missing else "?")
    return f"missing required property {named!r}"


def _wrong_type(error: ValidationError) -> str:
    expected = error.validator_value
    wanted = " or ".join(expected) if isinstance(expected, list) else expected
    return f"expected {wanted}, got {_shown(error.instance)}"


def _not_one_of(error: ValidationError) -> str:
    return f"expected one of {_shown(error.validator_value)}, got {_shown(error.instance)}"


def _not_the_constant(error: ValidationError) -> str:
    return f"expected {_shown(error.validator_value)}, got {_shown(error.instance)}"


def _unexpected_properties(error: ValidationError) -> str:
    given = error.instance
    allowed = sorted((error.schema.get("properties") or {}).keys())
    extra = sorted(set(given) - set(allowed)) if isinstance(given, dict) else []
    hint = f" (allowed: {', '.join(allowed)})" if allowed else " (this tool takes no arguments)"
    return f"unexpected propert{'y' if len(extra) == 1 else 'ies'} {', '.join(map(repr, extra))}{hint}"


_BOUNDS = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}


def _out_of_bounds(error: ValidationError) -> str:
    return f"expected a number {_BOUNDS[str(error.validator)]} {error.validator_value}, got {_shown(error.instance)}"


def _wrong_length(error: ValidationError) -> str:
    limit = "at least" if error.validator == "minLength" else "at most"
    given = error.instance
    return f"expected {limit} {counted(error.validator_value, 'character')}, got {len(given)}: {_shown(given)}"


def _wrong_item_count(error: ValidationError) -> str:
    limit = "at least" if error.validator == "minItems" else "at most"
    return f"expected {limit} {counted(error.validator_value, 'item')}, got {len(error.instance)}"


def _no_match(error: ValidationError) -> str:
    return f"expected a string matching {error.validator_value!r}, got {_shown(error.instance)}"


def _wrong_format(error: ValidationError) -> str:
    return f"expected {expected_form(str(error.validator_value))}, got {_shown(error.instance)}"


# a JSON Schema keyword -> what its failure says after "at $.path: " (others: jsonschema's own message)
_WORDINGS: dict[Any, Callable[[ValidationError], str]] = {
    "required": _missing_property, "type": _wrong_type, "enum": _not_one_of, "const": _not_the_constant,
    "additionalProperties": _unexpected_properties, **dict.fromkeys(_BOUNDS, _out_of_bounds),
    "minLength": _wrong_length, "maxLength": _wrong_length, "minItems": _wrong_item_count,
    "maxItems": _wrong_item_count, "pattern": _no_match, "format": _wrong_format,
}


def schema_violations(schema: dict[str, Any], value: Any) -> list[str]:
    """Every way ``value`` breaks ``schema``, each naming the JSON path, the expected and the given."""
    from jsonschema.exceptions import SchemaError

    try:
        validator = _validator(json.dumps(schema, sort_keys=True, default=str))
        return _described(validator, value)
    except SchemaError as exc:
        return [f"the schema is invalid: {exc.message}"]


def _described(validator: Draft202012Validator, value: Any) -> list[str]:
    errors = sorted(validator.iter_errors(value), key=lambda e: ([str(p) for p in e.absolute_path], e.message))
    mistyped = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
    # A wrong type says it all: drop the enum/pattern/... noise about the same value.
    errors = [e for e in errors if e.validator == "type" or tuple(e.absolute_path) not in mistyped]
    return [_describe(error) for error in errors]


def validate_arguments(tool: Tool, arguments: Any) -> list[str]:
    """Every way ``arguments`` breaks the tool's schema, each naming the JSON path, the expected and the given."""
    if not isinstance(arguments, dict):
        return [f"at $: expected an object with the arguments, got {_type_name(arguments)} {_shown(arguments)}"]
    if nesting_depth(arguments) > MAX_ARGUMENT_DEPTH:  # from an MCP client or a caller: never walked by recursion
        return [f"at $: the arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels, more than a call may send"]
    check_formats = _checks_formats(tool)  # surely_valid reads no format: a schema that uses one pays for jsonschema
    if not check_formats and surely_valid(tool.parameters, arguments):  # no jsonschema import, no tens of µs
        return []
    from jsonschema.exceptions import SchemaError

    try:
        return _described(_validator_for(tool, check_formats), arguments)
    except SchemaError as exc:
        return [f"the tool's parameter schema is invalid: {exc.message}"]
    except Exception as exc:  # e.g. an unknown type name: the loader should have caught it
        return [f"the tool's parameter schema cannot be checked: {type(exc).__name__}: {exc}"]


def cap_output(text: str, limit: int) -> str:
    """Keep ``limit`` characters and say how much was cut."""
    if limit <= 0 or len(text) <= limit:
        return text
    return text[:limit] + f"\n[output truncated: kept {limit} of {len(text)} characters]"


async def _approved(tool: Tool, arguments: dict[str, Any], approver: Approver | None) -> str | None:
    """None when the call may run, else the error result to send (a tool that needs confirmation)."""
    if approver is None:
        return NO_APPROVER_MESSAGE
    return None if await approver(tool, arguments) else DENIED_MESSAGE


async def execute_call(tool: Tool, arguments: Any, context: CallContext,
                       approver: Approver | None = None) -> ToolOutcome:
    """Validate, approve, run under ``tool.timeout``, cap at ``tool.max_output`` and redact one call.

    Secrets are registered with the active run's redactor; a call outside any run gets its own.
    """
    redactor = active_redactor()
    if redactor is not None:  # a run's call: the run's redactor is the active one already
        return await _execute(tool, arguments, context, approver, redactor)
    redactor = Redactor()
    with redacting(redactor):
        return await _execute(tool, arguments, context, approver, redactor)


async def _execute(tool: Tool, arguments: Any, context: CallContext, approver: Approver | None,
                   redactor: Redactor) -> ToolOutcome:
    problems = validate_arguments(tool, arguments)
    if problems:
        # the given values are quoted back to the model: a secret among them is redacted like any output
        return ToolOutcome(redactor.redact(f"invalid arguments for {tool.name}: " + "; ".join(problems)), True, 0)
    if tool.needs_confirmation:
        try:
            refusal = await _approved(tool, arguments, approver)
        except ApprovalWithheld as exc:  # a reason meant for the reader, not a Python exception's name
            refusal = f"approval failed: {exc}"
        except Exception as exc:  # an approver that breaks must not break the run
            refusal = f"approval failed: {exception_text(exc)}"
        if refusal:
            return ToolOutcome(refusal, True, 0)
    started = time.perf_counter()  # after approval: a human's thinking time is not the tool's
    output = await _run_backend(tool, arguments, context)
    duration_ms = round((time.perf_counter() - started) * 1000)
    text = output.text if isinstance(output.text, str) else str(output.text)
    blocks = [_redacted_block(block, redactor) for block in output.blocks] if output.blocks else []
    return ToolOutcome(cap_output(redactor.redact(text), tool.max_output), bool(output.is_error), duration_ms, blocks)


def _redacted_block(block: ContentBlock, redactor: Redactor) -> ContentBlock:
    # A text resource is read like any output; image and audio bytes are not text to search.
    text = block.resource.get("text")
    if not isinstance(text, str):
        return block
    return ContentBlock({**block.wire, "resource": {**block.resource, "text": redactor.redact(text)}})


async def _run_backend(tool: Tool, arguments: dict[str, Any], context: CallContext) -> BackendOutput:
    try:
        backend = get_backend(tool.backend.kind)
    except KeyError:
        return BackendOutput(f"no backend named {tool.backend.kind!r} is installed", True)
    try:
        with call_timeout(tool.timeout):  # cancels the backend's task on expiry
            return await backend.run(tool, arguments, context)
    except TimeoutError:
        return BackendOutput(f"the tool timed out after {tool.timeout:g}s", True)
    except MissingSecret as exc:
        return BackendOutput(f"the tool is not configured: {exc}", True)
    except Exception as exc:  # the model gets the type and message, never a traceback
        logging.getLogger(TOOL_LOGGER).debug("tool %s failed in its backend", tool.name, exc_info=True)
        return BackendOutput(exception_text(exc), True)
