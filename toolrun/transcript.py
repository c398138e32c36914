"""The JSON document of a run under another name, for callers that hold a bare ``RunResult``.

The document itself is ``RunResult.to_json()`` (``toolrun.results``); this module keeps
the two spellings transcripts were written with, and ``dumps``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from toolrun.results import RunResult, ToolCallRecord, dumps, usage_totals
from toolrun.secrets import redact


def transcript_document(result: RunResult, *, recipe: str, model: str, mode: str) -> dict[str, Any]:
    """The run's document with ``recipe``, ``model`` and ``mode`` set (as ``toolrun recipe --json`` prints it)."""
    return dataclasses.replace(result, recipe=recipe, model=model, mode=mode).to_json()


def tool_call_document(record: ToolCallRecord) -> dict[str, Any]:
    """One call's document, redacted with the active run's secrets."""
    return redact(record.to_json())


__all__ = ["dumps", "tool_call_document", "transcript_document", "usage_totals"]
