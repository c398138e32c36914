"""A recipe's ``output:`` section: the structured final answer it asks for, checked at load.

The recipe schema holds the keys to their types; what it cannot say is checked here with
file, line and fix: exactly one of ``schema`` and ``json: true``, a ``schema`` that is
itself a valid JSON Schema, and (once the provider is known) a ``mode`` it can ask in.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolrun.core.errors import Problem, UserError
from toolrun.core.messages import OutputMode, StructuredOutput
from toolrun.core.tool import Tool
from toolrun.core.yamlsource import YamlSyntaxError, line_of, load_yaml_file, plain
from toolrun.providers.structured import FINAL_ANSWER_TOOL

_EXAMPLE = "output: {schema: {type: object, properties: {city: {type: string}}, required: [city]}}"


def output_problems(document: Any, path: Path) -> list[Problem]:
    """What is wrong with the ``output:`` section of a schema-valid recipe document."""
    section = document.get("output")
    if section is None:
        return []
    line = line_of(document, ["output"])
    has_schema, wants_json = "schema" in section, section.get("json") is True
    if has_schema and "json" in section:
        return [Problem(path, line, "output has both schema and json",
                        "keep schema (an answer of that shape) or json: true (any JSON), not both")]
    if not has_schema and not wants_json:
        return [Problem(path, line, "output says neither what schema the answer has nor json: true",
                        f"write {_EXAMPLE}, or output: {{json: true}}")]
    if has_schema:
        return _schema_problems(plain(section["schema"]), path, line_of(document, ["output", "schema"]))
    return []


def _schema_problems(schema: dict[str, Any], path: Path, line: int | None) -> list[Problem]:
    from jsonschema import Draft202012Validator  # only a recipe that asks for a structured answer
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "the root"
        return [Problem(path, line, f"output.schema is not a valid JSON Schema (at {where}): {exc.message}",
                        "fix the schema (see https://json-schema.org/understanding-json-schema)")]
    from toolrun.catalog.parameter_checks import unusable_values

    return [  # a $ref that points nowhere: every answer would fail to validate
        Problem(path, line, f"output.schema at {'/'.join(map(str, steps)) or 'the root'}: {message}",
                "only references inside the schema work: write $ref: '#/$defs/Name' and put Name under "
                "output.schema.$defs")
        for steps, keyword, message, _ in unusable_values(schema, schema) if keyword == "$ref"
    ]


def structured_output(document: Any) -> StructuredOutput | None:
    """The recipe's ``output:`` as the loop's ``StructuredOutput`` (None when it asks for none)."""
    section = document.get("output")
    if section is None:
        return None
    schema = plain(section["schema"]) if "schema" in section else None
    return StructuredOutput(schema=schema, mode=section.get("mode"), retries=section.get("retries", 1))


def read_output_schema(path: Path) -> StructuredOutput:
    """``--output-schema FILE``: a JSON Schema file (JSON or YAML) as the answer's shape."""
    if not path.is_file():
        raise UserError(Problem(path, None, "--output-schema: the file does not exist",
                                "write the answer's JSON Schema to a file and pass its path"))
    try:
        schema = plain(load_yaml_file(path)) if path.suffix in (".yaml", ".yml") else json.loads(path.read_text())
    except (ValueError, YamlSyntaxError) as exc:
        raise UserError(Problem(path, None, f"--output-schema: the file is not valid JSON or YAML ({exc})",
                                "write one JSON Schema object, e.g. {\"type\": \"object\", \"properties\": {...}}")) from None
    if not isinstance(schema, dict):
        raise UserError(Problem(path, None, "--output-schema: the file does not hold a JSON Schema object",
                                "write one JSON Schema object, e.g. {\"type\": \"object\", \"properties\": {...}}"))
    problems = _schema_problems(schema, path, None)
    if problems:
        raise UserError(problems)
    return StructuredOutput(schema=schema)


def check_output_mode(output: StructuredOutput | None, provider_name: str, modes: tuple[str, ...],
                      file: Path | None, line: int | None) -> None:
    """UserError when ``output.mode`` is not a way the run's provider can ask."""
    if output is None or output.mode is None or output.mode in modes:
        return
    raise UserError(Problem(file, line, f"output.mode {output.mode!r}: provider {provider_name!r} cannot ask for "
                                        "a structured answer that way",
                            f"use one of: {', '.join(modes)}, or leave mode out to let toolrun choose"))


def check_final_tool_name(output: StructuredOutput | None, mode: OutputMode, tools: Sequence[Tool],
                          file: Path | None, line: int | None) -> None:
    """UserError when the answer comes through the forced final tool (``mode``: the run's) and a tool of the
    run has its name: the model would be sent two tools of one name."""
    clash = next((tool for tool in tools if tool.name == FINAL_ANSWER_TOOL), None)
    if output is None or mode != "tool" or clash is None:
        return
    raise UserError(Problem(file, line, f"output is asked for through a tool named '{FINAL_ANSWER_TOOL}' "
                                        f"(output mode tool), and {clash.source.file}:{clash.source.line} "
                                        "defines a tool of that name",
                            "rename that tool, leave it out of the recipe's tools:, or set output.mode: json"))
