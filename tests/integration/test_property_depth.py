"""The property tests again, at twice their thorough example count.

The fast suite runs each hypothesis property at a share of its count (``tests/property_budget.py``)
so it stays under a minute; here the same modules run deeper, in a pytest of their own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
PROPERTY_MODULES = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
                          if "property_examples" in path.read_text(encoding="utf-8")
                          and "integration" not in path.parts)


@pytest.mark.integration  # minutes of examples
def test_every_property_holds_at_twice_its_thorough_count() -> None:
    assert len(PROPERTY_MODULES) >= 8, PROPERTY_MODULES  # the search finds the property modules
    env = {**os.environ, "TOOLRUN_PROPERTY_SCALE": "2"}
    env.pop("TOOLRUN_PROPERTY_EXAMPLES", None)
    finished = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *PROPERTY_MODULES],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert finished.returncode == 0, finished.stdout[-4000:] + finished.stderr[-2000:]
