"""The shell backend's lint warnings: what makes some calls of a shell tool fail or misbehave.

The lint asks every backend for its ``warnings``; these are the shell backend's (secret-in-argv,
argv-option-injection, state-changing-without-annotations; shell-exit-code is in shell.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

from toolrun.backends.env_reference_lint import config_strings, env_reference_warnings
from toolrun.backends.shell_config import ShellConfig
from toolrun.backends.warning import BackendWarning
from toolrun.core.secrets import ENV_REFERENCE
from toolrun.core.templates import placeholders
from toolrun.core.tool import Tool


@functools.cache
def _template_first() -> re.Pattern[str]:
    # An argv element whose first rendered text comes from a template: past whitespace and {# comments #}.
    return re.compile(r"\s*(?:\{#.*?#\}\s*)*\{[{%]", re.DOTALL)


def shell_lint_warnings(tool: Tool, config: ShellConfig) -> list[BackendWarning]:
    """Every shell lint warning for ``tool`` (its typed ``config``) but shell-exit-code."""
    # Under shell: true the command is the shell's: $TOOLRUN_ARG_CITY and ${HOME} are what it expands.
    skip = frozenset({"backend.shell.command"}) if config.shell else frozenset()
    strings = config_strings(tool.backend.config, "backend.shell", skip)
    return [*argv_findings(tool, config), *annotation_findings(tool), *env_reference_warnings(strings, ("backend.shell.env.",))]


def _value_cannot_start_with_dash(schema: Any) -> bool:
    """True when the schema guarantees a value that is not an option (no leading "-")."""
    if not isinstance(schema, dict):
        return False
    if isinstance(schema.get("enum"), list):
        return all(not str(value).startswith("-") for value in schema["enum"])
    if "const" in schema:
        return not str(schema["const"]).startswith("-")
    kind = schema.get("type")
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        minimum = schema.get("minimum", schema.get("exclusiveMinimum"))
        return isinstance(minimum, (int, float)) and minimum >= 0
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        # The first thing an anchored pattern requires: a class, \d / \w, or a literal.
        first = re.match(r"\^(\[(?:\\.|[^\]])*\]|\\[dw]|[A-Za-z0-9_/.])", pattern)
        if first and pattern[first.end() : first.end() + 1] not in ("*", "?") and "|" not in pattern:
            try:
                return re.fullmatch(first.group(1), "-") is None
            except re.error:
                return False
    return False


def argv_findings(tool: Tool, config: ShellConfig) -> Iterator[BackendWarning]:
    """secret-in-argv; argv-option-injection: an argv element that starts with a model value, before any "--"."""
    if config.shell:
        return
    argv = config.argv
    secrets = sorted({name for element in argv for name in ENV_REFERENCE.findall(element)})
    if secrets:
        moved = ", ".join(f'{name}: "${{env:{name}}}"' for name in secrets)
        yield BackendWarning("secret-in-argv", "backend.shell.argv",
            f"argv carries the secret {', '.join(secrets)}: every user of the machine sees a command line (ps); "
            f"pass it in the environment instead — env: {{{moved}}} — and read it there",
        )
    properties = tool.parameters.get("properties", {}) or {}
    for index, element in enumerate(argv):
        if element == "--":
            return  # everything after it is an operand
        if not _template_first().match(element):
            continue
        try:
            names = placeholders(element)
        except Exception:  # a template syntax error is the loader's to report
            continue
        risky = sorted(name for name in names if not _value_cannot_start_with_dash(properties.get(name)))
        if not risky:
            continue
        key_path = "backend.shell.argv"
        if index == 0:
            message = (
                f"argv[0] is chosen by the model ({', '.join(risky)}): it picks the program to run; "
                "name the program yourself and pass the value as an argument"
            )
        else:
            message = (
                f"argv[{index}] {element!r} starts with a model-supplied value ({', '.join(risky)}): a value like "
                '"--output=/etc/x" would be read as an option; put "--" before it in argv, or constrain the '
                "parameter (enum, or a pattern such as ^[A-Za-z0-9])"
            )
        yield BackendWarning("argv-option-injection", key_path, message)


def annotation_findings(tool: Tool) -> Iterator[BackendWarning]:
    """state-changing-without-annotations: a command may change things, and the tool does not say."""
    if tool.annotations is not None:
        return
    yield BackendWarning(
        "state-changing-without-annotations",
        "backend",
        "shell tool without `annotations`: a command may change things; say what it does, e.g. "
        "`annotations: {read_only: true}` for a query, or `{destructive: true}` for one that deletes",
    )
