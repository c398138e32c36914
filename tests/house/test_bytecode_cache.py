"""When Python may not write bytecode beside the sources (PYTHONDONTWRITEBYTECODE, common in
containers), the ``toolrun`` script keeps it in toolrun's cache folder: an editable install
would otherwise compile every module it imports on every command. Not timed: the test
checks where bytecode goes, and that the user's settings are left alone otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli_recipe import ROOT

# The console script's entry, then where this process would keep bytecode.
SCRIPT = """
import json, sys
sys.argv = ["toolrun", "schema", "tool"]
from toolrun.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps({"prefix": sys.pycache_prefix, "writes": not sys.dont_write_bytecode}), file=sys.stderr)
"""


def run_script(tmp_path: Path, **environment: str) -> tuple[dict, Path]:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update(environment)
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1]), tmp_path / "cache" / "bytecode"


def test_bytecode_goes_to_the_cache_folder_when_python_may_not_write_it_beside_the_sources(tmp_path: Path) -> None:
    seen, bytecode = run_script(tmp_path, PYTHONDONTWRITEBYTECODE="1", TOOLRUN_CACHE_DIR=str(tmp_path / "cache"))
    assert seen == {"prefix": str(bytecode), "writes": True}
    # The click group and the command's module, compiled once and kept where Python looks for them.
    tag = sys.implementation.cache_tag
    for module in ("group", "schema"):
        assert (bytecode / (ROOT / "toolrun" / "cli").relative_to(ROOT.anchor) / f"{module}.{tag}.pyc").is_file()


def test_the_user_s_bytecode_settings_are_left_alone_otherwise(tmp_path: Path) -> None:
    off, bytecode = run_script(tmp_path, PYTHONDONTWRITEBYTECODE="1", TOOLRUN_CACHE_DIR="off")
    assert off == {"prefix": None, "writes": False} and not bytecode.exists()
    chosen, bytecode = run_script(tmp_path, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(tmp_path / "mine"),
                                  TOOLRUN_CACHE_DIR=str(tmp_path / "cache"))
    assert chosen == {"prefix": str(tmp_path / "mine"), "writes": False} and not bytecode.exists()
    usual, bytecode = run_script(tmp_path, TOOLRUN_CACHE_DIR=str(tmp_path / "cache"))
    assert usual == {"prefix": None, "writes": True} and not bytecode.exists()


def test_a_python_tool_s_module_gets_no_bytecode_when_the_user_said_so(tmp_path: Path) -> None:
    tools = tmp_path / "tools.d"
    tools.mkdir()
    (tools / "greeting.py").write_text("def greet(name):\n    return 'hello ' + name\n", encoding="utf-8")
    (tools / "greet.yaml").write_text(
        "name: greet\ndescription: Greets someone by name. Use it to say hello; not for anything else.\n"
        "parameters: {type: object, properties: {name: {type: string, description: Who}}, required: [name],"
        " additionalProperties: false}\nbackend: {python: 'greeting.py:greet'}\n", encoding="utf-8")
    script = ("import sys; sys.argv = ['toolrun', 'call', 'greet', '--arg', 'name=you', '--tools-dir', sys.argv[1]]\n"
              "from toolrun.cli import main\nmain()")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update(PYTHONDONTWRITEBYTECODE="1", TOOLRUN_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", script, str(tools)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "hello you", done.stderr
    kept = [path.name for path in (tmp_path / "cache" / "bytecode").rglob("*.pyc")]
    assert any(name.startswith("group.") for name in kept)  # toolrun's own modules are kept
    assert not any(name.startswith("greeting.") for name in kept)  # the tool's module is not: the user said so
    assert not (tools / "__pycache__").exists()


# A module imported after the script has put bytecode in the cache folder.
IMPORTING = """
import sys
from toolrun.core.cache_folder import keep_bytecode
keep_bytecode()
sys.path.insert(0, sys.argv[1])
import weather
print(weather.TODAY)
"""


def test_a_same_size_edit_whose_mtime_was_set_back_runs_the_new_code(tmp_path: Path) -> None:
    source = tmp_path / "modules" / "weather.py"
    source.parent.mkdir()
    source.write_text('TODAY = "sunny"\n', encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update(PYTHONDONTWRITEBYTECODE="1", TOOLRUN_CACHE_DIR=str(tmp_path / "cache"))

    def today() -> str:
        done = subprocess.run([sys.executable, "-c", IMPORTING, str(source.parent)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert today() == "sunny"
    assert list((tmp_path / "cache" / "bytecode").rglob("weather.*.pyc"))  # its bytecode was kept
    kept = source.stat()
    source.write_text('TODAY = "rainy"\n', encoding="utf-8")  # the same size, and the mtime put back (touch -r)
    os.utime(source, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    assert today() == "rainy"


# A folder looked in before the check is installed, and one module from it imported after.
LOADER_OF = """
import sys
sys.path.insert(0, sys.argv[1])
import first
from toolrun.core.bytecode_check import check_bytecode_by_status
if sys.argv[2] == "without-loaders-list":  # a FileFinder that does not keep CPython's list
    del sys.path_importer_cache[sys.argv[1]]._loaders
check_bytecode_by_status()
import second
print(type(first.__spec__.loader).__name__, type(second.__spec__.loader).__name__)
"""


@pytest.mark.parametrize("finder", ["as-cpython-makes-it", "without-loaders-list"])
def test_modules_of_a_folder_looked_in_before_are_checked_by_status_too(tmp_path: Path, finder: str) -> None:
    for name in ("first", "second"):
        (tmp_path / f"{name}.py").write_text("VALUE = 1\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", LOADER_OF, str(tmp_path), finder], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["SourceFileLoader", "StatusCheckedLoader"]
