"""``toolrun mcp``'s catalog server in this process (the SDK's in-memory client): reloading and the audit log.

The end-to-end tests with real server processes are in test_mcp_server.py; these drive the
same ``CatalogServer`` without a process, so they can change files and the environment cheaply.
"""

from __future__ import annotations

import io
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.mcp_helpers import ECHO_PY, SLEEPER_TOOL, echo_tool
from tests.mcp_probe_server import TOOLS as PROBE_TOOLS
from tests.mcp_probe_server import copy_probe_server
from toolrun.core.secrets import Redactor, redacting
from toolrun.mcp.audit import AuditLog
from toolrun.mcp.live_catalog import LiveCatalog
from toolrun.mcp.server import CatalogServer

PINGER = """
    name: ping_service
    description: >-
      Asks the status API of one service whether it is up, with the team's API token, and
      returns its answer. Use it when someone asks whether a service answers; do not use it
      to change anything, it only reads.
    parameters:
      type: object
      properties:
        service: {type: string, pattern: "^[a-z]+$", description: The service's name in lower case.}
      required: [service]
      additionalProperties: false
    annotations: {read_only: true}
    backend:
      shell:
        argv: [echo, checked, "{{ service }}"]
        env: {STATUS_TOKEN: "${env:STATUS_TOKEN}"}
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def serve_in_process(folder: Path, check: Any, audit: io.StringIO | None = None, **options: Any) -> str:
    """Run ``check(client)`` against a CatalogServer of ``folder``; the audit log's text (in ``audit``)."""
    audit = audit if audit is not None else io.StringIO()
    server = CatalogServer(LiveCatalog(folder), audit=AuditLog(audit), **options)

    async def main() -> None:
        with redacting(Redactor()):  # as `toolrun mcp` does: the server's own scope
            server.load()
            async with Client(server.server, mode="legacy") as client:
                await check(client)

    anyio.run(main)
    return audit.getvalue()


def test_the_audit_log_never_shows_a_secret_the_catalog_reads_even_when_no_call_read_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATUS_TOKEN", "status-SECRET-4444")
    write(tmp_path, "ping.yaml", PINGER)

    async def check(client: Client) -> None:
        refused = await client.call_tool("ping_service", {"service": "status-SECRET-4444"})
        assert refused.is_error  # invalid: the tool never ran, so never read the token

    lines = serve_in_process(tmp_path, check).splitlines()
    assert [json.loads(line)["arguments"] for line in lines] == [{"service": "***"}]


ECHO = """
    name: echo
    description: >-
      Echoes its text argument back as a JSON object with the text and the code's version. Use
      it to check that the server answers; do not use it for anything else, it changes nothing.
    parameters:
      type: object
      properties:
        text: {type: string, description: The text to echo back.}
      required: [text]
      additionalProperties: false
    annotations: {read_only: true}
    backend:
      python: echo.py:echo
"""


def echo_code(version: str) -> str:
    return f"from live_echo_helper import tag\n\ndef echo(text):\n    return {{'text': text, 'version': tag('{version}')}}\n"


def test_an_edited_python_tool_or_a_module_it_imports_runs_its_new_code(tmp_path: Path) -> None:
    write(tmp_path, "echo.yaml", ECHO)
    write(tmp_path, "echo.py", echo_code("v1"))
    write(tmp_path, "live_echo_helper.py", "def tag(version):\n    return version\n")

    async def check(client: Client) -> None:
        async def answer() -> Any:
            await client.list_tools()  # a tools/list reloads what changed, as the watcher does every 0.25 s
            return (await client.call_tool("echo", {"text": "hi"})).structured_content

        assert await answer() == {"text": "hi", "version": "v1"}
        write(tmp_path, "echo.py", echo_code("v2"))
        assert await answer() == {"text": "hi", "version": "v2"}
        write(tmp_path, "live_echo_helper.py", "def tag(version):\n    return version.upper()\n")
        assert await answer() == {"text": "hi", "version": "V2"}

    try:
        serve_in_process(tmp_path, check)
    finally:
        sys.modules.pop("live_echo_helper", None)  # imported by the tool into this process


