"""`toolrun import openapi` on OpenAI's own document, and `toolrun tools list` on what it wrote.

Reads the full document at ../shared/fixtures/specs/openai-openapi.yaml when it is there
(3 MB, ~300 operations), else the repository's subset (tests/fixtures/specs/, every
operation, fewer schemas) — and says which. Printed: parse + convert time, lint of the
written toolset, the file's size, then `toolrun tools list` on it as a user runs it (a
fresh process, best of three) and the in-process load and lint.

    python benchmarks/import_openapi.py [SPEC]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # so `python benchmarks/x.py` finds toolrun without installing
    sys.path.insert(0, str(ROOT))

from toolrun.api import load_catalog  # noqa: E402
from toolrun.openapi import group_findings, import_openapi, lint_toolset  # noqa: E402

FULL = ROOT.parent / "shared" / "fixtures" / "specs" / "openai-openapi.yaml"
SUBSET = ROOT / "tests" / "fixtures" / "specs" / "openai-openapi.subset.json"


def _spec() -> Path:
    if len(sys.argv) > 1:
        return Path(sys.argv[1])
    if FULL.is_file():
        return FULL
    print(f"note: {FULL} is absent; using the repository's subset instead")
    return SUBSET


def _tools_list_seconds(folder: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "toolrun", "tools", "list", "--tools-dir", str(folder)],
                       env=env, check=False, capture_output=True)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    spec = _spec()
    print(f"document: {spec} ({spec.stat().st_size / 1e6:.1f} MB)")
    started = time.perf_counter()
    result = import_openapi(spec)
    converted = time.perf_counter() - started
    print(f"import {converted:6.2f} s  {len(result.tools)} tools, {len(result.skipped)} skipped, "
          f"{len(result.text) / 1e6:.2f} MB of YAML")
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        file = folder / "openai.yaml"
        file.write_text(result.text, encoding="utf-8")
        started = time.perf_counter()
        review = lint_toolset(result.text, file)
        linted = time.perf_counter() - started
        print(f"lint   {linted:6.2f} s  {review.tools} tools load, {len(review.problems)} load problems, "
              f"{len(review.findings)} findings in {len(group_findings(review.findings))} groups")
        print(f"total  {converted + linted:6.2f} s  (what `toolrun import openapi` spends)")
        print(f"tools list {_tools_list_seconds(folder):6.2f} s  (`toolrun tools list`, a fresh process, best of 3)")
        started = time.perf_counter()
        catalog = load_catalog(folder)
        print(f"load_catalog {time.perf_counter() - started:6.2f} s  in process, lint included "
              f"({len(catalog)} tools)")


if __name__ == "__main__":
    sys.exit(main())
