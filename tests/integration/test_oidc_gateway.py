"""Single sign-on against a real OpenID provider: the npm package ``oidc-provider`` run on loopback.

Its client_credentials clients get JWT access tokens with a ``groups`` claim; ``toolrun mcp
--config`` admits them by the rules of its ``oidc`` section. An MCP client lists and calls
exactly the tools its claims allow; every bad token is refused with 401 and an audit line
naming its subject; a key rotated at the provider is taken up without a restart.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import queue
import shutil
import subprocess
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client

from tests.integration.npm_packages import node_22, npm_install
from tests.mcp_helpers import http_server, stop_process
from toolrun.mcp.oidc import KEY_REFRESH_INTERVAL

pytestmark = pytest.mark.integration
OIDC_PROVIDER_VERSION = "9.13.3"
RESOURCE = "https://tools.test/mcp"
PROVIDER_SCRIPT = Path(__file__).with_name("oidc") / "provider.mjs"
TOOL = """
name: {name}
description: >-
  {what} of one service, for the on-call engineer. Use it when asked about {topic}; it does
  not change anything else.
parameters: {{type: object, properties: {{service: {{type: string, description: The service name}}}}, required: [service]}}
annotations: {{read_only: {read_only}}}
backend:
  shell:
    argv: [echo, "{name} of", "{{{{ service }}}}"]
"""


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The issuer URL of a running oidc-provider; stopped at the end of the module."""
    modules = npm_install("oidc-provider", OIDC_PROVIDER_VERSION)
    script = modules.parent / "provider.mjs"  # next to node_modules: its imports resolve there
    copy = script.with_name(f".provider.mjs.{os.getpid()}")  # whole or absent for another worker
    shutil.copyfile(PROVIDER_SCRIPT, copy)
    os.replace(copy, script)
    errors = tmp_path_factory.mktemp("oidc-provider") / "stderr.txt"
    with errors.open("w", encoding="utf-8") as stderr:
        process = subprocess.Popen([str(node_22()), str(script), RESOURCE], stdout=subprocess.PIPE, stderr=stderr,
                                   text=True)
    assert process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()

    def drain(stdout: IO[str]) -> None:  # to the end: node never blocks on a full pipe
        for line in stdout:
            lines.put(line)
        lines.put("")

    reader = threading.Thread(target=drain, args=(process.stdout,), daemon=True)
    reader.start()
    try:
        deadline, line = time.monotonic() + 60, "-"
        while line and not line.startswith("ready "):
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))  # "" as soon as it exits
            except queue.Empty:
                line = ""
        assert line.startswith("ready "), (
            f"oidc-provider did not start (exit code {process.poll()}); its stderr:\n"
            f"{errors.read_text(encoding='utf-8')[-3000:]}")
        yield line.split()[1]
    finally:
        stop_process(process)
        reader.join(10)
        process.stdout.close()


def token(issuer: str, client: str, resource: str = RESOURCE) -> str:
    answer = httpx.post(issuer + "/token", auth=(client, f"{client}-secret"), timeout=30,
                        data={"grant_type": "client_credentials", "resource": resource, "scope": "tools"})
    answer.raise_for_status()
    return str(answer.json()["access_token"])


def forged(issuer: str, **claims: Any) -> str:
    """A token signed with the provider's own current key, with claims it would never issue."""
    now = int(time.time())
    body = {"iss": issuer, "aud": RESOURCE, "sub": "forger", "iat": now, "exp": now + 300, **claims}
    return httpx.post(issuer + "/forge", content=json.dumps(body), timeout=30).text


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _resigned(real: str, header: dict[str, Any], key: bytes | None) -> str:
    """A real token's claims under another header: unsigned (alg none) or HMAC-signed with ``key``."""
    claims = real.split(".")[1]
    signing_input = f"{_b64(json.dumps(header).encode())}.{claims}"
    signature = _b64(hmac.new(key, signing_input.encode(), hashlib.sha256).digest()) if key else ""
    return f"{signing_input}.{signature}"


