"""The options of the commands that play a recipe — ``recipe``, ``ask``, ``chat``, ``batch`` — written once.

Each decorator adds one option, named and typed the same in every command; where the
commands' help differs, the decorator takes it. A command lists them in the order its
``--help`` shows them, as with ``run_log_options``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from toolrun.cli.text_param import TYPED_TEXT

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def model_option(help: str) -> Decorator:
    """``--model P:M``, passed as ``model_spec: str | None``."""
    return click.option("--model", "model_spec", metavar="P:M", help=help)


def tools_dir_option(default: str) -> Decorator:
    """``--tools-dir D``, passed as ``tools_dir: Path | None``; ``default`` says what it falls back to."""
    return click.option("--tools-dir", type=click.Path(path_type=Path, file_okay=False),
                        help=f"tools directory (default: {default})")


def tool_patterns_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--tools GLOB`` (repeatable), passed as ``tool_patterns: tuple[str, ...]``."""
    return click.option("--tools", "tool_patterns", multiple=True, metavar="GLOB",
                        help="a tool the model may call, by name or glob (repeatable; default: the whole catalog)")(function)


def system_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--system TEXT``, passed as ``system: str | None``."""
    return click.option("--system", type=TYPED_TEXT, help="the system prompt")(function)


def json_option(help: str) -> Decorator:
    """``--json``, passed as ``as_json: bool``."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def stream_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--stream/--no-stream``, passed as ``stream: bool | None`` (None: the provider's default)."""
    return click.option("--stream/--no-stream", default=None,
                        help="use the provider's streaming API (default) or not")(function)


def max_turns_option(help: str) -> Decorator:
    """``--max-turns N`` (at least 1), passed as ``max_turns: int | None``."""
    return click.option("--max-turns", type=click.IntRange(min=1), help=help)


def record_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--record FILE``, passed as ``record: Path | None``."""
    return click.option("--record", type=click.Path(path_type=Path, dir_okay=False),
                        help="save every model exchange to this cassette")(function)


def replay_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--replay FILE``, passed as ``replay: Path | None``."""
    return click.option("--replay", type=click.Path(path_type=Path, dir_okay=False),
                        help="play the model side back from this cassette, offline")(function)


def live_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--live``, passed as ``live: bool``."""
    return click.option("--live", is_flag=True, help="never fall back to the recording beside the recipe")(function)


def assume_yes_option(help: str = "approve every call of a tool that asks for confirmation") -> Decorator:
    """``--yes``, passed as ``assume_yes: bool``."""
    return click.option("--yes", "assume_yes", is_flag=True, help=help)


def transcript_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--transcript FILE``, passed as ``transcript_path: Path | None``."""
    return click.option("--transcript", "transcript_path", type=click.Path(path_type=Path, dir_okay=False),
                        help="write the run as JSON Lines, one event per line, as it happens")(function)


def run_log_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--logs FILE`` and ``--no-log``, passed as ``logs: Path | None`` and ``no_log: bool``
    (``toolrun.cli.run_log_options.open_run_log`` opens the log they name)."""
    function = click.option("--no-log", "no_log", is_flag=True, help="do not write this run to the run log")(function)
    return click.option("--logs", "logs", type=click.Path(path_type=Path, dir_okay=False),
                        help="the run log database (default: $TOOLRUN_LOGS, else ~/.local/share/toolrun/logs.db)")(function)
