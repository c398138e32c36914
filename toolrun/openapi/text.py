"""Descriptions from an OpenAPI document made plain: markup trimmed, length capped, names made valid."""

from __future__ import annotations

import html
import re

MAX_DESCRIPTION_CHARS = 1200  # a tool's description: what, when and limits fit; a manual page does not
MAX_PARAMETER_DESCRIPTION_CHARS = 400

# What a reader of the rendered page never sees: a <script> or <style> element's text (an unclosed one runs to
# the end, as in a browser) and an HTML comment. An inline code span (`<script>`) is text shown as written.
_HIDDEN = re.compile(r"(`[^`\n]*`)|<(script|style)\b[^<>]*>.*?(?:</\2\s*>|\Z)|<!--.*?(?:-->|\Z)",
                     re.IGNORECASE | re.DOTALL)
_HIDDEN_PASSES = 8  # "<scr<script></script>ipt>" makes a new element once the inner one is gone: a few rounds
_LINK = re.compile(r"\[([^\]]+)\]\((?:[^()]|\([^)]*\))*\)")  # [text](url) -> text
_BREAK = re.compile(r"<\s*(br|/p|p|/li|/div|/h\d)\s*/?\s*>", re.IGNORECASE)
_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_EMPHASIS = re.compile(r"(\*\*|__)(.+?)\1")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+", re.MULTILINE)
_SPACES = re.compile(r"[ \t]+")
_BLANK_LINES = re.compile(r"\n\s*\n\s*(\n\s*)+")


def clean_description(text: str, limit: int = MAX_PARAMETER_DESCRIPTION_CHARS) -> str:
    """``text`` without HTML tags (and what script, style and comments hide), Markdown links/emphasis/headings and
    extra blank lines, at most ``limit`` chars."""
    text = _without_hidden_text(text)
    text = _BREAK.sub("\n", text)
    text = html.unescape(_TAG.sub("", text))
    text = _LINK.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\2", text)
    text = _HEADING.sub("", text)
    lines = [_SPACES.sub(" ", line).strip() for line in text.splitlines()]
    text = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    return cap(text, limit)


def _without_hidden_text(text: str) -> str:
    """``text`` without script and style elements and HTML comments: code a page runs, or text it hides, is no
    description for a model (and what a reviewer of the rendered page never reads must not reach one)."""
    for _ in range(_HIDDEN_PASSES):
        if "<" not in text:
            break
        shorter = _HIDDEN.sub(lambda match: match.group(1) or "", text)
        if shorter == text:
            break
        text = shorter
    return text


def cap(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a sentence (or word) end, with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    sentence = max(cut.rfind(". "), cut.rfind(".\n"))
    if sentence > limit // 2:
        return cut[: sentence + 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def identifier(text: str, fallback: str = "value") -> str:
    """``text`` as an argument name: letters, digits and _, not starting with a digit, at most 64 chars."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")
    if not name:
        name = fallback
    if name[0].isdigit():
        name = f"_{name}"
    return name[:64]


def tool_name(text: str) -> str:
    """``text`` as a tool name: letters, digits, _ and -, at most 64 chars."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_-")
    return (name or "operation")[:64]


def env_prefix(title: str) -> str:
    """An environment-variable prefix from an API's title: "Swagger Petstore" -> SWAGGER_PETSTORE."""
    words = re.sub(r"[^A-Za-z0-9]+", "_", title).strip("_").upper()
    if not words:
        return "API"
    return f"API_{words}" if words[0].isdigit() else words[:40].rstrip("_")


_TEMPLATE_SYNTAX = re.compile(r"\{\{|\{%|\{#|\$\{")


def has_template_syntax(text: str) -> bool:
    """True for text the http backend would render (``{{ }}``, ``{% %}``, ``{# #}``, ``${env:NAME}``):
    a document's path or server URL must stay data, not choose which variable is sent."""
    return _TEMPLATE_SYNTAX.search(text) is not None
