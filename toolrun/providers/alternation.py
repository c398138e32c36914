"""Conversations for wire formats that want strict user/assistant alternation (Anthropic, Gemini).

The neutral history may hold several user-side messages in a row (a tool message, then the
recipe's next user line) and empty assistant answers; these formats reject both. One rule
serves them: assistant turns go out as they came (an empty one is left out, so the user
turns around it stay one), and every run of user-side messages becomes one user turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolrun.core.messages import Message

AssistantTurn = Callable[[Message], dict[str, Any] | None]
UserTurn = Callable[[list[Message], Message | None], dict[str, Any] | None]


def alternating_turns(messages: list[Message], assistant_turn: AssistantTurn, user_turn: UserTurn) -> list[dict[str, Any]]:
    """The wire turns of ``messages``.

    ``assistant_turn(message)`` is one assistant turn, or None when it holds nothing to send;
    ``user_turn(run, answered)`` is one user turn out of a run of user-side messages (or None
    when it is empty); ``answered`` is the assistant message the run follows, whose calls its
    results answer.
    """
    wire: list[dict[str, Any]] = []
    pending: list[Message] = []
    answered: Message | None = None

    def flush_user() -> None:
        if pending and (turn := user_turn(list(pending), answered)) is not None:
            wire.append(turn)
        pending.clear()

    for message in messages:
        if message.role != "assistant":
            pending.append(message)
        elif (turn := assistant_turn(message)) is not None:
            flush_user()
            wire.append(turn)
            answered = message
    flush_user()
    return wire
