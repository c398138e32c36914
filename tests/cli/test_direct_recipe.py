"""``toolrun recipe FILE`` runs without click (``toolrun.cli.direct``): it must take exactly the
command lines click would take the same way, hand everything else to click, and print the
same errors. The parse is compared with click's own on many command lines, fixed and generated."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolrun.cli.recipe_play
from tests.cli.test_cli_recipe import INVENTORY, ROOT, clean_env, invoke
from toolrun.cli.direct import RECIPE_DEFAULTS, RECIPE_FLAGS, RECIPE_VALUE_OPTIONS, direct_command
from toolrun.cli.group import main as group
from toolrun.cli.recipe import recipe_command

A_FOLDER = str(ROOT / "tools.d")
A_FILE = str(INVENTORY)


def click_params(args: list[str]) -> dict[str, Any] | None:
    """What click calls the recipe command with for ``args`` (after ``recipe``), or None when it refuses them."""
    try:
        with recipe_command.make_context("recipe", list(args)) as context:
            return dict(context.params)
    except (click.exceptions.ClickException, click.exceptions.Exit):
        return None


def direct_params(args: list[str]) -> dict[str, Any] | None:
    direct = direct_command(["recipe", *args])
    return direct.params if direct is not None else None


TAKEN_DIRECTLY = [
    [A_FILE],
    ["recipes/inventory.yaml", "--no-log"],
    [A_FILE, "what do we have in 北京?", "--json", "--yes"],
    ["--live", A_FILE, "--model", "openai:gpt-4o-mini", "--stream"],
    [A_FILE, "--no-stream", "--stream", "--strict", "--replay-tools", "--replay", "c.json"],
    [A_FILE, "--var", "city=北京", "--var=question=a=b", "--max-turns", "3", "--max-turns=+7"],
    [A_FILE, "--tools-dir", A_FOLDER, "--record", "new.json", "--transcript=t.jsonl", "--logs", "l.db"],
    [A_FILE, "--model", "--json"],  # click takes the word after an option as its value, whatever it looks like
    [A_FILE, "--model", "a", "--model", "b"],  # the last one counts
    [A_FILE, "--record="],
]
LEFT_TO_CLICK = [
    [], ["--help"], [A_FILE, "-h"], [A_FILE, "--"], ["--", A_FILE], [A_FILE, "--jso"], [A_FILE, "--json=1"],
    [A_FILE, "--max-turns", "0"], [A_FILE, "--max-turns", "x"], [A_FILE, "--model"], [A_FOLDER],
    [A_FILE, "--tools-dir", A_FILE], [A_FILE, "--record", A_FOLDER], [A_FILE, "a", "b"], [""], [A_FILE, "-"],
]


@pytest.mark.parametrize("args", TAKEN_DIRECTLY, ids=str)
def test_a_common_command_line_runs_directly_with_what_click_would_pass(args: list[str]) -> None:
    parsed = direct_params(args)

    assert parsed is not None
    assert parsed == click_params(args)


@pytest.mark.parametrize("args", LEFT_TO_CLICK, ids=str)
def test_help_mistakes_and_unusual_forms_are_left_to_click(args: list[str]) -> None:
    assert direct_params(args) is None


WORDS = [A_FILE, A_FOLDER, "p.yaml", "a prompt", "", "-", "--", "-h", "--help", "--unknown", "--mod", "--json=1", "x=1",
         "0", "3", "-2", "+4", "x", "--max-turns=0", "--var=k=v", "--model=openai:m", "--tools-dir=" + A_FILE,
         *RECIPE_VALUE_OPTIONS, *RECIPE_FLAGS]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=7))
def test_any_command_line_is_either_left_to_click_or_parsed_as_click_parses_it(args: list[str]) -> None:
    parsed = direct_params(args)

    assert parsed is None or parsed == click_params(args)


def test_the_direct_parse_knows_every_option_of_the_recipe_command_and_no_other() -> None:
    click_options = {name for param in recipe_command.params if isinstance(param, click.Option)
                     for name in (*param.opts, *param.secondary_opts)}
    click_names = {param.name for param in recipe_command.params}

    assert click_options - {"--help"} == set(RECIPE_VALUE_OPTIONS) | set(RECIPE_FLAGS)
    assert click_names == set(RECIPE_DEFAULTS)
    assert direct_params([A_FILE]) == click_params([A_FILE])  # every default the same


@pytest.mark.parametrize(("args", "color"), [
    (["--color", "never", "recipe", A_FILE], "never"), (["--color=always", "recipe", A_FILE], "always"),
    (["recipe", A_FILE], "auto"),
])
def test_the_group_s_color_option_is_read_before_the_command(args: list[str], color: str) -> None:
    direct = direct_command(args)

    assert direct is not None and direct.color == color
    assert group.make_context("toolrun", list(args)).params["color"] == color


@pytest.mark.parametrize("args", [
    ["--debug", "recipe", A_FILE], ["--color", "blue", "recipe", A_FILE], ["--color"], ["--colour", "never", "recipe", A_FILE],
    ["--version"], ["tools", "list"], ["ask", "hello"], ["recipe"], [],
])
def test_other_commands_and_group_options_are_left_to_click(args: list[str]) -> None:
    assert direct_command(args) is None


@pytest.mark.parametrize("variable", ["TOOLRUN_DEBUG", "_TOOLRUN_COMPLETE"])
def test_debug_and_shell_completion_by_the_environment_are_left_to_click(monkeypatch: pytest.MonkeyPatch,
                                                                          variable: str) -> None:
    monkeypatch.setenv(variable, "1")
    assert direct_command(["recipe", A_FILE]) is None


REPORTS_GROUP = ("import atexit, sys; atexit.register(lambda: print('click group:', 'toolrun.cli.group' in sys.modules, "
                 "file=sys.stderr)); from toolrun.cli import main; main()")


def run_script(*args: str, tmp_path: Path) -> tuple[int, str, str]:
    """The script's own path through ``main()``, as the console script takes it, in a process of its own.

    Here and below the processes keep to the session's cache folder (tests/conftest.py), warm as a user's second
    command finds it: what they check is the output, not the cache, and a cold catalog load costs twice the run."""
    done = subprocess.run([sys.executable, "-c", REPORTS_GROUP, *args], cwd=ROOT, capture_output=True, text=True,
                          env=clean_env(TOOLRUN_LOGS=str(tmp_path / "logs.db")),
                          timeout=120)
    stderr, _, imported = done.stderr.rpartition("click group: ")
    assert imported.strip() == "False", done.stderr  # the run went the direct way
    return done.returncode, done.stdout, stderr


@pytest.mark.parametrize("args", [
    ["recipes/missing.yaml"],
    ["recipes/inventory.yaml", "--var", "novalue"],
    ["--color", "always", "recipe", "recipes/missing.yaml"],
])
def test_a_mistake_reads_the_same_run_directly_as_through_click(args: list[str], tmp_path: Path) -> None:
    through_click = invoke(*(["recipe", *args] if "recipe" not in args else args),
                           env=clean_env(TOOLRUN_LOGS=str(tmp_path / "logs.db")))
    code, stdout, stderr = run_script(*(["recipe", *args] if "recipe" not in args else args), tmp_path=tmp_path)

    assert (code, stdout, stderr) == (through_click.exit_code, through_click.stdout, through_click.stderr)
    assert code == 2 and stderr.startswith(("error: ", "\x1b[1;31merror:"))


def test_a_direct_run_prints_what_a_run_through_click_prints(tmp_path: Path) -> None:
    through_click = invoke("recipe", "recipes/inventory.yaml", "--json", env=clean_env(TOOLRUN_LOGS=str(tmp_path / "a.db")))
    code, stdout, _ = run_script("recipe", "recipes/inventory.yaml", "--json", tmp_path=tmp_path)

    assert code == through_click.exit_code == 0
    assert without_timings(json.loads(stdout)) == without_timings(json.loads(through_click.stdout))
    assert "玫瑰: 100" in stdout


def without_timings(document: Any) -> Any:
    """``document`` less the milliseconds a call took, which differ from run to run."""
    if isinstance(document, dict):
        return {key: without_timings(value) for key, value in document.items() if not key.endswith("_ms")}
    if isinstance(document, list):
        return [without_timings(item) for item in document]
    return document


def test_a_reader_that_closes_the_pipe_ends_a_direct_run_quietly() -> None:
    process = subprocess.Popen([sys.executable, "-m", "toolrun", "recipe", "recipes/inventory.yaml", "--json", "--no-log"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=clean_env())
    assert process.stdout is not None
    process.stdout.close()  # nobody reads the JSON document the run prints at its end
    _, stderr = process.communicate(timeout=120)

    assert process.returncode == 1
    assert "Traceback" not in stderr and "internal error" not in stderr and "Exception ignored" not in stderr
    assert stderr.count("← get_flower_inventory") == 3  # the run itself went on to its end


def test_a_json_document_stays_json_on_a_stream_that_holds_only_ascii(tmp_path: Path) -> None:
    # the stream cannot hold é or 🌸: the line goes out as UTF-8 bytes, as click wrote it, not as Python escapes
    script = tmp_path / "turns.yaml"
    script.write_text('- text: "café 🌸 ok"\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "toolrun", "recipe", "recipes/inventory.yaml", "--json", "--no-log",
                           "--model", f"scripted:{script}"], cwd=ROOT, capture_output=True,
                          env=clean_env(PYTHONIOENCODING="ascii"), timeout=120)

    assert done.returncode == 3, done.stderr  # the recipe's expect checks look for flowers
    assert json.loads(done.stdout.decode("utf-8"))["final"] == "café 🌸 ok"


def test_the_answer_and_a_page_go_out_as_utf8_on_a_stream_that_holds_only_ascii(tmp_path: Path) -> None:
    # the answer as it is printed (not --json), and a timeline page on stdout: an internal error before
    script = tmp_path / "turns.yaml"
    script.write_text('- text: "café 🌸 ok"\n', encoding="utf-8")
    env = clean_env(PYTHONIOENCODING="ascii")
    logs = ["--logs", str(tmp_path / "runs.db")]
    done = subprocess.run([sys.executable, "-m", "toolrun", "recipe", "recipes/inventory.yaml", *logs,
                           "--model", f"scripted:{script}"], cwd=ROOT, capture_output=True, env=env, timeout=120)
    assert done.returncode == 3, done.stderr  # the recipe's expect checks look for flowers
    assert done.stdout.decode("utf-8") == "café 🌸 ok\n"
    page = subprocess.run([sys.executable, "-m", "toolrun", "view", *logs, "-o", "-"], cwd=ROOT, capture_output=True,
                          env=env, timeout=120)
    assert page.returncode == 0, page.stderr
    assert "café 🌸 ok" in page.stdout.decode("utf-8")


def test_a_latin1_or_cp1252_stdout_keeps_its_encoding_and_escapes_what_it_cannot_hold(tmp_path: Path) -> None:
    # one encoding for the whole answer (not latin-1 and UTF-8 mixed), and JSON escapes that JSON reads back
    script = tmp_path / "turns.yaml"
    script.write_text('- text: "Grüße 🌸 schön"\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "toolrun", "recipe", "recipes/inventory.yaml", "--no-log",
                           "--model", f"scripted:{script}"], cwd=ROOT, capture_output=True, timeout=120,
                          env=clean_env(PYTHONIOENCODING="latin-1"))
    assert done.returncode == 3, done.stderr  # the recipe's expect checks look for flowers
    assert done.stdout.decode("latin-1") == "Grüße \\ud83c\\udf38 schön\n"
    called = subprocess.run([sys.executable, "-m", "toolrun", "call", "get_flower_inventory", "--arg", "city=北京",
                             "--json"], cwd=ROOT, capture_output=True, timeout=120,
                            env=clean_env(PYTHONIOENCODING="cp1252"))
    assert called.returncode == 0, called.stderr  # printed by click: an internal error before
    document = json.loads(called.stdout.decode("cp1252"))
    assert document["arguments"] == {"city": "北京"} and document["result"].startswith("玫瑰")


@pytest.mark.parametrize(("raised", "stderr"), [
    (TypeError("'NoneType' object is not subscriptable"),
     "error: internal error (TypeError: 'NoneType' object is not subscriptable) — this is a bug in toolrun; run the "
     "command again with --debug for the traceback and report it\n"),
    (KeyboardInterrupt(), "\nAborted!\n"),  # Ctrl-C before the run starts: click's words and exit code
])
def test_a_bug_or_an_early_ctrl_c_ends_a_direct_run_as_click_ends_it(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str],
                                                                      raised: BaseException, stderr: str) -> None:
    def failing(**params: Any) -> int:
        raise raised

    monkeypatch.setattr(toolrun.cli.recipe_play, "run_recipe_command", failing)
    direct = direct_command(["--color", "never", "recipe", A_FILE])
    assert direct is not None

    assert direct.run() == 1
    assert capsys.readouterr().err == stderr


CTRL_C_AT_IMPORT = """
import sys
MODULE = sys.argv.pop(1)
class CtrlC:  # Ctrl-C at the moment MODULE, named first on the command line, starts to load
    def find_spec(self, name, path=None, target=None):
        if name == MODULE:
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlC())
sys.argv[0] = "toolrun"
from toolrun.cli import main
main()
"""


@pytest.mark.parametrize(("module", "args"), [
    ("toolrun.cli.recipe_play", ["recipe", "recipes/inventory.yaml", "--no-log"]),  # the direct way
    ("toolrun.cli.tools_list", ["tools", "list"]),  # through click: its group loaded, the command's module next
])
def test_ctrl_c_while_the_command_loads_ends_with_click_s_words_not_a_traceback(
        module: str, args: list[str], tmp_path: Path, seed_tools_d_listings: Callable[[Path], Path]) -> None:
    # The cache holds the ticket server's tool list, as after a user's first command: the warm run lists
    # tools.d without starting that server (an SDK import, seconds of CPU) to learn names it already has.
    env = clean_env(TOOLRUN_CACHE_DIR=str(seed_tools_d_listings(tmp_path / "cache")))
    warm = subprocess.run([sys.executable, "-m", "toolrun", *args], cwd=ROOT, capture_output=True, timeout=60, env=env)
    assert warm.returncode == 0  # the caches filled, as after any first run: the modules load as they usually do
    done = subprocess.run([sys.executable, "-c", CTRL_C_AT_IMPORT, module, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env=env)
    assert (done.returncode, done.stderr) == (1, "\nAborted!\n")
