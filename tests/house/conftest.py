"""The offline replay of recipes/inventory.yaml, run as a user runs it, shared by the lean-import tests.

Each run is a real process in the checkout without a provider key; it reports the modules it imported
(at exit: nothing imported late escapes) and whether the garbage collector was on. The first run fills
a fresh cache folder (a cold run lints and checks every tool of tools.d); the warm runs use what it
left. The tests that read them share the xdist group ``REPLAYS``, so one worker runs each replay once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.test_cli_recipe import ROOT, clean_env

REPLAYS = "lean-replays"  # xdist group of the tests that read the replays below

REPLAY_AND_REPORT = """
import atexit, gc, json, sys
if sys.flags.no_site:  # python -S: the packages without this machine's .pth files, which import tempfile and more
    import site
    sys.path.extend(site.getsitepackages())
before = set(sys.modules)
report, *args = sys.argv[1:]
status = None

def write_report():
    with open(report, "w", encoding="utf-8") as out:
        json.dump({"status": status, "modules": sorted(sys.modules), "new": sorted(set(sys.modules) - before),
                   "collecting": gc.isenabled()}, out)

atexit.register(write_report)
sys.argv = ["toolrun", *args]  # main() with no arguments is the console script: it reads them here
from toolrun.cli import main
try:
    main()
except SystemExit as exit:
    status = exit.code
"""


@dataclass(frozen=True)
class Replay:
    """One replay: its exit status, output, the modules it imported (``new``: not imported before the command)
    and whether it ran with the collector on."""

    status: int | None
    stdout: str
    stderr: str
    modules: frozenset[str]
    new: frozenset[str]
    collecting: bool


class InventoryReplays:
    """The replays, each run at its first use: ``cold`` in a fresh cache folder, then warm ones on its caches."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.cache = folder / "cache"
        self._runs: dict[str, Replay] = {}

    @property
    def cold(self) -> Replay:
        return self._run("cold")

    @property
    def warm(self) -> Replay:
        self._run("cold")
        return self._run("warm")

    @property
    def warm_without_log(self) -> Replay:
        self._run("cold")
        return self._run("warm-without-log", "--no-log")

    @property
    def warm_without_site(self) -> Replay:
        """Run by ``python -S``: without site's .pth files, as on a machine whose start-up imports none of them."""
        self._run("cold")
        return self._run("warm-without-site", python_flags=("-S",))

    def logs(self, name: str) -> Path:
        return self.folder / name / "logs.db"

    def _run(self, name: str, *options: str, python_flags: tuple[str, ...] = ()) -> Replay:
        if name not in self._runs:
            report = self.folder / f"{name}.json"
            self.logs(name).parent.mkdir()
            env = clean_env(TOOLRUN_CACHE_DIR=str(self.cache), TOOLRUN_LOGS=str(self.logs(name)), PYTHONPATH=str(ROOT))
            done = subprocess.run([sys.executable, *python_flags, "-c", REPLAY_AND_REPORT, str(report), "recipe",
                                   "recipes/inventory.yaml", *options], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=120)
            assert done.returncode == 0, done.stderr
            found = json.loads(report.read_text(encoding="utf-8"))
            self._runs[name] = Replay(found["status"], done.stdout, done.stderr, frozenset(found["modules"]),
                                      frozenset(found["new"]), found["collecting"])
        return self._runs[name]


@pytest.fixture(scope="session")
def inventory_replays(tmp_path_factory: pytest.TempPathFactory) -> InventoryReplays:
    return InventoryReplays(tmp_path_factory.mktemp("inventory-replays"))
