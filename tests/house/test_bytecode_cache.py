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


# Modules imported after the script has put bytecode in the cache folder: one from a folder looked in
# before (its finder made earlier), one from a folder added after, one loaded by another finder (as an
# editable install's finder loads a package's top module).
IMPORTING = """
import importlib.util, sys
before, after = sys.argv[1], sys.argv[2]
sys.path.insert(0, before)
import early
from toolrun.core.cache_folder import keep_bytecode
keep_bytecode()
import weather
sys.path.insert(0, after)
import climate
spec = importlib.util.spec_from_file_location("season", after + "/season.py")
season = importlib.util.module_from_spec(spec)
spec.loader.exec_module(season)
print(weather.TODAY, climate.TODAY, season.TODAY)
"""


def test_a_same_size_edit_whose_mtime_was_set_back_runs_the_new_code(tmp_path: Path) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    sources = [before / "weather.py", after / "climate.py", after / "season.py"]
    for folder in (before, after):
        folder.mkdir()
    (before / "early.py").write_text("", encoding="utf-8")
    for source in sources:
        source.write_text('TODAY = "sunny"\n', encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update(PYTHONDONTWRITEBYTECODE="1", TOOLRUN_CACHE_DIR=str(tmp_path / "cache"))

    def today() -> list[str]:
        done = subprocess.run([sys.executable, "-c", IMPORTING, str(before), str(after)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert today() == ["sunny"] * 3
    kept = {path.name.split(".")[0] for path in (tmp_path / "cache" / "bytecode").rglob("*.pyc")}
    assert {"weather", "climate", "season"} <= kept  # their bytecode was kept
    for source in sources:
        status = source.stat()
        source.write_text('TODAY = "rainy"\n', encoding="utf-8")  # the same size, and the mtime put back (touch -r)
        os.utime(source, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert today() == ["rainy"] * 3


def test_bytecode_cut_short_in_the_cache_folder_is_compiled_again_not_a_failure_of_every_command(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run_script(tmp_path, PYTHONDONTWRITEBYTECODE="1", TOOLRUN_CACHE_DIR=str(cache))
    kept = list((cache / "bytecode").rglob("*.pyc"))
    assert kept
    for index, path in enumerate(kept):  # as a crash or a full disk leaves them: cut after the header, or a bad byte
        data = path.read_bytes()
        path.write_bytes(data[:20] if index % 2 else data[:16] + b"\xff" + data[17:])
    seen, _ = run_script(tmp_path, PYTHONDONTWRITEBYTECODE="1", TOOLRUN_CACHE_DIR=str(cache))
    assert seen["prefix"] == str(cache / "bytecode")
    group = cache / "bytecode" / (ROOT / "toolrun" / "cli").relative_to(ROOT.anchor) / f"group.{sys.implementation.cache_tag}.pyc"
    assert group.stat().st_size > 100  # written again whole
