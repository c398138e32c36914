"""The error results of calls that cannot run at all: unreadable, of an unknown tool, with arguments not a JSON object.

The model reads one in place of the tool's result, so each says what was wrong and how to send the
call again; nothing of the tool runs.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from toolrun.core.json_limits import MAX_ARGUMENT_DEPTH, DuplicateKey, NotFinite, TooDeep, loads_bounded, nesting_depth
from toolrun.core.messages import ToolCall
from toolrun.core.text import close_matches, excerpt

EXCERPT_CHARS = 200  # of a failing call's result or unparsable arguments, in an error message


def refusal(call: ToolCall, available: Collection[str], *, cut_off: bool) -> str | None:
    """The error result for ``call`` when it cannot run with the tools ``available``, or None when it can.

    ``cut_off``: the answer stopped at the output limit, which may have cut the arguments short.
    """
    if call.unreadable is not None:
        return unreadable_call_message(call.unreadable, list(available))
    if call.name not in available:
        return unknown_tool_message(call.name, list(available))
    if call.arguments is None:
        return invalid_json_message(call.raw_arguments, cut_off=cut_off)
    if nesting_depth(call.arguments) > MAX_ARGUMENT_DEPTH:  # an object from the wire, not a string we parsed
        return (f"the arguments nest deeper than {MAX_ARGUMENT_DEPTH} levels — send the call again "
                "with the arguments the tool's parameters describe")
    return None


def unknown_tool_message(name: str, available: list[str]) -> str:
    """The error result for a call of a tool that is not in the run's tool list."""
    message = f"unknown tool {name!r}"
    close = close_matches(name, available)
    if close:
        message += f"; did you mean {close[0]!r}?"
    listing = ", ".join(available) if available else "(none)"
    return f"{message} Available tools: {listing}. Call one of these by its exact name."


def unreadable_call_message(reason: str, available: list[str]) -> str:
    """The error result for a call the provider reported but could not give whole (``ToolCall.unreadable``)."""
    listing = ", ".join(available) if available else "(none)"
    return (f"your function call could not be read: {reason}. Nothing ran. Send it again as a function call "
            f"that names one of these tools exactly, with its arguments as a JSON object: {listing}.")


def invalid_json_message(raw: str, *, cut_off: bool) -> str:
    """The error result for arguments that did not parse as JSON, or that give a key twice."""
    try:
        loads_bounded(raw, MAX_ARGUMENT_DEPTH, finite=True, unique_keys=True)
        reason = "not a JSON object"
    except DuplicateKey as exc:
        return (f"the arguments give the key {exc.key!r} more than once: {short_excerpt(raw)} — send the call "
                "again with each key once, holding the value you mean")
    except (TooDeep, NotFinite) as exc:
        reason = str(exc)
    except json.JSONDecodeError as exc:
        reason = f"{exc.msg}, character {exc.pos}"
    except TypeError:
        reason = "no arguments were sent"
    shown = short_excerpt(raw or "")
    if cut_off:
        return (f"the arguments were cut off by the output limit (stop reason: length) and are not valid "
                f"JSON ({reason}): {shown!s} — send the call again with complete, shorter arguments")
    return f"the arguments are not valid JSON ({reason}): {shown} — send the call again with a JSON object"


def short_excerpt(text: str) -> str:
    """``text`` cut to what an error message repeats of it."""
    return excerpt(text, EXCERPT_CHARS)
