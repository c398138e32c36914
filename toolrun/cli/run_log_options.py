"""The run log that ``--logs FILE`` / ``--no-log`` name, opened for recipe, ask, chat and batch.

No click here: the direct run of ``toolrun recipe FILE`` opens the log too. The options
themselves are ``toolrun.cli.recipe_options.run_log_options``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolrun.runlog import RunLog


def open_run_log(logs: Path | None, no_log: bool = False) -> RunLog | None:
    """The run log to write to (None with ``--no-log``); UserError when it cannot be opened."""
    if no_log:
        return None
    from toolrun.runlog import RunLog, default_log_path  # --no-log does without the run log (and sqlite3)

    if logs is not None:
        return RunLog.open(logs, create_folder=False)  # a typo in a folder name must not grow a folder tree
    return RunLog.open(default_log_path())
