"""``toolrun mcp``'s catalog server in this process (the SDK's in-memory client): reloading and the audit log.

The end-to-end tests with real server processes are in test_mcp_server.py; these drive the
same ``CatalogServer`` without a process, so they can change files and the environment cheaply.
"""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from toolrun.mcp.audit import AuditLog
from toolrun.mcp.live_catalog import LiveCatalog
from toolrun.mcp.server import CatalogServer
from toolrun.secrets import Redactor, redacting

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


def serve_in_process(folder: Path, check: Any, **options: Any) -> str:
    """Run ``check(client)`` against a CatalogServer of ``folder``; the audit log's text."""
    audit = io.StringIO()
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
