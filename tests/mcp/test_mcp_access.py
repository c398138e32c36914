"""The pieces of ``toolrun mcp`` that need no SDK: the --auth file, the audit line, addresses, result shapes."""

from __future__ import annotations

import hashlib
import io
import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.property_budget import property_examples
from toolrun.core.errors import LoadError, UserError
from toolrun.core.text import terminal_safe
from toolrun.mcp.access import load_access_list
from toolrun.mcp.addresses import allowed_origins, is_loopback, parse_address
from toolrun.mcp.audit import AuditLog
from toolrun.mcp.limits import SessionLedger, SessionLimits, SessionRefused, resolve_session_limits
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


def test_a_token_short_enough_to_guess_is_refused_and_a_secret_file_s_newline_is_not_part_of_one(
        tmp_path: Path, monkeypatch) -> None:
    path = auth_file(tmp_path, """
        clients:
          - name: bot
            token: "${env:BOT_TOKEN}"
    """)
    for short in ("ab", "  0123456789abcde\n"):  # 15 characters once the newline a header cannot carry is gone
        monkeypatch.setenv("BOT_TOKEN", short)
        with pytest.raises(LoadError) as error:
            load_access_list(path)
        [problem] = error.value.problems
        assert (problem.line, problem.message) == (
            4, f"client 'bot': the token in BOT_TOKEN has {len(short.strip())} characters, fewer than 16: it can be guessed")
        assert "openssl rand -hex 32" in problem.fix
    monkeypatch.setenv("BOT_TOKEN", "0123456789abcdef\n")  # as `kubectl create secret --from-file` keeps it
    access = load_access_list(path)
    bot = access.client_for("Bearer 0123456789abcdef")
    assert bot is not None and bot.name == "bot" and access.secrets == ["0123456789abcdef"]


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
    found = [(p.line, p.message) for p in caught.value.problems]
    assert (4, "client 'a' is listed twice") in found
    assert (4, "client 'a' has the same token as client 'a' (line 3): the audit log could not tell them apart") in found


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


def test_an_audit_line_escapes_what_a_terminal_obeys_in_a_file_as_on_stderr(tmp_path: Path) -> None:
    hostile = "get_\x9b31m\u202e\u2028\u2029\x85\x1b]0;owned\x07\x7f\u2066"
    log = AuditLog.open(tmp_path / "audit.jsonl")
    log.record(client="bot", tool=hostile, arguments={"city": f"北京{hostile}"}, is_error=True, duration_ms=0, unknown=True)
    log.close()
    text = (tmp_path / "audit.jsonl").read_text(encoding="utf-8")
    assert text.count("\n") == 1 and all(ord(char) >= 0x20 and not 0x7f <= ord(char) <= 0x9f for char in text[:-1])
    assert not any(char in text for char in "\u202e\u2028\u2029\u2066")
    assert "北京get_\\u009b31m\\u202e" in text  # readable text stays, controls become JSON escapes
    entry = json.loads(text)
    assert (entry["tool"], entry["arguments"]["city"]) == (hostile, f"北京{hostile}")


@settings(max_examples=property_examples(100), deadline=None)
@given(st.recursive(st.text() | st.integers() | st.none(), lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
                    max_leaves=8))
def test_an_audit_line_is_one_line_of_the_same_json_with_nothing_a_terminal_obeys(arguments: object) -> None:
    stream = io.StringIO()
    AuditLog(stream).record(client="bot", tool="t", arguments=arguments, is_error=False, duration_ms=1)
    line = stream.getvalue()
    assert line.endswith("\n") and terminal_safe(line) == line and "\n" not in line[:-1]
    assert json.loads(line)["arguments"] == arguments


def test_a_client_may_have_its_own_session_limit_and_a_bad_one_is_a_problem(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BOT_TOKEN", "bot-token-1234-5678")
    path = auth_file(tmp_path, """
        clients:
          - {name: bot, token: "${env:BOT_TOKEN}", max_sessions: 3}
          - {name: ide, token_sha256: %s}
    """ % ("a" * 64))
    assert [client.max_sessions for client in load_access_list(path).clients] == [3, None]
    for bad in ("0", "-1", "yes", "2.5", "many"):
        with pytest.raises(LoadError) as error:
            load_access_list(auth_file(tmp_path, f'clients: [{{name: bot, token: "${{env:BOT_TOKEN}}", max_sessions: {bad}}}]'))
        assert "max_sessions must be a whole number of 1 or more" in error.value.problems[0].message


def test_no_client_may_fill_the_server_alone_and_by_default_none_crowds_out_the_others() -> None:
    assert resolve_session_limits(None, None, None) == SessionLimits(1000, 100)
    assert resolve_session_limits(10, None, [("bot", None)]) == SessionLimits(10, 5)
    assert resolve_session_limits(None, None, [("a", 900), ("b", 300)]).overall == 1201
    for overall, per_client, own in ((10, 10, None), (10, None, 10), (1, None, None)):
        with pytest.raises(ValueError, match="one client could fill the server alone"):
            resolve_session_limits(overall, per_client, [("bot", own)])
    assert resolve_session_limits(3, None, None).overall == 3  # without --auth: only the overall limit


_OPERATIONS = st.lists(st.tuples(st.sampled_from(["open", "begin", "end", "forget"]), st.sampled_from(["a", "b", None]),
                                 st.integers(0, 30)), max_size=80)


@settings(max_examples=property_examples(150), deadline=None)
@given(_OPERATIONS)
def test_the_ledger_keeps_every_limit_and_closes_only_the_openers_own_idle_sessions(operations: list) -> None:
    ledger = SessionLedger(SessionLimits(overall=6, per_client=2), clock=iter(range(10_000)).__next__)
    opened: list[str] = []
    for operation, identity, pick in operations:
        if operation == "open":
            try:
                idle = ledger.make_room(identity, None, f"client {identity}")
            except SessionRefused as refusal:
                assert "limit" in refusal.message
                continue
            if idle is not None:
                session = ledger._sessions[idle]
                assert session.identity == identity and session.in_flight == 0  # its own, and idle
                ledger.forget(idle)
            opened.append(key := f"s{len(opened)}")
            ledger.opened(key, identity)
        elif opened:
            getattr(ledger, operation)(opened[pick % len(opened)])
        assert len(ledger) <= 6 and all(ledger.count(who) <= 2 for who in ("a", "b"))
        assert ledger.belongs_to("never-opened", "a")


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
