"""``toolrun mcp --http --auth`` against a client that probes for what it may not see.

The server runs in this process (uvicorn on a real loopback socket, as in test_mcp_service.py):
the SDK is already imported, so a server costs milliseconds. The requests are raw HTTP, written
as a hostile client writes them, in the 2026-07-28 revision's per-request envelope.
"""

from __future__ import annotations

import hashlib
import json
import textwrap
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from toolrun.mcp.access import AccessList, load_access_list
from toolrun.mcp.audit import AuditLog
from toolrun.mcp.http import bind, http_server_for
from toolrun.mcp.live_catalog import LiveCatalog
from toolrun.mcp.oidc import IssuerKeys, TokenVerifier
from toolrun.mcp.oidc_rules import ClaimRule, OidcSettings
from toolrun.mcp.server import CatalogServer

TOKENS = {"reader": "reader-0f3a9c51d2e7", "admin": "admin-c2d8a6e3f5b1"}
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "hostile-test", "version": "1"}}
DESCRIPTION = ("Use it to check what a client may see; do not use it for anything else, "
               "it changes nothing anywhere and returns only what it was given.")


def write_tools(parent: Path) -> Path:
    """``get_echo`` for everyone; ``admin_purge``, whose ``region`` a 2026-07-28 client mirrors into a header."""
    folder = parent / "tools"
    folder.mkdir()
    (folder / "echo.py").write_text("def echo(text, region=None):\n    return {'text': text}\n", encoding="utf-8")
    for name, region in (("get_echo", ""), ("admin_purge", "\n    region: {type: string, description: The region., "
                                                          "x-mcp-header: Region}")):
        (folder / f"{name}.yaml").write_text(
            f"name: {name}\ndescription: >-\n  Answers with the text it was given. {DESCRIPTION}\n"
            "parameters:\n  type: object\n  properties:\n    text: {type: string, description: Text to echo.}"
            f"{region}\n  required: [text]\n  additionalProperties: false\n"
            "annotations: {read_only: true}\nbackend: {python: echo.py:echo}\n", encoding="utf-8")
    return folder


def access_list(folder: Path) -> AccessList:
    path = folder / "clients.yaml"
    digests = {name: hashlib.sha256(token.encode()).hexdigest() for name, token in TOKENS.items()}
    path.write_text(textwrap.dedent(f"""
        clients:
          - {{name: reader, token_sha256: {digests["reader"]}, tools: ["get_*"]}}
          - {{name: admin, token_sha256: {digests["admin"]}}}
    """), encoding="utf-8")
    return load_access_list(path)


@asynccontextmanager
async def running(server: CatalogServer, access: AccessList) -> AsyncIterator[str]:
    """The server on a free loopback port, in this event loop; its ``/mcp`` URL."""
    sock = bind("127.0.0.1", 0)
    http_server = http_server_for(server, sock, access)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(http_server.serve, [sock])
        with anyio.fail_after(10):
            while not http_server.started:
                await anyio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        http_server.should_exit = True


async def modern_call(http: httpx.AsyncClient, url: str, client: str, name: str, arguments: dict[str, Any],
                      headers: dict[str, str] | None = None) -> httpx.Response:
    """A 2026-07-28 ``tools/call``: no session, the protocol's routing headers, ``headers`` added."""
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": META}}
    return await http.post(url, json=body, headers={
        "Authorization": f"Bearer {TOKENS[client]}", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name, **(headers or {})})


