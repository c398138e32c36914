"""schema_dialects.allows_null: the one answer to "does this schema accept null?" (lint and export)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolrun.catalog.lint import lint_catalog
from toolrun.core.schema_dialects import allows_null
from toolrun.core.tool import BackendSpec, SourceLocation, Tool


@pytest.mark.parametrize(("schema", "expected"), [
    ({"type": "null"}, True),
    ({"type": ["string", "null"]}, True),
    ({"enum": ["a", None]}, True),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, True),
    ({"oneOf": [{"type": "integer"}, {"anyOf": [{"enum": [None]}]}]}, True),
    (True, True),
    ({"type": "string"}, False),
    ({"type": "string", "nullable": True}, False),  # OpenAPI's word, which JSON Schema ignores
    ({"enum": ["a", "b"]}, False),
    ({"enum": None, "anyOf": "not a list"}, False),  # malformed: no answer by accident
    (False, False),
])
def test_allows_null(schema: Any, expected: bool) -> None:
    assert allows_null(schema) is expected


def test_the_nullable_lint_is_quiet_when_an_any_of_branch_already_admits_null() -> None:
    parameters = {"type": "object", "properties": {
        "note": {"nullable": True, "description": "A note", "anyOf": [{"type": "string"}, {"type": "null"}]}}}
    tool = Tool(name="t", description="Read a note. Use it when the user asks for the note of the day.",
                parameters=parameters, backend=BackendSpec("python", {"function": "json:dumps"}),
                source=SourceLocation(Path("t.yaml"), 1))
    assert [f for f in lint_catalog([tool]) if f.rule == "openapi-nullable"] == []
