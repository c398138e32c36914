"""``--logs FILE`` / ``--no-log``: the run log options of recipe, ask and chat, and opening the log for them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from toolrun.runlog import RunLog


def run_log_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--logs FILE`` and ``--no-log``, passed as ``logs: Path | None`` and ``no_log: bool``."""
    function = click.option("--no-log", "no_log", is_flag=True, help="do not write this run to the run log")(function)
    return click.option("--logs", "logs", type=click.Path(path_type=Path, dir_okay=False),
                        help="the run log database (default: $TOOLRUN_LOGS, else ~/.local/share/toolrun/logs.db)")(function)


def open_run_log(logs: Path | None, no_log: bool = False) -> RunLog | None:
    """The run log to write to (None with ``--no-log``); UserError when it cannot be opened."""
    if no_log:
        return None
    from toolrun.runlog import RunLog, default_log_path  # --no-log does without the run log (and sqlite3)

    if logs is not None:
        return RunLog.open(logs, create_folder=False)  # a typo in a folder name must not grow a folder tree
    return RunLog.open(default_log_path())
