"""Real MCP clients (the official SDK's) against a real ``toolrun mcp`` process, and the protocol schemas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parent.parent
SPECS = Path(__file__).resolve().parent / "fixtures" / "specs"
REVISIONS = ("2025-11-25", "2026-07-28")


# A shell tool that runs long (its sleeper a child of its shell, whose pid goes to {pid_file}): for cancellation.
SLEEPER_TOOL = """
    name: sleep_long
    description: >-
      Sleeps for half a minute in a child of its shell and then says so. Use it only to test
      cancellation of long calls; do not use it for anything else, it does nothing useful.
    parameters: {{type: object, properties: {{}}, additionalProperties: false}}
    timeout: 60s
    annotations: {{read_only: true}}
    backend:
      shell:
        shell: true
        command: sleep 30 & echo $! > {pid_file}; wait
"""


# A tool that echoes its text argument; ``backend`` and ``extra`` (more top-level keys) vary by test.
ECHO_PY = 'def echo(text):\n    return {"text": text, "length": len(text)}\n'


def echo_tool(name: str, *, extra: str = "annotations: {read_only: true}",
              backend: str = "{python: echo.py:echo}") -> str:
    """The YAML of an echo tool named ``name``; its default backend is ``ECHO_PY`` saved as ``echo.py``."""
    return (f"name: {name}\n"
            "description: >-\n"
            "  Echoes its text argument back. Use it to check that the server answers and that a client\n"
            "  sees this tool; do not use it for anything else, it changes nothing anywhere.\n"
            "parameters:\n"
            "  type: object\n"
            "  properties:\n"
            "    text: {type: string, description: The text to echo back.}\n"
            "  required: [text]\n"
            "  additionalProperties: false\n"
            f"{extra}\n"
            f"backend: {backend}\n")


def server_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a server process: this checkout first on the import path."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPS_API")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra or {})
    return env


def toolrun_mcp_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "toolrun.cli", "mcp", *args]


@cache
def _validator(revision: str, definition: str) -> Draft202012Validator:
    document = json.loads((SPECS / f"mcp-{revision}.schema.json").read_text(encoding="utf-8"))
    return Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": document["$defs"]})


def wire(model: Any) -> dict[str, Any]:
    """An SDK model as it travels (camelCase keys, no nulls)."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def assert_valid(definition: str, value: dict[str, Any], revisions: tuple[str, ...] = REVISIONS) -> None:
    """``value`` validates against ``definition`` of each protocol revision's JSON Schema."""
    for revision in revisions:
        errors = sorted(_validator(revision, definition).iter_errors(value), key=str)
        assert not errors, f"{definition} invalid under {revision}: {errors[0].message} in {value}"


@dataclass
class HttpServer:
    """A ``toolrun mcp --http`` process: its URL and everything it wrote to stderr so far."""

    process: subprocess.Popen[str]
    url: str
    stderr: list[str] = field(default_factory=list)


def close_client_connections(base: str) -> None:
    """Close this process's toolrun client connections to the server at ``base`` (``http://host:port``)
    before it stops: their sessions end cleanly (no "Session termination failed" at exit) and no open
    stream holds the server's shutdown."""
    hub_module = sys.modules.get("toolrun.backends.mcp_server")
    if hub_module is not None:  # no toolrun client ran in this process: nothing to close
        hub_module.server_hub().close_where(lambda spec: spec.url is not None and spec.url.startswith(base + "/"))


def stop_process(process: subprocess.Popen[Any]) -> None:
    """SIGTERM, then SIGKILL if it has not ended within 10 s; reaped either way."""
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def http_server(*args: str, env: dict[str, str] | None = None, startup_timeout: float = 60) -> Iterator[HttpServer]:
    """Start ``toolrun mcp --http 127.0.0.1:0 ARGS`` (a free port), wait for its URL, stop it at exit.

    No balancer watches a test's server: it stops at SIGTERM without the drain delay (``--drain-delay 0s``
    unless ARGS give one), where the default 5 s held its worker at every teardown."""
    delay = [] if any(arg.startswith("--drain-delay") for arg in args) else ["--drain-delay", "0s"]
    process = subprocess.Popen(toolrun_mcp_argv("--http", "127.0.0.1:0", *delay, *args), cwd=ROOT, env=server_env(env),
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, encoding="utf-8")
    lines: list[str] = []
    ready = threading.Event()
    found: list[str] = []

    def drain() -> None:  # keep reading so the server never blocks on a full pipe
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line.rstrip("\n"))
            if line.startswith("listening on "):
                found.append(line.split("listening on ", 1)[1].strip())
                ready.set()
        ready.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        ready.wait(startup_timeout)
        assert found, "the server did not start:\n" + "\n".join(lines)
        yield HttpServer(process, found[0], lines)
    finally:
        if found:
            close_client_connections(found[0].removesuffix("/mcp"))
        stop_process(process)
        reader.join(5)
        if process.stderr is not None and not reader.is_alive():
            process.stderr.close()


# ---------------------------------------------------------------- sessions shared by a module's tests


@contextmanager
def blocking_portal() -> Iterator[Any]:
    """An event loop in a thread: MCP sessions opened in it outlive one test and serve the next."""
    from anyio.from_thread import start_blocking_portal

    with start_blocking_portal() as portal:
        yield portal


@contextmanager
def open_sessions(portal: Any, clients: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Enter every client at once (their servers start in parallel); close them all at exit."""
    from concurrent.futures import ThreadPoolExecutor

    managers = {key: portal.wrap_async_context_manager(client) for key, client in clients.items()}
    entered: dict[str, Any] = {}
    with ThreadPoolExecutor(len(managers)) as pool:
        futures = {key: pool.submit(manager.__enter__) for key, manager in managers.items()}
        failures = []
        for key, future in futures.items():
            try:
                entered[key] = future.result()
            except Exception as exc:  # noqa: BLE001 - raised below, after the others are closed
                failures.append(exc)
    try:
        if failures:
            raise failures[0]
        yield entered
    finally:
        with ThreadPoolExecutor(len(managers)) as pool:
            list(pool.map(lambda key: managers[key].__exit__(None, None, None), list(entered)))


TEAM_TOKENS = {"oncall-bot": "oncall-7d1e0b5a9c3f", "admin": "admin-52aa90e1c7d4", "upstream": "upstream-3c9e51aa"}


@dataclass
class TeamServer:
    """A ``toolrun mcp --http --auth`` serving tools.d to three clients, shared by the session's tests."""

    server: HttpServer
    audit: Path

    @property
    def url(self) -> str:
        return self.server.url

    def audit_entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.audit.read_text(encoding="utf-8").splitlines()]


def team_auth_file(folder: Path) -> Path:
    import hashlib

    path = folder / "clients.yaml"
    admin_digest = hashlib.sha256(TEAM_TOKENS["admin"].encode()).hexdigest()
    path.write_text(
        "clients:\n"
        "  - name: oncall-bot\n    token: \"${env:ONCALL_TOKEN}\"\n    tools: [\"get_*\"]\n"
        f"  - name: admin\n    token_sha256: {admin_digest}\n"
        "  - name: upstream\n    token: \"${env:UPSTREAM_TOKEN}\"\n    tools: [\"get_flower_*\", \"get_disk_*\"]\n",
        encoding="utf-8")
    return path
