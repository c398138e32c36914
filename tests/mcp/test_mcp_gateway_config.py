"""``toolrun mcp --config FILE``: one file for a server, checked like a tool file, overridden by options."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolrun.cli import main
from toolrun.core.durations import parse_duration
from toolrun.core.errors import LoadError
from toolrun.mcp.access import InlineAuth, read_access_list
from toolrun.mcp.gateway_config import load_gateway_config


def config_file(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "gateway"
    folder.mkdir(exist_ok=True)
    path = folder / "gateway.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_every_key_becomes_the_option_of_its_name_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    path = config_file(tmp_path, """
        listen: 0.0.0.0:8080
        tools_dir: tools.d
        tools: ["get_*"]
        recipes: ../recipes
        resource_url: https://tools.internal.example.com/mcp
        auth:
          oidc:
            issuer: https://sso.internal.example.com/realms/ops
            rules:
              - {claim: groups, contains: sre, tools: ["*"]}
        audit: audit.jsonl
        allow_origins: [https://inspector.internal.example.com]
        assume_yes: true
        max_sessions: 50
        header_timeout: 5s
    """)
    options = load_gateway_config(path).options
    folder = path.parent
    assert options["http"] == "0.0.0.0:8080" and options["tools"] == ["get_*"] and options["assume_yes"] is True
    assert (options["tools_dir"], options["recipes"], options["audit"]) == (folder / "tools.d", folder / "../recipes",
                                                                           folder / "audit.jsonl")
    assert options["header_timeout"] == 5.0 and options["max_sessions"] == 50
    assert options["allow_origins"] == ["https://inspector.internal.example.com"]
    auth = options["auth"]
    assert isinstance(auth, InlineAuth) and auth.file == path
    oidc = read_access_list(auth, options["resource_url"]).oidc
    assert oidc is not None and oidc.audience == "https://tools.internal.example.com/mcp"  # resource_url by default
    assert load_gateway_config(config_file(tmp_path, "auth: clients.yaml\n")).options["auth"] == folder / "clients.yaml"


def test_mistakes_are_reported_with_line_and_fix_like_a_tool_file(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as caught:
        load_gateway_config(config_file(tmp_path, """
            listen: 8080
            tool_dir: tools.d
            max_sessions: 0
            metrics_listen: 127.0.0.1:9464
            body_timeout: soon
            auth:
              oidc: {issuer: "https://sso.example.com", rules: [{claim: groups, contains: sre}]}
        """))
    found = {(problem.line, problem.message, problem.fix) for problem in caught.value.problems}
    assert (2, "listen must be HOST:PORT, not an integer 8080", "write it like listen: 0.0.0.0:8080") in found
    assert (3, "unknown key 'tool_dir' in the document", "did you mean 'tools_dir'?") in found
    assert not any(line == 5 for line, _, _ in found)  # metrics_listen: read like the others
    messages = {(line, message) for line, message, _ in found}
    assert (4, "max_sessions must be at least 1, not an integer 0") in messages
    assert any(line == 6 and message.startswith("body_timeout:") for line, message in messages)
    assert (8, "oidc needs an audience: the value tokens carry in aud") in messages  # no resource_url, no audience
    assert (8, "a rule needs the tools it gives, as a list of names or globs") in messages


def test_addresses_and_origins_are_checked_with_the_file_each_mistake_at_its_line(tmp_path: Path) -> None:
    # These were checked only when the server started: the first bad one alone, as an option ("--allow-origin '*'"),
    # with no file or line, and only once every other mistake of the file was fixed.
    with pytest.raises(LoadError) as caught:
        load_gateway_config(config_file(tmp_path, """
            listen: 0.0.0.0:8080
            tool_dir: tools.d
            metrics_listen: 0:9464
            allow_origins: ["*", "https://inspector.example.com", "https://ok.example.com/x"]
        """))
    found = {(problem.line, problem.message) for problem in caught.value.problems}
    assert (3, "unknown key 'tool_dir' in the document") in found
    assert any(line == 4 and message.startswith("metrics_listen: '0:9464' listens on every interface")
               for line, message in found), found  # worded as the file's key, not the option
    assert (5, "allow_origins: '*' is not an origin") in found
    assert not any("--" in problem.message + (problem.fix or "") for problem in caught.value.problems)
    with pytest.raises(LoadError) as once:  # refused by the schema: not told again by the address check
        load_gateway_config(config_file(tmp_path, "listen: nonsense\n"))
    assert [(problem.line, problem.message) for problem in once.value.problems] == [
        (1, 'listen must be HOST:PORT, not a string "nonsense"')]
    assert any(line == 5 and "'https://ok.example.com/x' is not an origin" in message for line, message in found), found
    assert len(found) == 4
    fine = load_gateway_config(config_file(tmp_path, "listen: 0.0.0.0:8080\nmetrics_listen: 10.0.0.5:9464\n"
                                                     "allow_origins: [https://inspector.example.com]\n"))
    assert fine.options["metrics_listen"] == "10.0.0.5:9464"
    assert load_gateway_config(config_file(tmp_path, "metrics_listen: 9464\n")).options["metrics_listen"] == "9464"


def test_an_option_on_the_command_line_overrides_the_file(tmp_path: Path) -> None:
    path = config_file(tmp_path, "tools_dir: missing-here\nlisten: 127.0.0.1:0\n")
    from_file = CliRunner().invoke(main, ["mcp", "--config", str(path)])
    assert from_file.exit_code == 2
    assert str(path.parent / "missing-here") in from_file.stderr and "tools directory not found" in from_file.stderr
    overridden = CliRunner().invoke(main, ["mcp", "--config", str(path), "--tools-dir", str(tmp_path / "mine")])
    assert overridden.exit_code == 2 and str(tmp_path / "mine") in overridden.stderr
    assert "missing-here" not in overridden.stderr
    broken = CliRunner().invoke(main, ["mcp", "--config", str(config_file(tmp_path, "listn: 1\n"))])
    assert broken.exit_code == 2 and "did you mean 'listen'?" in broken.stderr


def test_the_gateway_schema_is_printed_and_names_every_key() -> None:
    printed = CliRunner().invoke(main, ["schema", "gateway"])
    assert printed.exit_code == 0
    schema = json.loads(printed.stdout)
    assert {"listen", "tools_dir", "recipes", "resource_url", "auth", "audit", "allow_origins",
            "metrics_listen"} <= set(schema["properties"])
    assert set(schema["properties"]["auth"]["properties"]["oidc"]["properties"]) == {"issuer", "audience", "rules"}


def test_the_config_file_of_the_gateway_doc_loads_as_written(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("NIGHTLY_BOT_TOKEN", "nightly-0123456789abcdef")
    doc = (Path(__file__).resolve().parents[2] / "docs" / "gateway.md").read_text(encoding="utf-8")
    example = doc.split("`gateway.yaml`, next to the team's `tools.d/`:\n\n```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "gateway.yaml"
    path.write_text(example, encoding="utf-8")
    options = load_gateway_config(path).options
    access = read_access_list(options["auth"], options["resource_url"])
    assert [client.name for client in access.clients] == ["nightly-bot"]
    assert access.oidc is not None and access.oidc.audience == "https://tools.internal.example.com/mcp"


def test_the_service_keys_become_the_options_of_the_same_name(tmp_path: Path) -> None:
    options = load_gateway_config(config_file(tmp_path, """
        listen: 0.0.0.0:8080
        metrics_listen: 127.0.0.1:9464
        drain_delay: 8s
        stateless: true
    """)).options
    assert (options["metrics_listen"], options["drain_delay"], options["stateless"]) == ("127.0.0.1:9464", 8.0, True)


@pytest.mark.parametrize("given", ["9464", '"9464"'])
def test_metrics_listen_may_be_a_bare_port_as_on_the_command_line(tmp_path: Path, given: str) -> None:
    options = load_gateway_config(config_file(tmp_path, f"metrics_listen: {given}\n")).options
    assert options["metrics_listen"] == "9464"  # --metrics-listen 9464: on 127.0.0.1


@pytest.mark.parametrize(("given", "expected"), [("0s", 0.0), (0, 0.0), ("250ms", 0.25)])
def test_a_drain_delay_may_be_none_at_all(tmp_path: Path, given: object, expected: float) -> None:
    options = load_gateway_config(config_file(tmp_path, f"drain_delay: {given}\n")).options
    assert options["drain_delay"] == expected


def test_a_negative_drain_delay_is_refused_on_the_command_line_and_in_the_file(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="drain_delay: expected a duration"):
        load_gateway_config(config_file(tmp_path, "drain_delay: -1s\n"))
    refused = CliRunner().invoke(main, ["mcp", "--http", "127.0.0.1:0", "--drain-delay", "-1s"])
    assert refused.exit_code == 2 and "--drain-delay" in refused.output and "Traceback" not in refused.output
    assert parse_duration("0s", zero=True) == 0.0
    with pytest.raises(ValueError, match="more than 0"):
        parse_duration("0s")  # a timeout may not be none
