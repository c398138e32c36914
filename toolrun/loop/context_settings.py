"""What a run says about its context window, what the window reports, and the view of a run without a limit.

A recipe's ``settings.context`` (``ContextSettings``) gives each request a limit of input tokens;
``open_window`` makes the run's view of its history: a ``ContextWindow`` that fits each request
to the limit, or, with no limit (no ``settings.context``, or a model whose window is unknown),
``WholeHistory``, which sends every request as it is, without importing the estimates, the
trimming and the summary request (``toolrun.loop.context_window``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolrun.core.errors import RunFailed
from toolrun.core.text import counted

if TYPE_CHECKING:
    from toolrun.core.messages import ModelRequest, Usage
    from toolrun.loop.context_summary import Summarizer
    from toolrun.loop.context_window import ContextWindow

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


@dataclass
class ContextEvent:
    """What one request's view left out or changed, and the estimate before and after."""

    request: int  # 1-based: the model request this view went out with
    tokens_before: int
    tokens_after: int
    limit: int
    dropped_messages: int = 0
    dropped_calls: list[str] = field(default_factory=list)
    cleared_calls: list[str] = field(default_factory=list)
    cut_calls: list[str] = field(default_factory=list)
    summarized: bool = False

    def to_json(self) -> dict[str, Any]:
        """``{"request", "tokens_before", "tokens_after", "limit", ...}`` with only what happened."""
        document: dict[str, Any] = {"request": self.request, "tokens_before": self.tokens_before,
                                    "tokens_after": self.tokens_after, "limit": self.limit}
        if self.dropped_messages:
            document["dropped_messages"] = self.dropped_messages
        for key in ("dropped_calls", "cleared_calls", "cut_calls"):
            if getattr(self, key):
                document[key] = list(getattr(self, key))
        if self.summarized:
            document["summarized"] = True
        return document

    def __str__(self) -> str:
        said = []
        if self.dropped_messages:
            said.append(f"dropped {self.dropped_messages} earlier message{'s' if self.dropped_messages != 1 else ''}"
                        + (f" ({counted(len(self.dropped_calls), 'call')})" if self.dropped_calls else ""))
        if self.summarized:
            said.append("summarized them")
        if self.cleared_calls:
            said.append(f"cleared {len(self.cleared_calls)} old tool results")
        if self.cut_calls:
            said.append(f"cut the newest result of {', '.join(self.cut_calls)}")
        return (f"context, request {self.request}: {'; '.join(said)} — "
                f"~{self.tokens_before:,} → ~{self.tokens_after:,} tokens (limit {self.limit:,})")


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
