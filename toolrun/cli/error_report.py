"""toolrun's errors as the command line prints them: one line per problem, never a traceback.

Both ways a command runs use these: the click groups (``toolrun.cli.group``) and the direct
run of a recipe (``toolrun.cli.direct``), so a mistake reads the same either way.
"""

from __future__ import annotations

from toolrun.cli.color import echo_err
from toolrun.cli.echo import echo
from toolrun.core.errors import ToolrunError
from toolrun.core.secrets import redact
from toolrun.core.text import counted, terminal_safe


def report_internal_error(exc: Exception) -> None:
    """One line for an exception no part of toolrun meant to raise: it is a bug, not the user's mistake."""
    what = str(redact(str(exc)))
    what = f"{type(exc).__name__}: {what[:300]}" if what else type(exc).__name__
    echo_err(terminal_safe(f"error: internal error ({what}) — this is a bug in toolrun; run the command again "
                           "with --debug for the traceback and report it"), "error")


def report_error(exc: ToolrunError) -> None:
    problems = getattr(exc, "problems", None)
    if problems:
        for problem in problems:
            echo_err(terminal_safe(f"error: {problem}"), "error")
        unlisted = getattr(exc, "unlisted", 0)
        if unlisted:  # found, but too many to list: counted
            echo_err(f"error: and {counted(unlisted, 'more problem')} like these, not listed", "error")
        if len(problems) + unlisted > 1:
            echo(f"{len(problems) + unlisted} problems.", err=True)
    else:
        echo_err(terminal_safe(f"error: {exc}"), "error")
