"""``toolrun call NAME --arg k=v | --args JSON``: run one tool, no model involved.

How an ops engineer checks the wiring of a new tool before any model sees it: the
arguments are validated against the tool's schema exactly as a model's would be.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from toolrun.api import acall, find_tool
from toolrun.cli.approval_prompt import TerminalApprover
from toolrun.cli.color import echo_err
from toolrun.cli.common import complete_tool_names, json_usage_errors, load_catalog_for_cli, tools_dir_option
from toolrun.cli.text_param import TYPED_TEXT
from toolrun.core.errors import EXIT_RUN_FAILED, Problem, UserError
from toolrun.core.event_loop import run_until_done
from toolrun.core.json_limits import MAX_ARGUMENT_DEPTH, NotFinite, TooDeep, loads_bounded
from toolrun.core.text import json_printable, terminal_safe
from toolrun.core.tool import Tool
from toolrun.loop.execution import validate_arguments


def _usage_error_document(problem: Problem) -> dict[str, Any]:
    return {"tool": None, "arguments": None, "result": None, "is_error": True, "duration_ms": 0,
            "problems": [problem.to_json()]}


@click.command("call", cls=json_usage_errors(_usage_error_document))
@click.argument("name", type=TYPED_TEXT, shell_complete=complete_tool_names)
@click.option("--arg", "arg_pairs", multiple=True, metavar="K=V", type=TYPED_TEXT,
              help="One argument; V is read as JSON when the schema says it is not a string. Repeatable.")
@click.option("--args", "args_json", metavar="JSON", type=TYPED_TEXT, help="All arguments as one JSON object (--arg values win).")
@tools_dir_option
@click.option("--json", "as_json", is_flag=True, help='Print {"tool", "arguments", "result", "is_error", "duration_ms"} as JSON, whatever\n'
                   'the outcome.')
@click.option("--yes", "assume_yes", is_flag=True, help="Approve the call if the tool asks for confirmation.")
def call_command(name: str, arg_pairs: tuple[str, ...], args_json: str | None, tools_dir: Path | None,
                 as_json: bool, assume_yes: bool) -> None:
    """Run the tool NAME once with the given arguments and print its result.

    Exit code 0 for a result, 1 for an error result (with --json: invalid arguments too), 2 for an
    unknown tool, unparsable arguments, or (without --json) arguments the schema refuses.
    """
    try:
        catalog = load_catalog_for_cli(tools_dir, names=[name])  # only the files that mention it
        tool = find_tool(catalog, name)
        arguments = parse_arguments(tool, arg_pairs, args_json)
    except UserError as error:
        if not as_json:
            raise
        # --json promises one document on stdout whatever happens: a mistake of the command line
        # is one too (exit 2), with the same problems the text output would print on stderr.
        click.echo(json_printable({"tool": name, "arguments": None, "result": None, "is_error": True,
                                   "duration_ms": 0, "problems": [problem.to_json() for problem in error.problems]},
                                  indent=None))
        click.get_current_context().exit(error.exit_code)
    if not as_json:  # invalid arguments are the command line's mistake; --json reports them in its document
        problems = validate_arguments(tool, arguments)
        if problems:
            hint = f"see the parameters with: toolrun tools show {tool.name}"
            raise UserError([Problem(None, None, f"invalid arguments for {tool.name}: {p}",
                                     hint if index == len(problems) - 1 else None)
                             for index, p in enumerate(problems)])
    outcome = run_until_done(acall(catalog, tool.name, arguments,
                          approver=TerminalApprover(assume_yes, asking="You are about to call")))
    if as_json:
        click.echo(json_printable(outcome.to_json(), indent=None))
    elif outcome.is_error:
        echo_err(terminal_safe(f"error result: {outcome.result}"), "error")
    else:  # a terminal shows the result escaped; a pipe or a file gets it as the tool wrote it
        click.echo(terminal_safe(outcome.result) if sys.stdout.isatty() else outcome.result)
    if outcome.blocks and not as_json:
        click.echo(f"the tool also returned {', '.join(block.describe() for block in outcome.blocks)}; "
                   "--json prints them under content", err=True)
    if outcome.is_error:
        click.get_current_context().exit(EXIT_RUN_FAILED)


def _declared_types(tool: Tool, key: str) -> set[str]:
    schema = (tool.parameters.get("properties") or {}).get(key)
    if not isinstance(schema, dict):
        return set()
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {str(t) for t in declared}
    if "enum" in schema and all(isinstance(v, str) for v in schema["enum"]):
        return {"string"}
    return set()


def parse_value(tool: Tool, key: str, text: str) -> Any:
    """``--arg count=3`` gives 3 when the schema says integer; a string parameter keeps "3"."""
    types = _declared_types(tool, key)
    if not types or types <= {"string"}:  # unknown or string-only: the text is the value
        return text
    try:
        return loads_bounded(text, MAX_ARGUMENT_DEPTH, finite=True)
    except (TooDeep, NotFinite) as exc:
        if "string" in types:  # "Infinity" for a name-or-number parameter: a string the schema takes
            return text
        if isinstance(exc, TooDeep):
            raise UserError(Problem(None, None, f"--arg {key}: the value is {exc}", _TOO_DEEP_FIX)) from None
        raise UserError(Problem(None, None, f"--arg {key}: {exc}", _NOT_FINITE_FIX)) from None
    except ValueError:
        if "string" in types or not types & {"array", "object"}:
            return text  # the schema's own check words the mistake
        raise UserError(Problem(None, None, f"--arg {key}: {text!r} is not JSON, and {key} is an {_kind(types)}",
                                f"write it in JSON: --arg '{key}={_json_form(types, text)}'")) from None


_TOO_DEEP_FIX = f"a call's arguments nest {MAX_ARGUMENT_DEPTH} levels at most: pass a flatter value"
_NOT_FINITE_FIX = "write a finite number, e.g. 1.5 (JSON has no NaN or Infinity)"


def _kind(types: set[str]) -> str:
    return "array" if "array" in types else "object"


def _json_form(types: set[str], text: str) -> str:
    """``ops,sev2`` as the JSON array ``["ops","sev2"]``; an object as an example of one."""
    if "array" in types:
        return json.dumps([item.strip() for item in text.split(",") if item.strip()], ensure_ascii=False,
                          separators=(",", ":"))
    return '{"name": "value"}'


def parse_arguments(tool: Tool, arg_pairs: tuple[str, ...], args_json: str | None) -> dict[str, Any]:
    """The call's arguments from ``--args`` (a JSON object) and ``--arg K=V`` pairs."""
    arguments: dict[str, Any] = {}
    if args_json is not None:
        try:
            parsed = loads_bounded(args_json, MAX_ARGUMENT_DEPTH, finite=True)
        except TooDeep as exc:
            raise UserError(Problem(None, None, f"--args is {exc}", _TOO_DEEP_FIX)) from None
        except NotFinite as exc:
            raise UserError(Problem(None, None, f"--args: {exc}", _NOT_FINITE_FIX)) from None
        except ValueError as exc:
            raise UserError(Problem(None, None, f"--args is not valid JSON: {exc}",
                                    "pass one JSON object, e.g. --args '{\"city\": \"北京\"}'")) from None
        if not isinstance(parsed, dict):
            shown = json.dumps(parsed, ensure_ascii=False)[:80]
            raise UserError(Problem(None, None, f"--args must be a JSON object, got {shown}",
                                    "wrap the arguments in {...}"))
        arguments.update(parsed)
    given: dict[str, str] = {}
    for pair in arg_pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(Problem(None, None, f"--arg {pair!r} is not K=V", "write it as --arg city=北京"))
        if key in given:  # which one was meant? Saying so beats silently keeping the last
            message = f"--arg {key} is given twice ({given[key]!r} and {value!r})"
            raise UserError(Problem(None, None, message, f"keep one --arg {key}=..."))
        given[key] = value
        arguments[key] = parse_value(tool, key, value)
    return arguments
