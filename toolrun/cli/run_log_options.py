"""``--logs FILE`` / ``--no-log``: the run log options of recipe, ask, chat and batch.

``toolrun.cli.recipe_play.open_run_log`` opens the log they name.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click


def run_log_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--logs FILE`` and ``--no-log``, passed as ``logs: Path | None`` and ``no_log: bool``."""
    function = click.option("--no-log", "no_log", is_flag=True, help="do not write this run to the run log")(function)
    return click.option("--logs", "logs", type=click.Path(path_type=Path, dir_okay=False),
                        help="the run log database (default: $TOOLRUN_LOGS, else ~/.local/share/toolrun/logs.db)")(function)