def test_a_hidden_tool_whose_schema_names_a_header_answers_exactly_as_an_unknown_tool_and_is_audited(
        tmp_path: Path) -> None:
    # The SDK checks a 2026-07-28 call's Mcp-Param-* headers against the tool's schema before the call reaches the
    # server's handler: it was given every tool's schema, so a client that may not see admin_purge was told
    # "Mcp-Param-Region header is missing but the request body's 'region' argument is present" (the tool exists,
    # and takes a region) where an unknown tool answers "Unknown tool", and no audit line was written.
    audit_path = tmp_path / "audit.jsonl"
    server = CatalogServer(LiveCatalog(write_tools(tmp_path)), audit=AuditLog.open(audit_path))
    server.load()
    answers: dict[str, httpx.Response] = {}

    async def probe() -> None:
        async with running(server, access_list(tmp_path)) as url, httpx.AsyncClient(timeout=10) as http:
            for name in ("admin_purge", "made_up_purge"):
                answers[f"{name} body only"] = await modern_call(http, url, "reader", name, {"text": "x", "region": "eu"})
                answers[f"{name} header only"] = await modern_call(http, url, "reader", name, {"text": "x"},
                                                                   {"Mcp-Param-Region": "eu"})
            answers["admin"] = await modern_call(http, url, "admin", "admin_purge", {"text": "x", "region": "eu"},
                                                 {"Mcp-Param-Region": "eu"})
            answers["admin mismatch"] = await modern_call(http, url, "admin", "admin_purge", {"text": "x", "region": "eu"})

    anyio.run(probe)
    server.audit.close()  # type: ignore[union-attr]
    for attempt in ("body only", "header only"):
        hidden, unknown = answers[f"admin_purge {attempt}"], answers[f"made_up_purge {attempt}"]
        assert (hidden.status_code, hidden.json()) == (unknown.status_code, json.loads(
            unknown.text.replace("made_up_purge", "admin_purge"))), attempt
        assert hidden.json()["error"]["message"] == "Unknown tool: admin_purge"
    assert answers["admin"].json()["result"]["isError"] is False  # a client that may see it calls it
    assert answers["admin mismatch"].json()["error"]["message"].startswith("Mcp-Param-Region header is missing")
    lines = [json.loads(line) for line in audit_path.read_text(encoding="utf-8").splitlines()]
    assert [(line["client"], line["tool"], line.get("unknown_tool", False)) for line in lines] == [
        ("reader", "admin_purge", True), ("reader", "admin_purge", True), ("reader", "made_up_purge", True),
        ("reader", "made_up_purge", True), ("admin", "admin_purge", False)]


def test_the_token_a_caller_presents_is_redacted_from_its_calls_audit_line_and_result(tmp_path: Path) -> None:
    # Only the tokens read from the environment were secrets of the server: a token_sha256 client's token (the
    # doc's own example) or an OpenID token a client passed as an argument (a model fills an api_key parameter
    # with what it saw) was written as is to the audit log, where whoever reads it could call as that client.
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key())), "kid": "k1", "use": "sig"}
    issuer, audience = "https://sso.example.com/realms/ops", "https://tools.example.com/mcp"

    def fetch(url: str) -> dict[str, Any]:
        return {"issuer": issuer, "jwks_uri": issuer + "/certs"} if url.endswith("openid-configuration") else {"keys": [jwk]}

    now = int(time.time())
    sso_token = jwt.encode({"iss": issuer, "aud": audience, "sub": "alice", "groups": ["sre"], "exp": now + 300},
                           private, algorithm="RS256", headers={"kid": "k1"})
    access = access_list(tmp_path)
    access.oidc = OidcSettings(issuer, audience, (ClaimRule("groups", "sre", True, ("*",)),))
    verifier = TokenVerifier(access.oidc, IssuerKeys(issuer, fetch=fetch))
    audit_path = tmp_path / "audit.jsonl"
    server = CatalogServer(LiveCatalog(write_tools(tmp_path)), audit=AuditLog.open(audit_path))
    server.load()
    results: list[str] = []

    async def calls() -> None:
        sock = bind("127.0.0.1", 0)
        http_server = http_server_for(server, sock, access, verifier=verifier)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(http_server.serve, [sock])
            with anyio.fail_after(10):
                while not http_server.started:
                    await anyio.sleep(0.01)
            async with httpx.AsyncClient(timeout=10) as http:
                for bearer in (TOKENS["admin"], sso_token):
                    answer = await http.post(url, json={
                        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
                        "params": {"name": "get_echo", "arguments": {"text": f"key={bearer}"}, "_meta": META}},
                        headers={"Authorization": f"Bearer {bearer}", "Accept": "application/json, text/event-stream",
                                 "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "get_echo"})
                    results.append(answer.text)
            http_server.should_exit = True

    anyio.run(calls)
    server.audit.close()  # type: ignore[union-attr]
    lines = [json.loads(line) for line in audit_path.read_text(encoding="utf-8").splitlines()]
    assert [(line["client"], line["arguments"]) for line in lines] == [("admin", {"text": "key=***"}),
                                                                       ("alice", {"text": "key=***"})]
    assert all('"isError":false' in result and "key=***" in result for result in results), results
    assert not any(secret in text for secret in (TOKENS["admin"], sso_token) for text in results)
