"""Every import written inside a function, listed here with its reason: the rule and its exceptions in one place.

The rule: imports stand at the top of their module. An import moves into a function only
for start-up time — the module it brings is not needed by every command or call that
imports this one, and importing it costs (a package such as jsonschema, jinja2, httpx or
yaml, or a toolrun module that pulls those) — or because the package is an optional extra
(Ray, readline) that may not be installed. An import that would close a cycle at import time
is not fixed by hiding it in a function: move the shared piece down a layer instead.

``LAZY_IMPORTS`` names each module's function-level imports (module -> imported name ->
why). A new one fails ``test_every_function_level_import_is_listed`` until it is listed
here with its reason; one that goes away must leave the list too, so the list stays the
truth. ``tests/house/test_lean_imports_*.py`` check what the biggest of these save: which modules
an offline replay, a template check or a validation never imports.

Imports under ``if TYPE_CHECKING:`` are annotations only and are not counted; the
layering of every import, lazy or not, is ``tests/house/test_architecture.py``'s.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import toolrun
from tests.package_sources import SOURCES_GROUP, parsed_tree

PACKAGE_ROOT = Path(toolrun.__file__).resolve().parent

JSONSCHEMA = "jsonschema is 50-65 ms to import: only when something is validated, not on a cached start"
YAML = "yaml: only a file the caches do not hold is parsed"
AS_FOUND = "as found; this module's owners decide (its area is being reworked)"
STRUCTURED_ANSWER = "the final answer's checks (and the schema dialects): only a run with an output schema"
SDK_TYPES = "the MCP SDK's types (~0.4 s): only a connected server's tools are read, the SDK imported by then"
OVER_THE_NETWORK = "only a request over the network reads a body or makes a TLS client: a replay makes none"

LAZY_IMPORTS: dict[str, dict[str, str]] = {
    "toolrun.api": {
        "toolrun.sessions.recipe.load_recipe": "toolrun call and toolrun mcp import this module and read no recipe",
        "toolrun.sessions.play.run_recipe": "toolrun call and toolrun mcp import this module: not the providers, replay and loop",
    },
    "toolrun.backends": {"toolrun.backends.warning.BackendWarning": AS_FOUND},
    "toolrun.backends.mcp_server": {
        "mcp.client.stdio.StdioServerParameters": AS_FOUND,
        "mcp.client.stdio.stdio_client": AS_FOUND,
        "toolrun.backends.mcp_http.http_transport": "only a server reached by url needs it (it brings httpx2)",
        "mcp.Client": AS_FOUND,
        "mcp_types.Implementation": AS_FOUND,
        "importlib.metadata.version": "only a connection names toolrun's version (importlib.metadata is ~10 ms)",
        "importlib.metadata.PackageNotFoundError": "only a connection names toolrun's version (importlib.metadata is ~10 ms)",
        "mcp_types.CONNECTION_CLOSED": AS_FOUND,
        "mcp.client.stdio": "the MCP SDK (1-3 CPU s): only a catalog with an mcp_server file, before its connect timeout",
    },
    "toolrun.backends.mcp_errors": {
        "pydantic.ValidationError": "only an error of the MCP client is described, and the SDK has imported pydantic by then",
    },
    "toolrun.backends.mcp_tool_list": {
        "mcp_types": SDK_TYPES,
        "mcp_types.methods.validate_server_result": SDK_TYPES,
        "pydantic.ValidationError": SDK_TYPES,
    },
    "toolrun.backends.http": {
        "toolrun.backends.http_request.send": "httpx (~80 ms): only a call sends a request, not a catalog's load, lint or list",
        "toolrun.core.tls.shared_ssl_context": "ssl: only a call, or a server preparing for calls, reads the CA certificates",
    },
    "toolrun.backends.http_config": {
        "httpx": "only a url of no plain shape is read by httpx: a catalog's load and lint do without it",
    },
    "toolrun.backends.python": {
        "toolrun.backends.warning.BackendWarning": AS_FOUND,
        "toolrun.backends.python_signature.signature_mismatches": AS_FOUND,
        "toolrun.backends.python_signature.module_outline": AS_FOUND,
        "sysconfig": AS_FOUND,
    },
    "toolrun.loop.context_settings": {
        "toolrun.loop.context_window.ContextWindow": "only a run with a context limit estimates, trims and summarizes",
    },
    "toolrun.loop.runner": {
        "toolrun.loop.final_answer.check_answer": STRUCTURED_ANSWER,
        "toolrun.loop.final_answer.repair_request": STRUCTURED_ANSWER,
        "toolrun.loop.final_answer.CUT_OFF": STRUCTURED_ANSWER,
        "toolrun.loop.final_answer.failure_message": STRUCTURED_ANSWER,
    },
    "toolrun.loop.tool_offer": {
        "toolrun.catalog.tool_ranking.ToolIndex": "only a run with settings.tool_selection ranks (it brings the lint's tokenizer)",
    },
    "toolrun.batch.on_ray": {"ray": "Ray is an optional extra: a missing one is a one-line error"},
    "toolrun.batch.run": {
        "httpx": "only a batch that reaches a provider needs it",
        "toolrun.batch.on_ray.import_ray": "only --ray: a local batch does without the Ray driver",
        "toolrun.batch.on_ray.run_on_ray": "only --ray: a local batch does without the Ray driver",
    },
    "toolrun.catalog.cache": {
        "toolrun.catalog.scan_words.ScanWords": "only a name scan (toolrun call) reads or keeps the words of files",
    },
    "toolrun.catalog.lint": {
        "toolrun.catalog.tokens.token_estimate": "only a catalog whose side-by-side findings are not cached estimates its cost",
        "toolrun.catalog.lint_rules.tool_findings": "~10 ms of imports, only for a tool whose findings are not cached",
        "toolrun.catalog.similarity.tokenize": "only the side-by-side lint of the tools handed to a model",
        "toolrun.catalog.similarity.similar_groups": "only the side-by-side lint of the tools handed to a model",
    },
    "toolrun.catalog.lint_rules": {
        "toolrun.backends.get_backend": AS_FOUND,
    },
    "toolrun.catalog.loader": {
        "toolrun.catalog.mcp_toolset.load_mcp_toolset": "only a file the cache does not hold is built and checked",
        "toolrun.catalog.parameter_checks.parameter_problems": "only a file the cache does not hold is built and checked",
        "toolrun.catalog.tool_builder.build_tool": "only a file the cache does not hold is built and checked",
        "toolrun.catalog.tool_schema.schema_problems": "only a file the cache does not hold is built and checked",
        "toolrun.core.schema_errors.describe_value": "only a file with a mistake (it brings jsonschema)",
    },
    "toolrun.catalog.mcp_toolset": {
        "toolrun.backends.mcp_server.McpServerUnavailable": "only a catalog with an mcp_server file loads that backend",
        "toolrun.backends.mcp_server.list_server_tools": "only a catalog with an mcp_server file loads that backend",
    },
    "toolrun.catalog.parameter_checks": {"jsonschema.Draft202012Validator": JSONSCHEMA},
    "toolrun.catalog.tool_schema": {"jsonschema.Draft202012Validator": JSONSCHEMA},
    "toolrun.cli": {
        "toolrun.cli.group.main": "toolrun --version answers without importing click",
        "toolrun.cli.startup.keep_compiled_code": "toolrun --version answers without the code caches",
        "toolrun.core.cache_folder.keep_bytecode": "toolrun --version answers without the code caches",
        "toolrun.core.cache_folder.prune_when_due": "toolrun --version answers without the code caches",
        "toolrun.cli.echo.fit_narrow_streams": "toolrun --version answers without the stream settings",
        "toolrun.cli.group": "toolrun --version and toolrun recipe FILE run without importing click",
        "toolrun.cli.command_table.import_command_module": "toolrun --version answers without the command tables",
        "toolrun.cli.direct.direct_command": "toolrun --version answers without parsing a command",
    },
    "toolrun.cli.chat": {"readline": "optional in a Python build, and only a terminal edits lines"},
    "toolrun.cli.common": {"toolrun.cli.tools_list.first_sentence": "only shell completion: toolrun call does without it",
                           "click.shell_completion.CompletionItem": "only shell completion: 2-5 ms every command did without"},
    "toolrun.cli.logs": {"toolrun.runlog.prune.prune_runs": "only prune needs it"},
    "toolrun.cli.mcp": {"toolrun.mcp.serve": "the MCP SDK loads only for this command",
                        "toolrun.mcp.gateway_config.load_gateway_config": "yaml and the schema only for this command"},
    "toolrun.cli.direct": {
        "toolrun.cli.recipe_play": "only a recipe run: every other command parses its line here first",
        "toolrun.cli.recipe_play.run_recipe_command": "only a recipe run: every other command parses its line here first",
    },
    "toolrun.cli.recipe_play": {
        "toolrun.runlog.transcript_log.TranscriptLog": "only --transcript writes one",
        "toolrun.runlog.RunLogWriter": "--no-log does without the run log (and sqlite3)",
    },
    "toolrun.cli.run_log_options": {
        "toolrun.runlog.RunLog": "--no-log does without the run log (and sqlite3)",
        "toolrun.runlog.default_log_path": "--no-log does without the run log (and sqlite3)",
    },
    "toolrun.cli.startup": {
        "toolrun.core.private_files.replace_file": "only a process that compiled new dataclass code writes",
    },
    "toolrun.loop.execution": {
        "jsonschema.Draft202012Validator": JSONSCHEMA,
        "jsonschema.FormatChecker": JSONSCHEMA,
        "toolrun.core.format_checks.matches_format": "ipaddress, uuid and datetime: only a schema that uses a format",
        "jsonschema.exceptions.SchemaError": JSONSCHEMA,
    },
    "toolrun.mcp": {
        "toolrun.mcp.access.read_access_list": AS_FOUND,
        "anyio": AS_FOUND,
        "toolrun.mcp.audit.AuditLog": AS_FOUND,
        "toolrun.mcp.live_catalog.LiveCatalog": AS_FOUND,
        "toolrun.mcp.prompts.RecipePrompts": AS_FOUND,
        "toolrun.mcp.server.CatalogServer": "the MCP SDK (1-3 CPU s to import): only a server over HTTP",
        "toolrun.mcp.catalog_service.CatalogService": "the tool-call path: a server's, not a bad option's",
        "toolrun.mcp.lean_stdio.serve_lean_stdio": "only a server over stdio",
        "toolrun.core.secrets.Redactor": AS_FOUND,
        "toolrun.core.secrets.redacting": AS_FOUND,
        "toolrun.mcp.http.bind": AS_FOUND,
        "toolrun.mcp.http.serve_http": AS_FOUND,
        "toolrun.mcp.metrics.serve_metrics": "prometheus-client: only a server with --metrics-listen serves metrics",
        "toolrun.mcp.oidc.TokenVerifier": "pyjwt only for a server with an oidc section",
    },
    "toolrun.mcp.lean_stdio": {
        "toolrun.mcp.server.CatalogServer": "the MCP SDK (1-3 CPU s to import): only a client the lean server hands over",
        "toolrun.mcp.stdio.serve_stdio": "the MCP SDK's stdio transport: only a client the lean server hands over",
    },
    "toolrun.mcp.live_catalog": {
        "toolrun.backends.mcp_server.forget_stopped_servers": AS_FOUND,
        "toolrun.backends.python.forget_imported_code": AS_FOUND,
    },
    "toolrun.mcp.sdk_streams": {"anyio": AS_FOUND},
    "toolrun.core.cache_folder": {"toolrun.core.cache_prune.prune_cache_folder": "once a day: the other runs never prune",
                                  "importlib.util.cache_from_source": "only damaged bytecode in the cache folder"},
    "toolrun.core.tls": {"httpx": "only a client that speaks HTTP needs it; an offline replay imports no http client"},
    "toolrun.mcp.gateway_config": {"toolrun.core.schema_errors.schema_problems": JSONSCHEMA},
    "toolrun.openapi.importer": {"toolrun.openapi.toolset.render_toolset": AS_FOUND},
    "toolrun.core.packaged_schemas": {"importlib.resources": "4-8 ms: only an install that is no folder (a zip) reads a schema so"},
    "toolrun.sessions.play": {
        "toolrun.loop.recorded_tools.RecordedToolResults": "only --replay-tools plays results back",
        "toolrun.providers.scripted.ScriptedModel": "only a caller's own model object is told apart",
        "toolrun.providers.scripted_file.model_of_turns": "only a scripted: model reads a script",
        "toolrun.providers.scripted_file.read_script": "only a scripted: model reads a script",
        "toolrun.providers.scripted_file.script_turns": "only a scripted: model reads a script",
    },
    "toolrun.core.registry": {"importlib.metadata.entry_points": "~10 ms of imports and a scan of every installed package"},
    "toolrun.providers.openai_family": {
        "toolrun.core.schema_dialects.to_openai_strict": "only strict mode (opt-in) or an output schema converts a schema",
    },
    "toolrun.providers.transport": {
        "httpx": AS_FOUND,
        "toolrun.core.content_decoding.ACCEPT_ENCODING": OVER_THE_NETWORK,
        "toolrun.core.content_decoding.BodyTooLarge": OVER_THE_NETWORK,
        "toolrun.core.content_decoding.RefusedBody": OVER_THE_NETWORK,
        "toolrun.core.content_decoding.decoded": OVER_THE_NETWORK,
        "toolrun.core.tls.shared_ssl_context": OVER_THE_NETWORK,
        "toolrun.core.version.USER_AGENT": OVER_THE_NETWORK,
        "toolrun.core.retry_policy.RetryPolicy": "a live run's retries only: a replay never imports the retry waits",
    },
    "toolrun.sessions.recipe": {
        "toolrun.core.packaged_schemas.packaged_schema": "a cached recipe is not checked again",
        "toolrun.core.schema_errors.schema_problems": "a cached recipe is not checked again",
        "toolrun.core.schema_errors.describe_path": "a cached recipe is not checked again",
        "toolrun.core.durations.parse_duration": "only a recipe that sets the timeout",
    },
    "toolrun.sessions.recipe_output": {
        "jsonschema.Draft202012Validator": JSONSCHEMA,
        "jsonschema.exceptions.SchemaError": JSONSCHEMA,
        "toolrun.catalog.parameter_checks.unusable_values": JSONSCHEMA,
    },
    "toolrun.replay.divergence": {"difflib": "only a divergence is described with a diff"},
    "toolrun.core.retry_after": {
        "email.utils": "only a Retry-After given as a date (email brings much of the mail package)",
        "random": "only a retry waits, with jitter",
    },
    "toolrun.runlog.store": {
        "toolrun.runlog.search.index_pending_runs": AS_FOUND,
        "toolrun.runlog.search.search_runs": AS_FOUND,
        "random": "only a busy log is retried, with jitter",
    },
    "toolrun.core.schema_errors": {
        "jsonschema.Draft202012Validator": JSONSCHEMA,
        "jsonschema.exceptions.best_match": JSONSCHEMA,
    },
    "toolrun.core.secrets": {"base64": "only a run that reads a secret needs it"},
    "toolrun.core.templates": {
        "toolrun.core.template_sandbox.make_environment": AS_FOUND,
        "toolrun.core.template_sandbox.traced_output": "jinja2 (template_sandbox): only an element that renders a dash",
        "toolrun.core.template_sandbox.traced_template": "jinja2 (template_sandbox): only an element that renders a dash",
        "jinja2.TemplateSyntaxError": AS_FOUND,
        "jinja2.meta": AS_FOUND,
        "jinja2.UndefinedError": AS_FOUND,
        "jinja2.TemplateRuntimeError": AS_FOUND,
    },
    "toolrun.core.text": {"difflib": "only a mistake needs a did-you-mean"},
    "toolrun.core.tracing": {
        "toolrun.core.otel_tracing.otlp_tracer": "the OpenTelemetry SDK is an optional extra, loaded only when an OTLP endpoint is set",
    },
    "toolrun.core.yamlsource": {"yaml": YAML},
}


def function_level_imports(root: Path, package: str) -> dict[str, dict[str, list[int]]]:
    """Every import statement inside a function (or lambda) of ``package``: module -> imported name -> lines."""
    found: dict[str, dict[str, list[int]]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        module = ".".join(parts)
        for node in _statements_in_functions(parsed_tree(path)):
            for name in _imported_names(node, module, path.name == "__init__.py"):
                found.setdefault(module, {}).setdefault(name, []).append(node.lineno)
    return {module: {name: sorted(lines) for name, lines in names.items()} for module, names in found.items()}


def _statements_in_functions(tree: ast.AST) -> list[ast.AST]:
    """The nodes of ``tree`` that stand inside a function or lambda, at any depth, in one walk."""
    inside: list[ast.AST] = []
    pending = [(child, False) for child in ast.iter_child_nodes(tree)]
    while pending:
        node, in_function = pending.pop()
        if in_function:
            inside.append(node)
        nested = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        pending.extend((child, nested) for child in ast.iter_child_nodes(node))
    return inside


def _imported_names(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """``import a.b`` -> ``a.b``; ``from a import b, c`` -> ``a.b``, ``a.c`` (relative imports resolved)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    return [f"{base}.{alias.name}" for alias in node.names]