def test_an_edit_that_keeps_the_size_and_the_modification_time_is_reloaded(tmp_path: Path) -> None:
    live = LiveCatalog(tmp_path)
    echo = write(tmp_path, "echo.yaml", ECHO)
    write(tmp_path, "echo.py", echo_code("v1"))
    assert live.refresh() and list(live.snapshot.catalog.tools) == ["echo"]
    before = echo.stat()
    write(tmp_path, "echo.yaml", ECHO.replace("name: echo", "name: ohce"))
    os.utime(echo, ns=(before.st_atime_ns, before.st_mtime_ns))  # as a second write within one clock tick looks
    assert live.refresh() and list(live.snapshot.catalog.tools) == ["ohce"]
    assert not live.refresh()


def test_an_edit_within_one_tick_of_a_coarse_clock_is_reloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a file system whose timestamps are coarse (1 s, 2 s), a quick second write changes no time at all."""
    second = 1_000_000_000

    def one_second_ticks(status: os.stat_result) -> tuple[int, ...]:
        return (status.st_size, status.st_mtime_ns // second * second, status.st_ctime_ns // second * second, status.st_ino)

    monkeypatch.setattr("toolrun.mcp.live_catalog.status_key", one_second_ticks)
    live = LiveCatalog(tmp_path)
    write(tmp_path, "echo.yaml", ECHO)
    write(tmp_path, "echo.py", echo_code("v1"))
    assert live.refresh() and list(live.snapshot.catalog.tools) == ["echo"]
    write(tmp_path, "echo.yaml", ECHO.replace("name: echo", "name: ohce"))
    assert live.refresh() and list(live.snapshot.catalog.tools) == ["ohce"]


REMOVER = """
    name: remove_scratch
    description: >-
      Removes one named entry from a scratch list for tests and says which one it removed. Use it
      only when asked to remove an entry; do not use it for anything else, it changes the list.
    parameters:
      type: object
      properties:
        entry: {type: string, description: The entry's name.}
      required: [entry]
      additionalProperties: false
    annotations: {destructive: true}
    backend:
      shell:
        argv: [echo, "removed {{ entry }}"]
"""


def test_a_refused_or_cancelled_call_is_in_the_audit_log_too(tmp_path: Path) -> None:
    write(tmp_path, "remove.yaml", REMOVER)
    pid_file = tmp_path / "sleeper.pid"
    write(tmp_path, "sleep.yaml", SLEEPER_TOOL.format(pid_file=pid_file))
    audit = io.StringIO()

    async def check(client: Client) -> None:
        refused = await client.call_tool("remove_scratch", {"entry": "a"})  # this client cannot be asked
        assert refused.is_error and "--yes" in refused.content[0].text
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(client.call_tool, "sleep_long", {})
            with anyio.fail_after(10):
                while not pid_file.exists() or not pid_file.read_text().strip():
                    await anyio.sleep(0.01)
            tasks.cancel_scope.cancel()  # the client sends notifications/cancelled
        with anyio.fail_after(10):
            while audit.getvalue().count("\n") < 2:
                await anyio.sleep(0.01)

    serve_in_process(tmp_path, check, audit=audit)
    entries = [json.loads(line) for line in audit.getvalue().splitlines()]
    assert [(e["tool"], e["arguments"], e["is_error"]) for e in entries] == [
        ("remove_scratch", {"entry": "a"}, True), ("sleep_long", {}, True)]


def test_an_mcp_server_that_failed_is_started_again_once_its_files_are_fixed(tmp_path: Path) -> None:
    """A long-running server would otherwise keep a server that failed twice as failed, whatever the user fixes."""
    write(tmp_path, "probe.yaml", "mcp_server:\n  command: [python, probe_server.py]\n  timeout: 30s\n")
    live = LiveCatalog(tmp_path)
    for attempt in ("first", "second"):
        write(tmp_path, "probe_server.py", f"raise SystemExit('{attempt} mistake')\n")
        assert live.refresh() and not live.tools()
        [problem] = live.snapshot.problems
        assert f"{attempt} mistake" in problem.message
    copy_probe_server(tmp_path)
    assert live.refresh()
    assert [tool.name for tool in live.tools()] == list(PROBE_TOOLS), live.snapshot.problems


def test_a_tools_glob_that_matches_nothing_is_reported_with_a_guess(tmp_path: Path) -> None:
    write(tmp_path, "echo.yaml", ECHO)
    write(tmp_path, "echo.py", echo_code("v1"))
    lines: list[str] = []
    CatalogServer(LiveCatalog(tmp_path, ["ecoh", "e*", "zzz_*"]), report=lines.append).load()
    assert lines == ["warning: --tools 'ecoh' matches no tool of the catalog — did you mean 'echo'?",
                     "warning: --tools 'zzz_*' matches no tool of the catalog — `toolrun tools list` shows their names",
                     f"serving 1 tool from {tmp_path}"]


STATUS_TOOL = """
    name: get_build_status
    description: >-
      Returns the status of the latest build of one pipeline from the build server: passed,
      failed or running, with its number. Use it when someone asks whether a build is green; it
      only reads and starts nothing.
    parameters:
      type: object
      properties:
        pipeline: {type: string, pattern: "^[a-z-]+$", description: The pipeline's name in lower case.}
      required: [pipeline]
      additionalProperties: false
    annotations: {read_only: true}
    backend:
      http:
        url: "http://127.0.0.1:9/pipelines/{pipeline}/latest"
"""


def test_over_http_a_first_call_of_an_http_tool_imports_nothing_on_the_event_loop(tmp_path: Path) -> None:
    # httpx's connection pool, the request machinery and the CA certificates cost a first http call 50-150 ms,
    # during which every client of an HTTP server (one event loop) waited: the server takes them before serving
    import toolrun.backends
    from toolrun.mcp.catalog_service import CatalogService

    machinery = "toolrun.backends.http_request"
    # Each import below sets both sys.modules' entry and the package's attribute: both are put back as they were
    # (monkeypatch would restore the first and leave the attribute at the last import, where a later test's
    # monkeypatch of a constant "toolrun.backends.http_request.X" would patch a module no call reads).
    kept_module, kept_attribute = sys.modules.get(machinery), vars(toolrun.backends).get("http_request")

    def forget_machinery() -> None:
        sys.modules.pop(machinery, None)
        vars(toolrun.backends).pop("http_request", None)

    forget_machinery()
    try:
        write(tmp_path, "pinger.yaml", PINGER)
        served = CatalogServer(LiveCatalog(tmp_path), audit=AuditLog(io.StringIO()))
        served.load()
        assert machinery not in sys.modules  # no http tool yet: nothing of it

        write(tmp_path, "build.yaml", STATUS_TOOL)  # dropped in while serving: prepared by the reload, in its thread
        assert anyio.run(served.refresh) is True
        assert machinery in sys.modules

        forget_machinery()
        lean = CatalogService(LiveCatalog(tmp_path), audit=AuditLog(io.StringIO()))
        lean.load()  # stdio: the one client's server starts sooner, and its first call imports as `toolrun call` does
        assert machinery not in sys.modules
        CatalogServer(LiveCatalog(tmp_path), audit=AuditLog(io.StringIO())).load()
        assert machinery in sys.modules
    finally:
        forget_machinery()
        if kept_module is not None:
            sys.modules[machinery] = kept_module
        if kept_attribute is not None:
            toolrun.backends.http_request = kept_attribute  # type: ignore[attr-defined]


def test_a_call_cancelled_while_its_approval_question_is_up_withdraws_the_question_over_the_sdk(tmp_path: Path) -> None:
    # as the lean stdio server does (test_mcp_lean_stdio.py): the question's own notifications/cancelled ends the
    # client's dialog, instead of leaving a question up whose answer nobody awaits
    (tmp_path / "echo.py").write_text(ECHO_PY, encoding="utf-8")
    (tmp_path / "guarded.yaml").write_text(echo_tool("guarded_echo", extra="confirm: true"), encoding="utf-8")
    server = CatalogServer(LiveCatalog(tmp_path), audit=AuditLog(io.StringIO()))
    asked = anyio.Event()
    ended: list[str] = []

    async def user_away(context: Any, params: Any) -> Any:
        asked.set()
        try:
            await anyio.sleep(30)
        except BaseException as exc:  # the dialog closed under the user: how it ended
            ended.append(type(exc).__name__)
            raise
        ended.append("answered after 30 s")

    async def main() -> None:
        with redacting(Redactor()):
            server.load()
            async with Client(server.server, mode="legacy", elicitation_callback=user_away) as client:
                async with anyio.create_task_group() as calls:
                    calls.start_soon(client.call_tool, "guarded_echo", {"text": "no"})
                    await asked.wait()
                    calls.cancel_scope.cancel()  # the client gives the call up; its session stays open
                with anyio.move_on_after(10):
                    while not ended:
                        await anyio.sleep(0.01)

    anyio.run(main)
    assert ended == ["CancelledError"]


def test_an_approval_question_nobody_answers_is_withdrawn_and_the_call_denied_after_the_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # over HTTP, a client gone while its question was up (killed, its laptop closed) held the call, and with it
    # a session its next one needed, and every drain, for good: the wait is bounded (10 minutes; 0.3 s here)
    from toolrun.mcp import mapping

    monkeypatch.setattr(mapping, "APPROVAL_WAIT_SECONDS", 0.3)
    (tmp_path / "echo.py").write_text(ECHO_PY, encoding="utf-8")
    (tmp_path / "guarded.yaml").write_text(echo_tool("guarded_echo", extra="confirm: true"), encoding="utf-8")
    server = CatalogServer(LiveCatalog(tmp_path), audit=AuditLog(io.StringIO()))
    ended: list[str] = []
    results: list[Any] = []

    async def user_away(context: Any, params: Any) -> Any:
        try:
            await anyio.sleep(30)
        except BaseException as exc:
            ended.append(type(exc).__name__)
            raise

    async def main() -> None:
        with redacting(Redactor()):
            server.load()
            async with Client(server.server, mode="legacy", elicitation_callback=user_away) as client:
                with anyio.fail_after(10):
                    results.append(await client.call_tool("guarded_echo", {"text": "no"}))
                    while not ended:
                        await anyio.sleep(0.01)

    anyio.run(main)
    assert results[0].is_error and results[0].content[0].text == \
        "approval failed: nobody answered the approval question within 0.005 minutes"
    assert ended == ["CancelledError"]  # the question withdrawn, not left up


def test_the_deepest_parameters_the_loader_takes_are_listed_over_the_sdk(tmp_path: Path) -> None:
    # The loader's bound on a schema's depth stays under what the SDK can send: one level more than the SDK's
    # serializer takes failed every client's tools/list ("Circular reference detected (depth exceeded)")
    from tests.catalog.test_loader import _nested_tool
    from toolrun.catalog.parameter_checks import MAX_SCHEMA_DEPTH

    _nested_tool(tmp_path, (MAX_SCHEMA_DEPTH - 1) // 2)  # two mappings per level, and the top
    listed: list[Any] = []

    async def check(client: Client) -> None:
        listed.extend(tool.name for tool in (await client.list_tools()).tools)

    serve_in_process(tmp_path, check)
    assert listed == ["nested"]
