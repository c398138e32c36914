"""The ``summarize`` strategy's one model request: what the context window left out, condensed.

The messages left out go as one plain-text transcript in one user message, with no tools, so
the request is well-formed for every provider whatever the calls and results it describes.
The request is marked ``purpose="summary"``: it is recorded and replayed like any other, and
a scripted model answers it itself, without using a turn of its script.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from toolrun.core.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    TextPart,
    ToolCall,
    ToolResult,
)
from toolrun.loop.context_estimate import cut_to_tokens, estimate_text

SUMMARY_HEADER = "Summary of the earlier conversation (left out to fit the context window):"
SUMMARY_INSTRUCTIONS = (
    "You condense the earlier part of a conversation between a user, an assistant and the tools it called, "
    "so that the assistant can go on without it. Keep every fact, number, name and decision it may still "
    "need, what the tools returned that matters, and what is left to do. Plain text, at most about "
    "{words} words, no preamble.")
RESULT_CHARS = 2_000  # of one tool result in the transcript: the summary keeps what matters, not all of it
_REQUEST_OVERHEAD = 16  # tokens of the summary request beyond its texts

Summarizer = Callable[[ModelRequest], Awaitable[ModelResponse]]


def transcript(messages: list[Message], previous: str | None) -> str:
    """The messages as plain text, one line a message part, after the summary made before them."""
    lines = [f"(summary so far) {previous}"] if previous else []
    for message in messages:
        for part in message.parts:
            if isinstance(part, TextPart) and part.text.strip():
                lines.append(f"{message.role}: {part.text}")
            elif isinstance(part, ToolCall):
                arguments = part.arguments if part.arguments is not None else part.raw_arguments
                lines.append(f"assistant called {part.name}({json.dumps(arguments, ensure_ascii=False)})")
            elif isinstance(part, ToolResult):
                content = part.content if len(part.content) <= RESULT_CHARS else (
                    f"{part.content[:RESULT_CHARS]} [… {len(part.content) - RESULT_CHARS:,} more characters]")
                lines.append(f"{part.name} {'failed' if part.is_error else 'returned'}: {content}")
    return "\n".join(lines)


async def summarize_dropped(request: ModelRequest, dropped: list[Message], previous: str | None, room: int,
                            limit: int, chars_per_token: float, summarize: Summarizer) -> str:
    """A summary of ``previous`` and ``dropped`` of at most ``room`` tokens, by one request of ``limit`` at most."""
    instructions = SUMMARY_INSTRUCTIONS.format(words=max(50, room * 3 // 4))
    text = transcript(dropped, previous)
    input_room = limit - room - estimate_text(instructions, chars_per_token) - _REQUEST_OVERHEAD
    if estimate_text(text, chars_per_token) > input_room:
        text = cut_to_tokens(text, input_room, chars_per_token, what="this transcript")
    settings = ModelSettings(temperature=request.settings.temperature, max_tokens=max(room, 1))
    asked = ModelRequest(request.model, instructions, [Message("user", [TextPart(text)])], [], settings,
                         purpose="summary")
    answer = await summarize(asked)
    summary = (answer.message.text or "").strip() or (previous or "(the model gave no summary)")
    if estimate_text(summary, chars_per_token) > room:
        summary = cut_to_tokens(summary, room, chars_per_token, what="the summary")
    return summary
