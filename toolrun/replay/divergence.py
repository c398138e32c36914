"""Where a replayed run departs from its recording, said in plain words.

``compare_requests`` compares a request body a replay is about to send with the one that
was recorded for the same exchange: a different tool set, a different tool definition,
each conversation item that differs — named as "tool result for call_… (tool)" or
"arguments of call_… (tool)" when it is one — and any other request field. What a body's
tools, conversation and items are is the adapters' knowledge: the adapter that made the
recording is asked (every adapter, when it is not known).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolrun.core.text import excerpt
from toolrun.providers.base import Provider, WireItem
from toolrun.replay.adapters import every_provider


@dataclass
class Divergence:
    """One place where a replayed run asked something other than what was recorded."""

    exchange: int  # 1-based
    kind: str  # tool_set | tool_definition | tool_result | arguments | conversation | request
    path: str  # JSON path in the request body, e.g. "messages[3].content"
    recorded: Any
    now: Any
    message: str

    def __str__(self) -> str:
        return f"replay divergence at exchange {self.exchange}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"exchange": self.exchange, "kind": self.kind, "path": self.path,
                "recorded": self.recorded, "now": self.now, "message": self.message}


# Keys whose difference is the replay's own doing or irrelevant to the conversation.
_IGNORED_KEYS = frozenset({"stream", "stream_options"})


class WireReading:
    """A request body read the way its adapters say: tool names, conversation key, calls and results.

    With several adapters (the recording does not say whose it is) an entry is read by the
    first that knows it, and an item by the one that can also name its tool.
    """

    def __init__(self, providers: Sequence[type[Provider]]):
        self.providers = tuple(providers)
        self.conversation_keys = tuple(dict.fromkeys(p.conversation_key for p in self.providers if p.conversation_key))
        self._call_names: dict[int, dict[Any, str | None]] = {}  # id(conversation) -> its call names

    def tool_names(self, tools: Any) -> list[str]:
        """Names of the tools a request offers."""
        names: list[str] = []
        for entry in tools if isinstance(tools, list) else []:
            found = next((read for p in self.providers if (read := p.tool_names(entry)) is not None), None)
            names.extend(found or [])
        return names

    def item(self, node: Any) -> WireItem | None:
        """What ``node`` is when it is a tool call or a tool result."""
        if not isinstance(node, dict):
            return None
        found = [read for p in self.providers if (read := p.conversation_item(node)) is not None]
        return next((read for read in found if read.name), found[0] if found else None)

    def call_names(self, conversation: list[Any]) -> dict[Any, str | None]:
        """Call id -> tool name, from every tool call in the conversation (read once per conversation)."""
        if id(conversation) in self._call_names:
            return self._call_names[id(conversation)]
        names = self._call_names[id(conversation)] = {}

        def visit(node: Any) -> None:
            if isinstance(node, dict):
                found = self.item(node)
                if found is not None and found.kind == "tool_call" and found.call_id:
                    names[found.call_id] = found.name
                for value in node.values():
                    visit(value)
            elif isinstance(node, list):
                for value in node:
                    visit(value)

        visit(conversation)
        return names


def compare_requests(exchange: int, recorded: Any, now: Any,
                     providers: Sequence[type[Provider]] | None = None) -> list[Divergence]:
    """Differences between a recorded request body and the one a replayed run sends.

    The tool set (names, else the first differing definition); each message or item of the
    conversation that differs (its first differing path, named in plain words when it is a
    tool result or a call's arguments); each other request field that differs. ``providers``:
    the adapters whose wire format the bodies are in (default: every registered one).
    """
    if not isinstance(recorded, dict) or not isinstance(now, dict):
        if recorded != now:
            return [Divergence(exchange, "request", "$", recorded, now, "the request body differs")]
        return []
    reading = WireReading(every_provider() if providers is None else providers)
    findings: list[Divergence] = []
    findings.extend(_compare_tools(exchange, recorded.get("tools"), now.get("tools"), reading))
    for key in reading.conversation_keys:
        if key in recorded or key in now:
            findings.extend(_compare_conversation(exchange, key, recorded.get(key), now.get(key), reading))
    for key in sorted(set(recorded) | set(now)):
        if key in reading.conversation_keys or key in _IGNORED_KEYS or key == "tools":
            continue
        difference = first_difference(recorded.get(key, _MISSING), now.get(key, _MISSING), key)
        if difference is not None:
            path, old, new = difference
            findings.append(Divergence(exchange, "request", path, _plain(old), _plain(new),
                                       f"request field {path} differs: recorded {_show(old)}, now {_show(new)}"))
    return findings


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


_MISSING = _Missing()


def _plain(value: Any) -> Any:
    return None if value is _MISSING else value


def first_difference(recorded: Any, now: Any, path: str = "$") -> tuple[str, Any, Any] | None:
    """The first JSON path (depth first, in order) where two values differ, with both values."""
    if isinstance(recorded, dict) and isinstance(now, dict):
        for key in list(recorded) + [k for k in now if k not in recorded]:
            found = first_difference(recorded.get(key, _MISSING), now.get(key, _MISSING), f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(recorded, list) and isinstance(now, list):
        for index in range(max(len(recorded), len(now))):
            old = recorded[index] if index < len(recorded) else _MISSING
            new = now[index] if index < len(now) else _MISSING
            found = first_difference(old, new, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if type(recorded) is not type(now) or recorded != now:
        return path, recorded, now
    return None


def tool_names(tools: Any, providers: Sequence[type[Provider]] | None = None) -> list[str]:
    """Names of the tools a request offers, read by ``providers`` (default: every registered adapter)."""
    return WireReading(every_provider() if providers is None else providers).tool_names(tools)


def _compare_tools(exchange: int, recorded: Any, now: Any, reading: WireReading) -> list[Divergence]:
    old_names, new_names = reading.tool_names(recorded), reading.tool_names(now)
    if sorted(old_names) != sorted(new_names):
        missing = [n for n in old_names if n not in new_names]
        added = [n for n in new_names if n not in old_names]
        words = []
        if missing:
            words.append(f"no longer offers {', '.join(missing)}")
        if added:
            words.append(f"now also offers {', '.join(added)}")
        detail = "; ".join(words) or "the same names in other numbers"
        return [Divergence(exchange, "tool_set", "tools", old_names, new_names,
                           f"a different tool set: recorded [{', '.join(old_names)}], now [{', '.join(new_names)}] ({detail})")]
    difference = first_difference(recorded, now, "tools")
    if difference is None:
        return []
    path, old, new = difference
    name = _tool_at(now if isinstance(now, list) else [], path, reading)
    return [Divergence(exchange, "tool_definition", path, _plain(old), _plain(new),
                       f"the definition of tool {name} differs at {path}: recorded {_show(old)}, now {_show(new)}")]


def _tool_at(tools: list[Any], path: str, reading: WireReading) -> str:
    """The name of the tool a ``tools[i]...`` path points into."""
    try:
        index = int(path.split("[", 1)[1].split("]", 1)[0])
        names = reading.tool_names([tools[index]])
        return names[0] if names else f"#{index + 1}"
    except (IndexError, ValueError):
        return "?"


def _compare_conversation(exchange: int, key: str, recorded: Any, now: Any, reading: WireReading) -> list[Divergence]:
    """One finding per differing item of the conversation, at its first differing path.

    The two conversations are lined up as a diff lines up texts: an item missing from one of
    them (a system message the run does not send) is one finding, and the items after it
    are compared with their own counterparts, not with their neighbours.
    """
    if not isinstance(recorded, list) or not isinstance(now, list):
        difference = first_difference(recorded, now, key)
        return [] if difference is None else [_conversation_finding(exchange, difference, (None, recorded), (None, now),
                                                                    reading)]
    if recorded == now:
        return []
    findings = []
    for old_index, new_index in _differing_pairs(recorded, now):
        old = recorded[old_index] if old_index is not None else _MISSING
        new = now[new_index] if new_index is not None else _MISSING
        index = new_index if new_index is not None else old_index
        difference = first_difference(old, new, f"{key}[{index}]")
        if difference is not None:
            findings.append(_conversation_finding(exchange, difference, (old_index, recorded), (new_index, now), reading))
    return findings


_ALIGNED_AT_MOST = 200  # items left to line up after the common start and end; past it, item by item


def _differing_pairs(recorded: list[Any], now: list[Any]) -> list[tuple[int | None, int | None]]:
    """(recorded index, now index) of the items that differ once both are lined up; None: not in that one.

    The common start and end are set aside first (a message missing at the start leaves the
    rest a common end); what is left is lined up by difflib when small, else item by item
    (difflib's cost grows with the square of it: a long replay must stay quick).
    """
    shorter = min(len(recorded), len(now))
    start = 0
    while start < shorter and first_difference(recorded[start], now[start]) is None:
        start += 1
    end = 0
    while end < shorter - start and first_difference(recorded[-1 - end], now[-1 - end]) is None:
        end += 1
    old_middle, new_middle = recorded[start:len(recorded) - end], now[start:len(now) - end]
    opcodes: Sequence[tuple[str, int, int, int, int]] = [("replace", 0, len(old_middle), 0, len(new_middle))]
    if max(len(old_middle), len(new_middle)) <= _ALIGNED_AT_MOST:
        import difflib

        opcodes = difflib.SequenceMatcher(None, _keys(old_middle), _keys(new_middle), autojunk=False).get_opcodes()
    pairs: list[tuple[int | None, int | None]] = []
    for tag, old_start, old_end, new_start, new_end in opcodes:
        if tag == "equal":
            continue
        both = min(old_end - old_start, new_end - new_start)  # a replaced stretch: item by item, then the rest
        pairs += [(start + old_start + offset, start + new_start + offset) for offset in range(both)]
        pairs += [(start + index, None) for index in range(old_start + both, old_end)]
        pairs += [(None, start + index) for index in range(new_start + both, new_end)]
    return pairs


def _keys(items: list[Any]) -> list[str]:
    return [json.dumps(item, sort_keys=True, ensure_ascii=False, default=str) for item in items]


Placed = tuple[int | None, Any]  # an item's index in its conversation (None: the path starts at it), and the conversation


def _conversation_finding(exchange: int, difference: tuple[str, Any, Any], recorded: Placed, now: Placed,
                          reading: WireReading) -> Divergence:
    path, old, new = difference
    described = _describe_in_conversation(path, (now, recorded), reading)
    if described is None:
        kind, message = "conversation", f"the conversation differs at {path}: recorded {_show(old)}, now {_show(new)}"
    else:
        kind, what = described
        message = f"{what} differs: recorded {_show(old)}, now {_show(new)}"
    return Divergence(exchange, kind, path, _plain(old), _plain(new), message)


def _path_steps(path: str) -> list[str | int]:
    """``"messages[3].content[0].text"`` -> ["messages", 3, "content", 0, "text"]."""
    steps: list[str | int] = []
    for piece in path.replace("[", ".[").split("."):
        if not piece:
            continue
        steps.append(int(piece[1:-1]) if piece.startswith("[") else piece)
    return steps


def _describe_in_conversation(path: str, places: tuple[Placed, Placed], reading: WireReading) -> tuple[str, str] | None:
    """Name the tool result or call that ``path`` falls in, as the adapters read it (the run's item first)."""
    steps = _path_steps(path)[2:]  # after the conversation key and the item's index
    for index, conversation in places:
        if index is None or not isinstance(conversation, list):
            continue
        node: Any = conversation[index]
        chain: list[Any] = [node]
        for step in steps:
            try:
                node = node[step]
            except (KeyError, IndexError, TypeError):
                break
            chain.append(node)
        for item in reversed(chain):  # innermost object that is a call or a result wins
            found = reading.item(item)
            if found is not None:
                name = found.name or reading.call_names(conversation).get(found.call_id)
                if found.kind == "tool_result":
                    return "tool_result", _result_words(found.call_id, name)
                return "arguments", _arguments_words(found.call_id, name)
    return None


def _result_words(call_id: Any, name: Any) -> str:
    label = f" for {call_id}" if call_id else ""
    return f"tool result{label}" + (f" ({name})" if name else "")


def _arguments_words(call_id: Any, name: Any) -> str:
    label = f" of {call_id}" if call_id else ""
    return f"arguments{label}" + (f" ({name})" if name else "")


def _show(value: Any) -> str:
    """A short quoted rendering of a value for a one-line finding."""
    if value is _MISSING:
        return "(absent)"
    return f"'{excerpt(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False), 119)}'"
