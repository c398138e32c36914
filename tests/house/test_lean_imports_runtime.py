"""What an offline replay leaves out: modules only a live run, an http tool's check or a
mistake needs are not imported.

A subprocess plays recipes/inventory.yaml in place, without an API key (so it replays the
recording beside it), through the console script's own entry (``toolrun.cli.main()``), and
reports what it imported. Not timed (``benchmarks/run.py`` times it): this keeps a later
change from pulling httpx and the rest back onto the start of every replay. Also: every
dataclass has a docstring (one without costs ~180 us at import).
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.cli.test_cli_recipe import ROOT
from tests.house.conftest import REPLAYS, InventoryReplays
from tests.package_sources import SOURCES_GROUP, parsed_tree

# Each is imported only by what this replay never does: a request over the network (httpx,
# and email through http.client), checking a tool (the catalog cache holds them: an http
# tool's URL of an unusual shape is parsed with httpx, a python tool's source read with
# python_signature and sysconfig), suggesting a name for a typo (difflib), or tracing (no OTLP endpoint is set).
NEVER_IMPORTED = ("httpx", "httpcore", "email", "http.client", "urllib.request", "difflib", "toolrun.backends.http",
                  "toolrun.backends.python_signature", "sysconfig", "opentelemetry", "toolrun.core.otel_tracing")
# Each checks a file the caches serve (a tool file, or the recipe: a warm replay reads neither
# again), serves an option this replay does not take (a scripted: model, --replay-tools,
# --transcript), another command (toolrun logs search), the lint of a tool not cached, a live
# request's retry, or only annotations (approval's Approver); the MCP backend loads only for a
# server that is started (this recipe's tools need none).
NOT_ON_A_WARM_REPLAY = ("toolrun.catalog.tool_builder", "toolrun.catalog.parameter_checks", "toolrun.catalog.mcp_toolset",
                        "toolrun.catalog.tool_schema", "toolrun.core.packaged_schemas", "toolrun.core.schema_errors",
                        "toolrun.core.durations", "toolrun.providers.scripted", "toolrun.providers.scripted_file",
                        "toolrun.loop.recorded_tools", "toolrun.runlog.transcript_log", "toolrun.runlog.search",
                        "toolrun.backends.warning", "toolrun.core.retry_after", "toolrun.core.retry_policy",
                        "toolrun.loop.approval", "toolrun.backends.mcp_server")
# Each serves only what this recipe does not ask for: a request over the network (TLS, a body's
# content coding, the User-Agent), an output schema or strict mode (the final answer's checks, the
# schema dialects), a context limit (the window's estimates, trimming and summary, and the token
# estimate a lint shares with them when its findings are not cached), or a name scan (toolrun call).
NOT_WITHOUT_ITS_SETTING = ("toolrun.core.tls", "toolrun.core.content_decoding", "toolrun.core.version",
                           "toolrun.loop.final_answer", "toolrun.core.schema_dialects", "toolrun.loop.context_window",
                           "toolrun.loop.context_estimate", "toolrun.loop.context_summary", "toolrun.catalog.tokens",
                           "toolrun.catalog.cjk", "toolrun.catalog.scan_words")

@pytest.mark.xdist_group(REPLAYS)
def test_an_offline_replay_imports_no_http_client_and_nothing_only_a_mistake_needs(
        inventory_replays: InventoryReplays) -> None:
    warm = inventory_replays.warm  # a cold one checks every tool of tools.d (ops_api.yaml's result template with Jinja2)
    # ... but without httpx: tools.d's urls have a plain shape, and no request is made
    assert inventory_replays.cold.status == 0 and not {"httpx", "httpcore"} & inventory_replays.cold.modules

    assert warm.status == 0, warm.stderr
    assert "replaying" in warm.stderr and "玫瑰: 100" in warm.stdout  # the replay did run, its tool too
    assert "toolrun.sessions.play" in warm.modules and "toolrun.providers.openai_chat" in warm.modules
    assert [name for name in NEVER_IMPORTED if name in warm.modules] == []
    assert [name for name in NOT_ON_A_WARM_REPLAY if name in warm.modules] == []
    assert [name for name in NOT_WITHOUT_ITS_SETTING if name in warm.modules] == []


@pytest.mark.xdist_group(REPLAYS)
def test_the_main_command_runs_without_click(inventory_replays: InventoryReplays) -> None:
    # click's import and parse are a tenth of the run: toolrun.cli.direct parses `recipe FILE` itself
    for replay in (inventory_replays.warm, inventory_replays.warm_without_log):
        assert replay.status == 0, replay.stderr
        assert [name for name in replay.modules if name == "click" or name.startswith(("click.", "toolrun.cli.group"))] == []


@pytest.mark.xdist_group(REPLAYS)
def test_an_offline_replay_imports_neither_tempfile_nor_what_it_brings(inventory_replays: InventoryReplays) -> None:
    # tempfile brings random and shutil (2-3 ms): only a cache or cassette being written needs it. Run
    # without site's .pth files (-S), as on a machine whose start-up imports none of them.
    replay = inventory_replays.warm_without_site

    assert replay.status == 0, replay.stderr
    assert "玫瑰: 100" in replay.stdout and "toolrun.sessions.play" in replay.new
    assert [name for name in ("tempfile", "random", "shutil") if name in replay.new] == []


@pytest.mark.xdist_group(REPLAYS)
def test_a_replay_without_the_run_log_imports_neither_the_log_nor_sqlite3(inventory_replays: InventoryReplays) -> None:
    replay = inventory_replays.warm_without_log

    assert replay.status == 0, replay.stderr
    assert "玫瑰: 100" in replay.stdout and not inventory_replays.logs("warm-without-log").exists()
    assert [name for name in replay.modules if name.startswith(("toolrun.runlog", "sqlite3"))] == []


@pytest.mark.xdist_group(REPLAYS)
def test_the_script_runs_its_command_with_the_garbage_collector_on(inventory_replays: InventoryReplays) -> None:
    # main() turns the collector off while it imports the command, then freezes and turns it back on.
    replay = inventory_replays.cold

    assert replay.status == 0, replay.stderr
    assert replay.collecting is True


@pytest.mark.xdist_group(SOURCES_GROUP)
def test_every_dataclass_has_a_docstring() -> None:
    # Without one, @dataclass makes a __doc__ from inspect.signature: ~180 us per class at import.
    missing = []
    for path in sorted((ROOT / "toolrun").rglob("*.py")):
        for node in ast.walk(parsed_tree(path)):
            if isinstance(node, ast.ClassDef) and ast.get_docstring(node) is None and any(
                    ast.unparse(decorator).split("(")[0] in ("dataclass", "dataclasses.dataclass")
                    for decorator in node.decorator_list):
                missing.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert missing == []


def test_the_command_line_package_hands_out_the_click_groups_names_before_it_is_imported() -> None:
    # toolrun.cli stands in front of toolrun.cli.group; asking it for a name (or for one it lacks,
    # as inspect, doctest and "import *" do) before the group is imported must not recurse.
    script = """
