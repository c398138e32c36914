"""Lint rules for authoring mistakes: environment variables spelt the shell's way, fixes for MCP server tools,
value lists after a colon."""

from __future__ import annotations

from typing import Any

import pytest

from tests.catalog.test_lint import GOOD_DESCRIPTION, make_tool
from toolrun.catalog.lint import LintFinding, lint_catalog
from toolrun.core.tool import Annotations, BackendSpec

WRITES = Annotations(read_only=False, destructive=False, idempotent=True)


def findings_of(backend: BackendSpec, rule: str, **tool: Any) -> list[LintFinding]:
    return [f for f in lint_catalog([make_tool(backend=backend, annotations=WRITES, **tool)]) if f.rule == rule]


def test_a_braced_name_without_env_is_an_error_with_the_env_spelling_as_fix() -> None:
    backend = BackendSpec("http", {"method": "GET", "url": "https://api.example.com/{city}",
                                   "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}})
    [finding] = findings_of(backend, "env-reference-without-env")
    assert finding.severity == "error"
    assert '"${env:GITHUB_TOKEN}"' in finding.message


@pytest.mark.parametrize("config", [
    {"argv": ["curl", "-H", "X-Token: ${API_TOKEN}", "--", "{{ city }}"]},
    {"argv": ["echo", "--", "{{ city }}"], "env": {"TOKEN": "${API_TOKEN}"}},
])
def test_a_braced_name_in_a_shell_tool_is_an_error_too(config: dict[str, Any]) -> None:
    assert [f.severity for f in findings_of(BackendSpec("shell", config), "env-reference-without-env")] == ["error"]


def test_a_shell_true_command_may_use_shell_variables() -> None:
    backend = BackendSpec("shell", {"shell": True, "command": 'echo "${TOOLRUN_ARG_CITY}" "$HOME"'})
    assert findings_of(backend, "env-reference-without-env") == []
    assert findings_of(backend, "dollar-variable") == []


def test_a_bare_dollar_name_in_a_header_or_env_value_is_a_warning() -> None:
    http = BackendSpec("http", {"method": "GET", "url": "/{city}", "headers": {"Authorization": "token $GITHUB_TOKEN"}})
    shell = BackendSpec("shell", {"argv": ["env", "--", "{{ city }}"], "env": {"TOKEN": "$API_TOKEN"}})
    for backend, name in ((http, "GITHUB_TOKEN"), (shell, "API_TOKEN")):
        [finding] = findings_of(backend, "dollar-variable")
        assert finding.severity == "warning" and f'"${{env:{name}}}"' in finding.message


def test_odata_and_mongo_operators_stay_legal() -> None:
    backend = BackendSpec("http", {"method": "GET", "url": "/{city}", "query": {"$top": "10", "$filter": "$gt"},
                                   "json": {"age": {"$gt": 3}}, "headers": {"Prefer": "odata.$top"}})
    assert findings_of(backend, "dollar-variable") == [] == findings_of(backend, "env-reference-without-env")


def test_findings_on_an_mcp_server_tool_name_the_tools_override() -> None:
    backend = BackendSpec("mcp_server", {"command": ["python", "-m", "x"], "tool": "search_issues"})
    [finding] = findings_of(backend, "description-too-short", name="gh_search_issues", description="Search issues.")
    assert "under `tools:`" in finding.message and "`- name: search_issues`" in finding.message
    python = findings_of(BackendSpec("python", {"function": "f.py:f"}), "description-too-short", description="Search.")
    assert "tools:" not in python[0].message


@pytest.mark.parametrize("description", [
    "Allowed values: open, closed, all.",
    "Output format. Options: json, yaml or text",
    "State filter; possible values: open | closed",
])
def test_a_value_list_after_a_colon_is_an_enum_in_prose(description: str) -> None:
    parameters = {"type": "object", "properties": {"city": {"type": "string", "description": description}},
                  "required": ["city"]}
    [finding] = [f for f in lint_catalog([make_tool(parameters=parameters)]) if f.rule == "enum-in-prose"]
    assert "enum" in finding.message


def test_a_colon_without_a_list_is_no_enum() -> None:
    parameters = {"type": "object", "properties": {"city": {"type": "string", "description": "Note: see the docs."}}}
    assert not [f for f in lint_catalog([make_tool(parameters=parameters, description=GOOD_DESCRIPTION)])
                if f.rule == "enum-in-prose"]
