"""What a run says about its context window, and the view of its history when there is no limit.

A recipe's ``settings.context`` (``ContextSettings``) gives each request a limit of input tokens;
``open_window`` makes the run's view of its history: a ``ContextWindow`` that fits each request
to the limit, or, with no limit (no ``settings.context``, or a model whose window is unknown),
``WholeHistory``, which sends every request as it is, without importing the estimates, the
trimming and the summary request (``toolrun.loop.context_window``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolrun.core.errors import RunFailed

if TYPE_CHECKING:
    from toolrun.core.messages import ModelRequest, Usage
    from toolrun.loop.context_summary import Summarizer
    from toolrun.loop.context_window import ContextEvent, ContextWindow

STRATEGIES = ("drop-oldest", "clear-tool-results", "summarize")
DEFAULT_STRATEGY = "drop-oldest"
OUTPUT_SHARE = 8  # with no max_tokens, 1/8 of a model's window is left for its answer


@dataclass
class ContextSettings:
    """A recipe's ``settings.context``: how many input tokens a request may hold, and how to stay under."""

    max_input_tokens: int | None = None  # None: the model's window (less room for the answer) when known
    strategy: str = DEFAULT_STRATEGY

    def to_mapping(self) -> dict[str, Any]:
        """The keys a recipe would write (unset ones left out)."""
        return {key: value for key, value in (("max_input_tokens", self.max_input_tokens),
                                              ("strategy", self.strategy)) if value is not None}


class ContextOverflow(RunFailed):
    """What every request must hold (system prompt, tools, the question, the newest call) is over the limit."""

    reason = "the context is full"


def resolve_limit(settings: ContextSettings | None, window: int | None, max_tokens: int | None) -> int | None:
    """The input tokens a request may hold: the setting, else the window less room for the answer."""
    if settings is None:
        return None
    if settings.max_input_tokens is not None:
        return settings.max_input_tokens
    if window is None:
        return None
    return window - (max_tokens if max_tokens is not None else window // OUTPUT_SHARE)


class WholeHistory:
    """The view of a run without a limit: every request goes out as the runner built it."""

    limit: int | None = None

    def __init__(self, strategy: str = DEFAULT_STRATEGY) -> None:
        self.strategy = strategy

    def to_json(self) -> dict[str, Any]:
        """As ``ContextWindow.to_json`` with no limit: nothing was left out."""
        return {"max_input_tokens": None, "strategy": self.strategy, "events": []}

    def observe(self, usage: Usage) -> None:
        """Nothing to correct: no request is estimated."""

    async def fit(self, request: ModelRequest, summarize: Summarizer) -> ModelRequest:
        """``request`` as it is."""
        return request


def open_window(settings: ContextSettings | None, *, window: int | None, max_tokens: int | None,
                chars_per_token: float = 4.0,
                on_event: Callable[[ContextEvent], None] | None = None) -> ContextWindow | WholeHistory:
    """One run's view of its history: a ``ContextWindow`` when ``resolve_limit`` gives a limit, else ``WholeHistory``."""
    if resolve_limit(settings, window, max_tokens) is None:
        return WholeHistory(settings.strategy if settings is not None else DEFAULT_STRATEGY)
    from toolrun.loop.context_window import ContextWindow  # start-up: only a run with a limit estimates and trims

    return ContextWindow(settings, window=window, max_tokens=max_tokens, chars_per_token=chars_per_token,
                         on_event=on_event)