import sys
import toolrun.cli as cli
assert "toolrun.cli.group" not in sys.modules
assert hasattr(cli, "no_such_name") is False
assert "recipe" in cli.COMMANDS and cli.ToolrunGroup is not None and cli.group.COMMANDS is cli.COMMANDS
from toolrun.cli import *
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_the_commands_that_only_load_a_catalog_do_not_import_the_run_loop() -> None:
    # tools list and tools lint print the catalog summary: not a reason to import the loop and asyncio.
    probe = "import sys, toolrun.cli.tools_lint, toolrun.cli.tools_list; print('toolrun.loop.runner' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


def test_batch_does_without_the_terminal_display_and_approval_prompt() -> None:
    # batch writes rows, not a live run: opening the run log must not bring the recipe command's terminal side
    probe = ("import sys, toolrun.cli.batch; "
             "print([name for name in ('toolrun.cli.display', 'toolrun.cli.approval_prompt') if name in sys.modules])")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stderr


@pytest.mark.xdist_group(REPLAYS)
def test_an_offline_replay_does_not_import_hashlib(inventory_replays: InventoryReplays) -> None:
    # hashlib sets up OpenSSL's digests at import (1-2 ms); the caches' keys and checks and the
    # python tools' module names are BLAKE2b, from CPython's own module (toolrun.core.digests)
    replay = inventory_replays.warm_without_site

    assert replay.status == 0, replay.stderr
    assert "玫瑰: 100" in replay.stdout and "toolrun.catalog.cache" in replay.new
    assert [name for name in ("hashlib", "_hashlib") if name in replay.new] == []
