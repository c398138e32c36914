"""Where a replayed run departs from its recording, said in plain words.

``compare_requests`` compares a request body a replay is about to send with the one that
was recorded for the same exchange, in any of the five wire formats (OpenAI Chat and
Responses, Anthropic, Gemini, Ollama): a different tool set, a different tool definition,
each conversation item that differs — named as "tool result for call_… (tool)" or
"arguments of call_… (tool)" when it is one — and any other request field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


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


# Where each wire format keeps the conversation in its request body.
_CONVERSATION_KEYS = ("messages", "input", "contents")
# Keys whose difference is the replay's own doing or irrelevant to the conversation.
_IGNORED_KEYS = frozenset({"stream", "stream_options"})


def compare_requests(exchange: int, recorded: Any, now: Any) -> list[Divergence]:
    """Differences between a recorded request body and the one a replayed run sends.

    The tool set (names, else the first differing definition); each message or item of the
    conversation that differs (its first differing path, named in plain words when it is a
    tool result or a call's arguments); each other request field that differs.
    """
    if not isinstance(recorded, dict) or not isinstance(now, dict):
        if recorded != now:
            return [Divergence(exchange, "request", "$", recorded, now, "the request body differs")]
        return []
    findings: list[Divergence] = []
    findings.extend(_compare_tools(exchange, recorded.get("tools"), now.get("tools")))
    for key in _CONVERSATION_KEYS:
        if key in recorded or key in now:
            findings.extend(_compare_conversation(exchange, key, recorded.get(key), now.get(key)))
    for key in sorted(set(recorded) | set(now)):
        if key in _CONVERSATION_KEYS or key in _IGNORED_KEYS or key == "tools":
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


def tool_names(tools: Any) -> list[str]:
    """Names of the tools a request offers, in any of the five wire formats."""
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("function"), dict):  # OpenAI Chat, Ollama
            names.append(str(tool["function"].get("name")))
        elif isinstance(tool.get("functionDeclarations"), list):  # Gemini
            names.extend(str(d.get("name")) for d in tool["functionDeclarations"] if isinstance(d, dict))
        elif "name" in tool:  # Anthropic, Responses
            names.append(str(tool["name"]))
    return names


def _compare_tools(exchange: int, recorded: Any, now: Any) -> list[Divergence]:
    old_names, new_names = tool_names(recorded), tool_names(now)
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
    name = _tool_at(now if isinstance(now, list) else [], path)
    return [Divergence(exchange, "tool_definition", path, _plain(old), _plain(new),
                       f"the definition of tool {name} differs at {path}: recorded {_show(old)}, now {_show(new)}")]


def _tool_at(tools: list[Any], path: str) -> str:
    """The name of the tool a ``tools[i]...`` path points into."""
    try:
        index = int(path.split("[", 1)[1].split("]", 1)[0])
        names = tool_names([tools[index]])
        return names[0] if names else f"#{index + 1}"
    except (IndexError, ValueError):
        return "?"


def _compare_conversation(exchange: int, key: str, recorded: Any, now: Any) -> list[Divergence]:
    """One finding per differing item of the conversation, at its first differing path."""
    if not isinstance(recorded, list) or not isinstance(now, list):
        difference = first_difference(recorded, now, key)
        return [] if difference is None else [_conversation_finding(exchange, difference, [], [])]
    findings = []
    for index in range(max(len(recorded), len(now))):
        old = recorded[index] if index < len(recorded) else _MISSING
        new = now[index] if index < len(now) else _MISSING
        difference = first_difference(old, new, f"{key}[{index}]")
        if difference is not None:
            findings.append(_conversation_finding(exchange, difference, recorded, now))
    return findings


def _conversation_finding(exchange: int, difference: tuple[str, Any, Any], recorded: list[Any], now: list[Any]) -> Divergence:
    path, old, new = difference
    described = _describe_in_conversation(path, recorded, now)
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


def _describe_in_conversation(path: str, recorded: list[Any], now: list[Any]) -> tuple[str, str] | None:
    """Name the tool result or call that ``path`` falls in, in whichever wire format it is."""
    steps = _path_steps(path)[1:]
    for conversation in (now, recorded):
        node: Any = conversation
        chain: list[Any] = []
        for step in steps:
            try:
                node = node[step]
            except (KeyError, IndexError, TypeError):
                break
            chain.append(node)
        for item in reversed(chain):  # innermost object that is a call or a result wins
            found = _describe_item(item, conversation)
            if found is not None:
                return found
    return None


def _describe_item(item: Any, conversation: list[Any]) -> tuple[str, str] | None:
    if not isinstance(item, dict):
        return None
    names = _call_names(conversation)
    # OpenAI Chat: {"role": "tool", "tool_call_id", "content"}; Ollama: {"role": "tool", "tool_name"}
    if item.get("role") == "tool":
        call_id = item.get("tool_call_id")
        name = item.get("tool_name") or names.get(call_id)
        return "tool_result", _result_words(call_id, name)
    item_type = item.get("type")
    if item_type == "tool_result":  # Anthropic
        call_id = item.get("tool_use_id")
        return "tool_result", _result_words(call_id, names.get(call_id))
    if item_type == "function_call_output":  # Responses
        call_id = item.get("call_id")
        return "tool_result", _result_words(call_id, names.get(call_id))
    if isinstance(item.get("functionResponse"), dict):  # Gemini
        response = item["functionResponse"]
        return "tool_result", _result_words(response.get("id"), response.get("name"))
    if isinstance(item.get("function"), dict) and "arguments" in item["function"]:  # OpenAI Chat, Ollama
        return "arguments", _arguments_words(item.get("id"), item["function"].get("name"))
    if item_type == "tool_use":  # Anthropic
        return "arguments", _arguments_words(item.get("id"), item.get("name"))
    if item_type == "function_call":  # Responses
        return "arguments", _arguments_words(item.get("call_id"), item.get("name"))
    if isinstance(item.get("functionCall"), dict):  # Gemini
        call = item["functionCall"]
        return "arguments", _arguments_words(call.get("id"), call.get("name"))
    return None


def _call_names(conversation: list[Any]) -> dict[Any, str]:
    """Call id -> tool name, from every tool call in the conversation."""
    names: dict[Any, str] = {}

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("function"), dict) and node.get("id"):
                names[node["id"]] = node["function"].get("name")
            elif node.get("type") == "tool_use" and node.get("id"):
                names[node["id"]] = node.get("name")
            elif node.get("type") == "function_call" and node.get("call_id"):
                names[node["call_id"]] = node.get("name")
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(conversation)
    return names


def _result_words(call_id: Any, name: Any) -> str:
    label = f" for {call_id}" if call_id else ""
    return f"tool result{label}" + (f" ({name})" if name else "")


def _arguments_words(call_id: Any, name: Any) -> str:
    label = f" of {call_id}" if call_id else ""
    return f"arguments{label}" + (f" ({name})" if name else "")


def _show(value: Any, limit: int = 120) -> str:
    """A short quoted rendering of a value for a one-line finding."""
    if value is _MISSING:
        return "(absent)"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"'{text}'"
