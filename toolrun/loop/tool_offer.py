"""Which of a run's tools each model request offers: all of them, or a selection.

A catalog of hundreds of tools cannot go in every request (OpenAI refuses more than 128, and
long before that the definitions cost thousands of tokens and the model chooses worse).
``settings.tool_selection`` offers per request:

- ``mode: rank`` — the ``max_tools`` tools the conversation's user messages are most about
  (``toolrun.catalog.tool_ranking``), plus ``tools_always`` and every tool already called;
- ``mode: search`` — one ``find_tools`` tool the model searches the catalog with; what a
  search finds is offered from the next request on, with ``tools_always`` and the tools called.

Either way a call of any of the run's tools still runs: the selection only decides what is
shown, so a model that remembers a tool from an earlier turn is not refused.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Literal

from toolrun.core.errors import Problem, UserError
from toolrun.core.messages import Message, ToolDefinition
from toolrun.core.tool import FIND_TOOLS, Tool

if TYPE_CHECKING:
    from toolrun.catalog.tool_ranking import ToolIndex

MODES = ("rank", "search")
DEFAULT_MAX_TOOLS = 20
FIND_TOOLS_DEFINITION = ToolDefinition(
    FIND_TOOLS,
    "Search the available tools by what you want to do. The tools found can be called from your next "
    "answer on. Search again with other words when none fits.",
    {"type": "object", "properties": {"query": {"type": "string", "description":
                                                "what the tool should do, in a few words (e.g. 'weather forecast for a city')"}},
     "required": ["query"], "additionalProperties": False},
)


@dataclass(frozen=True)
class ToolSelection:
    """``settings.tool_selection``: how many tools a request offers, and how they are chosen."""

    max_tools: int = DEFAULT_MAX_TOOLS
    tools_always: tuple[str, ...] = ()  # names or globs, offered in every request
    mode: str = "rank"

    def to_mapping(self) -> dict[str, Any]:
        """The keys a recipe would write (defaults left out)."""
        mapping: dict[str, Any] = {"max_tools": self.max_tools}
        if self.tools_always:
            mapping["tools_always"] = list(self.tools_always)
        if self.mode != "rank":
            mapping["mode"] = self.mode
        return mapping

    @classmethod
    def from_mapping(cls, mapping: dict[str, Any]) -> ToolSelection:
        return cls(max_tools=mapping.get("max_tools", DEFAULT_MAX_TOOLS),
                   tools_always=tuple(mapping.get("tools_always") or ()), mode=mapping.get("mode", "rank"))


class ToolOffer:
    """The tools of one run and the definitions each of its requests offers."""

    def __init__(self, tools: Sequence[Tool], selection: ToolSelection | None) -> None:
        self.selection = selection
        # In the order first called; kept when an old exchange leaves the history.
        self.called: dict[str, None] = {}
        self.found: list[str] = []  # what find_tools found, in the order found
        self.replace_tools(tools)

    def replace_tools(self, tools: Sequence[Tool]) -> None:
        """Offer from ``tools`` from now on (the run's tools changed)."""
        self.tools = {tool.name: tool for tool in tools}
        self.all_definitions = [tool.definition() for tool in tools]
        self._index: ToolIndex | None = None  # built at the first request that ranks

    @property
    def index(self) -> ToolIndex:
        if self._index is None:
            from toolrun.catalog.tool_ranking import ToolIndex  # start-up: a run without a selection ranks nothing

            self._index = ToolIndex.of_tools(self.tools.values())
        return self._index

    def answers(self, name: str) -> bool:
        """Whether a call of ``name`` is a ``find_tools`` search this offer answers itself."""
        return self.selection is not None and self.selection.mode == "search" and name == FIND_TOOLS

    def definitions(self, history: Sequence[Message], limit: int | None = None,
                    forced: str | None = None) -> list[ToolDefinition]:
        """The tool definitions of the next request, given the conversation so far; at most ``limit``.

        ``forced``: the tool the request's ``tool_choice`` names, offered whatever the selection (a
        provider refuses a request that forces a tool it does not offer). Past the limit the
        lowest-ranked tools go first, then the tools called longest ago. The definitions keep
        the catalog's order, so a provider's prompt cache sees the same prefix.
        """
        if self.selection is None:
            return self.all_definitions
        for message in history:
            self.called.update({call.name: None for call in message.tool_calls if call.name in self.tools})
        named = [forced] if forced in self.tools else []
        kept = _unique(named + self._always() + list(self.called)[::-1])  # the latest called first
        if self.selection.mode == "search":
            chosen = set(_unique(kept + self.found)[: None if limit is None else limit - 1])
            return [FIND_TOOLS_DEFINITION, *(d for d in self.all_definitions if d.name in chosen)]
        fixed = set(kept)
        ranked = [tool.name for tool in self.index.rank(_user_text(history)) if tool.score > 0 and tool.name not in fixed]
        # max_tools slots are always filled: a question sharing no word with a tool still gets tools to choose from
        taken = fixed | set(ranked)
        ranked += [definition.name for definition in self.all_definitions if definition.name not in taken]
        ranked = ranked[: self.selection.max_tools]
        chosen = set(_unique(kept + ranked)[:limit])
        return [definition for definition in self.all_definitions if definition.name in chosen]

    def offered(self, definitions: Sequence[ToolDefinition]) -> list[str] | Literal["all"] | None:
        """What a request with ``definitions`` offered, for its turn's record: the names, or "all" when every
        one of the run's tools was among them; None without a selection (every request offers all)."""
        if self.selection is None:
            return None
        names = [definition.name for definition in definitions]
        return "all" if set(self.tools) <= set(names) else names

    def find(self, arguments: dict[str, Any] | None) -> tuple[str, bool]:
        """A ``find_tools`` call's result (JSON listing what it found) and whether it is an error."""
        assert self.selection is not None
        query = (arguments or {}).get("query")
        if not isinstance(query, str) or not query.strip():
            return "find_tools needs a 'query': a few words saying what the tool should do", True
        ranked = [tool for tool in self.index.rank(query, self.selection.max_tools) if tool.score > 0]
        self.found = _unique(self.found + [tool.name for tool in ranked])
        listing = [{"name": tool.name, "description": self.tools[tool.name].description} for tool in ranked]
        return json.dumps({"tools": listing}, ensure_ascii=False), False

    def _always(self) -> list[str]:
        assert self.selection is not None
        return [name for name in self.tools if any(fnmatchcase(name, glob) for glob in self.selection.tools_always)]

    def check_limit(self, provider: str, limit: int | None) -> None:
        """Raise ``UserError`` when the run would offer more tools than the provider accepts."""
        if limit is None:
            return
        if self.selection is None and len(self.tools) > limit:
            raise UserError(Problem(None, None, f"{len(self.tools)} tools for provider {provider!r}, which accepts "
                                    f"at most {limit} per request",
                                    "offer a selection per request with settings.tool_selection: {max_tools: 20}, "
                                    "or list fewer tools in the recipe's tools:"))
        if self.selection is not None and len(self._always()) + self.selection.max_tools + 1 > limit:
            raise UserError(Problem(None, None, f"tool_selection offers up to {self.selection.max_tools} tools plus "
                                    f"{len(self._always())} in tools_always; provider {provider!r} accepts at most "
                                    f"{limit} per request", "lower settings.tool_selection.max_tools or tools_always"))


def _user_text(history: Sequence[Message]) -> str:
    return "\n".join(message.text or "" for message in history if message.role == "user")


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


def check_selection(selection: ToolSelection, tools: Sequence[Tool]) -> None:
    """Raise ``UserError`` for a selection that cannot work with ``tools``."""
    if selection.mode not in MODES:
        raise UserError(Problem(None, None, f"tool_selection.mode {selection.mode!r} is not one of {', '.join(MODES)}",
                                "use mode: rank (the most relevant tools each request) or mode: search"))
    if selection.max_tools < 1:
        raise UserError(Problem(None, None, f"tool_selection.max_tools is {selection.max_tools}",
                                "set max_tools to 1 or more"))
    names = [tool.name for tool in tools]
    for glob in selection.tools_always:
        if not any(fnmatchcase(name, glob) for name in names):
            raise UserError(Problem(None, None, f"tool_selection.tools_always names {glob!r}, which is not one of "
                                    "the run's tools", "name a tool the recipe offers (globs work)"))
    if FIND_TOOLS in names:
        raise UserError(Problem(None, None, f"a tool is named {FIND_TOOLS!r}, which tool_selection reserves",
                                "rename the tool"))
