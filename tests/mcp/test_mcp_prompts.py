"""``toolrun mcp --recipes``: recipes as MCP prompts, completion, logging/setLevel and cursors, through the SDK's
own client against the server in this process (the official conformance suite runs in tests/integration/)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.mcp_helpers import assert_valid, wire
from toolrun.core.errors import UserError
from toolrun.core.secrets import Redactor, redacting
from toolrun.mcp.live_catalog import LiveCatalog
from toolrun.mcp.prompts import RecipePrompts
from toolrun.mcp.server import CatalogServer
from toolrun.sessions.recipe import load_recipe

ECHO_TOOL = """
    name: echo
    description: >-
      Repeats the text it is given. Use it to check that calls work end to end; do not use
      it for anything else, it does nothing useful.
    parameters:
      type: object
      properties: {text: {type: string, description: The text to repeat.}}
      required: [text]
      additionalProperties: false
    annotations: {read_only: true}
    backend: {shell: {argv: [echo, "{{ text }}"]}}
"""

TRIAGE = """
    name: triage
    description: Checks one service's health, deploys and disk.
    model: openai:gpt-4o-mini
    system: You are the on-call assistant for {{ team }}.
    messages:
      - user: "{{ service }} feels slow in {{ environment }}. Is it healthy?"
      - assistant: Let me look.
      - user: Go on.
    vars: {team: platform, environment: production}
    var_choices:
      environment: [production, staging, preview]
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def serve(tmp_path: Path, check: Any, *, recipes: bool = True, mode: str = "legacy", **client_options: Any) -> list[str]:
    """Run ``check(client, server)`` against a server of tmp_path/tools.d (and tmp_path/recipes); its report lines."""
    write(tmp_path / "tools.d", "echo.yaml", ECHO_TOOL)
    lines: list[str] = []
    prompts = RecipePrompts(tmp_path / "recipes", lines.append) if recipes else None
    server = CatalogServer(LiveCatalog(tmp_path / "tools.d"), report=lines.append, prompts=prompts)

    async def main() -> None:
        with redacting(Redactor()):
            server.load()
            async with Client(server.server, mode=mode, **client_options) as client:
                await check(client, server)

    anyio.run(main)
    return lines


def test_each_recipe_is_a_prompt_its_vars_the_arguments_required_without_a_default(tmp_path: Path) -> None:
    write(tmp_path / "recipes", "triage.yaml", TRIAGE)
    write(tmp_path / "recipes", "broken.yaml", "name: broken\nmesages: []\n")
    write(tmp_path / "recipes", "notes.txt", "not a recipe")
    write(tmp_path / "recipes", "triage.script.yaml", "- text: a scripted model's answer\n")  # beside its recipe: no error

    async def check(client: Client, server: CatalogServer) -> None:
        capabilities = client.server_capabilities
        assert capabilities.prompts is not None and capabilities.completions is not None
        listed = await client.list_prompts()
        assert_valid("ListPromptsResult", wire(listed))
        (prompt,) = listed.prompts
        assert (prompt.name, prompt.description) == ("triage", "Checks one service's health, deploys and disk.")
        assert [(a.name, a.required, a.description) for a in prompt.arguments or []] == [
            ("team", False, "default: platform"),
            ("environment", False, "one of: production, staging, preview; default: production"),
            ("service", True, None),
        ]

    lines = serve(tmp_path, check)
    assert any("broken.yaml" in line and "not served as a prompt" in line for line in lines)  # told once, to stderr
    assert not any("script" in line for line in lines)
    assert "serving 1 recipe as prompts from" in lines[-1]


def test_prompts_get_renders_the_system_prompt_first_and_the_values_as_data(tmp_path: Path) -> None:
    write(tmp_path / "recipes", "triage.yaml", TRIAGE)

    async def check(client: Client, server: CatalogServer) -> None:
        result = await client.get_prompt("triage", {"service": "{{ 7 * 7 }} ${env:HOME}", "environment": "staging"})
        assert_valid("GetPromptResult", wire(result))
        assert [(m.role, m.content.text) for m in result.messages] == [  # type: ignore[union-attr]
            ("user", "You are the on-call assistant for platform."),
            ("user", "{{ 7 * 7 }} ${env:HOME} feels slow in staging. Is it healthy?"),
            ("assistant", "Let me look."),
            ("user", "Go on."),
        ]

    serve(tmp_path, check)


