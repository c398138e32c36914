"""The pieces of ``toolrun mcp`` that need no SDK: the --auth file, the audit line, addresses, result shapes."""

from __future__ import annotations

import hashlib
import io
import json
import textwrap
from pathlib import Path

import pytest

from toolrun.errors import LoadError, UserError
from toolrun.mcp.access import load_access_list
from toolrun.mcp.addresses import allowed_origins, is_loopback, parse_address
from toolrun.mcp.audit import AuditLog
from toolrun.mcp.mapping import approval_given, call_result_to_mcp


def auth_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "clients.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_tokens_from_the_environment_or_as_digests_admit_their_client(tmp_path: Path, monkeypatch, run_scope) -> None:
    monkeypatch.setenv("BOT_TOKEN", "bot-token-91c2e7")
    digest = hashlib.sha256(b"ide-token-55aa01").hexdigest()
    access = load_access_list(auth_file(tmp_path, f"""
        clients:
          - name: bot
            token: "${{env:BOT_TOKEN}}"
            tools: ["get_*"]
          - name: ide
            token_sha256: {digest.upper()}
    """))
    bot = access.client_for("Bearer bot-token-91c2e7")
    assert bot is not None and (bot.name, bot.tools) == ("bot", ("get_*",))
    ide = access.client_for("bearer  ide-token-55aa01 ")
    assert ide is not None and (ide.name, ide.tools) == ("ide", None)
    for header in (None, "", "Bearer", "Bearer wrong", "bot-token-91c2e7", "Basic Ym90LXRva2VuLTkxYzJlNw=="):
        assert access.client_for(header) is None, header
    assert access.secrets == ["bot-token-91c2e7"]
    assert "bot-token-91c2e7" in run_scope.secrets  # read through ${env:...}: redacted from what this scope prints


def test_every_mistake_of_an_auth_file_is_reported_with_its_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("MISSING_TOKEN", raising=False)
    monkeypatch.setenv("SHARED", "shared-token-0001")
    path = auth_file(tmp_path, """
        clients:
          - name: literal
            token: hunter2-literal
          - name: both
            token: "${env:SHARED}"
            token_sha256: abc
          - name: missing
            token: "${env:MISSING_TOKEN}"
          - name: short-digest
            token_sha256: abc123
          - name: globs
            token: "${env:SHARED}"
            tools: get_*
            scope: admin
          - token: "${env:SHARED}"
    """)
    with pytest.raises(LoadError) as caught:
        load_access_list(path)
    found = [(p.line, p.message) for p in caught.value.problems]
    assert (4, "client 'literal': a token must not be written in the file") in found
    assert (6, "client 'both': needs exactly one of token and token_sha256") in found
    assert (9, "client 'missing': environment variable MISSING_TOKEN is not set") in found
    assert (11, "client 'short-digest': token_sha256 is not a SHA-256 hex digest") in found
    assert (14, "client 'globs': tools must be a list of names or globs") in found
    assert (15, "unknown key 'scope' in a client") in found
    assert (16, "a client needs a name") in found
    assert all(p.file == path and p.fix for p in caught.value.problems)


def test_two_clients_with_one_token_or_one_name_are_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SHARED", "shared-token-0001")
    path = auth_file(tmp_path, """
        clients:
          - {name: a, token: "${env:SHARED}"}
          - {name: a, token: "${env:SHARED}"}
    """)
    with pytest.raises(LoadError) as caught:
        load_access_list(path)
    messages = [p.message for p in caught.value.problems]
    assert "client 'a' is listed twice" in messages
    assert "two clients share one token: the audit log could not tell them apart" in messages


def test_an_auth_file_without_clients_says_what_to_write(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as caught:
        load_access_list(auth_file(tmp_path, "tokens: []\n"))
    assert caught.value.problems[0].message == "expected a list of clients under 'clients:'"
    with pytest.raises(LoadError) as missing:
        load_access_list(tmp_path / "nope.yaml")
    assert "cannot read the auth file" in missing.value.problems[0].message


def test_one_audit_line_per_call() -> None:
    stream = io.StringIO()
    AuditLog(stream).record(client="bot", tool="get_x", arguments={"city": "北京"}, is_error=False, duration_ms=4)
    entry = json.loads(stream.getvalue())
    assert list(entry) == ["time", "client", "tool", "arguments", "is_error", "duration_ms"]
    assert entry["time"].endswith("Z") and entry["arguments"] == {"city": "北京"}
    assert "北京" in stream.getvalue()  # not \\u escapes


@pytest.mark.parametrize(("text", "expected"), [("127.0.0.1:8765", ("127.0.0.1", 8765)), ("[::1]:0", ("::1", 0)),
                                                ("0.0.0.0:80", ("0.0.0.0", 80)), ("tools.internal:9000", ("tools.internal", 9000))])
def test_http_addresses(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["8765", "127.0.0.1:", ":8765", "host:http", "host:70000"])
def test_a_bad_http_address_says_how_to_write_it(text: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_address(text)
    assert "is not HOST:PORT" in str(caught.value)


def test_loopback_and_the_origins_a_server_accepts() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.5", "::", "tools.internal"))
    assert "http://localhost:8765" in allowed_origins("127.0.0.1", 8765)
    assert allowed_origins("10.0.0.5", 80) == ["http://10.0.0.5:80", "https://10.0.0.5:80"]


def test_results_and_approvals_in_the_protocols_shapes() -> None:
    assert call_result_to_mcp('{"a": 1}', False) == {"content": [{"type": "text", "text": '{"a": 1}'}], "isError": False,
                                                      "structuredContent": {"a": 1}}
    assert "structuredContent" not in call_result_to_mcp("[1, 2]", False)  # only an object may be structured content
    assert "structuredContent" not in call_result_to_mcp('{"error": 1}', True)
    assert approval_given("accept", {"approve": True}) and not approval_given("accept", {"approve": False})
    assert not approval_given("decline", None) and not approval_given("cancel", {"approve": True})
