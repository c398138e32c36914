"""A deterministic estimate of how many tokens a tool definition costs in every request.

It is an ESTIMATE, not a tokenizer: about 4 characters per token for Latin text and JSON
punctuation, and one token per CJK character (BPE vocabularies rarely merge them). It
needs no model files, gives the same number on every machine, and is within the right
order of magnitude for OpenAI, Anthropic and Gemini tokenizers, which is what a budget
check needs.
"""

from __future__ import annotations

import json
import math
from typing import Any

from toolrun.catalog.cjk import cjk_count
from toolrun.core.tool import Tool

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Estimated token count of ``text`` (ceil(other chars / 4) + CJK characters)."""
    cjk = cjk_count(text)
    return cjk + math.ceil((len(text) - cjk) / CHARS_PER_TOKEN)


def estimate_definition_tokens(definition: dict[str, Any]) -> int:
    """Estimated tokens of a tool definition as sent: its compact JSON."""
    return estimate_tokens(json.dumps(definition, ensure_ascii=False, separators=(",", ":")))


def token_estimate(tool: Tool) -> int:
    """Estimated tokens of the tool's definition (the OpenAI Chat export) in every request."""
    # The export's shape, built without its defensive copy: only serialised here.
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return estimate_definition_tokens({"type": "function", "function": function})