def _public_pem(issuer: str) -> bytes:
    jwks = httpx.get(issuer + "/jwks", timeout=30).json()
    public_key = jwt.PyJWK(jwks["keys"][0]).key
    return bytes(public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


@pytest.fixture(scope="module")
def gateway(provider: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("gateway")
    tools = folder / "tools.d"
    tools.mkdir()
    (tools / "status.yaml").write_text(TOOL.format(name="get_status", what="Returns the status", topic="status",
                                                   read_only="true"), encoding="utf-8")
    (tools / "restart.yaml").write_text(TOOL.format(name="restart_service", what="Restarts the processes",
                                                    topic="a restart", read_only="false"), encoding="utf-8")
    (folder / "gateway.yaml").write_text(textwrap.dedent(f"""
        tools_dir: tools.d
        resource_url: {RESOURCE}
        audit: audit.jsonl
        auth:
          oidc:
            issuer: {provider}
            rules:
              - {{claim: groups, contains: sre, tools: ["*"]}}
              - {{claim: groups, contains: support, tools: ["get_*"]}}
    """), encoding="utf-8")
    with http_server("--config", str(folder / "gateway.yaml")) as server:
        yield server.url, folder / "audit.jsonl"


async def _tools_and_calls(url: str, bearer: str) -> tuple[list[str], dict[str, str]]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=60)
    async with Client(streamable_http_client(url, http_client=client)) as session:
        listed = sorted(tool.name for tool in (await session.list_tools()).tools)
        outcomes = {}
        for name in ("get_status", "restart_service"):
            try:
                result = await session.call_tool(name, {"service": "checkout"})
                outcomes[name] = result.content[0].text  # type: ignore[union-attr]
            except Exception as exc:  # the protocol's error for a tool outside the client's rules
                outcomes[name] = f"refused: {exc}"
    return listed, outcomes


def test_a_token_of_the_provider_lists_and_calls_exactly_the_tools_its_claims_allow(provider: str, gateway: Any) -> None:
    url, audit = gateway
    sre_tools, sre_calls = asyncio.run(_tools_and_calls(url, token(provider, "sre-bot")))
    assert sre_tools == ["get_status", "restart_service"]
    assert sre_calls == {"get_status": "get_status of checkout", "restart_service": "restart_service of checkout"}
    support_tools, support_calls = asyncio.run(_tools_and_calls(url, token(provider, "support-bot")))
    assert support_tools == ["get_status"]
    assert support_calls["get_status"] == "get_status of checkout"
    assert "Unknown tool: restart_service" in support_calls["restart_service"]
    calls = [entry for entry in map(json.loads, audit.read_text().splitlines()) if "tool" in entry]
    assert {(entry["client"], entry["tool"], entry["is_error"]) for entry in calls} >= {
        ("sre-bot", "restart_service", False), ("support-bot", "restart_service", True)}
    metadata = httpx.get(url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource/mcp", timeout=30).json()
    assert metadata["resource"] == RESOURCE and metadata["authorization_servers"] == [provider]


def test_every_bad_token_is_refused_with_401_and_an_audit_line(provider: str, gateway: Any) -> None:
    url, audit = gateway
    real = token(provider, "sre-bot")
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    cases = {
        "expired": forged(provider, exp=now - 120),
        "not valid yet": forged(provider, nbf=now + 3600),
        "wrong audience": token(provider, "sre-bot", resource="https://another.test/api"),
        "wrong issuer": forged(provider, iss="https://sso.evil.test"),
        "algorithm 'none' is not accepted": _resigned(real, {"alg": "none", "kid": "key-1"}, None),
        "algorithm 'HS256' is not accepted": _resigned(real, {"alg": "HS256", "kid": "key-1"}, _public_pem(provider)),
        "signed with a key the issuer does not publish": jwt.encode(
            {"iss": provider, "aud": RESOURCE, "sub": "forger", "exp": now + 300}, stranger, "RS256",
            headers={"kid": "key-999"}),
    }
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}
    for reason, bad in cases.items():
        answer = httpx.post(url, json=initialize, timeout=30, headers={
            "Authorization": f"Bearer {bad}", "Accept": "application/json, text/event-stream"})
        assert answer.status_code == 401, reason
        assert answer.json()["message"] == f"the token was refused: {reason}"
        assert 'resource_metadata="https://tools.test/.well-known/oauth-protected-resource/mcp"' in \
            answer.headers["www-authenticate"]
    refused = [entry for entry in map(json.loads, audit.read_text().splitlines()) if "refused" in entry]
    assert [(entry["refused"], entry["issuer"]) for entry in refused[-len(cases):]] == [(reason, provider) for reason in cases]
    subjects = [entry["subject"] for entry in refused[-len(cases):]]
    assert subjects == ["forger", "forger", "sre-bot", "forger", "sre-bot", "sre-bot", "forger"]


def test_a_key_rotated_at_the_provider_is_taken_up_without_a_restart(provider: str, gateway: Any) -> None:
    url, _ = gateway
    assert asyncio.run(_tools_and_calls(url, token(provider, "sre-bot")))[0]  # the keys are known
    fetched_at = time.monotonic()
    assert httpx.post(provider + "/rotate", timeout=30).text == "key-2"
    rotated = token(provider, "sre-bot")
    assert jwt.get_unverified_header(rotated)["kid"] == "key-2"
    # The server fetched the keys at its first token (module start); it fetches again at most once a minute.
    time.sleep(max(0.0, KEY_REFRESH_INTERVAL + 1 - (time.monotonic() - fetched_at)))
    tools, calls = asyncio.run(_tools_and_calls(url, rotated))
    assert tools == ["get_status", "restart_service"] and calls["get_status"] == "get_status of checkout"
