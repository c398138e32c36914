"""``toolrun recipe FILE``, the main command, run without importing click.

click's import and its parse of the command line are about a tenth of an offline recipe run.
For a command line this module understands whole — ``recipe``, the recipe file, an optional
prompt, and the recipe command's own options written as ``--name value``, ``--name=value`` or
a flag, after ``--color`` if the group's is given — the script runs the command here, with
the same function click's command calls (``toolrun.cli.recipe_play.run_recipe_command``).
Anything else goes to click, which stays the one judge of a command line: ``--help``, a
mistake (an unknown option, a value that does not convert, a folder where a file goes), an
abbreviation, ``--``, ``--debug`` or ``TOOLRUN_DEBUG``, shell completion. A test parses many
command lines both ways and compares what each would call the command with.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from pathlib import Path
from typing import Any

from toolrun.cli.color import COLOR_CHOICES, remember_choice
from toolrun.cli.echo import echo
from toolrun.cli.error_report import report_error, report_internal_error
from toolrun.core.errors import ToolrunError
from toolrun.core.text import text_as_sent

# The recipe command's options (toolrun.cli.recipe): option -> the parameter it fills
RECIPE_VALUE_OPTIONS = {"--model": "model_spec", "--tools-dir": "tools_dir", "--var": "var_pairs",
                        "--max-turns": "max_turns", "--record": "record", "--replay": "replay",
                        "--transcript": "transcript_path", "--logs": "logs"}
RECIPE_FLAGS = {"--json": ("as_json", True), "--stream": ("stream", True), "--no-stream": ("stream", False),
                "--live": ("live", True), "--strict": ("strict", True), "--replay-tools": ("replay_tools", True),
                "--yes": ("assume_yes", True), "--no-log": ("no_log", True)}
RECIPE_DEFAULTS: dict[str, Any] = {"recipe_path": None, "prompt": None, "model_spec": None, "tools_dir": None,
                                   "var_pairs": (), "as_json": False, "stream": None, "max_turns": None, "record": None,
                                   "replay": None, "live": False, "strict": False, "replay_tools": False,
                                   "assume_yes": False, "transcript_path": None, "logs": None, "no_log": False}
FILE_PARAMETERS = ("recipe_path", "record", "replay", "transcript_path", "logs")  # a path that must not be a folder
FOLDER_PARAMETERS = ("tools_dir",)  # a path that must not be a file


class DirectRecipe:
    """``toolrun recipe`` with its parameters parsed, ready to run without click."""

    def __init__(self, color: str, params: dict[str, Any]) -> None:
        self.color = color
        self.params = params

    @staticmethod
    def load() -> None:
        """Import what running takes (the script does it with the garbage collector off)."""
        import toolrun.cli.recipe_play  # noqa: F401 - imported for run

    def run(self) -> int:
        """Run the command; returns its exit code. Errors read as the click group prints them."""
        from toolrun.cli.recipe_play import run_recipe_command

        restore_color = remember_choice(self.color)
        try:
            return run_recipe_command(**self.params)
        except ToolrunError as exc:
            report_error(exc)
            return exc.exit_code
        except BrokenPipeError:  # the reader went away (| head): as click, exit 1 without a word
            with contextlib.suppress(OSError, ValueError):  # what is still buffered is dropped at exit, not reported
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        except Exception as exc:  # noqa: BLE001 - a bug in toolrun: one line that says so (--debug goes through click)
            report_internal_error(exc)
            return 1
        except KeyboardInterrupt:  # before the run started or after it ended (a run stopped by Ctrl-C exits 130)
            echo(err=True)
            echo("Aborted!", err=True)
            return 1
        finally:
            restore_color()


def direct_command(args: list[str]) -> DirectRecipe | None:
    """``toolrun``'s arguments ``args`` as a recipe run this module can do, or None: click's to parse."""
    if "TOOLRUN_DEBUG" in os.environ or any(name.startswith("_") and name.endswith("_COMPLETE") for name in os.environ):
        return None  # --debug by its variable, or a shell asking for completions
    color = "auto"
    words = iter(args)
    for word in words:
        if word == "recipe":
            break
        name, equals, value = word.partition("=")
        if name != "--color":
            return None
        color = value if equals else next(words, "")
        if color not in COLOR_CHOICES:
            return None
    else:
        return None
    params = _recipe_params(list(words))
    return DirectRecipe(color, params) if params is not None else None


def _recipe_params(args: list[str]) -> dict[str, Any] | None:
    """The recipe command's parameters from its arguments, as click would pass them; None for anything unusual."""
    params = dict(RECIPE_DEFAULTS)
    positional: list[str] = []
    var_pairs: list[str] = []
    at = 0
    while at < len(args):
        word = args[at]
        at += 1
        if not word.startswith("-"):
            positional.append(word)
            continue
        name, equals, value = word.partition("=")
        if name in RECIPE_FLAGS and not equals:
            flag, flag_value = RECIPE_FLAGS[name]
            params[flag] = flag_value
            continue
        parameter = RECIPE_VALUE_OPTIONS.get(name)
        if parameter is None:
            return None  # --help, --, -x, a mistake: click's
        if not equals:
            if at == len(args):
                return None  # the value is missing
            value = args[at]
            at += 1
        if parameter == "var_pairs":
            var_pairs.append(value)
        else:
            params[parameter] = value
    if not 1 <= len(positional) <= 2 or not all(positional):
        return None
    params["recipe_path"] = positional[0]
    params["prompt"] = text_as_sent(positional[1]) if len(positional) == 2 else None
    params["var_pairs"] = tuple(text_as_sent(pair) for pair in var_pairs)  # as click's TYPED_TEXT would
    return _converted(params)


def _converted(params: dict[str, Any]) -> dict[str, Any] | None:
    """Paths as ``Path`` and ``--max-turns`` as an int, or None where click's types would refuse the value."""
    if params["max_turns"] is not None:
        try:
            params["max_turns"] = int(params["max_turns"])
        except ValueError:
            return None
        if params["max_turns"] < 1:
            return None
    for parameter in (*FILE_PARAMETERS, *FOLDER_PARAMETERS):
        value = params[parameter]
        if value is None:
            continue
        if not _path_allowed(value, folder=parameter in FOLDER_PARAMETERS):
            return None
        params[parameter] = Path(value)
    return params


def _path_allowed(value: str, *, folder: bool) -> bool:
    """Whether click's ``Path`` type (readable, a file or a folder as asked) takes ``value`` as it is."""
    try:
        found = os.stat(value)
    except OSError:
        return True  # need not exist yet
    if stat.S_ISREG(found.st_mode) if folder else stat.S_ISDIR(found.st_mode):
        return False  # a file where a folder goes, or a folder where a file goes
    return os.access(value, os.R_OK)