@pytest.mark.xdist_group(SOURCES_GROUP)
def test_every_function_level_import_is_listed() -> None:
    found = function_level_imports(PACKAGE_ROOT, "toolrun")
    new = [f"{module}: {name} (line {', '.join(map(str, lines))})" for module, names in sorted(found.items())
           for name, lines in sorted(names.items()) if name not in LAZY_IMPORTS.get(module, {})]
    gone = [f"{module}: {name}" for module, names in sorted(LAZY_IMPORTS.items())
            for name in sorted(names) if name not in found.get(module, {})]
    assert not new, ("imports inside functions that LAZY_IMPORTS does not list — move each to the top of its module, "
                     "or list it with the start-up time it saves:\n" + "\n".join(new))
    assert not gone, "LAZY_IMPORTS lists imports that are no longer inside a function — remove them:\n" + "\n".join(gone)


def test_the_scan_finds_imports_in_functions_methods_and_nested_blocks_but_not_at_the_top(tmp_path: Path) -> None:
    package = tmp_path / "planted"
    package.mkdir()
    (package / "__init__.py").write_text("def version():\n    from . import about\n    return about\n", encoding="utf-8")
    (package / "about.py").write_text(
        "import json\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import csv\n"
        "try:\n    import yaml\nexcept ImportError:\n    yaml = None\n"
        "class Reader:\n    async def read(self):\n        if True:\n            import difflib\n"
        "        def inner():\n            from .sub import thing as alias\n        return inner\n"
        "check = lambda: __import__('os')\n", encoding="utf-8")
    found = function_level_imports(package, "planted")
    assert found == {"planted": {"planted.about": [2]},
                     "planted.about": {"difflib": [12], "planted.sub.thing": [14]}}
