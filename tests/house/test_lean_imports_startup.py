"""What ``toolrun --version`` imports beyond what Python's start-up already holds: the two
toolrun modules and ``gc``, nothing else. ``typing``, ``importlib`` and ``__future__`` were over a
third of its start-up beyond ``python -c pass`` in a virtual environment (``benchmarks/startup.py``
times it; this keeps them from coming back).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION_THEN_REPORT = """\
import json, sys
before = set(sys.modules)
sys.argv = ["toolrun", "--version"]
from toolrun.cli import main
try:
    main()
except SystemExit as exit:
    code = exit.code
print(json.dumps({"exit": code, "new": sorted(set(sys.modules) - before)}))
"""


def test_the_version_imports_only_the_two_toolrun_modules_it_runs() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    # -S: no site, so no .pth file of this machine (an editable install's finder, certifi) imports typing first
    done = subprocess.run([sys.executable, "-S", "-c", VERSION_THEN_REPORT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    version, report = done.stdout.splitlines()
    assert version.startswith("toolrun, version ")
    # gc is built into the interpreter: importing it runs no code
    assert json.loads(report) == {"exit": 0, "new": ["gc", "toolrun", "toolrun.cli"]}