@pytest.mark.parametrize(("name", "arguments", "message"), [
    ("triage", {}, "prompt triage needs the argument service"),
    ("triage", {"service": "api", "servise": "x"}, "prompt triage has no argument 'servise'"),
    ("triage", {"service": "api", "environment": "prod"}, "'prod' is not one of production, staging, preview"),
    ("nosuch", {}, "Unknown prompt: nosuch"),
])
def test_a_wrong_prompts_get_is_invalid_params_saying_what_is_wrong(tmp_path: Path, name: str,
                                                                   arguments: dict[str, str], message: str) -> None:
    write(tmp_path / "recipes", "triage.yaml", TRIAGE)

    async def check(client: Client, server: CatalogServer) -> None:
        with pytest.raises(MCPError) as raised:
            await client.get_prompt(name, arguments)
        assert raised.value.error.code == types.INVALID_PARAMS
        assert message in raised.value.error.message

    serve(tmp_path, check)


def test_completion_offers_a_vars_choices_that_start_with_what_is_typed(tmp_path: Path) -> None:
    write(tmp_path / "recipes", "triage.yaml", TRIAGE)

    async def check(client: Client, server: CatalogServer) -> None:
        prompt = types.PromptReference(type="ref/prompt", name="triage")
        typed = await client.complete(prompt, {"name": "environment", "value": "PR"})
        assert typed.completion.values == ["production", "preview"]
        assert (await client.complete(prompt, {"name": "service", "value": "a"})).completion.values == []
        other = types.PromptReference(type="ref/prompt", name="nosuch")
        assert (await client.complete(other, {"name": "environment", "value": ""})).completion.values == []

    serve(tmp_path, check)


def test_var_choices_hold_var_overrides_of_a_recipe_run_too(tmp_path: Path) -> None:
    recipe = load_recipe(write(tmp_path, "triage.yaml", TRIAGE))
    assert recipe.variables({"environment": "staging"})["environment"] == "staging"
    with pytest.raises(UserError, match="var environment: 'prod' is not one of production, staging, preview"):
        recipe.variables({"environment": "prod"})


def test_without_recipes_no_prompts_are_offered(tmp_path: Path) -> None:
    async def check(client: Client, server: CatalogServer) -> None:
        assert client.server_capabilities.prompts is None
        with pytest.raises(MCPError) as raised:
            await client.list_prompts()
        assert raised.value.error.code == types.METHOD_NOT_FOUND

    serve(tmp_path, check, recipes=False)


def test_a_cursor_the_server_never_gave_is_invalid_params(tmp_path: Path) -> None:
    write(tmp_path / "recipes", "triage.yaml", TRIAGE)

    async def check(client: Client, server: CatalogServer) -> None:
        for listing in (client.list_tools, client.list_prompts):
            with pytest.raises(MCPError) as raised:
                await listing(cursor="bogus")
            assert raised.value.error.code == types.INVALID_PARAMS
        assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]

    serve(tmp_path, check)


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
def test_the_server_declares_logging_and_sends_only_the_levels_a_client_asked_for(tmp_path: Path) -> None:
    logged: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(f"{params.level}: {params.data}")

    async def check(client: Client, server: CatalogServer) -> None:
        assert client.server_capabilities.logging is not None
        await client.list_tools()  # the session listens to catalog changes from here
        await client.set_logging_level("critical")
        write(tmp_path / "tools.d", "typo.yaml", "name: typo\ndescriptoin: x\n")
        assert await server.refresh()
        await anyio.sleep(0.1)
        assert logged == []  # a load problem is an error: below critical
        await client.set_logging_level("warning")
        write(tmp_path / "tools.d", "typo.yaml", "name: typo\ndescriptoin: y\n")
        assert await server.refresh()
        with anyio.fail_after(5):
            while not logged:
                await anyio.sleep(0.02)
        assert logged[0].startswith("error: ") and "typo.yaml" in logged[0]

    serve(tmp_path, check, logging_callback=on_log)


def test_a_2026_07_28_client_is_offered_prompts_but_not_logging_which_that_revision_asks_for_per_request(
        tmp_path: Path) -> None:
    write(tmp_path / "recipes", "triage.yaml", TRIAGE)

    async def check(client: Client, server: CatalogServer) -> None:
        assert client.protocol_version == "2026-07-28"
        assert client.server_capabilities.logging is None
        assert client.server_capabilities.prompts is not None
        result = await client.get_prompt("triage", {"service": "api"})
        assert result.messages[1].content.text == "api feels slow in production. Is it healthy?"  # type: ignore[union-attr]

    serve(tmp_path, check, mode="auto")
