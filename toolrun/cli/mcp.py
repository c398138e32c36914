"""``toolrun mcp``: serve the catalog to MCP clients (stdio, or streamable HTTP with --http)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from toolrun.api import DEFAULT_TOOLS_DIR
from toolrun.cli.common import tools_dir_option
from toolrun.core.durations import parse_duration
from toolrun.core.text import terminal_safe
from toolrun.mcp.limits import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS
from toolrun.mcp.service import DEFAULT_DRAIN_DELAY


def _report(line: str) -> None:
    # stdout is the protocol's channel on stdio; a line may carry a tool server's stderr or a client's text.
    click.echo(terminal_safe(line), err=True)


class _TerminalSafeFormatter(logging.Formatter):
    """Log records (the SDK's, uvicorn's) as lines a terminal shows, not obeys: they may quote a client."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().format(record))


def _log_to_stderr_safely() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(_TerminalSafeFormatter("%(levelname)s: %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


class _Duration(click.ParamType):
    name = "DURATION"

    def __init__(self, *, zero: bool = False) -> None:
        self.zero = zero  # a delay may be 0s; a timeout may not

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            return parse_duration(value, zero=self.zero)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


_SECONDS = _Duration()
_DELAY = _Duration(zero=True)
_POSITIVE = click.IntRange(min=1)


@click.command("mcp")
@tools_dir_option
@click.option("--tools", "tool_globs", multiple=True, metavar="GLOB", help="Serve only the tools matching GLOB. Repeatable.")
@click.option("--http", "http", metavar="HOST:PORT", help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.")
@click.option("--auth", "auth", type=click.Path(path_type=Path, dir_okay=False),
              help="YAML file of clients, their bearer tokens and tools (required off loopback).")
@click.option("--audit", "audit", type=click.Path(path_type=Path, dir_okay=False),
              help="Append one JSON line per call here (HTTP default: stderr).")
@click.option("--yes", "assume_yes", is_flag=True, help="Approve every call of tools that ask for confirmation.")
@click.option("--max-sessions", type=_POSITIVE, metavar="N",
              help="HTTP: open sessions in all (default 1000, or the sum of the clients' limits).")
@click.option("--max-client-sessions", type=_POSITIVE, metavar="N",
              help="HTTP: open sessions per --auth client (default 100); a client's max_sessions overrides it.")
@click.option("--header-timeout", type=_SECONDS, default=DEFAULT_HEADER_TIMEOUT, show_default="10s",
              help="HTTP: time a request has to send its headers (30s, 500ms).")
@click.option("--body-timeout", type=_SECONDS, default=DEFAULT_BODY_TIMEOUT, show_default="30s",
              help="HTTP: time a request has to send its body once its headers are in.")
@click.option("--max-connections", type=_POSITIVE, metavar="N", default=DEFAULT_MAX_CONNECTIONS, show_default=True,
              help="HTTP: open connections at most.")
@click.option("--recipes", "recipes", type=click.Path(path_type=Path, file_okay=False), metavar="DIR",
              help="Also serve each recipe of DIR as an MCP prompt (its vars are the arguments).")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="ORIGIN",
              help="HTTP: let browser pages of ORIGIN (http://localhost:6274) call the server (CORS). Repeatable.")
@click.option("--metrics-listen", metavar="[HOST:]PORT",
              help="HTTP: serve Prometheus /metrics here (a bare port: on 127.0.0.1), never on the --http address.")
@click.option("--drain-delay", type=_DELAY, default=DEFAULT_DRAIN_DELAY, show_default="5s",
              help="HTTP: at SIGTERM, /readyz answers 503 this long before the server stops taking connections (0s: at once).")
@click.option("--stateless", is_flag=True,
              help="HTTP: keep no sessions (any replica answers any request); no approvals, list_changed or progress.")
@click.option("--resource-url", "resource_url", metavar="URL",
              help="HTTP: the server's public URL, the audience of --auth's OpenID tokens (https://tools.example.com/mcp).")
@click.option("--config", "config", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Read the settings from a YAML file (`toolrun schema gateway`); options given here override it.")
def mcp_command(config: Path | None, **given: Any) -> None:
    """Serve the tool catalog over the Model Context Protocol.

    Tool files added, changed or removed while the server runs are picked up without a restart;
    so are recipe files with --recipes.
    """
    from toolrun.mcp import serve  # the SDK loads only for this command
    from toolrun.mcp.gateway_config import load_gateway_config

    from_file = load_gateway_config(config).options if config is not None else {}
    context = click.get_current_context()
    options: dict[str, Any] = {}
    for name, value in given.items():  # an option on the command line wins over the file
        key = _SERVE_NAMES.get(name, name)
        typed = context.get_parameter_source(name) not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)
        options[key] = value if typed or key not in from_file else from_file[key]
    options["tools"] = list(options["tools"]) or None
    tools_dir = options.pop("tools_dir")
    _log_to_stderr_safely()
    serve(tools_dir if tools_dir is not None else DEFAULT_TOOLS_DIR, report=_report, **options)


_SERVE_NAMES = {"tool_globs": "tools"}  # an option whose name differs from serve()'s argument
